"""Time column -> int64 microseconds UTC, with a reject reason for every value that is not a time."""

from __future__ import annotations

import polars as pl

from contracts.corpus import TimeSpec

EPOCH_SCALE = {"epoch_s": 1_000_000, "epoch_ms": 1_000, "epoch_us": 1}
_AWARE = ("%Y-%m-%dT%H:%M:%S%.f%#z", "%Y-%m-%d %H:%M:%S%.f%#z")
_NAIVE = ("%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%d")

MISSING = "missing_timestamp"
BAD = "bad_timestamp"
NONEXISTENT = "nonexistent_local_time"
AMBIGUOUS = "ambiguous_local_time"


def _localize(naive: pl.Expr, spec: TimeSpec) -> tuple[pl.Expr, pl.Expr]:
    """Naive local datetimes -> (UTC microseconds, reason for the ones that do not map)."""
    if spec.timezone == "UTC":
        return naive.dt.epoch("us"), pl.lit(None, dtype=pl.String)
    ambiguous = "null" if spec.ambiguous == "reject" else spec.ambiguous
    local = naive.dt.replace_time_zone(spec.timezone, ambiguous=ambiguous, non_existent="null")
    # Tell nonexistent from ambiguous: only ambiguous times map when either offset is allowed.
    earliest = naive.dt.replace_time_zone(spec.timezone, ambiguous="earliest", non_existent="null")
    reason = (
        pl.when(naive.is_not_null() & local.is_null())
        .then(pl.when(earliest.is_null()).then(pl.lit(NONEXISTENT)).otherwise(pl.lit(AMBIGUOUS)))
        .otherwise(pl.lit(None, dtype=pl.String))
    )
    return local.dt.convert_time_zone("UTC").dt.epoch("us"), reason


def parse_times(frame: pl.DataFrame, column: str, spec: TimeSpec) -> pl.DataFrame:
    """Add `ts` (Int64 us UTC, null when rejected) and `ts_reason` to a frame with a string column."""
    text = pl.col(column).str.strip_chars()
    if spec.format in EPOCH_SCALE:
        number = text.cast(pl.Float64, strict=False)
        finite = number.is_finite()
        ts = pl.when(finite).then((number * EPOCH_SCALE[spec.format]).round(0).cast(pl.Int64)).otherwise(None)
        reason = pl.when(finite).then(pl.lit(None, dtype=pl.String)).otherwise(pl.lit(BAD))
    elif spec.format == "iso8601":
        aware = pl.coalesce(
            [text.str.strptime(pl.Datetime("us", "UTC"), fmt, strict=False) for fmt in _AWARE]
        ).dt.epoch("us")
        naive = pl.coalesce([text.str.strptime(pl.Datetime("us"), fmt, strict=False) for fmt in _NAIVE])
        local_ts, local_reason = _localize(naive, spec)
        ts = pl.coalesce([aware, local_ts])
        reason = pl.when(aware.is_not_null()).then(pl.lit(None, dtype=pl.String)).otherwise(
            pl.when(naive.is_null()).then(pl.lit(BAD)).otherwise(local_reason)
        )
    else:
        naive = text.str.strptime(pl.Datetime("us"), spec.format, strict=False)
        ts, local_reason = _localize(naive, spec)
        reason = pl.when(naive.is_null()).then(pl.lit(BAD)).otherwise(local_reason)
    missing = text.is_null() | (text == "")
    return frame.with_columns(
        ts=pl.when(missing).then(None).otherwise(ts),
        ts_reason=pl.when(missing).then(pl.lit(MISSING)).otherwise(reason),
    )
