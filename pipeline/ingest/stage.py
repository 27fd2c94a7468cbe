"""The ingest stage: raw corpus -> normalized Parquet tables and an ingest report."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from contracts.corpus import CorpusMapping
from contracts.ingest import FileAccount, IngestReport, MissingColumn
from pipeline import checksums
from pipeline.canonical import write_json
from pipeline.errors import IngestError, StageError
from pipeline.ingest.cleaning import clean
from pipeline.ingest.layouts import READERS
from pipeline.ingest.metadata import Resolver
from pipeline.ingest.tables import TABLES
from pipeline.parquet import write_frame
from pipeline.progress import track

REPORT = "report.json"


def _value_files(raw: Path, mapping: CorpusMapping) -> list[tuple[Path, str]]:
    files = sorted((p, p.relative_to(raw).as_posix()) for p in raw.glob(mapping.values.files) if p.is_file())
    if not files:
        raise IngestError(f"{raw}: no file matches values.files = {mapping.values.files!r}; check the pattern")
    return files


def _streams_frame(resolver: Resolver) -> pl.DataFrame:
    rows = []
    for stream_id, stream in sorted(resolver.streams.items()):
        p = stream.point
        rows.append({
            "stream_id": stream_id, "site_id": stream.site_id, "point_class": p.point_class, "equipment": p.equipment,
            "equipment_type": p.equipment_type, "location": p.location, "unit": p.unit, "label": p.label,
            "entity_id": p.entity_id, "source_file": ";".join(sorted(resolver.sources[stream_id])),
            "source_column": stream.key, "is_counter": p.counter is not None,
        })
    return pl.DataFrame(rows, schema={name: pl.String for name in TABLES["streams"][0].names[:-1]} | {"is_counter": pl.Boolean})


def run_ingest(mapping: CorpusMapping, raw: Path, out: Path) -> IngestReport:
    """Read, clean and write one corpus; every raw value cell ends as one observation or one reject."""
    if not raw.is_dir():
        raise IngestError(f"{raw}: raw corpus folder not found; copy the corpus there or set raw_dir in the mapping")
    raw_sha = checksums.verify(raw)
    resolver = Resolver(mapping, raw)
    reader = READERS[mapping.values.kind]
    batches, accounts = [], {}
    for path, rel in track(_value_files(raw, mapping), f"ingest {mapping.name}"):
        cells, n_cells = reader(path, rel, mapping, resolver)
        batches.append(cells)
        accounts[rel] = n_cells
    cells = pl.concat(batches)
    point_class = {sid: s.point.point_class for sid, s in resolver.streams.items()}
    counters = {sid: s.point.counter for sid, s in resolver.streams.items() if s.point.counter is not None}
    cells = clean(cells, mapping.cleaning, point_class, counters)

    valid = pl.col("reason").is_null()
    observations = cells.filter(valid).select("stream_id", "ts", "value")
    rejects = cells.filter(~valid).select("source", "row", "column", "stream_id", "ts", "raw", "reason")
    total = sum(accounts.values())
    if observations.height + rejects.height != total:
        raise StageError(
            f"{mapping.name}: accounting broken: {observations.height} observations + {rejects.height} rejects "
            f"!= {total} raw value cells (a bug: please report it)"
        )

    held_out = set(mapping.held_out_sites)
    unknown = sorted(held_out - set(resolver.catalog.sites))
    if unknown:
        raise IngestError(
            f"held_out_sites names {', '.join(unknown)}, not a site of {mapping.name} "
            f"(sites: {', '.join(sorted(resolver.catalog.sites))}); fix the mapping"
        )
    sites = [dict(site, held_out=site["site_id"] in held_out) for site in resolver.catalog.sites.values()]
    frames = {
        "sites": pl.DataFrame(sites, schema={"site_id": pl.String, "label": pl.String, "source": pl.String, "held_out": pl.Boolean}),
        "entities": pl.DataFrame(resolver.catalog.entities, schema={n: pl.String for n in TABLES["entities"][0].names}),
        "relations": pl.DataFrame(resolver.catalog.relations, schema={n: pl.String for n in TABLES["relations"][0].names}).unique(),
        "streams": _streams_frame(resolver),
        "observations": observations,
        "rejects": rejects,
    }
    for name, frame in frames.items():
        schema, key = TABLES[name]
        write_frame(frame, schema, key, out / f"{name}.parquet")

    per_file_obs = dict(cells.filter(valid).group_by("source").len().iter_rows())
    per_file_rej = dict(rejects.group_by("source").len().iter_rows())
    by_stream: dict[str, dict[str, int]] = {}
    for stream_id, reason, n in rejects.filter(pl.col("stream_id").is_not_null()).group_by("stream_id", "reason").len().sort("stream_id", "reason").iter_rows():
        by_stream.setdefault(stream_id, {})[reason] = n
    unmapped = rejects.filter(pl.col("reason") == "unmapped_column").select("source", "column").unique().sort("source", "column")
    report = IngestReport(
        corpus=mapping.name,
        sites=len(sites),
        streams=len(resolver.streams),
        observations=observations.height,
        rejects=rejects.height,
        raw_value_cells=total,
        rejects_by_reason=dict(sorted(rejects.group_by("reason").len().iter_rows())),
        rejects_by_stream=by_stream,
        files=[
            FileAccount(source=rel, raw_value_cells=n, observations=per_file_obs.get(rel, 0), rejects=per_file_rej.get(rel, 0))
            for rel, n in sorted(accounts.items())
        ],
        missing_columns=[MissingColumn(**m) for m in sorted(resolver.missing_columns, key=lambda m: (m["source"], m["column"]))],
        unmapped_columns=[f"{s}:{c}" for s, c in unmapped.iter_rows()],
        raw_sha256=dict(sorted(raw_sha.items())),
        notes=sorted(set(resolver.catalog.notes)),
    )
    write_json(out / REPORT, report.model_dump(mode="json"))
    return report


def read_report(stage_dir: Path) -> IngestReport:
    path = stage_dir / REPORT
    if not path.is_file():
        raise StageError(f"{path}: no ingest report; run `telemetry-bench ingest` (or `build`) first")
    return IngestReport.model_validate_json(path.read_text(encoding="utf-8"))
