"""Time column -> int64 microseconds UTC, with a reject reason for every value that is not a time."""

from __future__ import annotations

import re

import polars as pl

from contracts.corpus import TimeSpec

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

MISSING = "missing_timestamp"
BAD = "bad_timestamp"
NONEXISTENT = "nonexistent_local_time"
AMBIGUOUS = "ambiguous_local_time"


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


def spec_for_file(spec: TimeSpec, rel: str) -> tuple[TimeSpec, str]:
    """The spec a file's times are read with, and the mapping key that set its format (for error messages): the first
    time.file_formats entry whose regex fully matches the relative path gives the format (and zone, if it sets one)."""
    for index, entry in enumerate(spec.file_formats):
        if re.fullmatch(entry.files, rel):
            update = {"format": entry.format} | ({"timezone": entry.timezone} if entry.timezone is not None else {})
            return spec.model_copy(
                update=update
            ), f"the format of time.file_formats entry {index + 1} ({entry.files!r})"
    return spec, "time.format"


def parse_times(frame: pl.DataFrame, column: str, spec: TimeSpec) -> pl.DataFrame:
    """Add `ts` (Int64 us UTC, null when rejected) and `ts_reason` to a frame with a string column."""
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
    else:
        naive = text.str.strptime(pl.Datetime("us"), spec.format, strict=False)
        ts, local_reason = _localize_series(naive, spec)
        reason = pl.select(pl.when(naive.is_null()).then(pl.lit(BAD)).otherwise(local_reason)).to_series()
    return frame.with_columns(
        ts=pl.select(pl.when(missing).then(None).otherwise(ts)).to_series(),
        ts_reason=pl.select(pl.when(missing).then(pl.lit(MISSING)).otherwise(reason)).to_series(),
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
