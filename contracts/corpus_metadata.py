"""The metadata half of a corpus mapping ([metadata]): where sites, equipment and points come from (Brick graphs, a
points table, or inline points)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from contracts.base import Frozen


class CounterRule(Frozen):
    """A cumulative counter turned into the amount recorded since the reading before each (across gaps too)."""

    zero_is_dropout: bool = Field(True, description="A reading of exactly 0 is a logging dropout, not a reset.")
    max_increment: float | None = Field(None, description="An increment above this is rejected as counter_jump.")
    rollover: float | None = Field(
        None,
        gt=0,
        description="The counter wraps to 0 at this value: a decrease from above half of it is a rollover, whose "
        "increment is value + rollover - previous (absent: no rollover).",
    )
    resets: bool = Field(
        False,
        description="A decrease that is not a rollover is a reset to 0: its increment is the new reading (false: "
        "counter_decrease).",
    )


class PointSpec(Frozen):
    """Inline metadata of one stream: what the source column (or stream key) measures."""

    point_class: str = Field(description="Brick class of the point, e.g. 'Supply_Water_Temperature_Sensor'.")
    label: str = Field(description="Human label; '{site}' is replaced by the site label.")
    unit: str | None = Field(None, description="QUDT unit local name, e.g. 'DEG_C'.")
    equipment: str | None = Field(None, description="Equipment key within the site, e.g. 'primary_loop'.")
    equipment_type: str | None = Field(None, description="Brick class of the equipment, e.g. 'Hot_Water_Loop'.")
    location: str | None = Field(None, description="Location key within the site, if any.")
    optional: bool = Field(False, description="The column may be absent from a file without an error.")
    counter: CounterRule | None = Field(None, description="Set when the column is a cumulative counter.")


Location = Literal["raw", "config"]


def _location(key: str):
    """Where a metadata file named by `key` is: upstream in the raw folder, or written by the user in configs."""
    return Field(
        "raw",
        description=f"Where `{key}` is: 'raw' (relative to the corpus folder: upstream metadata) or 'config' "
        "(relative to configs/corpora/<name>/: metadata you wrote; its hash joins the corpus identity).",
    )


class BrickMetadata(Frozen):
    """Sites, equipment and points read from Brick/RDF Turtle graphs."""

    kind: Literal["brick"] = Field(description="Brick/RDF Turtle graphs give sites, equipment and points.")
    files: str = Field(description="Glob of Turtle files, relative to the folder `location` names.")
    location: Location = _location("files")
    site_classes: list[str] = Field(
        default=["https://w3id.org/rec#Building", "https://brickschema.org/schema/Brick#Building"],
        description="Full IRIs of the classes whose instances are sites.",
    )
    site_id: str = Field("{local}", description="Template for a site id; {local} is the site IRI's local name.")
    unmapped_columns: Literal["error", "reject"] = Field(
        "reject", description="A value column no point refers to: an error, or every cell rejected (unmapped_column)."
    )
    stream_id_predicate: str | None = Field(
        None,
        description="IRI of a literal that links a point to its stream key (BTS: senaps#stream_id), instead of "
        "ref:storedAt.",
    )


class TableMetadata(Frozen):
    """Stream metadata from a CSV table, one row per stream key."""

    kind: Literal["table"] = Field(description="A CSV table gives the points, one row per stream key.")
    file: str = Field(description="CSV path relative to the folder `location` names.")
    location: Location = _location("file")
    key_column: str = Field(description="Column holding the stream key (wide column name or long stream value).")
    point_class_column: str = Field(
        description="Column holding each stream's Brick point class (TODO is refused: fill it in; so is "
        "'CHECK <Class>', a class `corpus draft` proposed: delete 'CHECK ' once you have confirmed it)."
    )
    label_column: str = Field(description="Column holding each stream's human label.")
    unit_column: str | None = Field(
        None, description="Column holding the QUDT unit local name, e.g. DEG_C (empty: none)."
    )
    equipment_column: str | None = Field(
        None, description="Column holding the equipment key within the site (empty: none)."
    )
    equipment_type_column: str | None = Field(None, description="Column holding the equipment's Brick class.")
    location_column: str | None = Field(None, description="Column holding the location key within the site.")
    site_label: str = Field(
        "{site}", description="Template for a site's label; {site} is the site key (e.g. 'room {site}')."
    )
    unmapped_columns: Literal["error", "reject"] = Field(
        "error", description="A value column or stream key the table does not list: an error, or its cells rejected."
    )
    site_column: str | None = Field(
        None,
        description="Column holding the site id a row applies to (empty cell: every site), so that sites may map one "
        "key differently; rows are then keyed by (site, key).",
    )
    files_column: str | None = Field(
        None,
        description="Column holding a regex fully matched against a value file's relative path: the row applies "
        "to the files it matches (empty cell: every file).",
    )
    counter_column: str | None = Field(
        None,
        description="Column marking cumulative counters: a true cell (1, true, yes, y, x) makes the stream a counter "
        "with the CounterRule defaults; an empty or false cell (0, false, no, n) does not.",
    )


class InlineMetadata(Frozen):
    """Stream metadata declared in the mapping itself, keyed by source column or stream key."""

    kind: Literal["inline"] = Field(
        description="The mapping declares the points itself, under [metadata.points.<key>]."
    )
    site_label: str = Field("{site}", description="Template for a site's label; {site} is the site key.")
    points: dict[str, PointSpec] = Field(description="Source key -> point.")
    unmapped_columns: Literal["error", "reject"] = Field(
        "error",
        description="A value column or stream key no point names: an error, or its cells rejected (unmapped_column).",
    )


Metadata = Annotated[BrickMetadata | TableMetadata | InlineMetadata, Field(discriminator="kind")]
