"""`telemetry-bench corpus draft`: inspect a raw folder and write a draft mapping with every guess explained.

The draft guesses the layout, the delimiter, whether there is a header, the decimal mark, the time column, its format
and zone, the keys in the file names, and (without Brick graphs) writes a points table beside the mapping with one row
per stream and TODO in each point class. Nothing in the raw folder is written."""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import re
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath

from contracts.corpus import CorpusMapping
from contracts.lexicon import LexiconEntry, PointLexicon
from pipeline.core.checksums import SUMS_NAME
from pipeline.core.errors import ConfigError
from pipeline.ingest.draft_archives import Member, extract, member_pattern
from pipeline.ingest.draft_counters import dropout_zeros, rises_only
from pipeline.ingest.draft_paths import Paths, equipment_type, place_label, read_paths
from pipeline.ingest.draft_plan import PlanFn, Settings, SpanRead, monday, sampled_lines, split_kind, split_shares
from pipeline.ingest.draft_times import TimeChoice, choose, epochs, time_lines
from pipeline.ingest.draft_times import toml_value as _toml
from pipeline.ingest.draft_values import excluded, is_states, states_line, unit_for, unread_reason, value_column
from pipeline.ingest.metadata import UNCONFIRMED
from pipeline.ingest.timeparse import readings

SAMPLE_BYTES = 256 * 1024
SAMPLE_ROWS = 400
TAIL_BYTES = 64 * 1024  # a large file's last rows are read from its end, never the whole file
TAIL_ROWS = 50
SITE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:#-]{0,39}")
SITE_NAMES = re.compile(
    r"(?i)site|building|bldg|room|zone|house|home|station|location|premise|facility|campus|plant|apartment|flat|meter"
)
STREAM_NAMES = re.compile(r"(?i)sensor|stream|point|tag|signal|variable|channel|metric|measure|series|quantity|name")
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


def _number(cell: str, decimal: str = ".") -> float | None:
    text = cell.strip()
    if decimal == ",":
        if "." in text:
            return None
        text = text.replace(",", ".")
    try:
        return float(text)
    except ValueError:
        return None


def _present(cells: list[str]) -> list[str]:
    return [c.strip() for c in cells if c.strip().lower() not in MISSING]


def _numeric_share(cells: list[str], decimal: str = ".") -> float:
    present = _present(cells)
    return sum(_number(c, decimal) is not None for c in present) / len(present) if present else 0.0


def time_format(cells: list[str]) -> tuple[str, str] | None:
    """(format, why) when (nearly) every present cell is a time of day in one format; dates alone do not count."""
    present = _present(cells)
    if len(present) < 2:
        return None
    if all(ISO.match(c) for c in present):
        aware = any(
            ISO_AWARE.search(c) and ("T" in c or c.endswith("Z") or re.search(r"[+-]\d{2}:?\d{2}$", c)) for c in present
        )
        if aware or any("T" in c for c in present):
            return "iso8601", "ISO 8601 times" + (" with a UTC offset or Z" if aware else "")
    numbers = [_number(c) for c in present]
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
            _number(c, decimal) is not None or bool(ISO.match(c.strip())) or c.strip().lower() in MISSING for c in cells
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
    data_like = [(_number(c, decimal) is not None or time_format([c, c]) is not None) for c in first]
    below = [(_number(c, decimal) is not None or time_format([c, c]) is not None) for c in second]
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


def _affixes(names: list[str]) -> tuple[str, str]:
    """The common prefix (cut back to a separator, so that L4 and L8 vary as whole tokens) and suffix of file names."""
    prefix = re.sub(r"[A-Za-z0-9]+$", "", os.path.commonprefix(names))
    suffix = os.path.commonprefix([n[len(prefix) :][::-1] for n in names])[::-1]
    return prefix, suffix


def _row_order(group: list[Sniffed]) -> tuple[str, str]:
    """The row order of a group's files and the file that says so: the first file's first rows', unless the rows
    of a file spread through it run otherwise (a file ordered by meter, then time, restarts its times at each
    meter: 'any')."""
    first = group[0]
    order = _order(first, first.column(first.time[0]))  # type: ignore[index]
    if order == "any":
        return order, first.rel
    for s in group:
        index = s.time[0]  # type: ignore[index]
        rows = csv.reader(sampled_lines(s.source or Path(s.rel), s.header), delimiter=s.delimiter)
        spread = _present([row[index] for row in rows if index < len(row)])
        if len(set(spread)) > 1 and _order(s, spread) != order:
            return "any", s.rel
    return order, first.rel


def _order(sniffed: Sniffed, column: list[str]) -> str:
    """How the times of a column run: ascending, descending, or any."""
    index, fmt, _ = sniffed.time  # type: ignore[misc]
    cells = _present(column)
    if fmt.startswith("epoch"):
        keys = [float(c) for c in cells]
    elif fmt == "iso8601":
        keys = [c.replace("T", " ") for c in cells]  # comparable as text when all share a zone
    else:
        keys = [k for k in epochs(cells, fmt) if k is not None]  # type: ignore[misc]
    if len(set(keys)) > 1 and all(a <= b for a, b in zip(keys, keys[1:], strict=False)):
        return "ascending"  # repeated times (a long file's streams at one instant) keep the order
    if len(set(keys)) > 1 and all(a >= b for a, b in zip(keys, keys[1:], strict=False)):
        return "descending"
    return "any"


@dataclass
class Draft:
    mapping: str  # the TOML text
    points: str | None  # the points table (CSV), when there is no Brick graph
    guesses: dict[str, object]  # layout, delimiter, header, decimal, time column, format, zone, file pattern
    plan: list[str] = field(default_factory=list)  # what a build would do with the span (`plan` given)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
EPOCH_SCALE = {"epoch_s": 1_000_000, "epoch_ms": 1_000, "epoch_us": 1}


def _epochs_us(cells: list[str], fmt: str) -> list[int | None]:
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


def _timed_rows(rows, index: int, fmt: str) -> list[tuple[int, list[str]]]:
    """The rows whose time cell (column `index`) reads in `fmt`, with that time, in their order."""
    rows = [row for row in rows if index < len(row)]
    times = _epochs_us([row[index] for row in rows], fmt)
    return [(at, row) for at, row in zip(times, rows, strict=True) if at is not None]


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


def _edges(sniffed: Sniffed) -> tuple[int, int] | None:
    """A file's first and last reading, from its first and last data rows only."""
    index, fmt, _ = sniffed.time  # type: ignore[misc]

    def first_time(rows) -> int | None:
        timed = _timed_rows(rows, index, fmt)
        return timed[0][0] if timed else None

    head, tail = first_time(sniffed.rows), first_time(reversed(sniffed.tail))
    return None if head is None or tail is None else (min(head, tail), max(head, tail))


def _scan(raw: Path, group: list[Sniffed], columns: list[int]) -> list[set[str]]:
    """The distinct values of some columns over every row of every file (stream keys, site ids may first appear
    late)."""
    found: list[set[str]] = [set() for _ in columns]
    for s in group:
        with (s.source or raw / s.rel).open(encoding="utf-8-sig", errors="replace", newline="") as handle:
            rows = csv.reader(handle, delimiter=s.delimiter)
            if s.header:
                next(rows, None)
            for row in rows:
                for slot, index in zip(found, columns, strict=True):
                    if index < len(row) and (cell := row[index].strip()):
                        slot.add(cell)
    return found


def _words(name: str) -> set[str]:
    """The lower-case words of a name: split at non-letters and camelCase (ZoneTemp, CO2Level)."""
    spaced = re.sub(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Za-z0-9])(?=[A-Z][a-z])", " ", name)
    return {w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w}


def propose(key: str, lexicon: PointLexicon) -> LexiconEntry | None:
    """The lexicon's entry for a stream key: the phrase with the most words all in the key, then the first listed."""
    words, best = _words(key), None
    for rank, entry in enumerate(lexicon.points.values()):
        for phrase in entry.words:
            needed = phrase.split()
            if set(needed) <= words and (best is None or (len(needed), -rank) > best[0]):
                best = ((len(needed), -rank), entry)
    return best[1] if best else None


def _plan(
    raw: Path,
    group: list[Sniffed],
    edges: dict[str, tuple[int, int] | None],
    pattern: str,
    sites: int,
    streams: int,
    plan: PlanFn | None,
) -> tuple[list[str], Settings]:
    """What a build would do with the corpus (the lines), and the split settings the mapping must hold for it."""
    if plan is None:
        return [], {}
    known = [e for e in edges.values() if e]
    if not known:
        return [f"span: unknown (no time read in the first and last rows of {group[0].rel})"], {}
    first, last = min(a for a, _ in known), max(b for _, b in known)
    weeks = _weeks_with_data(raw, group, pattern)
    spans = _stream_spans(edges, pattern)
    return plan(SpanRead(first, last, sites, spans, max(streams, len(spans)), weeks))


def _weeks_with_data(raw: Path, group: list[Sniffed], pattern: str) -> dict[int, int]:
    """Per Monday, how many streams (files alike but for a shard group, as in _stream_spans) have a reading that
    week, from the time cells of evenly spread rows of each file (draft_plan.sampled_lines)."""
    regex, seen = re.compile(pattern), set()
    for s in group:
        if s.time is None:
            continue
        index, fmt, _ = s.time
        key = _stream_key(regex, pattern, s.rel)
        rows = csv.reader(sampled_lines(s.source or raw / s.rel, s.header), delimiter=s.delimiter)
        seen.update((key, monday(at)) for at, _ in _timed_rows(rows, index, fmt))
    return dict(sorted(Counter(week for _, week in seen).items()))


def _plan_block(plan: list[str]) -> list[str]:
    if not plan:
        return []
    return [
        "#",
        "# What a build would do with this corpus (from each value file's first and last rows; pipeline/tasks/fit.py):",
        *[f"#   {line}" for line in plan],
        "#",
    ]


def draft(
    raw: Path, name: str, raw_dir: str | None, lexicon: PointLexicon | None = None, plan: PlanFn | None = None
) -> Draft:
    """The draft mapping of a raw folder; raises ConfigError when no file holds a time column. `lexicon` proposes
    point classes; `plan` states what a build would do with the corpus's span (first, last reading, sites). A zip
    archive holding one data member is read as that member (values.archive_member)."""
    files = sorted(
        p
        for p in raw.rglob("*")
        if p.is_file() and p.name != SUMS_NAME and not any(part.startswith(".") for part in p.relative_to(raw).parts)
    )
    with tempfile.TemporaryDirectory(prefix="draft-") as scratch:  # inflated members, gone when the draft is
        members = extract(raw, files, Path(scratch), NOT_DATA)
        sniffed = [s for p in files if (s := _sniffed(raw, p, members, lexicon.states if lexicon else {}))]
        return _draft(raw, name, raw_dir, lexicon, plan, files, sniffed)


def _sniffed(raw: Path, path: Path, members: dict[str, Member], states: dict[str, float]) -> Sniffed | None:
    """A file's shape, read from the member inflated for it when it is an archive."""
    rel = path.relative_to(raw).as_posix()
    if rel in members:
        found = sniff(members[rel].extracted, rel, states)
        return dataclasses.replace(found, member=members[rel].name) if found else None
    return None if NOT_DATA.search(path.name) else sniff(path, rel, states)


def _draft(
    raw: Path,
    name: str,
    raw_dir: str | None,
    lexicon: PointLexicon | None,
    plan: PlanFn | None,
    files: list[Path],
    sniffed: list[Sniffed],
) -> Draft:
    graphs = [p.relative_to(raw).as_posix() for p in files if p.suffix == ".ttl"]
    states = lexicon.states if lexicon else {}
    if not sniffed:
        raise ConfigError(
            f"{raw}: no delimited text file with a time column was found; `corpus draft` reads CSV-like "
            "files (comma, semicolon, tab or bar separated); write the mapping by hand (docs/ingest.md)"
        )
    groups = _alike(sniffed)
    group = max(groups, key=lambda g: (sum(s.bytes for s in g), len(g), [s.rel for s in g]))
    choice = _time_choice(group)
    first, layout = group[0], _layout(group)
    rels = [s.rel for s in group]
    edges = {s.rel: _edges(s) for s in group}
    layout, naming = _naming(first, layout, rels, edges)
    glob, pattern, roles = naming.glob, naming.pattern, naming.roles
    left_out = _left_out(raw, files, groups, group, glob)

    keys, sites, site_column, site_label = _streams_and_sites(raw, group, layout, naming, bool(graphs))
    streams = len(keys) * sites if layout.kind == "wide_csv" else max(len(keys), sites)
    plan_lines, settings = _plan(raw, group, edges, pattern, sites, streams, plan)

    lines = [
        f"# Draft mapping written by `telemetry-bench corpus draft` from {len(files)} files; every guess says why.",
        '# Check each one, fill the TODOs, confirm each CHECK (delete "CHECK "), then `telemetry-bench build '
        f"--corpus {name}` (docs/ingest.md).",
        *_plan_block(plan_lines),
        f"name = {_toml(name)}",
        f"title = {_toml(f'TODO: one line on what {name} is')}",
    ]
    if raw_dir:
        lines.append(f"raw_dir = {_toml(raw_dir)}")
    lines += [
        'license = "TODO: the raw data\'s license, an SPDX identifier (CC-BY-4.0, ODbL-1.0, BSD-2-Clause, MIT...)"',
        'license_url = "TODO: where the license text is (https://...), or empty"',
        'citation = "TODO: how to credit the raw data (authors, title, DOI)"',
        *split_kind(settings),
        *_time_lines(group, choice),
        *_values_section(group, layout, glob, pattern, naming.why, len(rels), left_out),
        *_value_column_lines(group, layout),
        *_site_lines(first, layout, name, bool(graphs), roles, site_column),
    ]
    readings = {} if graphs else _spread_readings(group, layout, naming)
    metadata, points = _metadata_section(
        graphs,
        name,
        keys,
        lexicon,
        site_label,
        _unit_names(group, layout, naming),
        _files_of_keys(group, layout),
        _devices(layout, naming, rels),
        {key for key, meters in readings.items() if rises_only(meters.values())},
    )
    lines += [*metadata, "", "[cleaning]", 'missing_tokens = ["", "NA"]', 'duplicates = "keep_first_row"']
    lines += [] if graphs else _zero_lines(readings, lexicon)
    lines += [*_states_lines(group, states), ""]
    lines += split_shares(settings)
    text = "\n".join(lines)
    _validate(text, name)
    time_index, time_fmt, _ = first.time  # type: ignore[misc]
    guesses = {
        "layout": layout.kind,
        "delimiter": first.delimiter,
        "header": first.header,
        "decimal": first.decimal,
        "time_column": first.names[time_index],
        "time_format": time_fmt,
        "files": glob,
        "file_pattern": pattern,
        "streams": len(keys),
        "sites": sites,
    }
    if [r for r in roles if r in ("year", "part")]:
        guesses["shards"] = [r for r in roles if r in ("year", "part")]
    if site_column:
        guesses["site_column"] = site_column
    return Draft(text, points, guesses, plan_lines)


@dataclass
class _Naming:
    """How the value files' paths are matched, and what their varying parts are."""

    paths: Paths | None
    glob: str
    pattern: str
    why: str
    roles: list[str]


def _naming(
    first: Sniffed, layout: _Layout, rels: list[str], edges: dict[str, tuple[int, int] | None]
) -> tuple[_Layout, _Naming]:
    """The files glob and file_pattern of a group (its site, stream key and shards), and the layout they leave: the
    shards of one stream are one value column, not one stream per file."""
    paths = read_paths(rels, layout.kind == "file_per_stream", edges)
    if paths and layout.kind == "file_per_stream" and "key" not in paths.roles:  # shards of one stream
        why = f"{len(rels)} shards of one file, each a time column and one value column"
        layout = dataclasses.replace(layout, kind="wide_csv", key_group="site", why=why, streams_by_key=[])
        paths = read_paths(rels, False, edges)
    if paths is not None:
        return layout, _Naming(paths, paths.glob, paths.pattern, paths.why, paths.roles)
    folder = str(Path(first.rel).parent)
    names = [Path(r).name for r in rels]
    prefix, suffix = _affixes(names) if len(names) > 1 else (names[0], "")
    glob = (f"{folder}/" if folder != "." else "") + (f"{prefix}*{suffix}" if len(names) > 1 else prefix)
    if len(names) == 1:
        if layout.kind == "file_per_stream":
            layout = dataclasses.replace(layout, kind="wide_csv", why="one value column beside the time column")
        return layout, _Naming(None, glob, re.escape(names[0]), "the one file", [])
    pattern = re.escape(prefix) + f"(?P<{layout.key_group}>.+)" + re.escape(suffix)
    return layout, _Naming(None, glob, pattern, f"the part that varies is the {layout.key_group}", [layout.key_group])


def _streams_and_sites(
    raw: Path, group: list[Sniffed], layout: _Layout, naming: _Naming, has_graphs: bool
) -> tuple[list[str], int, str | None, str | None]:
    """The stream keys, the number of sites, the site column (when a column holds the sites) and the site label."""
    first, rels = group[0], [s.rel for s in group]
    scanned = (layout.streams_by_key[:1] if layout.kind == "long_csv" else []) + (
        [layout.site_column] if layout.site_column is not None else []
    )
    found = dict(zip(scanned, _scan(raw, group, scanned), strict=True)) if scanned else {}
    if layout.kind == "file_per_stream":
        keys = sorted({_role_value(naming, rel, "key") for rel in rels})
    elif layout.kind == "long_csv":
        keys = sorted(found[layout.streams_by_key[0]])
    else:
        site = first.names[layout.site_column] if layout.site_column is not None else None
        keys = sorted({s.names[i] for s in group for i in s.value_columns() if s.names[i] != site})
    if layout.site_column is not None and not has_graphs:
        column = first.names[layout.site_column]
        return keys, len(found[layout.site_column]), column, place_label(column)
    if "site" in naming.roles:
        sites = len({_role_value(naming, rel, "site") for rel in rels})
        if naming.paths is not None:
            return keys, sites, None, naming.paths.site_label
        return keys, sites, None, place_label(_affixes([Path(r).name for r in rels])[0], last=True)
    return keys, 1, None, None


def _role_value(naming: _Naming, rel: str, role: str) -> str:
    if naming.paths is not None:
        return naming.paths.value(rel, role) or ""
    match = re.fullmatch(naming.pattern, Path(rel).name)
    return match.group(role) if match else rel


def _alike(sniffed: list[Sniffed]) -> list[list[Sniffed]]:
    """The sniffed files in groups of alike ones (path depth, delimiter, header, decimal mark and time column): a
    nested tree such as site/meter/year.csv is one group."""
    groups: dict[tuple, list[Sniffed]] = {}
    for s in sniffed:
        key = (s.rel.count("/"), s.delimiter, s.header, s.decimal, s.names[s.time[0]] if s.header else s.time[0])  # type: ignore[index]
        groups.setdefault(key, []).append(s)
    return list(groups.values())


@dataclass
class _Layout:
    """The value layout guessed for a group of alike files, and the columns it reads."""

    kind: str
    key_group: str  # what the varying part of the file names holds
    why: str
    values: list[int]
    text_columns: list[int]
    streams_by_key: list[int]
    site_column: int | None  # a column of site ids (values.site_column)


def _site_named(name: str) -> bool:
    return bool(SITE_NAMES.search(name)) and not STREAM_NAMES.search(name)


def _site_column(first: Sniffed, candidates: list[int]) -> int | None:
    """A low-cardinality text column whose values look like ids (B12, room-413): the site of each row. A column named
    like a site (building, room...) first, then the leftmost."""
    found = []
    for i in candidates:
        cells = _present(first.column(i) + [row[i].strip() for row in first.tail if i < len(row)])
        distinct = set(cells)
        if len(distinct) < 2 or len(distinct) > max(2, len(cells) // 4):
            continue
        if not all(SITE_ID.fullmatch(c) for c in distinct):
            continue
        found.append(((not _site_named(first.names[i]), i), i))
    return min(found)[1] if found else None


def _numbered_sites(first: Sniffed, values: list[int]) -> int | None:
    """A column of whole numbers named like a site (room, building...) where each time comes once per number: rooms
    413, 415... in one file. Numbers, so not among the text columns; the site of each row, not a stream."""
    times = first.column(first.time[0])  # type: ignore[index]
    if len(set(times)) == len(times):
        return None
    for i in values:
        cells = first.column(i)
        if (
            _site_named(first.names[i])
            and all(c.isdigit() for c in cells)
            and len(set(zip(times, cells, strict=True))) == len(cells)
        ):
            return i
    return None


def _layout(group: list[Sniffed]) -> _Layout:
    """The layout of a group: one stream per file, rows of (stream, time, value), or one column per stream; and a
    column of site ids, when there is one."""
    first = group[0]
    values = first.value_columns()
    numbered = _numbered_sites(first, values)
    if numbered is not None:
        values = [i for i in values if i != numbered]
    time_index = first.time[0]  # type: ignore[index]
    text_columns = [i for i in range(len(first.names)) if i != time_index and i not in values]
    streams_by_key = [i for i in text_columns if 1 < len(set(first.column(i))) <= max(2, len(first.rows) // 2)]
    stream_columns = [i for i in streams_by_key if not _site_named(first.names[i])]
    if len(values) == 1 and stream_columns:
        stream = stream_columns[0]
        site = numbered if numbered is not None else _site_column(first, [i for i in streams_by_key if i != stream])
        return _Layout(
            "long_csv",
            "site",
            f"a column of repeated keys ({first.names[stream]!r}) beside one value column: rows of (stream, time, "
            "value)",
            values,
            text_columns,
            [stream],
            site,
        )
    site = numbered if numbered is not None else _site_column(first, text_columns)
    if len(values) == 1 and len(group) > 1 and site is None:
        return _Layout(
            "file_per_stream",
            "key",
            f"{len(group)} files alike, each a time column and one value column: one stream per file",
            values,
            text_columns,
            streams_by_key,
            None,
        )
    return _Layout(
        "wide_csv",
        "site",
        f"{len(values)} value columns beside the time column: one column per stream",
        values,
        text_columns,
        streams_by_key,
        site,
    )


def _time_choice(group: list[Sniffed]) -> TimeChoice | None:
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


def _time_lines(group: list[Sniffed], choice: TimeChoice | None) -> list[str]:
    """The [time] lines: strftime times as `choice` reads them, else as the sniffer read ISO or Unix times."""
    first = group[0]
    if choice is None:
        return _time_section(group)
    return time_lines(first.names[first.time[0]], first.why["time"], choice, *_row_order(group))  # type: ignore[index]


def _time_section(group: list[Sniffed]) -> list[str]:
    """The [time] lines: the column, its format, the zone of its values and the order of the rows."""
    first, (order, decided) = group[0], _row_order(group)
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


def _values_section(
    group: list[Sniffed],
    layout: _Layout,
    glob: str,
    pattern: str,
    why_pattern: str,
    files: int,
    left_out: list[tuple[str, str]],
) -> list[str]:
    """The [values] lines that say how the value files are read (the site lines follow them)."""
    first = group[0]
    lines = [
        "",
        "[values]",
        f"kind = {_toml(layout.kind)}  # {layout.why}",
        f"files = {_toml(glob)}  # {files} value files"
        + (f"; {len(left_out)} more it matches are left out (exclude)" if left_out else ""),
        f"file_pattern = {_toml(pattern)}  # "
        + (f"{why_pattern}; matched against the path below the corpus folder" if "/" in pattern else why_pattern),
        f"delimiter = {_toml(first.delimiter)}  # {first.why['delimiter']}",
        f"header = {'true' if first.header else 'false'}  # {first.why['header']}",
    ]
    if first.member is not None:
        members = [s.member for s in group if s.member]
        lines.insert(
            5,
            f"archive_member = {_toml(member_pattern(members))}  # each value file is a zip archive holding one data "
            "file: the build reads it in place, inflated within max_member_bytes",
        )
    if not first.header:
        lines.append(
            f"columns = {_toml(first.names)}  # names for the headerless columns: rename them as you like "
            "(and time.column with them)"
        )
    if first.decimal == ",":
        lines.append(f'decimal = ","  # {first.why["decimal"]}')
    if left_out:
        globs = [re.sub(r"([*?\[\]])", r"[\1]", rel) for rel, _ in left_out]  # each path, as a glob of itself
        lines.append(f"exclude = {_toml(globs)}  # " + "; ".join(f"{rel}: {why}" for rel, why in left_out))
    if layout.kind == "long_csv":
        lines += [
            f"stream_column = {_toml(first.names[layout.streams_by_key[0]])}",
            f"value_column = {_toml(first.names[layout.values[0]])}",
        ]
    return lines


def _site_lines(
    first: Sniffed, layout: _Layout, name: str, has_graphs: bool, roles: list[str], site_column: str | None
) -> list[str]:
    """The site rule (when no graph names the sites), the stream id when the paths name more than the site, and the
    wide files' columns that are not values."""
    lines = []
    if has_graphs and layout.kind == "wide_csv":
        pass
    elif site_column:
        lines += [
            f"site_column = {_toml(site_column)}  # a column of a few ids: the site of each row",
            'site = "{site}"  # the site column\'s value',
        ]
    elif "site" in roles:
        lines.append('site = "{site}"  # from file_pattern')
    else:
        lines.append(
            f"site = {_toml(name)}  # one site: change it, or capture (?P<site>...) in file_pattern and write "
            f'"{{site}}"'
        )
    extra = [r for r in roles if r not in ("site", "key", "year", "part")]
    if extra:
        parts = (["{site}"] if "site" in roles or site_column else []) + [f"{{{r}}}" for r in extra] + ["{key}"]
        lines.append(f"stream_id = {_toml('__'.join(parts))}  # the {', '.join(extra)} names the stream too")
    ignore = [first.names[i] for i in layout.text_columns if i != layout.site_column]
    if layout.kind == "wide_csv" and ignore:
        lines.append(f"ignore_columns = {_toml(ignore)}  # neither the time nor numbers")
    return lines


def _metadata_section(
    graphs: list[str],
    name: str,
    keys: list[str],
    lexicon: PointLexicon | None,
    site_label: str | None,
    unit_names: dict[str, str | None] | None = None,
    files_of: dict[str, str] | None = None,
    devices: tuple[str, str] | None = None,
    counters: set[str] | None = None,
) -> tuple[list[str], str | None]:
    """The [metadata] lines, and the points table (CSV) when there is no Brick graph: per stream, the class the
    lexicon proposes (`CHECK <Class>`, which the build refuses until confirmed) or TODO, a label with {site}, and
    the equipment `devices` says the paths name (its template and type)."""
    if graphs:
        graph_folder = str(Path(graphs[0]).parent)
        return [
            "",
            "[metadata]",
            'kind = "brick"  # Turtle graphs found: '
            + ", ".join(graphs[:3])
            + (f" and {len(graphs) - 3} more" if len(graphs) > 3 else ""),
            f"files = {_toml((graph_folder + '/' if graph_folder != '.' else '') + '*.ttl')}",
            'unmapped_columns = "reject"  # a column no graph point names: its cells are rejected, not an error',
        ], None
    proposals = {key: propose(key, lexicon) if lexicon else None for key in keys}
    checked = sum(p is not None for p in proposals.values())
    lines = [
        "",
        "[metadata]",
        'kind = "table"  # no Brick graph: the points table beside this mapping, one row per stream',
        'location = "config"  # configs/corpora/' + name + "/points.csv: metadata you write is not upstream data",
        'file = "points.csv"',
        'key_column = "key"',
        f'point_class_column = "point_class"  # {checked} of {len(keys)} "CHECK <Class>" (proposed by '
        'configs/lexicon.toml, unit with it): confirm each (delete "CHECK "); TODO: write the Brick class',
        'label_column = "label"  # {site} is the site label',
        'unit_column = "unit"',
        'equipment_column = "equipment"'
        + (
            "  # {equipment}: the part of each file's name that names it (file_pattern)"
            if devices and devices[0] == "{equipment}"
            else ""
        ),
        'equipment_type_column = "equipment_type"',
        f"site_label = {_toml(site_label or '{site}')}  # "
        + (
            "the names say what a site is; a user's words resolve against it"
            if site_label
            else 'e.g. "room {site}" or "building {site}": what a user calls a site'
        ),
    ]
    if counters:
        lines.append(
            f'counter_column = "counter"  # {len(counters)} "CHECK yes": values that only rise, a cumulative register '
            '(water, energy): confirm (delete "CHECK ") or empty the cell'
        )
    if files_of:
        lines.append(
            'files_column = "files"  # the files differ in their columns: each row applies to the files its regex '
            "matches (empty: every file)"
        )
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(
        ["key", "point_class", "label", "unit", "equipment", "equipment_type"]
        + (["files"] if files_of else [])
        + (["counter"] if counters else [])
    )
    for key in keys:
        entry = proposals[key]
        what = (
            entry.label if entry else (re.sub(r"[_\W]+", " ", key).strip() or key).replace("{", "(").replace("}", ")")
        )
        point_class = f"{UNCONFIRMED}{entry.point_class}" if entry else "TODO"
        named = (unit_names or {}).get(key, key)
        unit = "" if named is None else unit_for(named, lexicon, entry.unit if entry else None)
        files = [files_of.get(key, "")] if files_of else []
        equipment, kind = _equipment_cells(key, entry, devices)
        of = " of {equipment}" if equipment == "{equipment}" else ""
        counter = [f"{UNCONFIRMED}yes" if key in counters else ""] if counters else []
        writer.writerow([key, point_class, f"{what}{of} in {{site}}", unit, equipment, kind, *files, *counter])
    return lines, buffer.getvalue()


def _devices(layout: _Layout, naming: _Naming, rels: list[str]) -> tuple[str, str] | None:
    """The equipment the paths name, as (points table template, Brick class): `{equipment}` and its class where a
    part of the names reads as equipment (AHU1_SAT.csv); `{key}` where each file of one site is one stream named
    by no point name but a serial number (TAEFC1044741.csv: one device's file), for two streams of one class at a
    site without their equipment are ambiguous; None otherwise."""
    if "equipment" in naming.roles and naming.paths is not None:
        found = equipment_type([naming.paths.value(rel, "equipment") or "" for rel in rels])
        return "{equipment}", found or ""
    if layout.kind == "file_per_stream" and naming.roles == ["key"]:
        return "{key}", ""
    return None


def _equipment_cells(key: str, entry: LexiconEntry | None, devices: tuple[str, str] | None) -> tuple[str, str]:
    """A points row's equipment and its type: from the paths, or the key itself for a file named by no point."""
    if devices is None:
        return "", ""
    if devices[0] == "{key}":
        return (key, "") if entry is None and re.search(r"\d", key) else ("", "")
    return devices


def _validate(text: str, name: str) -> None:
    """The draft validates against the mapping contract."""
    import tomllib

    data = tomllib.loads(text)
    try:
        CorpusMapping.model_validate(data)
    except Exception as exc:  # a bug in the draft, never the user's input: say so in one line
        raise ConfigError(
            f"the draft mapping of {name} does not validate ({str(exc).splitlines()[0]}): please report it"
        ) from exc


def _left_out(raw: Path, files: list[Path], groups: list[list[Sniffed]], group: list[Sniffed], glob: str):
    """The files the glob matches that the draft does not read as value files, each with its reason: not alike
    the others, holding only a header, no time column."""
    sniffed = {s.rel for g in groups for s in g}
    reasons = {
        s.rel: "not alike the value files (another header, separator or folder depth)" for g in groups for s in g
    }
    for path in files:
        rel = path.relative_to(raw).as_posix()
        if rel not in sniffed:
            reasons[rel] = unread_reason(path)
    return excluded(raw, glob, [s.rel for s in group], reasons)


def _value_column_lines(group: list[Sniffed], layout: _Layout) -> list[str]:
    """value_column of one stream per file: a pattern where the files' value headers differ (units written in them)."""
    if layout.kind != "file_per_stream":
        return []
    names = [s.names[v[0]] for s in group if (v := s.value_columns())]
    column = value_column(names)
    why = "" if "*" not in column else f"  # {len(set(names))} value headers, one per unit written in them"
    return [f"value_column = {_toml(column)}{why}"]


def _unit_names(group: list[Sniffed], layout: _Layout, naming: _Naming) -> dict[str, str | None]:
    """The name whose written unit each stream key takes (its file's value header, one stream per file; the
    column itself, one column per stream), None for a state stream (its numbers have no unit)."""
    names: dict[str, str | None] = {}
    for s in group:
        columns = s.value_columns()
        if layout.kind == "file_per_stream" and columns:
            key = _role_value(naming, s.rel, "key")
            names[key] = None if is_states(s.column(columns[0]), s.states) else s.names[columns[0]]
        elif layout.kind == "wide_csv":
            names |= {s.names[i]: None if is_states(s.column(i), s.states) else s.names[i] for i in columns}
    return names


def _states_lines(group: list[Sniffed], states: dict[str, float]) -> list[str]:
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


def _spread_readings(group: list[Sniffed], layout: _Layout, naming: _Naming) -> Readings:
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
        for at, row in _timed_rows(rows, index, fmt):
            meter = (s.rel, row[site] if site is not None and site < len(row) else "")
            for i in columns:
                if i < len(row) and (value := _number(row[i], s.decimal)) is not None:
                    key = _role_value(naming, s.rel, "key") if layout.kind == "file_per_stream" else s.names[i]
                    readings.setdefault(key, {}).setdefault(meter, []).append((at, value))
    return readings


def _zero_lines(readings: Readings, lexicon: PointLexicon | None) -> list[str]:
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


def _files_of_keys(group: list[Sniffed], layout: _Layout) -> dict[str, str]:
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
