"""`corpus draft`'s reading of one file's shape: the delimiter, header, decimal mark and time column of delimited
text, from its first rows and its last ones (a seek, never the whole file); a zip archive holding one data member
is read as that member."""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.core.errors import ConfigError
from pipeline.ingest.draft_archives import Member
from pipeline.ingest.draft_values import is_states
from pipeline.ingest.timeparse import readings

SAMPLE_BYTES = 256 * 1024
SAMPLE_ROWS = 400
TAIL_BYTES = 64 * 1024  # a large file's last rows are read from its end, never the whole file
TAIL_ROWS = 50
DELIMITERS = ("\t", ";", ",", "|")
MISSING = {"", "na", "nan", "null", "none", "-"}
NOT_DATA = re.compile(
    r"(?i)^(readme|license|licence|upstream_license|source|notice|changelog)(\..*)?$|\.(md|pdf|html?|ttl|zip|pickle|pkl|json|toml|ya?ml|xml|png|jpe?g)$"
)
EPOCH_RANGES = (("epoch_s", 9e8, 4.2e9), ("epoch_ms", 9e11, 4.2e12), ("epoch_us", 9e14, 4.2e15))
ISO = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$")
ISO_AWARE = re.compile(r"(T.*|Z|[+-]\d{2}:?\d{2})$")


@dataclass
class Sniffed:
    """What one text file looks like."""

    rel: str
    bytes: int
    delimiter: str
    header: bool
    decimal: str
    names: list[str]  # the header's names, or col1, col2... for a headerless file
    rows: list[list[str]]  # sample data rows
    time: tuple[int, str, str] | None  # (column index, format, why)
    why: dict[str, str] = field(default_factory=dict)
    tail: list[list[str]] = field(default_factory=list)  # the file's last data rows (the sample's, for a small file)
    states: dict[str, float] = field(default_factory=dict)  # the lexicon's state texts (lower case) -> numbers
    source: Path | None = None  # where its text is read: the file, or an archive's member inflated for the draft
    member: str | None = None  # the member's path inside the archive `rel` (values.archive_member)

    def column(self, index: int) -> list[str]:
        return [row[index].strip() for row in self.rows if index < len(row)]

    def value_columns(self) -> list[int]:
        """Columns that hold numbers (other than the time column)."""
        return [
            i
            for i in range(len(self.names))
            if self.time
            and i != self.time[0]
            and (_numeric_share(self.column(i), self.decimal) >= 0.9 or is_states(self.column(i), self.states))
        ]


def to_number(cell: str, decimal: str = ".") -> float | None:
    text = cell.strip()
    if decimal == ",":
        if "." in text:
            return None
        text = text.replace(",", ".")
    try:
        return float(text)
    except ValueError:
        return None


def present_cells(cells: list[str]) -> list[str]:
    return [c.strip() for c in cells if c.strip().lower() not in MISSING]


def _numeric_share(cells: list[str], decimal: str = ".") -> float:
    present = present_cells(cells)
    return sum(to_number(c, decimal) is not None for c in present) / len(present) if present else 0.0


def time_format(cells: list[str]) -> tuple[str, str] | None:
    """(format, why) when (nearly) every present cell is a time of day in one format; dates alone do not count."""
    present = present_cells(cells)
    if len(present) < 2:
        return None
    if all(ISO.match(c) for c in present):
        aware = any(
            ISO_AWARE.search(c) and ("T" in c or c.endswith("Z") or re.search(r"[+-]\d{2}:?\d{2}$", c)) for c in present
        )
        if aware or any("T" in c for c in present):
            return "iso8601", "ISO 8601 times" + (" with a UTC offset or Z" if aware else "")
    numbers = [to_number(c) for c in present]
    if all(n is not None for n in numbers):
        for name, low, high in EPOCH_RANGES:
            if all(low <= n < high for n in numbers):  # type: ignore[operator]
                return name, f"numbers between {low:.0e} and {high:.0e}: Unix time in {name.split('_')[1]}"
        return None
    found = readings(present)
    return (found[0], f"every value reads as {found[0]}") if found else None


def _split(lines: list[str], delimiter: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO("\n".join(lines)), delimiter=delimiter))


def _delimiter(lines: list[str]) -> tuple[str, str, str]:
    """(delimiter, decimal mark, why): the separator that splits every line alike into cells that read as data."""
    best = None
    for delimiter in DELIMITERS:
        rows = _split(lines, delimiter)
        widths = Counter(len(r) for r in rows)
        width, count = widths.most_common(1)[0]
        if width < 2:
            continue
        cells = [c for r in rows[1:] for c in r]
        decimal = "," if delimiter != "," and _decimal_comma(cells) else "."
        data = sum(
            to_number(c, decimal) is not None or bool(ISO.match(c.strip())) or c.strip().lower() in MISSING
            for c in cells
        ) / max(len(cells), 1)
        score = (count / len(rows), data, width)
        if best is None or score > best[0]:
            best = (score, delimiter, decimal)
    if best is None:
        raise ConfigError("no delimiter splits the lines into two or more columns")
    (share, data, width), delimiter, decimal = best
    why = f"splits {share:.0%} of the sampled lines into {width} columns, {data:.0%} of the cells numbers or times"
    return delimiter, decimal, why


def _decimal_comma(cells: list[str]) -> bool:
    comma = sum(bool(re.fullmatch(r"[+-]?\d+,\d+", c.strip())) for c in cells)
    dot = sum(bool(re.fullmatch(r"[+-]?\d*\.\d+", c.strip())) for c in cells)
    return comma > 0 and dot == 0


def _head_and_tail(path: Path) -> tuple[bytes, int, str]:
    """A file's first bytes, its size and, past the first bytes, its last ones (a seek: nothing between is read)."""
    with path.open("rb") as handle:
        data = handle.read(SAMPLE_BYTES)
        size = handle.seek(0, os.SEEK_END)
        if size <= SAMPLE_BYTES:
            return data, size, ""
        handle.seek(max(SAMPLE_BYTES, size - TAIL_BYTES))
        return data, size, handle.read().decode("utf-8", errors="replace")


def sniff(path: Path, rel: str, states: dict[str, float] | None = None) -> Sniffed | None:
    """One file's shape, or None when it is not delimited text with a time column."""
    data, size, tail_text = _head_and_tail(path)
    if b"\x00" in data:
        return None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    lines = [line for line in text.splitlines() if line.strip()]
    if len(data) == SAMPLE_BYTES and lines:
        lines = lines[:-1]  # the last line may be cut
    last_lines = lines[-TAIL_ROWS:]
    lines = lines[: SAMPLE_ROWS + 1]
    if len(lines) < 3:
        return None
    try:
        delimiter, decimal, why_delimiter = _delimiter(lines)
    except ConfigError:
        return None
    rows = _split(lines, delimiter)
    first, second = rows[0], rows[1]
    data_like = [(to_number(c, decimal) is not None or time_format([c, c]) is not None) for c in first]
    below = [(to_number(c, decimal) is not None or time_format([c, c]) is not None) for c in second]
    header = any(b and not d for d, b in zip(data_like, below, strict=False)) or not any(data_like)
    names = [c.strip() for c in first] if header else [f"col{i + 1}" for i in range(len(first))]
    body = rows[1:] if header else rows
    sniffed = Sniffed(rel, size, delimiter, header, decimal, names, body, None, states=states or {}, source=path)
    if tail_text:
        last_lines = [line for line in tail_text.splitlines() if line.strip()][1:][-TAIL_ROWS:]  # the first may be cut
    sniffed.tail = _split(last_lines, delimiter)
    times = []
    for index in range(len(names)):
        found = time_format(sniffed.column(index))
        if found:
            distinct = len(set(sniffed.column(index)))
            named = bool(re.search(r"(?i)time|date|^ts$|stamp|epoch", names[index]))
            times.append(((distinct, named, -index), index, found))
    if not times:
        return None
    _, index, (fmt, why_time) = max(times)
    sniffed.time = (index, fmt, why_time)
    if not header:  # name the headerless columns by what they hold
        values = sniffed.value_columns()
        sniffed.names[index] = "time"
        for i in values:
            sniffed.names[i] = "value" if len(values) == 1 else f"value{values.index(i) + 1}"
    sniffed.why = {
        "delimiter": why_delimiter,
        "header": "line 1 holds names where the lines below hold numbers or times"
        if header
        else "line 1 is data like the rest",
        "decimal": "values such as 12,5 and none such as 12.5" if decimal == "," else "values use a decimal point",
        "time": f"column {sniffed.names[index]!r}: {why_time}"
        + (f" (of {len(times)} time-like columns, the one with the most distinct values)" if len(times) > 1 else ""),
    }
    return sniffed


def sniff_file(raw: Path, path: Path, members: dict[str, Member], states: dict[str, float]) -> Sniffed | None:
    """A file's shape, read from the member inflated for it when it is an archive."""
    rel = path.relative_to(raw).as_posix()
    if rel in members:
        found = sniff(members[rel].extracted, rel, states)
        return dataclasses.replace(found, member=members[rel].name) if found else None
    return None if NOT_DATA.search(path.name) else sniff(path, rel, states)
