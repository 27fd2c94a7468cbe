"""The points of a draft without Brick graphs: the class configs/lexicon.toml proposes for each stream key
(`CHECK <Class>`), the equipment the paths name, and the [metadata] section with the points table beside the
mapping."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from contracts.lexicon import LexiconEntry, PointLexicon
from pipeline.ingest.draft_layout import Layout, Naming
from pipeline.ingest.draft_paths import equipment_type
from pipeline.ingest.draft_times import toml_value as _toml
from pipeline.ingest.draft_values import unit_for
from pipeline.ingest.metadata import UNCONFIRMED


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


def metadata_section(
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


def path_devices(layout: Layout, naming: Naming, rels: list[str]) -> tuple[str, str] | None:
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
