"""Arrow schemas and full sort keys of the normalized tables."""

import pyarrow as pa

S, INT, F = pa.string(), pa.int64(), pa.float64()

TABLES: dict[str, tuple[pa.Schema, list[str]]] = {
    "sites": (pa.schema([("site_id", S), ("label", S), ("source", S), ("held_out", pa.bool_())]), ["site_id"]),
    "entities": (
        pa.schema([("entity_id", S), ("site_id", S), ("entity_class", S), ("label", S), ("iri", S), ("source", S)]),
        ["entity_id"],
    ),
    "relations": (
        pa.schema([("subject", S), ("predicate", S), ("object", S), ("site_id", S)]),
        ["subject", "predicate", "object"],
    ),
    "streams": (
        pa.schema(
            [
                ("stream_id", S),
                ("site_id", S),
                ("point_class", S),
                ("equipment", S),
                ("equipment_type", S),
                ("location", S),
                ("unit", S),
                ("label", S),
                ("entity_id", S),
                ("source_file", S),
                ("source_column", S),
                ("is_counter", pa.bool_()),
            ]
        ),
        ["stream_id"],
    ),
    "observations": (pa.schema([("stream_id", S), ("ts", INT), ("value", F)]), ["stream_id", "ts"]),
    "rejects": (
        pa.schema(
            [("source", S), ("row", INT), ("column", S), ("stream_id", S), ("ts", INT), ("raw", S), ("reason", S)]
        ),
        ["source", "row", "column", "reason", "stream_id", "ts", "raw"],
    ),
}
