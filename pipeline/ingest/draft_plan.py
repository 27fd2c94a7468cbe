"""What `corpus draft` hands the build's plan rule, and how the mapping writes the split settings it gets back.

The draft may not import the tasks layer (data flows one way): the CLI passes a PlanFn that applies the tasks
stage's own rule (pipeline/tasks/propose.py) to what the draft read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pipeline.core.timeunits import DAY_US

WEEK_US = 7 * DAY_US
MONDAY_US = 4 * DAY_US  # 1970-01-05 00:00 UTC, the first Monday after the epoch
WHOLE_BYTES = 2 * 1024 * 1024  # a file this small is read whole for the weeks holding data
WEEK_SAMPLES = 20_000  # a larger one at this many evenly spread offsets: a week of data is seen when its rows take
# more than 1 / WEEK_SAMPLES of the file (a 5-minute stream's week is 2,016 rows)


@dataclass(frozen=True)
class SpanRead:
    """What the draft read of a corpus's time: the first and last reading (epoch us), the sites, each stream's
    (first, last) from its files, the streams (what a group plan splits before the points table names equipment or
    locations), and per Monday (epoch us) how many streams have a reading that week."""

    first: int
    last: int
    sites: int
    stream_spans: list[tuple[int, int]]
    streams: int
    weeks: dict[int, int]


# setting name ("split" or "shares") -> (value, why): what the mapping must hold for the plan the draft states
Settings = dict[str, tuple[object, str]]
PlanFn = Callable[[SpanRead], tuple[list[str], Settings]]


def monday(at: int) -> int:
    """The Monday 00:00 UTC (epoch us) of the calendar week holding `at`."""
    return at - (at - MONDAY_US) % WEEK_US


def split_kind(settings: Settings) -> list[str]:
    """The mapping's top-level `split` line, when the draft found another plan than `auto` would take."""
    if "split" not in settings:
        return []
    value, why = settings["split"]
    return [f"split = {json.dumps(value)}  # {why}"]


def split_shares(settings: Settings) -> list[str]:
    """The mapping's [splits] table, when the default shares leave a time block without data."""
    if "shares" not in settings:
        return []
    value, why = settings["shares"]
    shares = ", ".join(f"{k} = {v:g}" for k, v in value.items())  # type: ignore[attr-defined]
    return [f"# {why}", "[splits]", f"shares = {{ {shares} }}", ""]


def sampled_lines(path: Path, header: bool) -> Iterator[str]:
    """The data lines of a file: every one of a small file, else the line after each of WEEK_SAMPLES evenly spread
    byte offsets (a seek each, never the whole file). Lines are decoded as UTF-8, a byte that is not replaced."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        if size <= WHOLE_BYTES:
            lines = handle.read().decode("utf-8-sig", errors="replace").splitlines()
            yield from lines[1:] if header else lines
            return
        for sample in range(1, WEEK_SAMPLES):
            handle.seek(size * sample // WEEK_SAMPLES)
            handle.readline()  # the rest of the line the offset fell in
            if line := handle.readline():
                yield line.decode("utf-8", errors="replace").rstrip("\r\n")
