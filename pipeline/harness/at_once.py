"""Corpora built at once: the native stages on threads of this process, the later (Python) stages in spawned
processes, one corpus per worker, each on its share of the workers and of the memory budget.

Each corpus writes only under its own artifacts folder and every stage is deterministic, so what corpora build at
once is what they build one after the other, byte for byte. Outcomes are reported as each stage ends (a spawned
worker sends them back, with its progress bars, over a queue) and come back in the order the corpora were given; the
first failure in that order is raised once the running stages have ended, and stops the other corpora before their
next stage."""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from pipeline.core import progress
from pipeline.core.errors import StageError
from pipeline.core.executor import start_worker
from pipeline.core.resources import Resources, polars_threads

T = TypeVar("T")
R = TypeVar("R")
Report = Callable[[Any], None]
# One corpus of the later stages: (the corpus, its share of the machine, report each outcome, stop before a stage)
Job = Callable[[T, Resources, Report | None, Any], R]


def share(runtime: Resources, at_once: int) -> Resources:
    """One corpus's share of the machine when `at_once` corpora build together. DuckDB's threads too: two connections
    of two threads on two cores spent a third more CPU on the same insert."""
    return dataclasses.replace(
        runtime,
        workers=max(1, runtime.worker_count // at_once),
        memory_budget=runtime.memory_budget // at_once,
        threads=max(1, (runtime.threads or runtime.worker_count) // at_once),
    )


def on_threads(job: Job, items: Sequence[T], runtime: Resources, on_done: Report | None) -> list[R]:
    """job over items, up to one item per worker at once on threads of this process (work that releases the GIL)."""
    at_once = max(1, min(len(items), runtime.worker_count))
    if at_once == 1:
        return [job(item, runtime, on_done, None) for item in items]
    mine = share(runtime, at_once)
    reported = threading.Lock()

    def report(outcome: Any) -> None:
        with reported:
            on_done(outcome)

    stop = threading.Event()  # a failed corpus stops the others after their running stage

    def one(item: T) -> R:
        try:
            return job(item, mine, report if on_done else None, stop)
        except BaseException:
            stop.set()
            raise

    with ThreadPoolExecutor(max_workers=at_once, thread_name_prefix="corpus") as pool:
        futures = [pool.submit(one, item) for item in items]
        try:
            return [future.result() for future in futures]
        except BaseException:
            stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
            raise


# A spawned corpus worker's link to the build: events go back over _events, _stop says the build failed elsewhere.
_events = None
_stop = None


def _start(events, stop, threads: str, bars: bool) -> None:
    global _events, _stop
    _events, _stop = events, stop
    start_worker(threads)
    if bars:
        progress.relay_to(events)


def _send(outcome: Any) -> None:
    _events.put(("done", outcome))


def _in_worker(job: Job, item: T, mine: Resources) -> R:
    return job(item, mine, _send, _stop)


def in_processes(
    job: Job, items: Sequence[T], names: Sequence[str], runtime: Resources, on_done: Report | None
) -> list[R]:
    """job over items, each in a spawned worker process, up to one worker per CPU worker at once, the items in the order
    given (put the longest first); results in item order. `job` is a module-level function (it is pickled by name)
    and every item picklable; `names` name the items in the error a worker's death raises."""
    at_once = max(1, min(len(items), runtime.worker_count))
    mine = share(runtime, at_once)
    context = multiprocessing.get_context("spawn")  # no fork: no inherited locks or DuckDB handles
    events, stop = context.Queue(), context.Event()
    display = progress.Relayed()

    def drain() -> None:
        while (event := events.get()) is not None:
            if event[0] == "done":
                if on_done:
                    on_done(event[1])
            else:
                display.handle(event)

    reader = threading.Thread(target=drain, name="corpus-events", daemon=True)
    reader.start()
    try:
        with ProcessPoolExecutor(
            max_workers=at_once,
            mp_context=context,
            initializer=_start,
            initargs=(events, stop, polars_threads(at_once), progress.watched()),
        ) as pool:
            futures = [pool.submit(_in_worker, job, item, mine) for item in items]
            for future in as_completed(futures):
                if future.exception() is not None:
                    stop.set()  # the others stop before their next stage
        return [future.result() for future in futures]  # the first failure in item order
    except BrokenProcessPool as exc:
        broken = [name for name, future in zip(names, futures, strict=True) if _broke(future)]
        raise StageError(
            f"{' or '.join(broken)}: the process building it ended without a word (killed, or out of memory?); "
            f"build one corpus at a time with `telemetry-bench build --workers 1` to see why"
        ) from exc
    finally:
        events.put(None)
        reader.join()
        display.close()
        with contextlib.suppress(Exception):
            events.close()


def _broke(future) -> bool:
    return isinstance(future.exception(), BrokenProcessPool)
