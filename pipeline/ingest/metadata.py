"""Resolve each raw source key (a wide column or a stream key) to its site, stream id and point."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from contracts.corpus import BrickMetadata, CorpusMapping, TableMetadata
from pipeline.core.errors import IngestError
from pipeline.ingest.brick import read_brick
from pipeline.ingest.catalog import Catalog, Point
from pipeline.ingest.csvread import read_strings

UNCONFIRMED = "CHECK "  # the prefix of a point class `corpus draft` proposed (pipeline/ingest/draft.py)


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


def _read_table(raw: Path, meta: TableMetadata) -> Catalog:
    table = read_strings(raw / meta.file)
    needed = [meta.key_column, meta.point_class_column, meta.label_column] + [
        c for c in (meta.unit_column, meta.equipment_column, meta.equipment_type_column, meta.location_column) if c
    ]
    absent = [c for c in needed if c not in table.header]
    if absent:
        raise IngestError(
            f"{table.path}: column {', '.join(absent)} named in metadata is absent; the file has "
            f"{', '.join(table.header)}"
        )
    for number, text in table.malformed:
        raise IngestError(f"{table.path}: row {number}: wrong number of fields in {text!r}; fix the row")
    catalog = Catalog()

    def cell(row: dict, column: str | None) -> str | None:
        return (row[column] or None) if column else None

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
        if key in catalog.points_by_key:
            raise IngestError(f"{table.path}: row {number}: stream key {key!r} appears twice; keep one row per key")
        catalog.points_by_key[key] = Point(
            point_class=row[meta.point_class_column],
            label=row[meta.label_column],
            unit=cell(row, meta.unit_column),
            equipment=cell(row, meta.equipment_column),
            equipment_type=cell(row, meta.equipment_type_column),
            location=cell(row, meta.location_column),
        )
    return catalog


class Resolver:
    """Metadata of one corpus, asked file by file and key by key; collects sites, entities, streams."""

    def __init__(self, mapping: CorpusMapping, raw: Path) -> None:
        self.mapping = mapping
        meta = mapping.metadata
        if isinstance(meta, BrickMetadata):
            self.catalog = read_brick(_glob(raw, meta.files, "metadata.files"), meta)
        elif isinstance(meta, TableMetadata):
            self.catalog = _read_table(raw, meta)
        else:
            self.catalog = Catalog()
            self.catalog.points_by_key = {
                key: Point(**spec.model_dump(exclude={"counter"}), counter=spec.counter)
                for key, spec in meta.points.items()
            }
        self.streams: dict[str, Stream] = {}
        self.codes: dict[str, int] = {}  # stream id -> provisional code, in order of first sight
        self.sources: dict[str, set[str]] = {}
        self.missing_columns: list[dict] = []
        self.rejected_members: list[dict] = []

    @property
    def unmapped_policy(self) -> str:
        return self.mapping.metadata.unmapped_columns

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
        try:
            site = template.format(**groups)
        except KeyError as exc:
            raise IngestError(
                f"values.site template {template!r} names {exc} which file_pattern does not capture"
            ) from exc
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

    def expected_keys(self, rel: str) -> Mapping[str, Point]:
        """Keys metadata expects in this file (wide layout); read-only."""
        if isinstance(self.mapping.metadata, BrickMetadata) and not self.by_stream_key:
            name = Path(rel).name
            return {key: point for (file_name, key), point in self.catalog.points_by_file.items() if file_name == name}
        return self.catalog.points_by_key  # not copied: asked once per key of every file

    def check_columns(self, rel: str, present: list[str]) -> None:
        """Expected columns absent from a file: reported for Brick, an error for declared points unless optional."""
        for key, point in sorted(self.expected_keys(rel).items()):
            if key in present:
                continue
            if isinstance(self.mapping.metadata, BrickMetadata) or point.optional:
                self.missing_columns.append({"source": rel, "column": key, "point": point.entity_id or key})
            else:
                raise IngestError(
                    f"{rel}: column {key!r} declared in metadata.points is absent (the file has {', '.join(present)}); "
                    "fix the name or mark the point optional = true"
                )

    def stream_id_for(self, rel: str, site_id: str, key: str, template: str) -> str | None:
        """The id of the stream a key belongs to, without registering it; None when no metadata maps it."""
        return template.format(site=site_id, key=key) if key in self.expected_keys(rel) else None

    def stream(self, rel: str, site_id: str, key: str, template: str) -> Stream | None:
        """The stream a key belongs to, registering it on first sight; None when no metadata maps it."""
        point = self.expected_keys(rel).get(key)
        if point is None:
            return None
        stream_id = template.format(site=site_id, key=key)
        if stream_id not in self.streams:
            site_label = self.catalog.sites[site_id]["label"]
            point = replace(point, label=point.label.format(site=site_label))
            if not isinstance(self.mapping.metadata, BrickMetadata):
                point = self._register_inline(site_id, stream_id, point, rel)
            self.streams[stream_id] = Stream(stream_id=stream_id, site_id=site_id, key=key, point=point)
            self.codes[stream_id] = len(self.codes)
        self.sources.setdefault(stream_id, set()).add(rel)
        return self.streams[stream_id]

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
