"""Partitions, batches and the worker pool of the ingest and store stages.

Work is split by stream: a stream belongs to partition xxh3_64(stream id) % partitions and, inside
its partition, to one of `buckets` batches by the next digits of the same hash. Cells that belong
to no stream (unmapped columns, malformed rows, refused members) belong to the batch that owns
their source's name. Every per-stream computation depends on that stream's rows only, and the
merge orders everything by full keys, so outputs are byte-identical for any number of partitions,
batches and workers (docs/scale.md). Runtime settings here never enter a stage's identity.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import queue
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import xxhash

from pipeline.core.allocator import WORKER_THREADS, tune_allocator, worker_environment
from pipeline.core.errors import ConfigError
from pipeline.core.progress import track

T = TypeVar("T")
R = TypeVar("R")

EXECUTORS = ("local", "ray")
DEFAULT_BUDGET = 4 << 30
MAIN_RESERVE = 768 << 20
WORKER_BASE = 256 << 20  # a worker's resident size after importing polars, pyarrow, duckdb and numpy
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_bytes(text: str) -> int:
    """'4GB', '512 MiB', '2g', '1000000' -> bytes (binary units)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", text.lower())
    if not match:
        raise ConfigError(f"memory budget {text!r} is not a size; write it like 4GB, 512MB or 2g")
    value = float(match.group(1)) * _UNITS[match.group(2)]
    if value < 64 << 20:
        raise ConfigError(f"memory budget {text!r} is below 64 MB; the build cannot run in that")
    return int(value)


@dataclass(frozen=True)
class Resources:
    """How a build may use the machine. Changes nothing in the outputs."""

    threads: int | None = None  # DuckDB threads per process (None: DuckDB's default)
    partitions: int | None = None  # hash partitions of the streams (None: one per worker; one for a small corpus)
    workers: int | None = None  # processes (None: the CPUs this process may use)
    memory_budget: int = DEFAULT_BUDGET  # bytes for the whole build, shared by the workers
    executor: str = "local"  # where batches and units run: "local" (spawned processes) or "ray" (Ray tasks)
    ray_address: str | None = None  # a Ray cluster to connect to (None: a local Ray instance of `workers` CPUs)
    parts: str | None = None  # where workers leave intermediate parts (pipeline.core.parts; None: each stage's folder)

    def __post_init__(self) -> None:
        if self.executor not in EXECUTORS:
            raise ConfigError(f"executor {self.executor!r} is not one of {', '.join(EXECUTORS)}")
        if self.parts is not None:  # checked (and made absolute) wherever a build is given one, nothing created
            from pipeline.core.parts import check_location

            object.__setattr__(self, "parts", check_location(self.parts))

    @property
    def worker_count(self) -> int:
        if self.workers:
            return self.workers
        return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)

    @property
    def main_reserve(self) -> int:
        """What the main process keeps for itself (libraries, the merge, DuckDB's cache)."""
        return min(MAIN_RESERVE, self.memory_budget // 4)

    def per_worker(self, tasks: int) -> int:
        """Bytes of data one worker may hold when `tasks` tasks share the pool: the main process's share
        and each worker's own libraries set aside."""
        share = (self.memory_budget - self.main_reserve) // max(1, min(self.worker_count, tasks))
        return share - WORKER_BASE if share > 2 * WORKER_BASE else share // 2  # tiny budgets (tests): half


class Background:
    """Calls `consume(item)` on its own thread for every item put, in order; at most `depth` wait.

    The first error stops the work (later items are drained, so `put` never blocks for ever) and is
    raised again by the next `put` or by `close`."""

    _END = object()

    def __init__(self, consume: Callable[[T], None], depth: int, name: str) -> None:
        self.consume = consume
        self.queue: queue.Queue = queue.Queue(maxsize=depth)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (item := self.queue.get()) is not self._END:
            if self.error is None:
                try:
                    self.consume(item)
                except BaseException as exc:  # noqa: BLE001 - raised again in the producing thread
                    self.error = exc

    def put(self, item: T) -> None:
        if self.error is not None:
            raise self.error
        self.queue.put(item)

    def close(self, *, check: bool = True) -> None:
        """Wait for every item to be consumed; raise the first error unless `check` is off (cleanup)."""
        if self.thread.is_alive():
            self.queue.put(self._END)
            self.thread.join()
        if check and self.error is not None:
            raise self.error


def stream_hash(key: str) -> int:
    return xxhash.xxh3_64_intdigest(key.encode("utf-8"))


@dataclass(frozen=True)
class Scope:
    """The streams (and stream-less sources) one batch owns."""

    partition: int = 0
    partitions: int = 1
    bucket: int = 0
    buckets: int = 1

    def owns(self, key: str) -> bool:
        h = stream_hash(key)
        return h % self.partitions == self.partition and (h // self.partitions) % self.buckets == self.bucket

    @property
    def name(self) -> str:
        return f"p{self.partition:03d}-b{self.bucket:03d}"


def scopes(partitions: int, buckets: int) -> list[Scope]:
    return [Scope(p, partitions, b, buckets) for p in range(partitions) for b in range(buckets)]


def buckets_for(estimated_bytes: int, partitions: int, per_worker: int) -> int:
    """Batches per partition so that one batch's estimated working set fits a worker's share."""
    return max(1, math.ceil(estimated_bytes / partitions / max(1, per_worker)))


def run_all(fn: Callable[[T], R], tasks: Sequence[T], resources: Resources, description: str) -> list[R]:
    """fn over tasks, results in task order (see run_ordered)."""
    return list(run_ordered(fn, tasks, resources, description))


def runs_here(resources: Resources, tasks: Sequence) -> bool:
    """Whether run_ordered calls fn in this process (local executor with one worker, or one task) rather than in
    spawned workers or Ray tasks."""
    return resources.executor == "local" and (resources.worker_count <= 1 or len(tasks) <= 1)


def run_ordered(fn: Callable[[T], R], tasks: Sequence[T], resources: Resources, description: str) -> Iterator[R]:
    """fn over tasks, yielding results in task order as soon as each is ready, while later tasks still run.

    Spawned processes when the local executor has workers > 1 and 2+ tasks; Ray tasks on the Ray executor. `fn` must
    be a module-level function and every task picklable: a task is all a worker gets."""
    if resources.executor == "ray":
        from pipeline.core.ray_executor import run_on_ray

        yield from run_on_ray(fn, tasks, resources, description)
        return
    if runs_here(resources, tasks):
        yield from (fn(task) for task in track(tasks, description))
        return
    context = multiprocessing.get_context("spawn")  # no fork: no inherited locks or DuckDB handles
    busy = min(resources.worker_count, len(tasks))
    with ProcessPoolExecutor(
        max_workers=busy, mp_context=context, initializer=_start_worker, initargs=(polars_threads(busy),)
    ) as pool:
        futures = [pool.submit(fn, task) for task in tasks]
        for future in track(futures, description):
            yield future.result()


def polars_threads(busy: int) -> str:
    """Each worker's polars (and DuckDB) gets its share of the CPUs, so workers do not fight over cores. Set in each
    worker before it imports polars, never in this process's environment: corpora building at once share it."""
    return str(max(1, Resources(workers=None).worker_count // max(1, busy)))


def _start_worker(polars_threads: str) -> None:
    """A spawned worker's settings, before its tasks import anything heavy."""
    os.environ["POLARS_MAX_THREADS"] = polars_threads
    os.environ[WORKER_THREADS] = polars_threads
    os.environ.update(worker_environment())
    tune_allocator()
