"""The lines of a draft mapping that write what was read: the plan comment block, the [values] section, the site
and stream-id lines; and the check that the whole text validates against the mapping contract."""

from __future__ import annotations

import re

from contracts.corpus import CorpusMapping
from pipeline.core.errors import ConfigError
from pipeline.ingest.draft_archives import member_pattern
from pipeline.ingest.draft_layout import Layout
from pipeline.ingest.draft_sniff import Sniffed
from pipeline.ingest.draft_times import toml_value as _toml


def plan_block(plan: list[str]) -> list[str]:
    """The comment lines that say what a build would do with the corpus (none without a plan)."""
    if not plan:
        return []
    return [
        "#",
        "# What a build would do with this corpus (from each value file's first and last rows; pipeline/tasks/fit.py):",
        *[f"#   {line}" for line in plan],
        "#",
    ]


def values_section(
    group: list[Sniffed],
    layout: Layout,
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


def site_lines(
    first: Sniffed, layout: Layout, name: str, has_graphs: bool, roles: list[str], site_column: str | None
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


def validate(text: str, name: str) -> None:
    """The draft validates against the mapping contract."""
    import tomllib

    data = tomllib.loads(text)
    try:
        CorpusMapping.model_validate(data)
    except Exception as exc:  # a bug in the draft, never the user's input: say so in one line
        raise ConfigError(
            f"the draft mapping of {name} does not validate ({str(exc).splitlines()[0]}): please report it"
        ) from exc
