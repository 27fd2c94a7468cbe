"""`corpus draft`'s reading of a group of alike files: which files are alike, their value layout (one stream per
file, rows of (stream, time, value), or one column per stream) and site column, and what their paths name (the
files glob, file_pattern, stream keys and sites)."""

from __future__ import annotations

import csv
import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path

from pipeline.ingest.draft_paths import Paths, place_label, read_paths
from pipeline.ingest.draft_sniff import Sniffed, present_cells

SITE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:#-]{0,39}")
SITE_NAMES = re.compile(
    r"(?i)site|building|bldg|room|zone|house|home|station|location|premise|facility|campus|plant|apartment|flat|meter"
)
STREAM_NAMES = re.compile(r"(?i)sensor|stream|point|tag|signal|variable|channel|metric|measure|series|quantity|name")


def alike_groups(sniffed: list[Sniffed]) -> list[list[Sniffed]]:
    """The sniffed files in groups of alike ones (path depth, delimiter, header, decimal mark and time column): a
    nested tree such as site/meter/year.csv is one group."""
    groups: dict[tuple, list[Sniffed]] = {}
    for s in sniffed:
        key = (s.rel.count("/"), s.delimiter, s.header, s.decimal, s.names[s.time[0]] if s.header else s.time[0])  # type: ignore[index]
        groups.setdefault(key, []).append(s)
    return list(groups.values())


@dataclass
class Layout:
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
        cells = present_cells(first.column(i) + [row[i].strip() for row in first.tail if i < len(row)])
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


def guess_layout(group: list[Sniffed]) -> Layout:
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
        return Layout(
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
        return Layout(
            "file_per_stream",
            "key",
            f"{len(group)} files alike, each a time column and one value column: one stream per file",
            values,
            text_columns,
            streams_by_key,
            None,
        )
    return Layout(
        "wide_csv",
        "site",
        f"{len(values)} value columns beside the time column: one column per stream",
        values,
        text_columns,
        streams_by_key,
        site,
    )


@dataclass
class Naming:
    """How the value files' paths are matched, and what their varying parts are."""

    paths: Paths | None
    glob: str
    pattern: str
    why: str
    roles: list[str]


def name_paths(
    first: Sniffed, layout: Layout, rels: list[str], edges: dict[str, tuple[int, int] | None]
) -> tuple[Layout, Naming]:
    """The files glob and file_pattern of a group (its site, stream key and shards), and the layout they leave: the
    shards of one stream are one value column, not one stream per file."""
    paths = read_paths(rels, layout.kind == "file_per_stream", edges)
    if paths and layout.kind == "file_per_stream" and "key" not in paths.roles:  # shards of one stream
        why = f"{len(rels)} shards of one file, each a time column and one value column"
        layout = dataclasses.replace(layout, kind="wide_csv", key_group="site", why=why, streams_by_key=[])
        paths = read_paths(rels, False, edges)
    if paths is not None:
        return layout, Naming(paths, paths.glob, paths.pattern, paths.why, paths.roles)
    folder = str(Path(first.rel).parent)
    names = [Path(r).name for r in rels]
    prefix, suffix = _affixes(names) if len(names) > 1 else (names[0], "")
    glob = (f"{folder}/" if folder != "." else "") + (f"{prefix}*{suffix}" if len(names) > 1 else prefix)
    if len(names) == 1:
        if layout.kind == "file_per_stream":
            layout = dataclasses.replace(layout, kind="wide_csv", why="one value column beside the time column")
        return layout, Naming(None, glob, re.escape(names[0]), "the one file", [])
    pattern = re.escape(prefix) + f"(?P<{layout.key_group}>.+)" + re.escape(suffix)
    return layout, Naming(None, glob, pattern, f"the part that varies is the {layout.key_group}", [layout.key_group])


def _affixes(names: list[str]) -> tuple[str, str]:
    """The common prefix (cut back to a separator, so that L4 and L8 vary as whole tokens) and suffix of file names."""
    prefix = re.sub(r"[A-Za-z0-9]+$", "", os.path.commonprefix(names))
    suffix = os.path.commonprefix([n[len(prefix) :][::-1] for n in names])[::-1]
    return prefix, suffix


def streams_and_sites(
    raw: Path, group: list[Sniffed], layout: Layout, naming: Naming, has_graphs: bool
) -> tuple[list[str], int, str | None, str | None]:
    """The stream keys, the number of sites, the site column (when a column holds the sites) and the site label."""
    first, rels = group[0], [s.rel for s in group]
    scanned = (layout.streams_by_key[:1] if layout.kind == "long_csv" else []) + (
        [layout.site_column] if layout.site_column is not None else []
    )
    found = dict(zip(scanned, _scan(raw, group, scanned), strict=True)) if scanned else {}
    if layout.kind == "file_per_stream":
        keys = sorted({role_value(naming, rel, "key") for rel in rels})
    elif layout.kind == "long_csv":
        keys = sorted(found[layout.streams_by_key[0]])
    else:
        site = first.names[layout.site_column] if layout.site_column is not None else None
        keys = sorted({s.names[i] for s in group for i in s.value_columns() if s.names[i] != site})
    if layout.site_column is not None and not has_graphs:
        column = first.names[layout.site_column]
        return keys, len(found[layout.site_column]), column, place_label(column)
    if "site" in naming.roles:
        sites = len({role_value(naming, rel, "site") for rel in rels})
        if naming.paths is not None:
            return keys, sites, None, naming.paths.site_label
        return keys, sites, None, place_label(_affixes([Path(r).name for r in rels])[0], last=True)
    return keys, 1, None, None


def role_value(naming: Naming, rel: str, role: str) -> str:
    """The part of a file's path that `role` (site, key...) captures: empty where the paths name none, the path
    itself where the file name misses the pattern."""
    if naming.paths is not None:
        return naming.paths.value(rel, role) or ""
    match = re.fullmatch(naming.pattern, Path(rel).name)
    return match.group(role) if match else rel


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
