"""Time column -> int64 microseconds UTC, with a reject reason for every value that is not a time."""

from __future__ import annotations

import functools
import re
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import polars as pl

from contracts.corpus import TimeSpec
from pipeline.core import patterns
from pipeline.core.errors import IngestError
from pipeline.ingest.pickles import EARLIEST_US, LATEST_US  # the instants the store holds: 1900-01-01..2200-01-01

EPOCH_SCALE = {"epoch_s": 1_000_000, "epoch_ms": 1_000, "epoch_us": 1}
_AWARE = ("%Y-%m-%dT%H:%M:%S%.f%#z", "%Y-%m-%d %H:%M:%S%.f%#z")
_NAIVE = ("%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%d")

# A format whose general parser is slow (a fraction, an offset) and the quick one that parses its common values the
# same way: values without a fraction; "Z" (offset zero) read as UTC. What the quick one leaves goes to the general.
_QUICK = {
    "%Y-%m-%dT%H:%M:%S%.f%#z": "%Y-%m-%dT%H:%M:%SZ",
    "%Y-%m-%d %H:%M:%S%.f%#z": "%Y-%m-%d %H:%M:%SZ",
    "%Y-%m-%dT%H:%M:%S%.f": "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%d %H:%M:%S%.f": "%Y-%m-%d %H:%M:%S",
}

# The strftime formats `corpus draft` tries on a time column, in the order it prefers them where several read every
# value (month-first before day-first for "/" dates, as US building-automation exports write them; the draft asks in
# a CHECK line then). A value ending in a zone abbreviation (5:00:01 PM CST) is read by the format and " %Z".
CANDIDATES = (
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%d %H:%M:%S %:z",
    "%Y-%m-%d %H:%M %:z",
    "%Y/%m/%d %H:%M:%S",
    "%Y/%m/%d %H:%M",
    "%m/%d/%Y %H:%M:%S",
    "%m/%d/%Y %H:%M",
    "%d/%m/%Y %H:%M:%S",
    "%d/%m/%Y %H:%M",
    "%m/%d/%Y %I:%M:%S %p",
    "%m/%d/%Y %I:%M %p",
    "%d/%m/%Y %I:%M:%S %p",
    "%d/%m/%Y %I:%M %p",
    "%d.%m.%Y %H:%M:%S",
    "%d.%m.%Y %H:%M",
    "%d-%b-%y %I:%M:%S %p",
    "%d-%b-%y %I:%M %p",
    "%d-%b-%Y %H:%M:%S",
    "%d-%b-%y %H:%M:%S",
    "%Y-%m-%dT%H:%M:%S",
    "%Y%m%d%H%M%S",
    "%Y%m%d %H%M",
)
ABBREVIATION = r"\s([A-Za-z]{2,5})$"  # a zone abbreviation after the time: CST, CDT, UTC (not AM or PM)
MERIDIEM = ("AM", "PM")


def _zone_abbreviation(text: pl.Series) -> tuple[pl.Series, pl.Series]:
    """Each value's zone abbreviation (upper case; null when it has none) and the value without it."""
    found = text.str.extract(ABBREVIATION, 1).str.to_uppercase()
    found = pl.select(pl.when(found.is_in(MERIDIEM)).then(None).otherwise(found)).to_series()
    body = pl.select(pl.when(found.is_null()).then(text).otherwise(text.str.replace(ABBREVIATION, ""))).to_series()
    return found, body


AWARE_FORMAT = re.compile(r"%[:#]?z")
_CANDIDATE_TYPES = tuple(pl.Datetime("us", "UTC") if AWARE_FORMAT.search(f) else pl.Datetime("us") for f in CANDIDATES)
_DIGIT = re.compile(r"\d")
MISSING = "missing_timestamp"
BAD = "bad_timestamp"
NONEXISTENT = "nonexistent_local_time"
AMBIGUOUS = "ambiguous_local_time"
OUT_OF_SPAN = "timestamp_out_of_span"  # a time that reads (0000-01-01) but lies outside the span the store holds


def _literal_letters(fmt: str) -> set[str]:
    """The letters a format holds as literal text, outside its % directives (lower case)."""
    return {c.lower() for c in re.sub(r"%[#.]?[A-Za-z]", "", fmt) if c.isalpha()}


def _letters_absent(text: pl.Series, formats: tuple[str, ...]) -> set[str]:
    """The formats' literal letters that no value holds, in either case: a format holding one of them parses no value
    and is skipped (a failing parse costs more than a succeeding one). Punctuation is not looked for: every value of
    a date and time holds it."""
    letters = set().union(*map(_literal_letters, formats))
    return {c for c in letters if not any(text.str.contains(v, literal=True).any() for v in (c, c.upper()))}


def _may_be_aware(text: pl.Series) -> bool:
    """Whether any value may carry a UTC offset: an offset (%#z) needs a 'Z', a '+' or a third '-'."""
    return any(text.str.contains(c, literal=True).any() for c in ("Z", "z", "+")) or bool(
        (text.str.count_matches("-", literal=True) >= 3).any()
    )


def _strptime(text: pl.Series, fmt: str, dtype: pl.Datetime) -> pl.Series:
    """`text.str.strptime(dtype, fmt)`, the values its quick format parses taken from that (same values, a fraction of
    the time) and only the rest given to the general parser."""
    quick = _QUICK.get(fmt)
    if quick is None:
        return text.str.strptime(dtype, fmt, strict=False)
    parsed = text.str.strptime(pl.Datetime(dtype.time_unit), quick, strict=False)
    if dtype.time_zone is not None:
        parsed = parsed.dt.replace_time_zone("UTC").dt.convert_time_zone(dtype.time_zone)
    left = parsed.is_null() & text.is_not_null()
    if not left.any():
        return parsed
    rows = left.arg_true()
    return parsed.scatter(rows, text.gather(rows).str.strptime(dtype, fmt, strict=False))


def _first_match(text: pl.Series, formats: tuple[str, ...], dtype: pl.Datetime) -> pl.Series:
    """Parse with each format in turn, only the values still unparsed: one pass when the first fits."""
    result = pl.repeat(None, len(text), dtype=dtype, eager=True).alias(text.name)
    absent = _letters_absent(text, formats)
    for fmt in formats:
        todo = result.is_null() & text.is_not_null()
        if not todo.any():
            break
        if _literal_letters(fmt) & absent:
            continue
        result = pl.select(pl.when(todo).then(_strptime(text, fmt, dtype)).otherwise(result)).to_series()
    return result


def readings(cells: list[str]) -> list[str]:
    """The candidate formats under which every present cell parses, in the order CANDIDATES prefers them; values
    ending in a zone abbreviation give formats ending in " %Z"."""
    present = [c.strip() for c in cells if c.strip()]
    if not present or not all(_DIGIT.search(c) for c in present):  # every candidate reads numbers (an hour at least)
        return []
    text = pl.Series(present, dtype=pl.String)
    suffix = ""
    abbreviation, body = _zone_abbreviation(text)
    if abbreviation.is_not_null().any():
        text, suffix = body, " %Z"
    unread = (  # every candidate in one query: a query per format cost more than its parse
        pl.DataFrame({"t": text})
        .select(
            pl.col("t").str.strptime(_CANDIDATE_TYPES[i], fmt, strict=False).null_count().alias(str(i))
            for i, fmt in enumerate(CANDIDATES)
        )
        .row(0)
    )
    return [fmt + suffix for fmt, n in zip(CANDIDATES, unread, strict=True) if n == 0]


@functools.cache
def abbreviations(zone: str) -> dict[str, int]:
    """The zone abbreviations an IANA zone uses (CST, CDT for America/Chicago) -> their UTC offset in microseconds,
    and UTC/GMT; a zone that is not IANA's has only those."""
    found = {"UTC": 0, "GMT": 0, "Z": 0}
    try:
        info = ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        return found
    for year in range(1970, 2051):
        for month in (1, 7):
            at = datetime(year, month, 15, tzinfo=info)
            found[at.tzname() or ""] = int(at.utcoffset().total_seconds()) * 1_000_000  # type: ignore[union-attr]
    return {k: v for k, v in found.items() if k.isalpha()}


def _abbreviated(text: pl.Series, spec: TimeSpec) -> tuple[pl.Series, pl.Series]:
    """Times ending in a zone abbreviation (format "... %Z"): each read with its abbreviation's offset in the zone
    (CST and CDT in America/Chicago); without one, as naive local time; an abbreviation the zone does not use is a
    bad timestamp."""
    abbreviation, body = _zone_abbreviation(text)
    naive = body.str.strptime(pl.Datetime("us"), spec.format[: -len(" %Z")], strict=False)
    offset = abbreviation.replace_strict(abbreviations(spec.timezone), default=None, return_dtype=pl.Int64)
    local_ts, local_reason = _localize_series(naive, spec)
    ts = pl.select(pl.when(abbreviation.is_null()).then(local_ts).otherwise(naive.dt.epoch("us") - offset)).to_series()
    reason = pl.select(
        pl.when(naive.is_null() | (abbreviation.is_not_null() & offset.is_null()))
        .then(pl.lit(BAD))
        .when(abbreviation.is_null())
        .then(local_reason)
    ).to_series()
    return ts, reason


def spec_for_file(spec: TimeSpec, rel: str) -> tuple[TimeSpec, str]:
    """The spec a file's times are read with, and the mapping key that set its format (for error messages): the first
    time.file_formats entry whose regex fully matches the relative path gives the format (and zone, if it sets one)."""
    for index, entry in enumerate(spec.file_formats):
        if patterns.fullmatch(entry.files, rel, "time.file_formats files"):
            update = {"format": entry.format} | ({"timezone": entry.timezone} if entry.timezone is not None else {})
            return spec.model_copy(
                update=update
            ), f"the format of time.file_formats entry {index + 1} ({entry.files!r})"
    return spec, "time.format"


@functools.lru_cache(maxsize=256)
def _unreadable(fmt: str) -> str | None:
    """Why polars cannot parse with a strftime format at all (None when it can): the mapping's check sees only that
    the format has % codes, and polars refuses some such formats whatever the cells ('%H' alone: an hour wants its
    minute), with an exception of its own (found by make fuzz)."""
    for dtype in (pl.Datetime("us"), pl.Datetime("us", "UTC")):
        try:
            pl.Series(["2020-01-01 00:00:00"]).str.strptime(dtype, fmt, strict=False)
        except pl.exceptions.PolarsError as exc:
            return " ".join(str(exc).split())[:200]
    return None


def parse_times(frame: pl.DataFrame, column: str, spec: TimeSpec) -> pl.DataFrame:
    """Add `ts` (Int64 us UTC, null when rejected) and `ts_reason` to a frame with a string column; one IngestError
    line for a format polars cannot parse with."""
    if spec.format not in EPOCH_SCALE and spec.format != "iso8601" and (why := _unreadable(spec.format)):
        raise IngestError(f"time format {spec.format!r} cannot be read ({why}); fix it in time.format or file_formats")
    text = frame[column].str.strip_chars()
    missing = text.is_null() | (text == "")
    if spec.format in EPOCH_SCALE:
        scale = EPOCH_SCALE[spec.format]
        number = text.cast(pl.Float64, strict=False)
        exact = text.cast(pl.Int64, strict=False) * scale  # integers stay exact beyond 2**53
        approx = pl.when(number.is_finite()).then((number * scale).round(0)).cast(pl.Int64, strict=False)
        ts = pl.select(pl.coalesce(pl.lit(exact), approx)).to_series()
        reason = pl.select(pl.when(ts.is_null()).then(pl.lit(BAD))).to_series()
    elif spec.format == "iso8601":
        aware = (
            _first_match(text, _AWARE, pl.Datetime("us", "UTC"))
            if _may_be_aware(text)
            else pl.repeat(None, len(text), dtype=pl.Datetime("us", "UTC"), eager=True)
        )
        if (aware.is_not_null() | missing).all():
            ts, reason = aware.dt.epoch("us"), pl.repeat(None, len(text), dtype=pl.String, eager=True)
        else:
            naive = _first_match(text, _NAIVE, pl.Datetime("us"))
            local_ts, local_reason = _localize_series(naive, spec)
            ts = aware.dt.epoch("us").fill_null(local_ts)
            reason = pl.select(
                pl.when(aware.is_not_null()).then(None).when(naive.is_null()).then(pl.lit(BAD)).otherwise(local_reason)
            ).to_series()
    elif spec.format.endswith(" %Z"):
        ts, reason = _abbreviated(text, spec)
    elif AWARE_FORMAT.search(spec.format):
        ts = text.str.strptime(pl.Datetime("us", "UTC"), spec.format, strict=False).dt.epoch("us")
        reason = pl.select(pl.when(ts.is_null()).then(pl.lit(BAD))).to_series()
    else:
        naive = text.str.strptime(pl.Datetime("us"), spec.format, strict=False)
        ts, local_reason = _localize_series(naive, spec)
        reason = pl.select(pl.when(naive.is_null()).then(pl.lit(BAD)).otherwise(local_reason)).to_series()
    # The store refuses to load an instant outside its span (pipeline/store/invariants.py): such a cell is a reject
    # here, counted, so the build never writes what its store would not hold.
    outside = ts.is_not_null() & ((ts < EARLIEST_US) | (ts > LATEST_US))
    return frame.with_columns(
        ts=pl.select(pl.when(missing | outside).then(None).otherwise(ts)).to_series(),
        ts_reason=pl.select(
            pl.when(missing).then(pl.lit(MISSING)).when(outside).then(pl.lit(OUT_OF_SPAN)).otherwise(reason)
        ).to_series(),
    )


def _localize_series(naive: pl.Series, spec: TimeSpec) -> tuple[pl.Series, pl.Series]:
    """Naive local datetimes -> (UTC microseconds, reason for the ones that do not map)."""
    if spec.timezone == "UTC":
        return naive.dt.epoch("us"), pl.repeat(None, len(naive), dtype=pl.String, eager=True)
    ambiguous = "null" if spec.ambiguous == "reject" else spec.ambiguous
    local = naive.dt.replace_time_zone(spec.timezone, ambiguous=ambiguous, non_existent="null")
    ts = local.dt.convert_time_zone("UTC").dt.epoch("us")
    unmapped = naive.is_not_null() & local.is_null()
    if not unmapped.any():
        return ts, pl.repeat(None, len(naive), dtype=pl.String, eager=True)
    # Tell nonexistent from ambiguous: only ambiguous times map when either offset is allowed.
    earliest = naive.dt.replace_time_zone(spec.timezone, ambiguous="earliest", non_existent="null")
    reason = pl.select(
        pl.when(unmapped)
        .then(pl.when(earliest.is_null()).then(pl.lit(NONEXISTENT)).otherwise(pl.lit(AMBIGUOUS)))
        .otherwise(pl.lit(None, dtype=pl.String))
    ).to_series()
    return ts, reason
