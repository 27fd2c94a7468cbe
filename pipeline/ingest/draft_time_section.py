"""The [time] section of a draft: a group's strftime formats chosen on every file's first and last rows
(draft_times.choose), the zone its times imply, and the order its rows run in, judged on rows spread through
each file."""

from __future__ import annotations

import re

from pipeline.ingest.draft_sniff import Sniffed, present_cells, to_number
from pipeline.ingest.draft_times import EPOCH_SCALE, TimeChoice, choose, epochs, time_lines
from pipeline.ingest.draft_times import toml_value as _toml


def time_choice(group: list[Sniffed]) -> TimeChoice | None:
    """The formats of a group's strftime times, chosen on the first and last rows of every file (each file's own
    format set on its Sniffed); None for ISO 8601 and Unix times, which the sniffer reads alone."""
    if group[0].time[1] == "iso8601" or group[0].time[1] in EPOCH_SCALE:  # type: ignore[index]
        return None
    cells = {s.rel: s.column(s.time[0]) + [r[s.time[0]] for r in s.tail if s.time[0] < len(r)] for s in group}  # type: ignore[index]
    choice = choose(cells)
    if choice is None:
        return None
    for s in group:
        s.time = (s.time[0], choice.per_file.get(s.rel, choice.format), s.time[2])  # type: ignore[index]
    return choice


def time_section(group: list[Sniffed], choice: TimeChoice | None, orders: dict[str, str | None]) -> list[str]:
    """The [time] lines: strftime times as `choice` reads them, else as the sniffer read ISO or Unix times; `orders`:
    how the times spread through each file run (draft_readings.spread_pass)."""
    first = group[0]
    if choice is None:
        return _sniffed_time_section(group, orders)
    return time_lines(first.names[first.time[0]], first.why["time"], choice, *_row_order(group, orders))  # type: ignore[index]


def _sniffed_time_section(group: list[Sniffed], orders: dict[str, str | None]) -> list[str]:
    """The [time] lines: the column, its format, the zone of its values and the order of the rows."""
    first, (order, decided) = group[0], _row_order(group, orders)
    time_index, time_fmt, _ = first.time  # type: ignore[misc]
    aware = time_fmt == "iso8601" and any(re.search(r"(Z|[+-]\d{2}:?\d{2})$", c) for c in first.column(time_index))
    zone_why = (
        "Unix time counts UTC seconds"
        if time_fmt.startswith("epoch")
        else "times carry their UTC offset"
        if aware
        else "naive times, read as UTC: if they are local wall-clock time, write the site's IANA zone (e.g. "
        "Europe/Berlin)"
    )
    return [
        "",
        "[time]",
        f"column = {_toml(first.names[time_index])}  # {first.why['time']}",
        f"format = {_toml(time_fmt)}",
        f'timezone = "UTC"  # {zone_why}',
        f"row_order = {_toml(order)}  # as the sampled rows of {decided} run",
    ]


def _row_order(group: list[Sniffed], orders: dict[str, str | None]) -> tuple[str, str]:
    """The row order of a group's files and the file that says so: the first file's first rows', unless the rows
    of a file spread through it run otherwise (`orders`; a file ordered by meter, then time, restarts its times at
    each meter: 'any')."""
    first = group[0]
    order = order_of(first, present_cells(first.column(first.time[0])))  # type: ignore[index]
    if order == "any":
        return order, first.rel
    for s in group:
        spread = orders.get(s.rel)
        if spread is not None and spread != order:
            return "any", s.rel
    return order, first.rel


def order_of(sniffed: Sniffed, cells: list[str], times: list[int | None] | None = None) -> str:
    """How the present time cells of a column run: ascending, descending, or any; `times`, when given, are the cells'
    own epochs (draft_times.epochs_us) of a strftime format, not parsed again."""
    index, fmt, _ = sniffed.time  # type: ignore[misc]
    if fmt.startswith("epoch"):
        keys = [k for k in map(to_number, cells) if k is not None]  # a damaged cell is no time (never a traceback)
    elif fmt == "iso8601":
        keys = [c.replace("T", " ") for c in cells]  # comparable as text when all share a zone
    else:
        keys = [k for k in (epochs(cells, fmt) if times is None else times) if k is not None]  # type: ignore[misc]
    if len(set(keys)) > 1 and all(a <= b for a, b in zip(keys, keys[1:], strict=False)):
        return "ascending"  # repeated times (a long file's streams at one instant) keep the order
    if len(set(keys)) > 1 and all(a >= b for a, b in zip(keys, keys[1:], strict=False)):
        return "descending"
    return "any"
