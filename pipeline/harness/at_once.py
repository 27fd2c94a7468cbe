"""Corpora built at once: the native stages on threads of this process, stage by stage, the later (Python) stages in
spawned processes, one corpus per worker, each on its share of the workers and of the memory budget.

Each corpus writes only under its own artifacts folder and every stage is deterministic, so what corpora build at
once is what they build one after the other, byte for byte. Outcomes are reported as each stage ends (a spawned
worker sends them back, with its progress bars, over a queue) and come back in the order the corpora were given; the
first failure in that order is raised once the running stages have ended, and stops the other corpora before their
next stage."""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import multiprocessing
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, ThreadPoolExecutor, as_completed, wait
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
# One step of one item on a thread: (the item, the step's number, its share of the machine) -> the step's outcome
Step = Callable[[T, int, Resources], R]
# How large an item's step is (the larger first among ready steps): (the item, the step's number, its outcomes so far)
Size = Callable[[T, int, list], float]


def share(runtime: Resources, at_once: int) -> Resources:
    """One corpus's share of the machine when `at_once` corpora build together. DuckDB's threads too: two connections
    of two threads on two cores spent a third more CPU on the same insert."""
    return dataclasses.replace(
        runtime,
        workers=max(1, runtime.worker_count // at_once),
        memory_budget=runtime.memory_budget // at_once,
        threads=max(1, (runtime.threads or runtime.worker_count) // at_once),
    )


def steps_on_threads(
    step: Step, items: Sequence[T], steps: int, runtime: Resources, on_done: Report | None, size: Size
) -> list[list[R]]:
    """Each item's `steps` steps in order, up to one step per worker at once on threads of this process (work that
    releases the GIL), each on its share of the machine; one worker runs them on this thread.

    A free worker takes the ready step with the lowest number, the largest first (`size` of the item at that step,
    given the outcomes of its steps before): every item's first step is taken before any second one, so the second
    steps, largest first, fill the workers to the end, where whole items on threads leave the last item's chain to
    run on alone (the native stages of the four CSV corpora: 0.8 s of one core idle in 3.7 s). Outcomes are reported
    as each step ends and come back in item order, then step order. A failure stops every item before its next step;
    the first failure in item order is raised once the running steps have ended and been reported (with one worker,
    the first failure, there being no other)."""
    at_once = max(1, min(len(items), runtime.worker_count))
    mine = share(runtime, at_once) if at_once > 1 else runtime
    done: list[list[R]] = [[] for _ in items]
    ready = [(0, -size(item, 0, []), index) for index, item in enumerate(items)] if steps else []
    heapq.heapify(ready)

    def finished(index: int, number: int, outcome: R) -> None:
        done[index].append(outcome)
        if on_done:
            on_done(outcome)
        if number + 1 < steps:
            heapq.heappush(ready, (number + 1, -size(items[index], number + 1, done[index]), index))

    if at_once == 1:
        while ready:
            number, _, index = heapq.heappop(ready)
            finished(index, number, step(items[index], number, mine))
        return done
    failures: dict[int, BaseException] = {}
    with ThreadPoolExecutor(max_workers=at_once, thread_name_prefix="corpus") as pool:
        running: dict[Future, tuple[int, int]] = {}
        try:
            while running or (ready and not failures):
                while ready and not failures and len(running) < at_once:
                    number, _, index = heapq.heappop(ready)
                    running[pool.submit(step, items[index], number, mine)] = (index, number)
                for future in wait(running, return_when=FIRST_COMPLETED).done:
                    index, number = running.pop(future)
                    try:  # the step's failure, or its report's or size's (a closed pipe): this item's failure
                        finished(index, number, future.result())
                    except Exception as exc:
                        failures[index] = exc
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    if failures:
        raise failures[min(failures)]
    return done


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
