"""Resolve each raw source key (a wide column or a stream key) to its site, stream id and point."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path

from contracts.corpus import CorpusMapping
from contracts.corpus_metadata import BrickMetadata, CounterRule, TableMetadata
from pipeline.core import patterns
from pipeline.core.errors import IngestError
from pipeline.ingest.brick import read_brick
from pipeline.ingest.catalog import Catalog, Point, TableRow
from pipeline.ingest.csvread import MAX_CELL_BYTES, read_strings

UNCONFIRMED = "CHECK "  # the prefix of a point class `corpus draft` proposed (pipeline/ingest/draft_points.py)


@dataclass(frozen=True)
class Stream:
    stream_id: str
    site_id: str
    key: str
    point: Point


def _glob(raw: Path, pattern: str, what: str) -> list[tuple[Path, str]]:
    files = sorted((p, p.relative_to(raw).as_posix()) for p in raw.glob(pattern) if p.is_file())
    if not files:
        raise IngestError(f"{raw}: no file matches {what} = {pattern!r}; check the pattern or restore the files")
    return files


TRUE_CELLS = ("1", "true", "yes", "y", "x")
FALSE_CELLS = ("", "0", "false", "no", "n")


def _counter_cell(path: Path, number: int, column: str, text: str) -> CounterRule | None:
    value = text.strip().lower()
    if value.startswith(UNCONFIRMED.lower()):  # proposed by `corpus draft`, not yet confirmed
        raise IngestError(
            f"{path}: row {number}: counter column {column!r} holds {text!r}, a guess of `corpus draft` (the values "
            f"only rise); check it, then delete '{UNCONFIRMED}' (or empty the cell: not a counter)"
        )
    if value in TRUE_CELLS:
        return CounterRule()
    if value in FALSE_CELLS:
        return None
    raise IngestError(
        f"{path}: row {number}: counter column {column!r} holds {text!r}; write one of "
        f"{', '.join(TRUE_CELLS)} for a cumulative counter, or leave it empty (or 0, false, no)"
    )


def _files_cell(path: Path, number: int, column: str, text: str | None) -> str | None:
    if text is None:
        return None
    try:
        re.compile(text)
    except re.error as exc:
        raise IngestError(
            f"{path}: row {number}: {column!r} holds {text!r}, not a valid regex ({exc}); write a regex of the "
            "files' relative paths, e.g. 'b1/.*'"
        ) from exc
    return text


def _read_table(raw: Path, meta: TableMetadata) -> Catalog:
    """The points of a table by key; a table keyed by site or files gives its rows instead (`table_rows`)."""
    table = read_strings(raw / meta.file)
    optional = (meta.unit_column, meta.equipment_column, meta.equipment_type_column, meta.location_column)
    selectors = (meta.site_column, meta.files_column, meta.counter_column)
    needed = [meta.key_column, meta.point_class_column, meta.label_column] + [c for c in optional + selectors if c]
    absent = [c for c in needed if c not in table.header]
    if absent:
        raise IngestError(
            f"{table.path}: column {', '.join(absent)} named in metadata is absent; the file has "
            f"{', '.join(table.header)}"
        )
    for number, text in table.malformed:
        raise IngestError(f"{table.path}: row {number}: wrong number of fields in {text!r}; fix the row")
    for number, text in table.oversized:
        raise IngestError(
            f"{table.path}: row {number}: a cell over {MAX_CELL_BYTES:,} bytes ({text[:80]!r}); fix the row"
        )
    catalog = Catalog()
    keyed = meta.site_column is not None or meta.files_column is not None
    rows: list[TableRow] = []
    seen: dict[tuple, int] = {}

    def cell(row: dict, column: str | None) -> str | None:
        return (row[column].strip() or None) if column else None

    for number, row in zip(table.rows.tolist(), table.table.to_pylist(), strict=True):
        key = row[meta.key_column]
        point_class = row[meta.point_class_column].strip()
        if point_class in ("", "TODO"):
            raise IngestError(
                f"{table.path}: row {number}: the point class of stream key {key!r} is "
                f"{point_class or 'empty'}; write its Brick class "
                "(e.g. Supply_Water_Temperature_Sensor) in column " + repr(meta.point_class_column)
            )
        if point_class.split()[:1] == [UNCONFIRMED.strip()]:  # proposed by `corpus draft`, not yet confirmed
            raise IngestError(
                f"{table.path}: row {number}: the point class of stream key {key!r} is {point_class!r}, a guess "
                f"of `corpus draft`; check it, then delete '{UNCONFIRMED}' (or write the right Brick class) in column "
                + repr(meta.point_class_column)
            )
        if (
            meta.unit_column and row[meta.unit_column].strip() == "TODO"
        ):  # a header wrote a unit the draft does not know
            raise IngestError(
                f"{table.path}: row {number}: the unit of stream key {key!r} is TODO; write its QUDT unit (e.g. DEG_F) "
                f"as the file's header writes it, in column {meta.unit_column!r}"
            )
        site, files = (
            cell(row, meta.site_column),
            _files_cell(table.path, number, meta.files_column, cell(row, meta.files_column)),
        )
        if (key, site, files) in seen:
            scope = "".join(
                f", {what} {value!r}" for what, value in (("site", site), ("files", files)) if value is not None
            )
            raise IngestError(
                f"{table.path}: row {number}: stream key {key!r}{scope} appears twice (first in row "
                f"{seen[key, site, files]}); keep one row per key" + (" and site/files" if keyed else "")
            )
        seen[key, site, files] = number
        point = Point(
            point_class=row[meta.point_class_column],
            label=row[meta.label_column],
            unit=(row[meta.unit_column] or None) if meta.unit_column else None,
            equipment=(row[meta.equipment_column] or None) if meta.equipment_column else None,
            equipment_type=(row[meta.equipment_type_column] or None) if meta.equipment_type_column else None,
            location=(row[meta.location_column] or None) if meta.location_column else None,
            counter=(
                _counter_cell(table.path, number, meta.counter_column, row[meta.counter_column])
                if meta.counter_column
                else None
            ),
        )
        if keyed:
            rows.append(TableRow(number, key, site, files, point))
        else:
            catalog.points_by_key[key] = point
    catalog.table_rows = rows
    return catalog


def table_points(path: str, rows_of_key: dict[str, list[TableRow]], rel: str, site: str | None) -> dict[str, Point]:
    """Key -> point for one file and site: of the rows that apply (site empty or equal, files regex matching the
    relative path), the one of highest precedence (site and files > site > files > neither); a tie is an error."""
    points = {}
    for key, rows in rows_of_key.items():
        applying = [
            r
            for r in rows
            if (r.site is None or r.site == site)
            and (r.files is None or patterns.fullmatch(r.files, rel, "metadata files cell") is not None)
        ]
        if not applying:
            continue
        best = max(r.rank for r in applying)
        winners = [r for r in applying if r.rank == best]
        if len(winners) > 1:
            raise IngestError(
                f"{path}: rows {', '.join(str(r.number) for r in winners)} all give stream key {key!r} for file {rel}"
                f"{f' (site {site!r})' if site is not None else ''}; narrow their files regexes so that one applies"
            )
        points[key] = winners[0].point
    return points


def fill(template: str, values: dict[str, str], what: str, rel: str) -> str:
    """A template filled from named values; a name it lacks (an optional group that did not match) is an error."""
    try:
        return template.format_map(values)
    except (KeyError, IndexError, AttributeError, ValueError) as exc:
        raise IngestError(
            f"{rel}: {what} template {template!r} needs {exc}, which this file's path does not give "
            f"(it gives {', '.join(sorted(values)) or 'nothing'}); fix file_pattern or the template"
        ) from exc


class Resolver:
    """Metadata of one corpus, asked file by file and key by key; collects sites, entities, streams."""

    def __init__(self, mapping: CorpusMapping, raw: Path) -> None:
        self.mapping = mapping
        meta = mapping.metadata
        self.table_path = str(raw / meta.file) if isinstance(meta, TableMetadata) else ""
        self.keyed_table = isinstance(meta, TableMetadata) and (meta.site_column or meta.files_column) is not None
        self.rows_of_key: dict[str, list[TableRow]] = {}  # a points table keyed by site or files
        self._table_points: dict[tuple[str, str | None], dict[str, Point]] = {}
        # The same rows by site (None: rows for every site), so a file's site reads only its rows and the rows for
        # every site: scanning all rows for each site was quadratic in the sites of a table keyed by site.
        self._rows_of_site: dict[str | None, dict[str, list[TableRow]]] = {}
        if isinstance(meta, BrickMetadata):
            self.catalog = read_brick(_glob(raw, meta.files, "metadata.files"), meta)
        elif isinstance(meta, TableMetadata):
            self.catalog = _read_table(raw, meta)
            for row in self.catalog.table_rows:
                self.rows_of_key.setdefault(row.key, []).append(row)
                self._rows_of_site.setdefault(row.site, {}).setdefault(row.key, []).append(row)
        else:
            self.catalog = Catalog()
            self.catalog.points_by_key = {
                key: Point(**spec.model_dump(exclude={"counter"}), counter=spec.counter)
                for key, spec in meta.points.items()
            }
        self.streams: dict[str, Stream] = {}
        self.codes: dict[str, int] = {}  # stream id -> provisional code, in order of first sight
        self.sources: dict[str, set[str]] = {}
        self.declared: dict[str, tuple[str, tuple]] = {}  # stream id -> (first file, what it said of the stream)
        self.missing_columns: list[dict] = []
        self.rejected_members: list[dict] = []

    @property
    def unmapped_policy(self) -> str:
        return self.mapping.metadata.unmapped_columns

    @property
    def site_specific(self) -> bool:
        """Whether what a key means depends on the site (a site column in the files, or a table keyed by site)."""
        return getattr(self.mapping.values, "site_column", None) is not None or (
            isinstance(self.mapping.metadata, TableMetadata) and self.mapping.metadata.site_column is not None
        )

    def site_for(self, rel: str, groups: dict[str, str], template: str | None) -> str:
        if self.by_stream_key:
            site = self.site_of_key(groups.get("key", ""))
            if site is None:
                raise IngestError(f"{rel}: stream key {groups.get('key')!r} has no point in the Brick graph")
            return site
        if isinstance(self.mapping.metadata, BrickMetadata):
            name = Path(rel).name
            if name not in self.catalog.site_of_file:
                raise IngestError(
                    f"{rel}: no Brick point refers to this file (ref:storedAt); add its points to the graph "
                    "or narrow values.files"
                )
            return self.catalog.site_of_file[name]
        site = fill(template, groups, "values.site", rel)
        if site not in self.catalog.sites:
            label = getattr(self.mapping.metadata, "site_label", "{site}").format(site=site)
            self.catalog.add_site(site, label, rel)
            self.catalog.entities.append(
                {"entity_id": site, "site_id": site, "entity_class": "Site", "label": label, "iri": None, "source": rel}
            )
        return site

    @property
    def by_stream_key(self) -> bool:
        """Brick points linked by a stream key literal (BTS), not by the file they are stored in."""
        return isinstance(self.mapping.metadata, BrickMetadata) and bool(self.mapping.metadata.stream_id_predicate)

    def site_of_key(self, key: str) -> str | None:
        return self.catalog.site_of_key.get(key)

    def expected_keys(self, rel: str, site: str | None = None) -> Mapping[str, Point]:
        """Keys metadata expects in this file (of this site); read-only."""
        if isinstance(self.mapping.metadata, BrickMetadata) and not self.by_stream_key:
            name = Path(rel).name
            return {key: point for (file_name, key), point in self.catalog.points_by_file.items() if file_name == name}
        if self.keyed_table:
            if (rel, site) not in self._table_points:
                self._table_points[rel, site] = table_points(self.table_path, self._rows_for(site), rel, site)
            return self._table_points[rel, site]
        return self.catalog.points_by_key  # not copied: asked once per key of every file

    def _rows_for(self, site: str | None) -> dict[str, list[TableRow]]:
        """The rows that may apply to a site (its own and those for every site), keys and rows in table order."""
        general, own = self._rows_of_site.get(None, {}), self._rows_of_site.get(site, {}) if site is not None else {}
        return {
            key: sorted(general.get(key, []) + own.get(key, []), key=lambda r: r.number)
            for key in self.rows_of_key
            if key in general or key in own
        }

    def check_columns(self, rel: str, present: list[str], site: str | None = None) -> None:
        """Expected columns absent from a file: reported for Brick, an error for declared points unless optional."""
        for key, point in sorted(self.expected_keys(rel, site).items()):
            if key in present:
                continue
            if isinstance(self.mapping.metadata, BrickMetadata) or point.optional:
                self.missing_columns.append({"source": rel, "column": key, "point": point.entity_id or key})
            else:
                raise IngestError(
                    f"{rel}: column {key!r} declared in metadata.points is absent (the file has {', '.join(present)}); "
                    "fix the name or mark the point optional = true"
                )

    def stream_id_for(
        self, rel: str, site_id: str, key: str, template: str, groups: dict[str, str] | None = None
    ) -> str | None:
        """The id of the stream a key belongs to, without registering it; None when no metadata maps it."""
        if key not in self.expected_keys(rel, site_id):
            return None
        return fill(template, {**(groups or {}), "site": site_id, "key": key}, "values.stream_id", rel)

    def stream(
        self, rel: str, site_id: str, key: str, template: str, groups: dict[str, str] | None = None
    ) -> Stream | None:
        """The stream a key belongs to, registering it on first sight; None when no metadata maps it. Files giving
        one stream id (shards) feed one stream, unless they say different things of it (an error)."""
        point = self.expected_keys(rel, site_id).get(key)
        if point is None:
            return None
        stream_id = fill(template, {**(groups or {}), "site": site_id, "key": key}, "values.stream_id", rel)
        site_label = self.catalog.sites[site_id]["label"]
        values = {**(groups or {}), "key": key}  # a points row written once for many files: each file's own parts
        point = replace(point, label=fill(point.label, {**values, "site": site_label}, "metadata label", rel))
        if point.equipment and "{" in point.equipment:
            point = replace(
                point, equipment=fill(point.equipment, {**values, "site": site_id}, "metadata equipment", rel)
            )
        said = (site_id, key, point)
        if stream_id not in self.streams:
            self.declared[stream_id] = (rel, said)
            if not isinstance(self.mapping.metadata, BrickMetadata):
                point = self._register_inline(site_id, stream_id, point, rel)
            self.streams[stream_id] = Stream(stream_id=stream_id, site_id=site_id, key=key, point=point)
            self.codes[stream_id] = len(self.codes)
        elif said != self.declared[stream_id][1]:
            self._conflict(stream_id, rel, said)
        self.sources.setdefault(stream_id, set()).add(rel)
        return self.streams[stream_id]

    def _conflict(self, stream_id: str, rel: str, said: tuple) -> None:
        first, before = self.declared[stream_id]
        names = ["site", "key"] + [f.name for f in fields(Point)]
        old = [before[0], before[1], *(getattr(before[2], n) for n in names[2:])]
        new = [said[0], said[1], *(getattr(said[2], n) for n in names[2:])]
        name, a, b = next((n, x, y) for n, x, y in zip(names, old, new, strict=True) if x != y)
        raise IngestError(
            f"{rel}: stream {stream_id!r} is also given by {first} with another {name} ({b!r} here, {a!r} there); "
            "make values.stream_id tell them apart (e.g. with {site} or a file_pattern group) or make their "
            "metadata agree"
        )

    def code(self, stream_id: str) -> int:
        return self.codes[stream_id]

    def _register_inline(self, site_id: str, stream_id: str, point: Point, rel: str) -> Point:
        owner = site_id
        if point.equipment:
            equipment_id = f"{site_id}.{point.equipment}"
            if not any(e["entity_id"] == equipment_id for e in self.catalog.entities):
                self.catalog.entities.append(
                    {
                        "entity_id": equipment_id,
                        "site_id": site_id,
                        "entity_class": point.equipment_type or "Equipment",
                        "label": f"{point.equipment.replace('_', ' ')} at {self.catalog.sites[site_id]['label']}",
                        "iri": None,
                        "source": rel,
                    }
                )
                self.catalog.relations.append(
                    {"subject": equipment_id, "predicate": "isPartOf", "object": site_id, "site_id": site_id}
                )
            owner = equipment_id
            point = replace(point, equipment=equipment_id)
        self.catalog.entities.append(
            {
                "entity_id": stream_id,
                "site_id": site_id,
                "entity_class": point.point_class,
                "label": point.label,
                "iri": None,
                "source": rel,
            }
        )
        self.catalog.relations.append(
            {"subject": stream_id, "predicate": "isPointOf", "object": owner, "site_id": site_id}
        )
        return replace(point, entity_id=stream_id)
