"""When a drafted corpus holds readings, for the build's plan rule: each value file's first and last reading, each
stream's span (its shards joined), the weeks holding data, and the plan the rule makes of them."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import PurePosixPath

from pipeline.ingest.draft_plan import PlanFn, Settings, SpanRead
from pipeline.ingest.draft_sniff import Sniffed
from pipeline.ingest.draft_times import timed_rows


def file_edges(sniffed: Sniffed) -> tuple[int, int] | None:
    """A file's first and last reading, from its first and last data rows only."""
    index, fmt, _ = sniffed.time  # type: ignore[misc]

    def first_time(rows) -> int | None:
        timed = timed_rows(rows, index, fmt)
        return timed[0][0] if timed else None

    head, tail = first_time(sniffed.rows), first_time(reversed(sniffed.tail))
    return None if head is None or tail is None else (min(head, tail), max(head, tail))


def plan_of(
    group: list[Sniffed],
    edges: dict[str, tuple[int, int] | None],
    pattern: str,
    sites: int,
    streams: int,
    plan: PlanFn | None,
    file_weeks: dict[str, set[int]],
) -> tuple[list[str], Settings]:
    """What a build would do with the corpus (the lines), and the split settings the mapping must hold for it;
    `file_weeks`: the Mondays each file holds readings in (draft_readings.spread_pass)."""
    if plan is None:
        return [], {}
    known = [e for e in edges.values() if e]
    if not known:
        return [f"span: unknown (no time read in the first and last rows of {group[0].rel})"], {}
    first, last = min(a for a, _ in known), max(b for _, b in known)
    weeks = _weeks_with_data(group, pattern, file_weeks)
    spans = _stream_spans(edges, pattern)
    return plan(SpanRead(first, last, sites, spans, max(streams, len(spans)), weeks))


def _stream_spans(edges: dict[str, tuple[int, int] | None], pattern: str) -> list[tuple[int, int]]:
    """The first and last reading of each stream (or site) by its files: files alike but for a shard group (year,
    part) of `pattern` are one stream's, their spans joined."""
    regex, joined = re.compile(pattern), {}
    for rel, edge in edges.items():
        if edge is None:
            continue
        key = _stream_key(regex, pattern, rel)
        a, b = joined.get(key, edge)
        joined[key] = (min(a, edge[0]), max(b, edge[1]))
    return [joined[key] for key in sorted(joined)]


def _stream_key(regex: re.Pattern, pattern: str, rel: str) -> tuple:
    """The stream (or site) a file holds: its path's groups in `pattern` but the shard groups (year, part)."""
    found = regex.fullmatch(rel if "/" in pattern else PurePosixPath(rel).name)
    groups = found.groupdict() if found else {"": rel}
    return tuple(sorted((k, v) for k, v in groups.items() if k not in ("year", "part")))


def _weeks_with_data(group: list[Sniffed], pattern: str, file_weeks: dict[str, set[int]]) -> dict[int, int]:
    """Per Monday, how many streams (files alike but for a shard group, as in _stream_spans) have a reading that
    week, from the weeks of each file's evenly spread rows (draft_readings.spread_pass)."""
    regex, seen = re.compile(pattern), set()
    for s in group:
        if s.rel in file_weeks:
            key = _stream_key(regex, pattern, s.rel)
            seen.update((key, week) for week in file_weeks[s.rel])
    return dict(sorted(Counter(week for _, week in seen).items()))
