"""`corpus draft`'s reading of a group's value columns: the unit each stream's name writes, state texts, which
files hold which column, the value_column pattern, and the readings spread through each file behind the meter
CHECK guesses (zero dropouts here; a counter that only rises, draft_counters.rises_only)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

from contracts.lexicon import PointLexicon
from pipeline.ingest.draft_counters import dropout_zeros
from pipeline.ingest.draft_layout import Layout, Naming, role_value
from pipeline.ingest.draft_plan import sampled_lines
from pipeline.ingest.draft_points import propose
from pipeline.ingest.draft_sniff import Sniffed, to_number
from pipeline.ingest.draft_times import timed_rows
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


def spread_readings(group: list[Sniffed], layout: Layout, naming: Naming) -> Readings:
    """Each stream key's (time, value) readings per meter (its file and site column value), from rows spread
    through each file (draft_plan.sampled_lines); none for long tables."""
    readings: Readings = {}
    if layout.kind == "long_csv":
        return readings
    site = layout.site_column
    for s in group:
        index, fmt, _ = s.time  # type: ignore[misc]
        columns = s.value_columns()
        rows = csv.reader(sampled_lines(s.source or Path(s.rel), s.header), delimiter=s.delimiter)
        for at, row in timed_rows(rows, index, fmt):
            meter = (s.rel, row[site] if site is not None and site < len(row) else "")
            for i in columns:
                if i < len(row) and (value := to_number(row[i], s.decimal)) is not None:
                    key = role_value(naming, s.rel, "key") if layout.kind == "file_per_stream" else s.names[i]
                    readings.setdefault(key, {}).setdefault(meter, []).append((at, value))
    return readings


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
