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


_lock = threading.Lock()
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
    if not watched():
        yield _Quiet()
        return
    global _display, _open
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
