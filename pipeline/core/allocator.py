"""Allocators keep freed memory for reuse instead of handing it back to the kernel at once.

The build allocates and frees large columns stage after stage. Returned pages come back as fresh zeroed pages on
the next allocation: measured on the shipped corpora, a build of ingest + store spent a quarter of its CPU time in
the kernel, most of it faulting in such pages. Both settings cost no memory beyond what a build already peaks at."""

from __future__ import annotations

import gc
import os

# A worker's share of the CPUs, for the DuckDB connections it opens (pipeline.store.reader): set in a worker's
# environment by the local pool and by Ray, with POLARS_MAX_THREADS. DuckDB's default is every core, and two
# task-family workers of two threads on two cores spend a fifth more CPU time. Not a user setting.
WORKER_THREADS = "TELEMETRY_BENCH_WORKER_THREADS"

# polars' jemalloc: freed pages are returned after 10 s instead of its shorter default (page faults of a build of both
# shipped corpora: 694k -> 393k). Read when polars loads, so it is set when `pipeline` is imported; a value the user
# set is kept.
POLARS_JEMALLOC = ("_RJEM_MALLOC_CONF", "dirty_decay_ms:10000,muzzy_decay_ms:10000")


# Python's cyclic collector runs after every 700 new container objects (lists, dicts, tuples holding them) and
# walks the older generations every 10 runs of the one before: a command that builds many rows as Python objects
# (the draft's sampled rows, the audit's episodes, a test worker's fixtures) spent a quarter of its time in it
# (`corpus draft` of ucam 9.9 -> 6.9 s; the suite's CPU -8 %), while `build --until store`, whose rows are Arrow's,
# is unchanged. Little of what the pipeline makes is cyclic garbage, so collecting after 50,000 costs no memory
# (peak RSS the same to 0.3 %).
GC_THRESHOLDS = (50_000, 20, 20)


def collect_less() -> None:
    """The cyclic collector's thresholds of a command or worker process (GC_THRESHOLDS)."""
    gc.set_threshold(*GC_THRESHOLDS)


def keep_freed_pages() -> None:
    """Set the allocator settings that are read from the environment (before polars is imported)."""
    os.environ.setdefault(*POLARS_JEMALLOC)


def worker_environment() -> dict[str, str]:
    """A worker process's allocator settings, to be in its environment before it imports polars: polars' own
    defaults (an empty setting adds nothing to them). A worker holds one batch or unit, sized to its share of the
    memory budget; pages it kept after freeing them would come on top of that share (measured at 1e8 points: peak RSS
    of the build 2.8-3.1 GB -> 3.6 GB)."""
    return {POLARS_JEMALLOC[0]: ""} if os.environ.get(POLARS_JEMALLOC[0]) == POLARS_JEMALLOC[1] else {}


def tune_allocator() -> None:
    """glibc keeps freed blocks for reuse instead of unmapping them: numpy's large temporaries otherwise fault in
    fresh zeroed pages every time (measured: a store unit spent half its time in the kernel). A no-op off glibc."""
    import ctypes  # here: `import pipeline` runs this module, and most commands never tune the allocator
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(-3, 1 << 30)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass
