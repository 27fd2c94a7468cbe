"""The metadata half of a corpus mapping ([metadata]): where sites, equipment and points come from (Brick graphs, a
points table, or inline points)."""

from __future__ import annotations

import re
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import regex as regex_engine
from pydantic import Field, field_validator, model_validator

from contracts.base import Frozen


class CounterRule(Frozen):
    """A cumulative counter turned into the amount recorded since the reading before each (across gaps too)."""

    zero_is_dropout: bool = Field(True, description="A reading of exactly 0 is a logging dropout, not a reset.")
    max_rate: float | None = Field(
        None,
        gt=0,
        description="The most the meter can record per hour, in the stream's unit per hour: an increment above "
        "max_rate times the hours since the reading before is rejected as counter_jump (a rate, so that the amount "
        "recorded across a gap is kept).",
    )
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

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: object) -> object:
        # A bound per reading rejected the amount recorded across every long gap; the bound is now a rate.
        if isinstance(data, dict) and "max_increment" in data:
            raise ValueError(
                "max_increment is replaced by max_rate, the most the meter records per hour of the interval since "
                "the reading before (for hourly readings, max_increment = 5000 is max_rate = 5000)"
            )
        return data


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


# ---------------------------------------------------------------- streams absent by design


def regex(value: str, what: str) -> str:
    """The value, refused in one line when it is not a regular expression (`what` names the key)."""
    try:
        regex_engine.compile(value)  # the engine that matches it (pipeline/core/patterns.py), with a time bound
    except regex_engine.error as exc:
        raise ValueError(f"{what} {value!r} is not a valid regex: {exc}") from exc
    return value


def iana_zone(value: str | None) -> str | None:
    """The zone, refused in one line when zoneinfo does not know it (checked with the mapping, before any file)."""
    if value is None:
        return value
    try:  # a zone `corpus draft` proposes ("CHECK <zone>") is checked too; the build refuses it until confirmed
        ZoneInfo(value.removeprefix("CHECK "))
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:  # OSError: a folder ('America'), a name too long
        raise ValueError(
            f"timezone {value!r} is not an IANA time zone zoneinfo knows; write one such as 'UTC' or 'Europe/Belgrade'"
        ) from exc
    return value


Weekday = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
WEEKDAYS: tuple[str, ...] = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_HOURS = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]|24):([0-5]\d)$")


def hour_range(text: str) -> tuple[int, int]:
    """'07:00-19:00' -> (420, 1140): minutes after local midnight, start before end ('24:00' ends at midnight)."""
    found = _HOURS.match(text)
    if not found:
        raise ValueError(f"hours {text!r} is not HH:MM-HH:MM (e.g. '07:00-19:00'; '24:00' ends at midnight)")
    start, end = int(found[1]) * 60 + int(found[2]), int(found[3]) * 60 + int(found[4])
    if not start < end <= 1440:
        raise ValueError(f"hours {text!r} must end after they start, by 24:00 (split a night shift in two ranges)")
    return start, end


class _Silence(Frozen):
    """What every declaration of expected silence names: the streams it applies to and why they are silent."""

    streams: str = Field(
        description="Regex fully matched against stream ids (e.g. '.*__ac_power'): the streams this applies to; "
        "a stream may match one declaration at most."
    )
    reason: str = Field(
        min_length=1, description="Why the stream is silent then, in words a user accepts (the dataset card says it)."
    )

    @field_validator("streams")
    @classmethod
    def _compiles(cls, value: str) -> str:
        return regex(value, "streams")


class ScheduleSilence(_Silence):
    """A stream expected to report during local hours on some weekdays, and silent otherwise (e.g. occupancy)."""

    kind: Literal["schedule"] = Field(description="Expected during declared local hours; silent outside them.")
    hours: list[str] = Field(
        min_length=1, description="Local hours the stream is expected, each 'HH:MM-HH:MM' (e.g. ['07:00-19:00'])."
    )
    weekdays: list[Weekday] = Field(
        default=list(WEEKDAYS), min_length=1, description="Local days those hours apply to (mon..sun; default all)."
    )
    timezone: str | None = Field(None, description="IANA zone of the hours (default: the mapping's time.timezone).")

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        return iana_zone(value)

    @field_validator("hours")
    @classmethod
    def _ranges(cls, value: list[str]) -> list[str]:
        ranges = sorted(hour_range(text) for text in value)
        for (_, end), (start, _) in zip(ranges, ranges[1:], strict=False):
            if start < end:
                raise ValueError(f"hours {value} overlap; give disjoint ranges")
        return value


class NightSilence(_Silence):
    """A stream silent while the sun is down at the site (a PV inverter at night): expected only while the sun's
    geometric elevation is at least `sun_above_deg` (NOAA's solar position equations, pipeline/store/expected.py)."""

    kind: Literal["night"] = Field(description="Silent while the sun is below sun_above_deg at the site.")
    latitude: float = Field(ge=-90, le=90, description="Site latitude in degrees, north positive.")
    longitude: float = Field(ge=-180, le=180, description="Site longitude in degrees, east positive.")
    sun_above_deg: float = Field(
        0.0,
        ge=-18,
        le=20,
        description="Expected while the sun's centre is at least this many degrees above the horizon (geometric, no "
        "refraction; 0: from sunrise to sunset).",
    )


Silence = Annotated[ScheduleSilence | NightSilence, Field(discriminator="kind")]
