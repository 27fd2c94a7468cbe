"""Logical digest of a table: xxh3-128 over schema, row count and column buffers in key order."""

from __future__ import annotations

import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from pipeline.core.arrow import to_numpy, zero
from pipeline.core.canonical import HASH_SCHEME_VERSION


class _Runs:
    """Bytes given as pieces (each dictionary string repeated over its run of rows), never joined in memory: hashing
    the pieces in turn equals hashing their concatenation."""

    def __init__(self, pieces: list[tuple[bytes, int]]) -> None:
        self.pieces = pieces
        self.nbytes = sum(len(text) * count for text, count in pieces)

    def __iter__(self):
        for text, count in self.pieces:
            yield text * count


def _dictionary_runs(array: pa.DictionaryArray) -> list[bytes | memoryview | _Runs] | None:
    """A string dictionary column without nulls in long runs (sorted by it, as stream ids are) as the same bytes its
    decoded strings give, from the codes: no string per row is built. None when it does not apply."""
    if array.null_count or array.dictionary.null_count or not pa.types.is_string(array.dictionary.type):
        return None
    codes = to_numpy(array.indices)
    starts = np.concatenate([[0], np.flatnonzero(codes[1:] != codes[:-1]) + 1]) if len(codes) else codes[:0]
    if len(starts) * 64 > len(codes) or sys.byteorder != "little":
        return None
    texts = [value.encode("utf-8") for value in array.dictionary.to_pylist()]
    lengths = np.array([len(t) for t in texts], dtype=np.int64)
    offsets = np.zeros(len(codes) + 1, dtype=np.int64)
    np.cumsum(lengths[codes], out=offsets[1:])
    counts = np.diff(np.append(starts, len(codes)))
    runs = [(texts[code], count) for code, count in zip(codes[starts].tolist(), counts.tolist(), strict=True)]
    return [np.ones(len(codes), dtype=np.uint8).tobytes(), memoryview(offsets).cast("B"), _Runs(runs)]


def _column_bytes(column: pa.ChunkedArray) -> list[bytes | memoryview | _Runs]:
    array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if pa.types.is_dictionary(array.type) and (runs := _dictionary_runs(array)) is not None:
        return runs
    if (
        array.null_count == 0
        and (pa.types.is_integer(array.type) or pa.types.is_floating(array.type))
        and sys.byteorder == "little"
    ):
        # Fast path, same bytes: every value valid, and the values buffer is already the little-endian numbers.
        numbers = np.ascontiguousarray(to_numpy(array))
        return [np.ones(len(array), dtype=np.uint8).tobytes(), memoryview(numbers).cast("B")]
    valid = to_numpy(pc.is_valid(array)).astype(np.uint8).tobytes()
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type) or pa.types.is_string_view(array.type):
        array = pc.fill_null(array, zero(array.type)).cast(pa.large_string())
        offsets = np.frombuffer(array.buffers()[1], dtype=np.int64)[array.offset : array.offset + len(array) + 1]
        data = array.buffers()[2]
        body = memoryview(b"") if data is None else memoryview(data)[offsets[0] : offsets[-1]]
        return [valid, (offsets - offsets[0]).astype("<i8").tobytes(), body]
    if pa.types.is_boolean(array.type):
        return [valid, to_numpy(pc.fill_null(array, zero(array.type))).astype(np.uint8).tobytes()]
    if pa.types.is_dictionary(array.type):  # decoded by a take from the dictionary (faster than a cast)
        values = array.dictionary
        if pa.types.is_string(values.type):
            values = values.cast(pa.large_string())
        return _column_bytes(pa.chunked_array([pc.take(values, array.indices)]))
    numbers = to_numpy(pc.fill_null(array, zero(array.type)))
    return [valid, np.ascontiguousarray(numbers).astype(numbers.dtype.newbyteorder("<")).tobytes()]


def table_digest(table: pa.Table) -> str:
    """Same rows in the same order and the same logical types give the same digest."""
    hasher = xxhash.xxh3_128()
    hasher.update(f"v{HASH_SCHEME_VERSION}|{table.num_rows}|".encode())
    for field, column in zip(table.schema, table.columns, strict=True):
        value_type = (
            field.type.value_type if pa.types.is_dictionary(field.type) else field.type
        )  # a dictionary is its values
        kind = (
            "string"
            if pa.types.is_string(value_type)
            or pa.types.is_large_string(value_type)
            or pa.types.is_string_view(value_type)
            else str(value_type)
        )
        hasher.update(f"{field.name}:{kind}|".encode())
        for part in _column_bytes(column):
            hasher.update(
                part.nbytes.to_bytes(8, "little")
                if isinstance(part, memoryview | _Runs)
                else len(part).to_bytes(8, "little")
            )
            for piece in part if isinstance(part, _Runs) else [part]:
                hasher.update(piece)
    return hasher.hexdigest()


class ChunkedDigest:
    """`table_digest` of a table fed in row groups of ROW_GROUP_SIZE rows (as RowGroupWriter emits them).

    Up to one full group it is exactly `table_digest` of the whole table; a longer table's digest is
    xxh3-128 over the row count and the digests of its consecutive ROW_GROUP_SIZE-row groups, so a
    table of any size is digested in bounded memory, and the same rows always give the same digest."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.groups: list[str] = []
        self.rows = 0

    def update(self, group: pa.Table) -> None:
        self.rows += group.num_rows
        self.groups.append(table_digest(group))

    def hexdigest(self) -> str:
        if not self.groups:
            return table_digest(self.schema.empty_table())
        if len(self.groups) == 1:
            return self.groups[0]
        hasher = xxhash.xxh3_128()
        hasher.update(f"v{HASH_SCHEME_VERSION}|chunked|{self.rows}|".encode())
        for digest in self.groups:
            hasher.update(digest.encode())
        return hasher.hexdigest()


def reader_digest(batches, schema: pa.Schema) -> str:
    """ChunkedDigest of a stream of record batches, regrouped into ROW_GROUP_SIZE-row groups."""
    from pipeline.ingest.parquet import ROW_GROUP_SIZE

    digest = ChunkedDigest(schema)
    pending: list[pa.RecordBatch] = []
    rows = 0
    for batch in batches:
        pending.append(batch)
        rows += batch.num_rows
        while rows >= ROW_GROUP_SIZE:
            table = pa.Table.from_batches(pending, schema=batch.schema)
            digest.update(table.slice(0, ROW_GROUP_SIZE))
            rest = table.slice(ROW_GROUP_SIZE)
            pending, rows = rest.to_batches(), rest.num_rows
    if rows or not digest.groups:
        digest.update(pa.Table.from_batches(pending, schema=schema) if pending else schema.empty_table())
    return digest.hexdigest()
