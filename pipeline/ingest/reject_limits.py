"""A build that rejects most of a file stops: above a share of one file's cells rejected for one reason (configs/
ingest.toml, or the mapping's [[cleaning.reject_limits]] with its reason), ingest is one line naming the file, the
share and the likely cause, never a benchmark built quietly from the cells that happened to parse."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from contracts.corpus import CorpusMapping
from pipeline.core import patterns
from pipeline.core.errors import IngestError, shown
from pipeline.ingest.layouts import read_raw
from pipeline.ingest.timeparse import BAD, readings, spec_for_file


def limit_for(mapping: CorpusMapping, defaults: dict[str, float], rel: str, reason: str) -> tuple[float, str] | None:
    """The share of a file's cells a reason may reject, and where that limit is written (None: no limit)."""
    for index, entry in enumerate(mapping.cleaning.reject_limits):
        if entry.reason == reason and patterns.fullmatch(entry.files, rel, "cleaning.reject_limits files"):
            return entry.share, f"cleaning.reject_limits entry {index + 1}"
    return (defaults[reason], "configs/ingest.toml") if reason in defaults else None


def check_reject_shares(
    mapping: CorpusMapping, raw: Path, cells: dict[str, int], rejects: pl.DataFrame, defaults: dict[str, float]
) -> None:
    """One IngestError line for the first file (in path order) whose rejects for one reason pass their limit."""
    counted = rejects.group_by("source", "reason").agg(pl.len().alias("n"), pl.col("row").min().alias("first"))
    for rel, reason, n, first in counted.sort("source", "reason").iter_rows():
        limit = limit_for(mapping, defaults, rel, reason)
        if limit is None or not cells.get(rel) or n / cells[rel] <= limit[0]:
            continue
        cause = likely_time_cause(mapping, raw, rel, first) if reason == BAD else None
        raise IngestError(
            f"{rel}: {n / cells[rel]:.0%} of its cells ({n:,} of {cells[rel]:,}) rejected as {reason}, above the "
            f"limit of {limit[0]:.0%} ({limit[1]})"
            + (f"; {cause}" if cause else "")
            + "; fix the mapping, or allow it for this file with [[cleaning.reject_limits]] (files, reason, share, why)"
        )


def likely_cause(text: str, fmt: str) -> str:
    """Why a time text does not parse as `fmt`, and the format that reads it, in a few words."""
    others = [f for f in readings([text]) if f != fmt]
    day_first = re.search(r"%d\W%m", fmt) is not None
    if others:
        what = "dates read day-first here; " if day_first and "%m/%d" in others[0] else ""
        return f"{what}{shown(text)} does not parse as {fmt}: try {others[0]}"
    return f"{shown(text)} does not parse as {fmt}, nor as any format `corpus draft` knows"


def likely_time_cause(mapping: CorpusMapping, raw: Path, rel: str, row: int) -> str | None:
    """The likely cause of a file's bad timestamps, from the time text of its first rejected record."""
    if mapping.values.kind == "bts_pickle":
        return None
    table = read_raw(raw / rel, mapping.values)
    at = [i for i, number in enumerate(table.rows) if number == row]
    if not at or mapping.time.column not in table.header:
        return None
    text = table.table.column(mapping.time.column)[at[0]].as_py().strip()
    return likely_cause(text, spec_for_file(mapping.time, rel)[0].format)
