"""One ingest batch: the streams a Scope owns, read, cleaned and written to a folder of its own.

This is the partition boundary. A batch needs only its BatchTask (the mapping, the raw folder and
its Scope); it returns a BatchResult (small, picklable) and leaves observations.arrow (ts, value
sorted by stream id then time, no stream column: `stream_counts` says which rows are whose) and
rejects.arrow (Arrow IPC) in `task.out`. Batches share nothing, so any executor that can call `ingest_batch`
(a process pool here, Ray or a cluster elsewhere) produces the same outputs; `stage.merge` joins them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from contracts.corpus import CorpusMapping
from pipeline.core.canonical import digest_value
from pipeline.core.checksums import refuse_outside
from pipeline.core.errors import IngestError
from pipeline.core.executor import Scope
from pipeline.core.parts import iter_part, join, read_part, write_part
from pipeline.ingest.cleaning import (
    OBS_SCHEMA,
    REJECT_SCHEMA,
    Slice,
    StreamRules,
    difference_counters,
    resolve_duplicates,
    split_cells,
)
from pipeline.ingest.layouts import READERS, ReadFile, read_files_per_stream
from pipeline.ingest.metadata import Resolver
from pipeline.ingest.paths import natural_key
from pipeline.ingest.tables import TABLES

OBSERVATIONS = "observations.arrow"
REJECTS = "rejects.arrow"


@dataclass(frozen=True)
class BatchTask:
    mapping: CorpusMapping
    raw: str
    scope: Scope
    out: str
    metadata_root: str  # the folder metadata paths are relative to: the raw folder, or configs/corpora/<name>/


@dataclass
class BatchResult:
    out: str
    stream_counts: list[tuple[str, int]]  # (stream id, observations) in the row order of observations.arrow
    streams: list[dict]  # rows of the streams table this batch owns
    accounts: dict[str, tuple[tuple[int, str], int]]  # source -> (read order key, raw value cells)
    observations_by_source: dict[str, int]
    catalog: dict  # sites, entities, relations: the same in every batch (checked by digest)
    catalog_digest: str
    notes: list[str] = field(default_factory=list)
    missing_columns: list[dict] = field(default_factory=list)
    rejected_members: list[dict] = field(default_factory=list)
    # The batch's observations and rejects when it ran in the merging process (nothing written); None from a worker,
    # whose tables are files in `out`.
    held: dict[str, pa.Table] | None = None

    def table(self, name: str) -> pa.Table:
        """The batch's OBSERVATIONS or REJECTS table."""
        return self.held[name] if self.held is not None else read_part(join(self.out, name))

    def batches(self, name: str, rows: int = 1 << 16):
        """The table's record batches, read one at a time from a worker's file."""
        if self.held is not None:
            return iter(self.held[name].to_batches(max_chunksize=rows))
        return iter_part(join(self.out, name))


def value_files(raw: Path, mapping: CorpusMapping) -> list[tuple[Path, str]]:
    folders_too = mapping.values.kind == "bts_pickle"  # an extracted archive is a folder of pickles
    excluded = {p for pattern in getattr(mapping.values, "exclude", []) for p in raw.glob(pattern)}
    files = sorted(
        (p, p.relative_to(raw).as_posix())
        for p in raw.glob(mapping.values.files)
        if (p.is_file() or (folders_too and p.is_dir())) and p not in excluded
    )
    for path, _ in files:
        refuse_outside(raw, path)
    if not files:
        raise IngestError(f"{raw}: no file matches values.files = {mapping.values.files!r}; check the pattern")
    return files


def streams_rows(resolver: Resolver, keep) -> list[dict]:
    rows = []
    for stream_id, stream in sorted(resolver.streams.items()):
        if not keep(stream_id):
            continue
        p = stream.point
        rows.append(
            {
                "stream_id": stream_id,
                "site_id": stream.site_id,
                "point_class": p.point_class,
                "equipment": p.equipment,
                "equipment_type": p.equipment_type,
                "location": p.location,
                "unit": p.unit,
                "label": p.label,
                "entity_id": p.entity_id,
                "source_file": ";".join(sorted(resolver.sources[stream_id], key=natural_key)),
                "source_column": stream.key,
                "is_counter": p.counter is not None,
            }
        )
    return rows


def ingest_batch(task: BatchTask) -> BatchResult:
    """A worker's batch: ingested, its observations and rejects written to its folder for the merge."""
    result = ingest_batch_here(task)
    _write_batch(task.out, result.held)
    return replace(result, held=None)


def ingest_batch_here(task: BatchTask) -> BatchResult:
    """Read every value file, keep the cells this batch owns and clean them; the tables stay in the result."""
    mapping, scope, out = task.mapping, task.scope, task.out
    resolver = Resolver(mapping, Path(task.metadata_root))
    reads = _read_values(Path(task.raw), mapping, resolver, scope)
    # Local stream codes are ranks of the sorted stream ids this batch registered, so code order is id order.
    stream_ids = sorted(resolver.streams)
    rank = {resolver.code(sid): i for i, sid in enumerate(stream_ids)}
    rules = StreamRules(
        point_class={rank[resolver.code(sid)]: s.point.point_class for sid, s in resolver.streams.items()},
        counters={rank[resolver.code(sid)]: s.point.counter for sid, s in resolver.streams.items() if s.point.counter},
    )
    owned = [i for i, sid in enumerate(stream_ids) if scope.owns(sid)]
    obs_parts, reject_parts = _split_reads(reads, mapping, scope, rank, owned, rules)
    if any(len(files) > 1 for files in resolver.sources.values()):
        # Shards of one stream (years, numbered parts) in the natural order of their paths (part_2 before part_10):
        # the order duplicate_timestamp's keep_first_row / keep_last_row go by.
        order = sorted(range(len(reads)), key=lambda i: natural_key(reads[i][1].rel))
        obs_parts = [obs_parts[i] for i in order]
    obs, duplicates, counter_rejects = _clean_observations(obs_parts, mapping, rules)
    sources = [read.rel for _, read in reads]
    rejects = _labelled_rejects(
        [r for r in reject_parts if r.height] + [duplicates, counter_rejects],
        sources,
        stream_ids,
        _column_labels(resolver, rank, mapping),
    )
    schema = TABLES["rejects"][0]
    held = {
        REJECTS: rejects.select(schema.names).to_arrow().cast(schema),
        OBSERVATIONS: pa.table({"ts": obs["ts"].to_arrow(), "value": obs["value"].to_arrow()}),
    }
    catalog = {
        "sites": [resolver.catalog.sites[k] for k in sorted(resolver.catalog.sites)],
        "entities": resolver.catalog.entities,
        "relations": resolver.catalog.relations,
    }
    return BatchResult(
        out=out,
        stream_counts=[(stream_ids[sid], n) for sid, n in obs.group_by("sid", maintain_order=True).len().iter_rows()],
        streams=streams_rows(resolver, scope.owns),
        accounts={
            read.rel: ((number, read.rel), read.cells)
            for number, read in reads
            if not read.shared or scope.owns(read.rel)
        },
        observations_by_source={sources[f]: n for f, n in obs.group_by("file").len().iter_rows()},
        catalog=catalog,
        catalog_digest=digest_value(catalog),
        notes=sorted(set(resolver.catalog.notes)),
        missing_columns=resolver.missing_columns,
        rejected_members=resolver.rejected_members,
        held=held,
    )


def _write_batch(out: str, held: dict[str, pa.Table]) -> None:
    """The batch's observations (ts, value) and rejects, as Arrow IPC in its own folder of the parts location."""
    write_part(held[REJECTS], join(out, REJECTS))
    # Small record batches: the merge keeps one open per batch, so its memory stays small with many batches.
    write_part(held[OBSERVATIONS], join(out, OBSERVATIONS), batch_rows=1 << 16)


def _read_values(raw: Path, mapping: CorpusMapping, resolver: Resolver, scope: Scope) -> list[tuple[int, ReadFile]]:
    """Every value file read by the layout's reader, as (file number, read) in file order."""
    files = value_files(raw, mapping)
    if mapping.values.kind == "file_per_stream":  # many small files: their times parsed together
        return [(n, r) for n, r in enumerate(read_files_per_stream(files, mapping, resolver, scope)) if r is not None]
    reader = READERS[mapping.values.kind]
    reads: list[tuple[int, ReadFile]] = []
    for number, (path, rel) in enumerate(files):
        read = reader(path, rel, mapping, resolver, scope)
        reads += [(number, r) for r in (read if isinstance(read, list) else [read]) if r is not None]
    return reads


def _split_reads(
    reads: list[tuple[int, ReadFile]],
    mapping: CorpusMapping,
    scope: Scope,
    rank: dict[int, int],
    owned: list[int],
    rules: StreamRules,
) -> tuple[list[pl.DataFrame], list[pl.DataFrame]]:
    """Each read's cells of the streams this batch owns, split into valid cells and rejects."""
    remap = {**rank, -1: None}
    obs_parts, reject_parts = [], []
    for index, (_, read) in enumerate(reads):
        frame = read.frame
        per_row = sorted({s.codes for s in read.slices if s.sid is None and s.codes in frame.columns})
        if per_row:
            frame = frame.with_columns(
                pl.col(c).replace_strict(remap, default=None, return_dtype=pl.Int32) for c in per_row
            )
        # An unmapped column keeps its -1 (None would mean "one stream per row", the long layout).
        slices = [
            replace(s, sid=remap.get(s.sid, s.sid)) if s.sid is not None and not s.unmapped else s for s in read.slices
        ]
        valid, rejected = split_cells(
            frame, index, slices, mapping.cleaning, rules, getattr(mapping.values, "decimal", ".")
        )
        parts = [valid, rejected, _malformed(read, index, slices)]
        if (
            read.shared
        ):  # many streams in one file: keep the cells of owned streams (and stream-less ones if the file is ours)
            mine = pl.col("sid").is_in(owned) | (pl.col("sid").is_null() & scope.owns(read.rel))
            parts = [part.filter(mine) for part in parts]
        obs_parts.append(parts[0])
        reject_parts += parts[1:]
    return obs_parts, reject_parts


def _clean_observations(
    obs_parts: list[pl.DataFrame], mapping: CorpusMapping, rules: StreamRules
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The valid cells sorted by (stream, ts) with duplicates resolved and counters differenced; with the rejects of
    both."""
    # Parts arrive in file order with rows in file order: a stable sort keeps that order among equal (sid, ts).
    obs = pl.concat(obs_parts) if obs_parts else pl.DataFrame(schema=OBS_SCHEMA)
    if not _sorted_by_stream_time(obs):  # one sorted stream per file (pickles) is common: skip the sort then
        obs = obs.sort("sid", "ts", maintain_order=True)
    obs, duplicates = resolve_duplicates(obs, mapping.cleaning.duplicates)
    obs, counter_rejects = difference_counters(obs, rules.counters)
    return obs, duplicates, counter_rejects


def _column_labels(resolver: Resolver, rank: dict[int, int], mapping: CorpusMapping) -> dict[int, str | None]:
    """The raw column name a reject of each stream code names: the stream's key in a wide file, else the value
    column."""
    label_of = {"wide_csv": None, "bts_pickle": "value"}
    return {
        rank[resolver.code(sid)]: (
            s.key
            if mapping.values.kind == "wide_csv"
            else label_of.get(mapping.values.kind) or mapping.values.value_column
        )
        for sid, s in resolver.streams.items()
    }


def _labelled_rejects(
    parts: list[pl.DataFrame], sources: list[str], stream_ids: list[str], labels: dict[int, str | None]
) -> pl.DataFrame:
    """The rejects in one frame, their file numbers and stream codes turned into source, column and stream id."""
    return pl.concat(parts, how="vertical_relaxed").with_columns(
        source=pl.col("file").replace_strict(dict(enumerate(sources)), return_dtype=pl.String),
        column=pl.coalesce("column", pl.col("sid").replace_strict(labels, default=None, return_dtype=pl.String)),
        stream_id=pl.col("sid").replace_strict(dict(enumerate(stream_ids)), default=None, return_dtype=pl.String),
    )


def _sorted_by_stream_time(obs: pl.DataFrame) -> bool:
    if obs["sid"].null_count() or obs["ts"].null_count():
        return False
    step = np.diff(obs["sid"].to_numpy())
    return bool(np.all((step > 0) | ((step == 0) & (np.diff(obs["ts"].to_numpy()) >= 0))))


def _malformed(read: ReadFile, index: int, slices: list[Slice]) -> pl.DataFrame:
    """One reject per value column of each record set aside: the wrong number of fields, or a cell too large."""
    code = {s.label: (None if s.unmapped else s.sid) for s in slices}
    rows = [
        (index, number, label, code.get(label), None, text[:500], reason)
        for number, text, reason in read.malformed
        for label in read.value_labels
    ]
    return pl.DataFrame(rows, schema=REJECT_SCHEMA, orient="row")
