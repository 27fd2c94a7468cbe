"""`corpus draft`'s reading of time columns: every candidate format tried on the rows it read of every file (head and
tail, so that a month's later days, 5/13/2022, tell month-first from day-first), the one that reads them all chosen,
a CHECK where two read them all, per-file formats where files differ, and the zone behind CST/CDT; and the
time cells of sampled rows read as microseconds since 1970 (epochs_us, read_times, timed_rows)."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import polars as pl

from contracts.corpus import TimeSpec
from pipeline.ingest.timeparse import parse_times, readings

# The zone a draft proposes (as a CHECK) for the abbreviations it finds in times: CST/CDT are US Central time.
ZONES = {
    "CST": "America/Chicago",
    "CDT": "America/Chicago",
    "EST": "America/New_York",
    "EDT": "America/New_York",
    "MST": "America/Denver",
    "MDT": "America/Denver",
    "PST": "America/Los_Angeles",
    "PDT": "America/Los_Angeles",
    "CET": "Europe/Berlin",
    "CEST": "Europe/Berlin",
    "BST": "Europe/London",
}
CHECK = "CHECK "  # the prefix of a guess the user confirms by deleting it; the build refuses it until then


@dataclass
class TimeChoice:
    """The formats of a group's time column: the corpus's, each other file's, and what the user must confirm."""

    format: str
    why: str
    alternative: str | None = None  # another format that reads every value as well: the format is a CHECK
    per_file: dict[str, str] = field(default_factory=dict)  # rel -> its format, where it is not `format`
    unread: list[str] = field(default_factory=list)  # files no one format reads entirely
    zone: str | None = None  # the IANA zone the abbreviations in the times point to
    abbreviations: list[str] = field(default_factory=list)


def epochs(cells: list[str], fmt: str, zone: str = "UTC") -> list[int | None]:
    """Time cells in microseconds since 1970 UTC as ingest reads them (naive times in `zone`); None where one does not
    parse."""
    if fmt.endswith(" %Z") and zone == "UTC":  # CST read in the zone that uses it, as the drafted mapping will say
        zone = next((ZONES[a] for a in sorted(_abbreviations(cells)) if a in ZONES), zone)
    frame = pl.DataFrame({"t": [c.strip() for c in cells]}, schema={"t": pl.String})
    return parse_times(frame, "t", TimeSpec(column="t", format=fmt, timezone=zone))["ts"].to_list()


def _abbreviations(cells: list[str]) -> set[str]:
    return {m.group(1).upper() for c in cells if (m := re.search(r"\s([A-Za-z]{2,5})$", c.strip()))} - {"AM", "PM"}


def choose(files: dict[str, list[str]]) -> TimeChoice | None:
    """The time formats of alike files from their sampled time cells (rel -> cells); None when no file's cells all
    read in one candidate format (ISO 8601 and Unix times are the sniffer's)."""
    found = {rel: readings(cells) for rel, cells in files.items()}
    coverage = Counter(fmt for fmts in found.values() for fmt in fmts)
    if not coverage:
        return None
    order = {fmt: i for fmts in found.values() for i, fmt in reversed(list(enumerate(fmts)))}
    main = max(coverage, key=lambda f: (coverage[f], -order[f]))
    read_by_main = {rel for rel, fmts in found.items() if main in fmts}
    twins = [f for f in coverage if f != main and {r for r, fmts in found.items() if f in fmts} == read_by_main]
    abbreviations = sorted(set().union(*(_abbreviations(c) for c in files.values())))
    zones = sorted({ZONES[a] for a in abbreviations if a in ZONES})
    choice = TimeChoice(
        format=main,
        why=f"every value sampled (first and last rows) of {len(read_by_main)} of {len(files)} files reads as {main}",
        alternative=twins[0] if twins else None,
        per_file={rel: fmts[0] for rel, fmts in sorted(found.items()) if fmts and rel not in read_by_main},
        unread=sorted(rel for rel, fmts in found.items() if not fmts),
        zone=zones[0] if len(zones) == 1 else None,
        abbreviations=abbreviations,
    )
    return choice


def time_lines(column: str, why_column: str, choice: TimeChoice, order: str, order_file: str) -> list[str]:
    """The [time] lines of a draft: column, format (a CHECK where another reads as well), zone, row order, and one
    [[time.file_formats]] entry per format other files are written in."""
    fmt = f"{CHECK}{choice.format}" if choice.alternative else choice.format
    check = (
        f"; {choice.alternative} reads every value too (no day above 12 was seen): confirm by deleting "
        f'"CHECK ", or write the other'
        if choice.alternative
        else ""
    )
    aware = "%z" in choice.format or ":z" in choice.format
    if choice.abbreviations and choice.zone:
        zone = f'timezone = "{CHECK}{choice.zone}"  # {"/".join(choice.abbreviations)} in the times: the site\'s zone '
        zone += "resolves each abbreviation (and reads the times without one); confirm or write the site's IANA zone"
    elif aware:
        zone = 'timezone = "UTC"  # times carry their UTC offset'
    else:
        zone = (
            'timezone = "UTC"  # naive times, read as UTC: if they are local wall-clock time, write the site\'s IANA '
            "zone (e.g. Europe/Berlin)"
        )
    lines = [
        "",
        "[time]",
        f"column = {toml_value(column)}  # {why_column}",
        f"format = {toml_value(fmt)}  # {choice.why}{check}",
        zone,
        f"row_order = {toml_value(order)}  # as the sampled rows of {order_file} run",
    ]
    if choice.unread:
        lines.insert(4, f"# no one candidate format reads every sampled time of {', '.join(choice.unread)}: check them")
    by_format: dict[str, list[str]] = {}
    for rel, own in choice.per_file.items():
        by_format.setdefault(own, []).append(rel)
    for own, rels in sorted(by_format.items()):
        lines += [
            "",
            f"[[time.file_formats]]  # {len(rels)} files write their times otherwise",
            f"files = {toml_value('|'.join(re.escape(r) for r in rels))}",
            f"format = {toml_value(own)}",
        ]
    return lines


def toml_value(value: object) -> str:
    """A value as TOML: a literal string where it keeps regex backslashes readable, else JSON's spelling."""
    if isinstance(value, str) and "'" not in value and "\n" not in value and ("\\" in value):
        return f"'{value}'"
    return json.dumps(value, ensure_ascii=False)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
EPOCH_SCALE = {"epoch_s": 1_000_000, "epoch_ms": 1_000, "epoch_us": 1}


def epochs_us(cells: list[str], fmt: str) -> list[int | None]:
    """Time cells in microseconds since 1970 UTC (naive times read as UTC, as the draft's timezone says), None where
    one does not read; a strftime format's cells are parsed
    in one call (one polars frame per file, not per cell: a 5-minute BAS export samples thousands of rows per file)."""
    if fmt not in EPOCH_SCALE and fmt != "iso8601":
        return epochs(cells, fmt) if cells else []
    out: list[int | None] = []
    for cell in cells:
        text = cell.strip()
        try:
            if fmt in EPOCH_SCALE:
                out.append(round(float(text) * EPOCH_SCALE[fmt]))
                continue
            at = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except (ValueError, OverflowError):
            out.append(None)
            continue
        out.append(((at if at.tzinfo else at.replace(tzinfo=UTC)) - EPOCH) // timedelta(microseconds=1))
    return out


def read_times(rows, index: int, fmt: str) -> tuple[list[list[str]], list[str], list[int | None]]:
    """The rows that reach the time column (`index`), their time cells, and each cell's time in `fmt` (None where it
    does not read)."""
    rows = [row for row in rows if index < len(row)]
    cells = [row[index] for row in rows]
    return rows, cells, epochs_us(cells, fmt)


def timed_rows(rows, index: int, fmt: str) -> list[tuple[int, list[str]]]:
    """The rows whose time cell (column `index`) reads in `fmt`, with that time, in their order."""
    rows, _, times = read_times(rows, index, fmt)
    return [(at, row) for at, row in zip(times, rows, strict=True) if at is not None]
