"""The ingest stage: raw corpus -> normalized Parquet tables and an ingest report."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import polars as pl
import pyarrow as pa

from contracts.corpus import CorpusMapping
from contracts.ingest import FileAccount, IngestReport, MissingColumn
from pipeline import checksums
from pipeline.canonical import write_json
from pipeline.errors import IngestError, StageError
from pipeline.ingest.cleaning import (
    REJECT_SCHEMA,
    Slice,
    StreamRules,
    counter_steps,
    difference_counters,
    resolve_duplicates,
    split_cells,
)
from pipeline.ingest.layouts import READERS, ReadFile
from pipeline.ingest.metadata import Resolver
from pipeline.ingest.tables import TABLES
from pipeline.parquet import write_frame, write_table
from pipeline.progress import track

REPORT = "report.json"


def _value_files(raw: Path, mapping: CorpusMapping) -> list[tuple[Path, str]]:
    folders_too = mapping.values.kind == "bts_pickle"  # an extracted archive is a folder of pickles
    files = sorted((p, p.relative_to(raw).as_posix()) for p in raw.glob(mapping.values.files) if p.is_file() or (folders_too and p.is_dir()))
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


def _observations_table(obs: pl.DataFrame, stream_ids: list[str]) -> pa.Table:
    """Observations with stream ids dictionary-encoded (codes are ranks of the sorted ids)."""
    indices = pa.array(obs["sid"].to_numpy(), type=pa.int32())
    stream = pa.DictionaryArray.from_arrays(indices, pa.array(stream_ids, type=pa.string()))
    return pa.table({"stream_id": stream, "ts": obs["ts"].to_arrow(), "value": obs["value"].to_arrow()})


def run_ingest(mapping: CorpusMapping, raw: Path, out: Path) -> IngestReport:
    """Read, clean and write one corpus; every raw value cell ends as one observation or one reject."""
    if not raw.is_dir():
        raise IngestError(f"{raw}: raw corpus folder not found; copy the corpus there or set raw_dir in the mapping")
    raw_sha = checksums.verify(raw)
    resolver = Resolver(mapping, raw)
    reader = READERS[mapping.values.kind]
    reads = []
    for path, rel in track(_value_files(raw, mapping), f"ingest {mapping.name}"):
        read = reader(path, rel, mapping, resolver)
        reads += read if isinstance(read, list) else [read]

    # Final stream codes are ranks of the sorted stream ids, so sorting by code sorts by id.
    stream_ids = sorted(resolver.streams)
    rank = {resolver.code(sid): i for i, sid in enumerate(stream_ids)}
    remap = {**rank, -1: None}
    rules = StreamRules(
        point_class={rank[resolver.code(sid)]: s.point.point_class for sid, s in resolver.streams.items()},
        counters={rank[resolver.code(sid)]: s.point.counter for sid, s in resolver.streams.items() if s.point.counter},
    )
    obs_parts, reject_parts, time_parts = [], [], []
    for index, read in enumerate(reads):
        frame = read.frame
        if "sid" in frame.columns:
            frame = frame.with_columns(sid=pl.col("sid").replace_strict(remap, default=None, return_dtype=pl.Int32))
        slices = [replace(s, sid=remap.get(s.sid, s.sid)) if s.sid is not None else s for s in read.slices]
        valid, rejected = split_cells(frame, index, slices, mapping.cleaning, rules)
        obs_parts.append(valid)
        reject_parts.append(rejected)
        reject_parts.append(_malformed(read, index, slices))
        time_parts.append(_counter_times(frame, slices, rules))

    # Parts arrive in file order with rows in file order: a stable sort keeps that order among equal (sid, ts).
    obs = pl.concat(obs_parts).sort("sid", "ts", maintain_order=True)
    obs, duplicates = resolve_duplicates(obs, mapping.cleaning.duplicates)
    steps = pl.concat([
        counter_steps(time_parts, [c for c, r in rules.counters.items() if r == rule], rule.step_window)
        for rule in {r.model_dump_json(): r for r in rules.counters.values()}.values()
    ] or [counter_steps([], [], 1)])
    obs, counter_rejects = difference_counters(obs, rules.counters, steps)

    label_of = {"wide_csv": None, "bts_pickle": "value"}
    labels = {rank[resolver.code(sid)]: (s.key if mapping.values.kind == "wide_csv"
                                         else label_of.get(mapping.values.kind) or mapping.values.value_column)
              for sid, s in resolver.streams.items()}
    sources = [read.rel for read in reads]
    rejects = (
        pl.concat([r for r in reject_parts if r.height] + [duplicates, counter_rejects], how="vertical_relaxed")
        .with_columns(
            source=pl.col("file").replace_strict(dict(enumerate(sources)), return_dtype=pl.String),
            column=pl.coalesce("column", pl.col("sid").replace_strict(labels, default=None, return_dtype=pl.String)),
            stream_id=pl.col("sid").replace_strict(dict(enumerate(stream_ids)), default=None, return_dtype=pl.String),
        )
    )
    accounts = {read.rel: read.cells for read in reads}
    total = sum(accounts.values())
    if obs.height + rejects.height != total:
        raise StageError(
            f"{mapping.name}: accounting broken: {obs.height} observations + {rejects.height} rejects "
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
        "entities": pl.DataFrame(resolver.catalog.entities, schema=dict.fromkeys(TABLES["entities"][0].names, pl.String)),
        "relations": pl.DataFrame(resolver.catalog.relations, schema=dict.fromkeys(TABLES["relations"][0].names, pl.String)).unique(),
        "streams": _streams_frame(resolver),
        "rejects": rejects,
    }
    for name, frame in frames.items():
        schema, key = TABLES[name]
        write_frame(frame, schema, key, out / f"{name}.parquet")
    write_table(_observations_table(obs, stream_ids), out / "observations.parquet")

    per_file_obs = dict(obs.group_by("file").len().iter_rows())
    per_file_rej = dict(rejects.group_by("source").len().iter_rows())
    by_stream: dict[str, dict[str, int]] = {}
    stream_reasons = rejects.filter(pl.col("stream_id").is_not_null()).group_by("stream_id", "reason").len()
    for stream_id, reason, n in stream_reasons.sort("stream_id", "reason").iter_rows():
        by_stream.setdefault(stream_id, {})[reason] = n
    unmapped = rejects.filter(pl.col("reason") == "unmapped_column").select("source", "column").unique().sort("source", "column")
    report = IngestReport(
        corpus=mapping.name,
        sites=len(sites),
        streams=len(resolver.streams),
        observations=obs.height,
        rejects=rejects.height,
        raw_value_cells=total,
        rejects_by_reason=dict(sorted(rejects.group_by("reason").len().iter_rows())),
        rejects_by_stream=by_stream,
        files=[
            FileAccount(source=rel, raw_value_cells=accounts[rel], observations=per_file_obs.get(i, 0), rejects=per_file_rej.get(rel, 0))
            for i, rel in enumerate(sources)
        ],
        missing_columns=[MissingColumn(**m) for m in sorted(resolver.missing_columns, key=lambda m: (m["source"], m["column"]))],
        unmapped_columns=[f"{s}:{c}" for s, c in unmapped.iter_rows()],
        raw_sha256=dict(sorted(raw_sha.items())),
        notes=sorted(set(resolver.catalog.notes)),
        rejected_members=sorted(resolver.rejected_members, key=lambda m: (m["source"], m["member"])),
        synthetic=(raw / "SYNTHETIC.md").is_file(),
    )
    write_json(out / REPORT, report.model_dump(mode="json"))
    return report


def _malformed(read: ReadFile, index: int, slices: list[Slice]) -> pl.DataFrame:
    """One reject per value column of each record with the wrong number of fields."""
    code = {s.label: (None if s.unmapped else s.sid) for s in slices}
    rows = [
        (index, number, label, code.get(label), None, text[:500], "malformed_row")
        for number, text in read.malformed for label in read.value_labels
    ]
    return pl.DataFrame(rows, schema=REJECT_SCHEMA, orient="row")


def _counter_times(frame: pl.DataFrame, slices: list[Slice], rules: StreamRules) -> pl.DataFrame:
    """(sid, ts) of every row of a counter stream, valid or not: the local step comes from all of them."""
    parts = []
    for sl in slices:
        if sl.sid is None:
            parts.append(frame.select(pl.col("sid").cast(pl.Int32), "ts").filter(pl.col("sid").is_in(list(rules.counters))))
        elif sl.sid in rules.counters and not sl.unmapped:
            parts.append(frame.select(sid=pl.lit(sl.sid, dtype=pl.Int32), ts="ts"))
    return pl.concat(parts) if parts else pl.DataFrame(schema={"sid": pl.Int32, "ts": pl.Int64})


def read_report(stage_dir: Path) -> IngestReport:
    path = stage_dir / REPORT
    if not path.is_file():
        raise StageError(f"{path}: no ingest report; run `telemetry-bench ingest` (or `build`) first")
    return IngestReport.model_validate_json(path.read_text(encoding="utf-8"))
