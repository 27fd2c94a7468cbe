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
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import xxhash

from pipeline.core.allocator import WORKER_THREADS, collect_less, tune_allocator, worker_environment
from pipeline.core.progress import track
from pipeline.core.resources import Resources, polars_threads

T = TypeVar("T")
R = TypeVar("R")


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
        max_workers=busy, mp_context=context, initializer=start_worker, initargs=(polars_threads(busy),)
    ) as pool:
        futures = [pool.submit(fn, task) for task in tasks]
        for future in track(futures, description):
            yield future.result()


def start_worker(polars_threads: str) -> None:
    """A spawned worker's settings, before its tasks import anything heavy."""
    os.environ["POLARS_MAX_THREADS"] = polars_threads
    os.environ[WORKER_THREADS] = polars_threads
    os.environ.update(worker_environment())
    tune_allocator()
    collect_less()
