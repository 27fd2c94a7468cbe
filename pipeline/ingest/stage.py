"""The ingest stage: raw corpus -> normalized Parquet tables and an ingest report."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from contracts.corpus import CorpusMapping
from contracts.ingest import FileAccount, IngestReport, MissingColumn
from pipeline.core import checksums
from pipeline.core.allocator import tune_allocator
from pipeline.core.arrow import numbers, strings, to_numpy
from pipeline.core.canonical import digest, write_json
from pipeline.core.errors import IngestError, StageError
from pipeline.core.executor import buckets_for, run_all, runs_here, scopes
from pipeline.core.parts import join, remove_parts, stage_parts
from pipeline.core.resources import Resources
from pipeline.ingest.batch import (
    OBSERVATIONS,
    REJECTS,
    BatchResult,
    BatchTask,
    ingest_batch,
    ingest_batch_here,
    value_files,
)
from pipeline.ingest.layouts import archive_member, open_archive
from pipeline.ingest.parquet import RowGroupWriter, write_frame
from pipeline.ingest.reject_limits import check_reject_shares
from pipeline.ingest.tables import TABLES

REPORT = "report.json"


# Peak working set of a batch per byte of (uncompressed) raw value data it reads; it sizes batches to
# the memory budget. Measured (peak RSS above the interpreter's): pickles ~9 at 1e8 synthetic points
# (12 batches of ~127 MB, ~1.2 GB per worker); CSV 18 (hhw, 19 MB -> 343 MB) to 38 (xai4heat, 11.6 MB
# -> 445 MB: text cells, frames of strings and their parses).
EXPANSION = {"bts_pickle": 10, "wide_csv": 40, "long_csv": 40, "file_per_stream": 40}
SMALL_WORKING_SET = 1 << 30  # ~25 MB of CSV, ~100 MB of pickles


def raw_value_bytes(files: list[tuple[Path, str]]) -> int:
    """Uncompressed size of the value files (zip archives by their members' sizes)."""
    total = 0
    for path, _ in files:
        if path.is_dir():
            total += sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        elif zipfile.is_zipfile(path):
            with open_archive(path) as archive:
                total += sum(info.file_size for info in archive.infolist())
        else:
            total += path.stat().st_size
    return total


def plan(
    mapping: CorpusMapping, raw: Path, out: Path, resources: Resources, metadata_root: Path | None = None
) -> list[BatchTask]:
    """Batches: `partitions` hash partitions of the streams, each cut into enough buckets to fit the budget."""
    files = value_files(raw, mapping)
    member = getattr(mapping.values, "archive_member", None)
    # Every archive's member is matched and checked here, once and before any worker starts: every batch reads a file
    # holding many streams, and a member refused only while each batch inflates it would be held by every worker
    # at once (two workers held 2.3-3.0 GB each on a 2 GiB member before refusing it).
    for path, _ in files if member is not None else []:
        archive_member(path, member, mapping.values.max_member_bytes, inflate=False)
    working_set = raw_value_bytes(files) * EXPANSION[mapping.values.kind]
    # Unless told, a small corpus stays in this process: starting workers would cost more than it saves.
    partitions = resources.partitions or (1 if working_set < SMALL_WORKING_SET else resources.worker_count)
    buckets = buckets_for(working_set, partitions, resources.per_worker(partitions))
    root = str(metadata_root or raw)
    parts = stage_parts(out, resources.parts, "ingest")
    return [BatchTask(mapping, str(raw), scope, join(parts, scope.name), root) for scope in scopes(partitions, buckets)]


def run_ingest(
    mapping: CorpusMapping,
    raw: Path,
    out: Path,
    resources: Resources | None = None,
    metadata_folder: Path | None = None,
    reject_limits: dict[str, float] | None = None,
) -> IngestReport:
    """Read, clean and write one corpus; every raw value cell ends as one observation or one reject.

    `metadata_folder` is configs/corpora/<name>/ when the mapping keeps its metadata there (location = "config");
    `reject_limits` (configs/ingest.toml) stop it where one reason rejects too much of a file."""
    if not raw.is_dir():
        raise IngestError(f"{raw}: raw corpus folder not found; copy the corpus there or set raw_dir in the mapping")
    if metadata_folder is not None and not metadata_folder.is_dir():
        raise IngestError(
            f'{metadata_folder}: folder not found, but metadata.location = "config" keeps the metadata '
            'there; create it with the metadata files, or set location = "raw"'
        )
    resources = resources or Resources()
    tune_allocator()
    raw_sha = checksums.verify(raw)
    tasks = plan(mapping, raw, out, resources, metadata_folder)
    try:
        # In this process (one worker, or one batch), a batch's tables stay in memory; workers write them as files.
        here = runs_here(resources, tasks)
        results = run_all(ingest_batch_here if here else ingest_batch, tasks, resources, f"ingest {mapping.name}")
        metadata_sha = (
            {}
            if metadata_folder is None
            else {
                p.relative_to(metadata_folder).as_posix(): checksums.sha256_file(p)
                for p in sorted(metadata_folder.rglob("*"))
                if p.is_file() and not p.name.startswith(".")
            }
        )
        return merge(mapping, raw, out, results, raw_sha, metadata_sha, reject_limits or {})
    finally:
        remove_parts(stage_parts(out, resources.parts, "ingest"))


def _merge_observations(results: list[BatchResult], stream_ids: list[str], path: Path) -> tuple[int, dict[str, str]]:
    """k-way merge of the batches' stream-sorted rows into one file sorted by (stream id, ts), in bounded memory;
    also each stream's content digest (xxh3-128 of its timestamps and values), which finds identical copies.

    Batches own disjoint streams, each batch's rows are sorted by stream id, so walking all streams in
    id order reads every batch file front to back: one open reader and one pending piece per batch."""
    rank = {sid: i for i, sid in enumerate(stream_ids)}
    dictionary = strings(stream_ids)
    runs = sorted((sid, b, n) for b, result in enumerate(results) for sid, n in result.stream_counts)
    cursors = [_Cursor(result.batches(OBSERVATIONS)) for result in results]
    # The store reads this file once, by row ranges, never filtered by value: statistics of the stream ids (a quarter
    # of the encoding's time) would serve no reader, and lz4 writes and reads faster than zstd.
    writer = RowGroupWriter(
        path,
        TABLES["observations"][0].remove(0).insert(0, pa.field("stream_id", pa.dictionary(pa.int32(), pa.string()))),
        statistics=["ts", "value"],
        compression="lz4",
    )
    contents: dict[str, str] = {}
    try:
        for sid, b, n in runs:
            piece = cursors[b].take(n)
            codes = pa.DictionaryArray.from_arrays(numbers(np.full(n, rank[sid], dtype=np.int32)), dictionary)
            writer.write(pa.table({"stream_id": codes, "ts": piece["ts"], "value": piece["value"]}))
            if n:
                ts, values = (np.ascontiguousarray(to_numpy(piece[c])) for c in ("ts", "value"))
                contents[sid] = digest(ts.tobytes() + values.tobytes())
        return writer.close(), contents
    except BaseException:
        writer.abort()
        raise


class _Cursor:
    """Sequential reader of one batch's observations: `take(n)` returns the next n rows."""

    def __init__(self, batches) -> None:
        self.batches = batches
        self.buffer: pa.Table | None = None

    def take(self, n: int) -> pa.Table:
        pieces, need = [], n
        while need:
            if self.buffer is None or self.buffer.num_rows == 0:
                self.buffer = pa.Table.from_batches([next(self.batches)])
            piece = self.buffer.slice(0, need)
            self.buffer = self.buffer.slice(piece.num_rows)
            pieces.append(piece)
            need -= piece.num_rows
        return pa.concat_tables(pieces) if len(pieces) != 1 else pieces[0]


def merge(
    mapping: CorpusMapping,
    raw: Path,
    out: Path,
    results: list[BatchResult],
    raw_sha: dict[str, str],
    metadata_sha: dict[str, str] | None = None,
    reject_limits: dict[str, float] | None = None,
) -> IngestReport:
    """Join the batches: one catalog, disjoint streams in id order, rejects by full key, one account per source;
    stops (IngestError) where a reason rejects more of a file than its limit."""
    catalog, streams = _joined(mapping, results)
    observations, contents = _merge_observations(
        results, [row["stream_id"] for row in streams], out / "observations.parquet"
    )
    rejects = pl.concat([pl.from_arrow(result.table(REJECTS)) for result in results], how="vertical_relaxed")
    accounts = dict(sorted((rel, value) for result in results for rel, value in result.accounts.items()))
    total = sum(cells for _, cells in accounts.values())
    if observations + rejects.height != total:
        raise StageError(
            f"{mapping.name}: accounting broken: {observations} observations + {rejects.height} rejects "
            f"!= {total} raw value cells (a bug: please report it)"
        )
    check_reject_shares(
        mapping, raw, {rel: cells for rel, (_, cells) in accounts.items()}, rejects, reject_limits or {}
    )
    sites = _sites(mapping, catalog)
    _write_tables(out, sites, catalog, streams, rejects)
    unmapped = (
        rejects.filter(pl.col("reason") == "unmapped_column")
        .select("source", "column")
        .unique()
        .sort("source", "column")
    )
    missing = {tuple(sorted(m.items())): m for result in results for m in result.missing_columns}
    members = {tuple(sorted(m.items())): m for result in results for m in result.rejected_members}
    report = IngestReport(
        corpus=mapping.name,
        sites=len(sites),
        streams=len(streams),
        observations=observations,
        rejects=rejects.height,
        raw_value_cells=total,
        rejects_by_reason=dict(sorted(rejects.group_by("reason").len().iter_rows())),
        rejects_by_stream=_rejects_by_stream(rejects),
        files=_file_accounts(results, accounts, rejects),
        missing_columns=[
            MissingColumn(**m) for m in sorted(missing.values(), key=lambda m: (m["source"], m["column"]))
        ],
        unmapped_columns=[f"{s}:{c}" for s, c in unmapped.iter_rows()],
        raw_sha256=dict(sorted(raw_sha.items())),
        metadata_sha256=dict(sorted((metadata_sha or {}).items())),
        notes=sorted({note for result in results for note in result.notes}),
        rejected_members=sorted(members.values(), key=lambda m: (m["source"], m["member"])),
        synthetic=(raw / "SYNTHETIC.md").is_file(),
        duplicate_streams=_identical_streams(contents),
    )
    write_json(out / REPORT, report.model_dump(mode="json"))
    return report


def _joined(mapping: CorpusMapping, results: list[BatchResult]) -> tuple[dict, list[dict]]:
    """The catalog every batch resolved alike, and the streams rows of all batches in id order (each owned once)."""
    digests = {result.catalog_digest for result in results}
    if len(digests) != 1:
        raise StageError(f"{mapping.name}: batches resolved different catalogs (a bug: please report it)")
    streams = sorted((row for result in results for row in result.streams), key=lambda row: row["stream_id"])
    stream_ids = [row["stream_id"] for row in streams]
    if len(set(stream_ids)) != len(stream_ids):
        raise StageError(f"{mapping.name}: a stream is owned by two batches (a bug: please report it)")
    return results[0].catalog, streams


def _identical_streams(contents: dict[str, str]) -> list[list[str]]:
    """Groups of streams with the same timestamps and values, each group and the list sorted."""
    by_content: dict[str, list[str]] = {}
    for sid, content in contents.items():
        by_content.setdefault(content, []).append(sid)
    return sorted(sorted(group) for group in by_content.values() if len(group) > 1)


def _sites(mapping: CorpusMapping, catalog: dict) -> list[dict]:
    """The catalog's sites, each marked held out or not; refuses a held-out site the corpus does not have."""
    site_ids = [site["site_id"] for site in catalog["sites"]]
    held_out = set(mapping.held_out_sites)
    unknown = sorted(held_out - set(site_ids))
    if unknown:
        raise IngestError(
            f"held_out_sites names {', '.join(unknown)}, not a site of {mapping.name} "
            f"(sites: {', '.join(sorted(site_ids))}); fix the mapping"
        )
    return [dict(site, held_out=site["site_id"] in held_out) for site in catalog["sites"]]


def _write_tables(out: Path, sites: list[dict], catalog: dict, streams: list[dict], rejects: pl.DataFrame) -> None:
    """The sites, entities, relations, streams and rejects tables, each sorted by its key."""
    string_schema = lambda name: dict.fromkeys(TABLES[name][0].names, pl.String)  # noqa: E731
    frames = {
        "sites": pl.DataFrame(
            sites, schema={"site_id": pl.String, "label": pl.String, "source": pl.String, "held_out": pl.Boolean}
        ),
        "entities": pl.DataFrame(catalog["entities"], schema=string_schema("entities")),
        "relations": pl.DataFrame(catalog["relations"], schema=string_schema("relations")).unique(),
        "streams": pl.DataFrame(streams, schema={**string_schema("streams"), "is_counter": pl.Boolean}),
        "rejects": rejects,
    }
    for name, frame in frames.items():
        table_schema, key = TABLES[name]
        write_frame(frame, table_schema, key, out / f"{name}.parquet")


def _rejects_by_stream(rejects: pl.DataFrame) -> dict[str, dict[str, int]]:
    """Per stream, its rejects counted by reason (both in sorted order)."""
    by_stream: dict[str, dict[str, int]] = {}
    stream_reasons = rejects.filter(pl.col("stream_id").is_not_null()).group_by("stream_id", "reason").len()
    for stream_id, reason, n in stream_reasons.sort("stream_id", "reason").iter_rows():
        by_stream.setdefault(stream_id, {})[reason] = n
    return by_stream


def _file_accounts(
    results: list[BatchResult], accounts: dict[str, tuple[tuple[int, str], int]], rejects: pl.DataFrame
) -> list[FileAccount]:
    """One account per source in read order: its raw value cells, observations and rejects."""
    per_file_obs: dict[str, int] = {}
    for result in results:
        for rel, n in result.observations_by_source.items():
            per_file_obs[rel] = per_file_obs.get(rel, 0) + n
    per_file_rej = dict(rejects.group_by("source").len().iter_rows())
    files = [
        FileAccount(
            source=rel,
            raw_value_cells=accounts[rel][1],
            observations=per_file_obs.get(rel, 0),
            rejects=per_file_rej.get(rel, 0),
        )
        for rel in sorted(accounts, key=lambda rel: accounts[rel][0])
    ]
    for account in files:  # the corpus's sums can balance while a file's do not
        if account.observations + account.rejects != account.raw_value_cells:
            raise StageError(
                f"{account.source}: accounting broken: {account.observations} observations + {account.rejects} "
                f"rejects != {account.raw_value_cells} raw value cells of the file (a bug: please report it)"
            )
    return files


def read_report(stage_dir: Path) -> IngestReport:
    path = stage_dir / REPORT
    if not path.is_file():
        raise StageError(f"{path}: no ingest report; run `telemetry-bench ingest` (or `build`) first")
    return IngestReport.model_validate_json(path.read_text(encoding="utf-8"))
