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

STORE_FILE = "store.duckdb"
READER_MEMORY = "1GB"
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


def open_store(path: Path, threads: int | None = None) -> duckdb.DuckDBPyConnection:
    """Open a built store read-only (writes are refused by DuckDB). In a worker (a spawned process or a Ray task),
    DuckDB gets the worker's share of the CPUs unless told; the share is fixed per process, so every reader of a
    process opens the store under the same configuration."""
    threads = threads or THREADS
    if not path.is_file():
        raise StageError(f"{path}: no tool store; run `telemetry-bench build` first")
    # A read-only store only reads: DuckDB's page cache is capped so that the readers of a large
    # store (the tasks stage opens two) stay within the build's memory budget.
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
