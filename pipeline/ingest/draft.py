"""`telemetry-bench corpus draft`: inspect a raw folder and write a draft mapping with every guess explained.

The draft guesses the layout, the delimiter, whether there is a header, the decimal mark, the time column, its format
and zone, the keys in the file names, and (without Brick graphs) writes a points table beside the mapping with one row
per stream and TODO in each point class. Nothing in the raw folder is written. This module runs the draft: the
draft_* modules beside it read the files and write each section."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from contracts.lexicon import PointLexicon
from pipeline.core.checksums import SUMS_NAME
from pipeline.core.errors import ConfigError
from pipeline.ingest.draft_archives import extract
from pipeline.ingest.draft_counters import rises_only
from pipeline.ingest.draft_layout import alike_groups, guess_layout, name_paths, streams_and_sites
from pipeline.ingest.draft_plan import PlanFn, split_kind, split_shares
from pipeline.ingest.draft_points import metadata_section, path_devices
from pipeline.ingest.draft_readings import (
    files_of_keys,
    spread_pass,
    states_lines,
    unit_names,
    value_column_lines,
    zero_lines,
)
from pipeline.ingest.draft_sniff import NOT_DATA, Sniffed, sniff_file
from pipeline.ingest.draft_spans import file_edges, plan_of
from pipeline.ingest.draft_text import plan_block, site_lines, validate, values_section
from pipeline.ingest.draft_time_section import time_choice, time_section
from pipeline.ingest.draft_times import toml_value as _toml
from pipeline.ingest.draft_values import excluded, unread_reason


@dataclass
class Draft:
    """A drafted mapping, its points table, the guesses behind them and the plan lines."""

    mapping: str  # the TOML text
    points: str | None  # the points table (CSV), when there is no Brick graph
    guesses: dict[str, object]  # layout, delimiter, header, decimal, time column, format, zone, file pattern
    plan: list[str] = field(default_factory=list)  # what a build would do with the span (`plan` given)


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
        sniffed = [s for p in files if (s := sniff_file(raw, p, members, lexicon.states if lexicon else {}))]
        return _draft(raw, name, raw_dir, lexicon, plan, files, sniffed)


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
    groups = alike_groups(sniffed)
    group = max(groups, key=lambda g: (sum(s.bytes for s in g), len(g), [s.rel for s in g]))
    choice = time_choice(group)
    first, layout = group[0], guess_layout(group)
    rels = [s.rel for s in group]
    edges = {s.rel: file_edges(s) for s in group}
    layout, naming = name_paths(first, layout, rels, edges)
    glob, pattern, roles = naming.glob, naming.pattern, naming.roles
    left_out = _left_out(raw, files, groups, group, glob)

    keys, sites, site_column, site_label = streams_and_sites(raw, group, layout, naming, bool(graphs))
    streams = len(keys) * sites if layout.kind == "wide_csv" else max(len(keys), sites)
    spread = spread_pass(group, layout, naming, readings=not graphs)
    readings = spread.readings
    plan_lines, settings = plan_of(group, edges, pattern, sites, streams, plan, spread.weeks)

    lines = [
        f"# Draft mapping written by `telemetry-bench corpus draft` from {len(files)} files; every guess says why.",
        '# Check each one, fill the TODOs, confirm each CHECK (delete "CHECK "), then `telemetry-bench build '
        f"--corpus {name}` (docs/ingest.md).",
        *plan_block(plan_lines),
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
        *time_section(group, choice, spread.orders),
        *values_section(group, layout, glob, pattern, naming.why, len(rels), left_out),
        *value_column_lines(group, layout),
        *site_lines(first, layout, name, bool(graphs), roles, site_column),
    ]
    metadata, points = metadata_section(
        graphs,
        name,
        keys,
        lexicon,
        site_label,
        unit_names(group, layout, naming),
        files_of_keys(group, layout),
        path_devices(layout, naming, rels),
        {key for key, meters in readings.items() if rises_only(meters.values())},
    )
    lines += [*metadata, "", "[cleaning]", 'missing_tokens = ["", "NA"]', 'duplicates = "keep_first_row"']
    lines += [] if graphs else zero_lines(readings, lexicon)
    lines += [*states_lines(group, states), ""]
    lines += split_shares(settings)
    text = "\n".join(lines)
    validate(text, name)
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
