"""The store's reader API: where the tool store is, its tables' keys, and opening it read-only.

Everything that reads a built store (tools, tasks, episodes, audit, release, report) imports this module, never
the builder, so that editing how the store is built does not change the code identity of the stages that read it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import duckdb
import xxhash

from pipeline.core.allocator import WORKER_THREADS
from pipeline.core.errors import StageError
from pipeline.core.manifest import damaged_output, read_manifest

STORE_FILE = "store.duckdb"
READER_MEMORY = "512MB"
# Where readers spill, fixed when this module loads: the temporary folder may be changed later in the process (tests
# do), and DuckDB refuses a second connection to one file under another configuration.
SPILLS = Path(tempfile.gettempdir())
# A worker's readers use its share of the CPUs (pipeline.core.allocator.WORKER_THREADS), read once, like SPILLS: every
# reader of a process must open the store under one configuration.
_SHARE = os.environ.get(WORKER_THREADS, "")
THREADS = int(_SHARE) if _SHARE.isdigit() and int(_SHARE) > 0 else None

# The store writes `observations` in (stream_id, ts) order, rows at one time in the order ingest gave them
# (pipeline.store.build appends runs of whole streams in id order, each sorted), and readers use that order without
# sorting again: DuckDB keeps a table's row order through WHERE, UNION ALL and window functions with an empty OVER
# clause (its documented order preservation). A reader that meets rows out of that order stops with this error.
OBSERVATIONS_OUT_OF_ORDER = (
    "store observations are not in (stream_id, ts) order; rebuild the store (telemetry-bench build --force)"
)

# Table -> full sort key. Every table is exported to <name>.parquet in this order.
KEYS: dict[str, list[str]] = {
    "sites": ["site_id"],
    "entities": ["entity_id"],
    "relations": ["subject", "predicate", "object"],
    "streams": ["stream_id"],
    "observations": ["stream_id", "ts"],
    "quality": ["stream_id"],
    "aggregates": ["stream_id", "period", "window_start"],
    "profiles": ["stream_id", "dow", "hour"],
    "previews": ["stream_id", "idx"],
    "thresholds": ["name"],
    "settings": ["name"],
    "rejects": ["stream_id", "ts", "reason", "raw"],
}

# Tables a store has only when its corpus declares them (table -> full sort key), exported like the others: a corpus
# without them builds the very store it built before they existed. expected_hours: the rules of streams absent by
# design (pipeline/store/expected.py), read by the tools.
OPTIONAL: dict[str, list[str]] = {"expected_hours": ["stream_id"]}

# Table -> its columns with their DuckDB types, as the exported Parquet tables hold them (a built store keeps
# observations' stream_id as an ENUM): a release's tables are checked against these before they are loaded, so that
# the tools never meet a table of other columns.
COLUMNS: dict[str, str] = {
    "sites": "site_id VARCHAR, label VARCHAR, source VARCHAR, held_out BOOLEAN",
    "entities": "entity_id VARCHAR, site_id VARCHAR, entity_class VARCHAR, label VARCHAR, iri VARCHAR, source VARCHAR",
    "relations": "subject VARCHAR, predicate VARCHAR, object VARCHAR, site_id VARCHAR",
    "streams": "stream_id VARCHAR, site_id VARCHAR, point_class VARCHAR, equipment VARCHAR, equipment_type VARCHAR, "
    "location VARCHAR, unit VARCHAR, label VARCHAR, entity_id VARCHAR, source_file VARCHAR, source_column VARCHAR, "
    "is_counter BOOLEAN, rate_unit VARCHAR, equipment_role VARCHAR, site_key VARCHAR, class_key VARCHAR, "
    "equipment_key VARCHAR, equipment_type_key VARCHAR, location_key VARCHAR, label_key VARCHAR, "
    "ambiguity_count BIGINT, n_obs BIGINT, "
    "first_ts BIGINT, last_ts BIGINT, tool_ready BOOLEAN, content_twins INTEGER",
    "observations": "stream_id VARCHAR, ts BIGINT, value DOUBLE, step_us BIGINT",
    "quality": "stream_id VARCHAR, n BIGINT, first_ts BIGINT, last_ts BIGINT, step_us BIGINT, longest_gap_us BIGINT, "
    "coverage DOUBLE, expected_count DOUBLE, gap_ratio DOUBLE, duplicate_fraction DOUBLE, nan_fraction DOUBLE, "
    "reject_fraction DOUBLE, zero_fraction DOUBLE, constant_fraction DOUBLE, distinct_values BIGINT, "
    "quality_band VARCHAR",
    "aggregates": "stream_id VARCHAR, period VARCHAR, window_start BIGINT, window_end BIGINT, count BIGINT, "
    "mean DOUBLE, std DOUBLE, min DOUBLE, max DOUBLE, total DOUBLE, first_ts BIGINT, last_ts BIGINT, "
    "longest_gap_us BIGINT, step_us BIGINT, rejected BIGINT, duplicates BIGINT, non_finite BIGINT, "
    "coverage DOUBLE, gap_ratio DOUBLE, "
    "quality_band VARCHAR",
    "profiles": "stream_id VARCHAR, dow BIGINT, hour BIGINT, count BIGINT, mean DOUBLE, std DOUBLE, min DOUBLE, "
    "max DOUBLE",
    "previews": "stream_id VARCHAR, idx BIGINT, ts BIGINT, value DOUBLE",
    "thresholds": "name VARCHAR, value DOUBLE, quantile DOUBLE, population VARCHAR, corpus_value DOUBLE, "
    "floor DOUBLE, ceiling DOUBLE",
    "settings": "name VARCHAR, value BIGINT",
    "rejects": "stream_id VARCHAR, ts BIGINT, reason VARCHAR, raw VARCHAR",
    "expected_hours": "stream_id VARCHAR, rule VARCHAR, says VARCHAR",
}


def checked_store(folder: Path) -> Path:
    """The built store of a store stage's folder, once checked as `build` checks it before reusing it
    (pipeline.core.manifest.damaged_output): its size and xxh3 against the stage's record, and no write-ahead log
    beside it. An edit in place (DuckDB's UPDATE) changes the file's bytes, so every reader of a project's store reads
    only what the build wrote. A store that stats as the build state recorded it is not hashed again (damaged_output);
    else hashing costs about 1 ms per MB read (a 16 MB store: 12 ms; opening it: 260 ms)."""
    path = folder / STORE_FILE
    if not path.is_file():
        return path  # open_store says there is none
    manifest = read_manifest(folder)
    if manifest is None:  # the record to check it against removed, or a store no build finished
        raise StageError(
            f"{path}: no readable manifest.json beside it to check it against; rebuild it with `telemetry-bench build`"
        )
    why = damaged_output(folder, manifest, only=[STORE_FILE])
    if why is not None:
        raise StageError(
            f"{path}: {why}; the tools read only what the build wrote: rebuild it with "
            f"`telemetry-bench build --corpus {manifest.corpus}`"
        )
    return path


def open_store(path: Path, threads: int | None = None) -> duckdb.DuckDBPyConnection:
    """Open a built store read-only (writes are refused by DuckDB). In a worker (a spawned process or a Ray task),
    DuckDB gets the worker's share of the CPUs unless told; the share is fixed per process, so every reader of a
    process opens the store under the same configuration."""
    threads = threads or THREADS
    if not path.is_file():
        raise StageError(f"{path}: no tool store; run `telemetry-bench build` first")
    # A read-only store only reads: DuckDB's page cache is capped so that the readers of a large
    # store (the tasks stage opens two) stay within the build's memory budget. 512 MB: at 1e8 points the tasks
    # stage's peak fell from 2.9-3.0 GiB (1 GB) to 2.1 GiB in the same time (a page evicted is read again from the
    # OS's cache; decompressing it is the cost either way).
    # What DuckDB spills (a large family's candidate pool, in the tasks stage) goes to a temporary folder of this
    # process and this store, never next to the store (a finished stage's folder).
    spills = f"telemetry-bench-duckdb-{os.getpid()}-{xxhash.xxh3_64_hexdigest(str(path.resolve()).encode())}"
    config = {
        "memory_limit": READER_MEMORY,
        "temp_directory": str(SPILLS / spills),
        **({"threads": int(threads)} if threads else {}),
    }
    try:
        con = duckdb.connect(str(path), read_only=True, config=config)
    except duckdb.Error as exc:  # e.g. not a DuckDB file (damaged, or another file put in its place)
        raise StageError(
            f"{path}: cannot be opened as a tool store ({str(exc).splitlines()[0]}); if it is damaged, rebuild it: "
            "`telemetry-bench build`"
        ) from exc
    quiet(con)
    return con


def quiet(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """No progress bar: DuckDB draws one on stdout for a query of more than 2 s (a large family's candidate query,
    the store's inserts at scale), which would corrupt a command's --json output."""
    con.execute("SET enable_progress_bar = false")
    return con
