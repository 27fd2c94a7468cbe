"""Progress bars on a terminal, silence in CI logs and pipes."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def interactive() -> bool:
    """A person watches a terminal, and this is the main thread (corpora building at once stay quiet: a terminal
    holds one live display)."""
    return (
        sys.stderr.isatty()
        and not os.environ.get("CI")
        and not os.environ.get("TELEMETRY_BENCH_QUIET")
        and threading.current_thread() is threading.main_thread()
    )


def track(items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
    """Iterate with a rich progress bar when a person is watching; plain iteration otherwise."""
    if _sink is not None:  # a spawned build worker: its build draws the bar
        if total is None and hasattr(items, "__len__"):
            total = len(items)
        with bar(description, total) as shown:
            for item in items:
                yield item
                shown.advance()
        return
    if not interactive():
        yield from items
        return
    from rich.progress import track as rich_track

    yield from rich_track(items, description=description, total=total, console=None, transient=True)


class _Quiet:
    """A bar nobody sees (CI logs, pipes): advancing it does nothing."""

    def advance(self, steps: int = 1) -> None:
        pass


class _Bar:
    def __init__(self, progress, task_id) -> None:
        self.progress, self.task_id = progress, task_id

    def advance(self, steps: int = 1) -> None:
        self.progress.advance(self.task_id, steps)


class _Sent:
    """A bar of a spawned build worker: its steps go to the build, which draws them (`Relayed`)."""

    def __init__(self, key: tuple[int, int]) -> None:
        self.key = key

    def advance(self, steps: int = 1) -> None:
        _sink.put(("advance", self.key, steps))


_lock = threading.Lock()
_sink = None  # in a spawned build worker whose build is watched: where its bars go (a multiprocessing queue)
_sent = 0
_display = None  # the one live display of the process's bars while any is open (rich.progress.Progress)
_open = 0


def watched() -> bool:
    """A person watches a terminal (any thread: bars of corpora working at once share one display)."""
    return sys.stderr.isatty() and not os.environ.get("CI") and not os.environ.get("TELEMETRY_BENCH_QUIET")


@contextlib.contextmanager
def bar(description: str, total: int | None) -> Iterator[_Bar | _Quiet]:
    """A progress bar for one long piece of work (`bar.advance()` per step) on a terminal, shared with the bars other
    threads have open at the same time (the build's corpora: one line each), gone when the work ends; nothing at all
    in CI logs and pipes, where the stage's own summary line is the record."""
    global _display, _open, _sent
    if _sink is not None:
        with _lock:
            _sent += 1
            key = (os.getpid(), _sent)
        _sink.put(("open", key, description, total))
        try:
            yield _Sent(key)
        finally:
            _sink.put(("close", key))
        return
    if not watched():
        yield _Quiet()
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with _lock:
        if _display is None:
            columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
            _display = Progress(*columns, console=Console(stderr=True), transient=True)
            _display.start()
        display = _display
        task_id = display.add_task(description, total=total)
        _open += 1
    try:
        yield _Bar(display, task_id)
    finally:
        with _lock:
            display.remove_task(task_id)
            _open -= 1
            if _open == 0:
                display.stop()
                _display = None


def relay_to(sink) -> None:
    """In a spawned build worker: send every bar to the build that started it (which draws them with its own)."""
    global _sink
    _sink = sink


class Relayed:
    """The build's side of `relay_to`: draws the bars its spawned workers send, beside its own."""

    def __init__(self) -> None:
        self.open: dict[tuple[int, int], contextlib.ExitStack] = {}
        self.bars: dict[tuple[int, int], _Bar | _Quiet] = {}

    def handle(self, event: tuple) -> None:
        kind, key = event[0], event[1]
        if kind == "open":
            stack = contextlib.ExitStack()
            self.bars[key] = stack.enter_context(bar(event[2], event[3]))
            self.open[key] = stack
        elif kind == "advance" and key in self.bars:
            self.bars[key].advance(event[2])
        elif kind == "close" and key in self.open:
            self.bars.pop(key)
            self.open.pop(key).close()

    def close(self) -> None:
        """Bars of workers that ended without closing them (a killed worker) go too."""
        for key in list(self.open):
            self.bars.pop(key)
            self.open.pop(key).close()
