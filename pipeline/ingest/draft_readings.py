"""`corpus draft`'s reading of a group's value columns: the unit each stream's name writes, state texts, which
files hold which column, the value_column pattern, and the readings spread through each file behind the meter
CHECK guesses (zero dropouts here; a counter that only rises, draft_counters.rises_only)."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

from contracts.lexicon import PointLexicon
from pipeline.ingest.draft_counters import dropout_zeros
from pipeline.ingest.draft_layout import Layout, Naming, role_value
from pipeline.ingest.draft_plan import monday, sampled_lines
from pipeline.ingest.draft_points import propose
from pipeline.ingest.draft_sniff import Sniffed, present_cells, to_number
from pipeline.ingest.draft_time_section import order_of
from pipeline.ingest.draft_times import read_times
from pipeline.ingest.draft_times import toml_value as _toml
from pipeline.ingest.draft_values import is_states, states_line, value_column
from pipeline.ingest.metadata import UNCONFIRMED


def value_column_lines(group: list[Sniffed], layout: Layout) -> list[str]:
    """value_column of one stream per file: a pattern where the files' value headers differ (units written in them)."""
    if layout.kind != "file_per_stream":
        return []
    names = [s.names[v[0]] for s in group if (v := s.value_columns())]
    column = value_column(names)
    why = "" if "*" not in column else f"  # {len(set(names))} value headers, one per unit written in them"
    return [f"value_column = {_toml(column)}{why}"]


def unit_names(group: list[Sniffed], layout: Layout, naming: Naming) -> dict[str, str | None]:
    """The name whose written unit each stream key takes (its file's value header, one stream per file; the
    column itself, one column per stream), None for a state stream (its numbers have no unit)."""
    names: dict[str, str | None] = {}
    for s in group:
        columns = s.value_columns()
        if layout.kind == "file_per_stream" and columns:
            key = role_value(naming, s.rel, "key")
            names[key] = None if is_states(s.column(columns[0]), s.states) else s.names[columns[0]]
        elif layout.kind == "wide_csv":
            names |= {s.names[i]: None if is_states(s.column(i), s.states) else s.names[i] for i in columns}
    return names


def states_lines(group: list[Sniffed], states: dict[str, float]) -> list[str]:
    """The [cleaning] states line for the state texts of the group's state columns (none: no line)."""
    tokens = set()
    for s in group:
        for i in s.value_columns():
            cells = s.column(i) + [r[i] for r in s.tail if i < len(r)]
            if is_states(cells, states):
                tokens |= {c.strip() for c in cells if c.strip()}
    line = states_line(tokens, states)
    return [line] if line else []


Readings = dict[str, dict[tuple[str, str], list[tuple[int, float]]]]


@dataclass
class Spread:
    """What the rows spread through each file of a group (draft_plan.sampled_lines) say, each file's rows parsed
    once: per file the Mondays (epoch us) of the weeks it holds readings in and the order its times run in (None
    where they hold fewer than two distinct times); each stream key's (time, value) readings per meter (its file and
    site column value)."""

    weeks: dict[str, set[int]] = field(default_factory=dict)
    orders: dict[str, str | None] = field(default_factory=dict)
    readings: Readings = field(default_factory=dict)


def spread_pass(group: list[Sniffed], layout: Layout, naming: Naming, readings: bool) -> Spread:
    """One pass over the rows spread through each file of the group: its weeks, its order and (`readings`, never
    for long tables) its readings."""
    spread = Spread()
    readings = readings and layout.kind != "long_csv"
    for s in group:
        if s.time is None:
            continue
        index, fmt, _ = s.time
        lines = sampled_lines(s.source or Path(s.rel), s.header)
        rows, cells, times = read_times(csv.reader(lines, delimiter=s.delimiter), index, fmt)
        spread.weeks[s.rel] = {monday(at) for at in times if at is not None}
        present = present_cells(cells)
        spread.orders[s.rel] = order_of(s, present, times) if len(set(present)) > 1 else None
        if readings:
            timed = [(at, row) for at, row in zip(times, rows, strict=True) if at is not None]
            _add_readings(spread.readings, s, timed, layout, naming)
    return spread


def _add_readings(
    found: Readings, s: Sniffed, timed: list[tuple[int, list[str]]], layout: Layout, naming: Naming
) -> None:
    """A file's readings of each value column, under its stream key (one per file, or the column's name)."""
    site, decimal = layout.site_column, s.decimal
    key = role_value(naming, s.rel, "key") if layout.kind == "file_per_stream" else None
    columns = [(i, s.names[i] if key is None else key) for i in s.value_columns()]
    for at, row in timed:
        meter = (s.rel, row[site] if site is not None and site < len(row) else "")
        width = len(row)
        for i, name in columns:
            if i < width and (value := to_number(row[i], decimal)) is not None:
                found.setdefault(name, {}).setdefault(meter, []).append((at, value))


def zero_lines(readings: Readings, lexicon: PointLexicon | None) -> list[str]:
    """The [cleaning] zero_dropout_classes line (as a CHECK) for the energy and usage classes the lexicon proposes
    whose streams read exactly 0 now and then amid positive readings (draft_counters.dropout_zeros)."""
    found: dict[str, list[str]] = {}
    for key, meters in sorted(readings.items()):
        entry = propose(key, lexicon) if lexicon else None
        if entry and re.search(r"Energy|Usage", entry.point_class) and dropout_zeros(meters.values()):
            found.setdefault(entry.point_class, []).append(key)
    if not found:
        return []
    classes = [f"{UNCONFIRMED}{c}" for c in sorted(found)]
    keys = ", ".join(k for c in sorted(found) for k in found[c])
    return [
        f"zero_dropout_classes = {_toml(classes)}  # {keys}: exactly 0 now and then amid positive readings, a meter "
        "that logged nothing (a dropout, not no use); confirm (delete 'CHECK ') or delete the line"
    ]


def files_of_keys(group: list[Sniffed], layout: Layout) -> dict[str, str]:
    """Where the wide files of a group differ in their value columns (a room served by an air handler, not a fan
    coil): each column's files as a regex of their paths ('' where every file has it); empty when they agree."""
    if layout.kind != "wide_csv":
        return {}
    holders: dict[str, list[str]] = {}
    for s in group:
        for i in s.value_columns():
            holders.setdefault(s.names[i], []).append(s.rel)
    if all(len(rels) == len(group) for rels in holders.values()):
        return {}
    return {key: "" if len(rels) == len(group) else "|".join(map(re.escape, rels)) for key, rels in holders.items()}
