"""The metadata side of ingest: sites, entities, relations and the points value columns map to."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Point:
    """What one raw value column (or stream key) measures, as resolved from metadata."""

    point_class: str
    label: str
    unit: str | None = None
    equipment: str | None = None
    equipment_type: str | None = None
    location: str | None = None
    entity_id: str | None = None
    optional: bool = False
    counter: object | None = None  # contracts.corpus_metadata.CounterRule; kept opaque here


@dataclass(frozen=True)
class TableRow:
    """One row of a points table keyed by site and/or files: the key's point where the row applies."""

    number: int
    key: str
    site: str | None  # the site id it applies to; None: every site
    files: str | None  # regex on the relative path of the files it applies to; None: every file
    point: Point

    @property
    def rank(self) -> int:
        """Precedence: a row naming both site and files beats one naming the site, which beats one naming files."""
        return 2 * (self.site is not None) + (self.files is not None)


@dataclass
class Catalog:
    """Metadata read before values: sites, entities, relations, and the point lookup."""

    sites: dict[str, dict] = field(default_factory=dict)
    entities: list[dict] = field(default_factory=list)
    relations: list[dict] = field(default_factory=list)
    # (file name, source key) -> Point, for Brick graphs whose points name the file they are stored in.
    points_by_file: dict[tuple[str, str], Point] = field(default_factory=dict)
    # file name -> site id, for Brick graphs.
    site_of_file: dict[str, str] = field(default_factory=dict)
    # source key -> Point, for inline and table metadata (and Brick graphs linked by a stream key literal).
    points_by_key: dict[str, Point] = field(default_factory=dict)
    # source key -> site id, for Brick graphs linked by a stream key literal.
    site_of_key: dict[str, str] = field(default_factory=dict)
    # the rows of a points table keyed by site or files (metadata.table_points picks one per file, site and key).
    table_rows: list[TableRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add_site(self, site_id: str, label: str, source: str) -> None:
        self.sites.setdefault(site_id, {"site_id": site_id, "label": label, "source": source})
