"""Progress bars on a terminal, silence in CI logs and pipes."""

from __future__ import annotations

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
