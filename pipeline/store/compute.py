"""Derived tables computed on observations sorted by (stream_id, ts), with deterministic reductions.

Groups are contiguous runs of the sorted rows, so every reduction is a numpy `reduceat` over
fixed segments: the same bits on every run and thread count (DETERMINISM.md). Windows are
half-open [start, end) on UTC days, Monday weeks and calendar months.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.core import runs
from pipeline.core.timeunits import DAY_US, HOUR_US

DAY, HOUR = DAY_US, HOUR_US
MONDAY = 4 * DAY  # 1970-01-05, the first Monday after the epoch (a Thursday)
# What a stream's readings are (docs/store.md, "Meters"): levels (a temperature, a power), or a meter's amounts per
# reading interval, recorded as such (an interval meter) or differenced from a cumulative register (a counter).
LEVEL, INTERVAL, COUNTER = 0, 1, 2


def with_steps(obs: pl.DataFrame, step_window: int) -> pl.DataFrame:
    """Add gap_us (to the previous observation of the stream) and step_us (median of the gaps within `step_window`
    rows either side, in the stream). Rows are sorted by (stream_id, ts)."""
    if obs["ts"].null_count():
        raise ValueError("with_steps: observations without a time")
    starts = runs.run_starts(obs["stream_id"])
    gap = runs.gaps(obs["ts"].to_numpy(), starts, "gap_us")
    steps = runs.rolling_median(gap, starts, step_window)
    return obs.with_columns(gap_us=gap, step_us=steps.round(0).cast(pl.Int64))


def _segments(keys: list[np.ndarray]) -> np.ndarray:
    """Start index of each run of equal keys (rows already sorted by them)."""
    n = len(keys[0])
    change = np.zeros(n, dtype=bool)
    if n:
        change[0] = True
        for key in keys:
            change[1:] |= key[1:] != key[:-1]
    return np.flatnonzero(change)


def _moments(values: np.ndarray, starts: np.ndarray, ddof: int) -> dict[str, np.ndarray]:
    counts = np.diff(np.append(starts, len(values)))
    mean = np.add.reduceat(values, starts) / counts
    dev = values - np.repeat(mean, counts)
    ss = np.add.reduceat(dev * dev, starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        std = np.where(counts > ddof, np.sqrt(ss / np.maximum(counts - ddof, 1)), np.nan)
    return {
        "count": counts.astype(np.int64),
        "mean": mean,
        "std": std,
        "min": np.minimum.reduceat(values, starts),
        "max": np.maximum.reduceat(values, starts),
    }


def _intervals(ts: np.ndarray, gap: np.ndarray, step: np.ndarray, kind: np.ndarray) -> np.ndarray:
    """Each reading's interval in microseconds (float): a counter's since the reading before it (its local step for a
    stream's first reading), an interval meter's local step; NaN where none is known (a stream of one reading)."""
    interval = np.where(kind == COUNTER, gap, step).astype(np.float64)
    fallback = np.asarray(step, dtype=np.float64)
    interval = np.where(np.isfinite(interval) & (interval > 0), interval, fallback)
    return np.where(np.isfinite(interval) & (interval > 0), interval, np.nan)


def window_moments(
    values: np.ndarray,
    ts: np.ndarray,
    interval: np.ndarray,
    starts: np.ndarray,
    kind: np.ndarray,
    window_start: np.ndarray,
    ddof: int,
) -> dict[str, np.ndarray]:
    """count, mean, std, min, max and total of each run of rows starting at `starts`; `kind` and `window_start` are
    each run's.

    Levels: the moments of the values; total, their sum. A meter's amounts (docs/store.md, "Meters"): total is what
    the meter recorded over the window (an interval meter: the sum of its readings; a counter: the amounts whose
    interval lies inside the window, i.e. the register difference between its first and last readings there); min,
    max and std are those of each reading's rate per hour (amount / interval); mean is the total per hour those amounts
    cover (a counter without one: its first reading's rate)."""
    level = _moments(values, starts, ddof)
    counts = level["count"]
    if not len(starts) or not (kind != LEVEL).any():
        return {**level, "total": np.add.reduceat(values, starts) if len(starts) else values[:0]}
    row_kind, row_start = np.repeat(kind, counts), np.repeat(window_start, counts)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(row_kind != LEVEL, values * HOUR / interval, values)
        inside = np.isfinite(interval) & (ts - np.nan_to_num(interval, nan=np.inf) >= row_start)
    counted = (row_kind != COUNTER) | inside
    rates = _moments(np.where(np.isfinite(rate), rate, values), starts, ddof)
    total = np.add.reduceat(np.where(counted, values, 0.0), starts)
    covered = (row_kind != LEVEL) & counted & np.isfinite(interval)
    hours = np.add.reduceat(np.where(covered, interval, 0.0), starts) / HOUR
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(hours > 0, total / hours, rates["mean"])
    pick = lambda name, amounts: np.where(kind == LEVEL, level[name], amounts)  # noqa: E731
    return {
        "count": counts,
        "mean": pick("mean", mean),
        "std": pick("std", rates["std"]),
        "min": pick("min", rates["min"]),
        "max": pick("max", rates["max"]),
        "total": total,
    }


def median_step(steps: np.ndarray) -> int | None:
    """The median of whole-number steps (float, NaN where a row has none) rounded half to even, as polars' median and
    round give it (the two middle values' mean is exact below 2**52): the step of one window, without building a
    polars Series per window. None when no row has a step."""
    known = steps[~np.isnan(steps)]
    return int(np.round(np.median(known))) if len(known) else None


def segment_medians(values: pl.Series, seg: np.ndarray) -> pl.Series:
    """The median of each run of rows starting at `seg` (integers), rounded to an integer as polars rounds it; null
    for a run without values. A run of one repeated value (a local step, mostly) is its value, without a sort."""
    if not len(seg):
        return pl.Series("step_us", [], dtype=pl.Int64)
    numbers = values.fill_null(0).cast(pl.Int64).to_numpy()
    nulls = np.add.reduceat(values.is_null().to_numpy().astype(np.int64), seg)
    out = np.minimum.reduceat(numbers, seg)
    varied = np.flatnonzero((nulls > 0) | (out != np.maximum.reduceat(numbers, seg)))
    medians = pl.Series("step_us", out, dtype=pl.Int64)
    if not len(varied):
        return medians
    run = np.repeat(np.arange(len(seg)), np.diff(np.append(seg, len(numbers))))
    chosen = np.zeros(len(seg), dtype=bool)
    chosen[varied] = True
    rows = chosen[run]
    sorted_medians = (
        pl.DataFrame({"_seg": run[rows], "step_us": values.filter(pl.Series(rows))})
        .group_by("_seg", maintain_order=True)
        .agg(pl.col("step_us").median().round(0).cast(pl.Int64))
    )
    return medians.scatter(sorted_medians["_seg"].to_numpy(), sorted_medians["step_us"])


def stream_codes(stream: pl.Series) -> np.ndarray:
    """Dense codes of a column sorted by stream id: 0 for the first stream, +1 at each change."""
    return (stream != stream.shift(1)).fill_null(False).cast(pl.Int64).cum_sum().to_numpy()


def window_bounds(ts: np.ndarray, period: str) -> tuple[np.ndarray, np.ndarray]:
    """[start, end) of the UTC day, Monday week or calendar month holding each timestamp."""
    if period == "day":
        start = ts - np.mod(ts, DAY)
        return start, start + DAY
    if period == "week":
        start = ts - np.mod(ts - MONDAY, 7 * DAY)
        return start, start + 7 * DAY
    # Months through a lookup by day: calendar conversion of each distinct day, not of every row.
    days = np.floor_divide(ts, DAY)
    if not len(days):
        return ts.copy(), ts.copy()
    first = int(days.min())
    span = np.arange(first, int(days.max()) + 1).astype("datetime64[D]").astype("datetime64[M]")
    starts = span.astype("datetime64[us]").astype(np.int64)
    ends = (span + 1).astype("datetime64[us]").astype(np.int64)
    return starts[days - first], ends[days - first]


def window_segments(codes: np.ndarray, ts: np.ndarray) -> dict[str, np.ndarray]:
    """Start row of each stream x UTC day, Monday week and calendar month (rows sorted by stream, time).

    Weeks and months are unions of days, so they are found among the day starts (a few per stream and
    day) instead of computing a week and a month for every row."""
    days = np.floor_divide(ts, DAY)
    day = _segments([codes, days])
    if not len(day):
        return {"day": day, "week": day, "month": day}
    first_day, stream = days[day], codes[day]
    origin = int(first_day.min())
    months = (
        np.arange(origin, int(first_day.max()) + 1).astype("datetime64[D]").astype("datetime64[M]").astype(np.int64)
    )
    out = {"day": day}
    for period, key in (("week", np.floor_divide(first_day - MONDAY // DAY, 7)), ("month", months[first_day - origin])):
        change = np.ones(len(day), dtype=bool)
        change[1:] = (stream[1:] != stream[:-1]) | (key[1:] != key[:-1])
        out[period] = day[change]
    return out


def _reject_counts(rejects: pl.DataFrame | None, period: str, key: pl.DataType) -> pl.DataFrame:
    """Rejected cells per stream x window: all of them, duplicates, non-finite values (stream key of type `key`)."""
    schema = {
        "stream_id": key,
        "window_start": pl.Int64,
        "rejected": pl.Int64,
        "duplicates": pl.Int64,
        "non_finite": pl.Int64,
    }
    if rejects is None or rejects.height == 0:
        return pl.DataFrame(schema=schema)
    starts, _ = window_bounds(rejects["ts"].to_numpy(), period)
    return (
        rejects.with_columns(window_start=pl.Series(starts))
        .group_by("stream_id", "window_start")
        .agg(
            rejected=pl.len().cast(pl.Int64),
            duplicates=(pl.col("reason") == "duplicate_timestamp").sum().cast(pl.Int64),
            non_finite=(pl.col("reason") == "non_finite").sum().cast(pl.Int64),
        )
    )


def aggregates(
    obs: pl.DataFrame,
    ddof: int,
    codes: np.ndarray | None = None,
    rejects: pl.DataFrame | None = None,
    kinds: np.ndarray | None = None,
) -> pl.DataFrame:
    """count, mean, std, min, max, total, local step, longest gap, coverage, gap ratio and rejected cells per stream x
    window.

    `rejects` (stream_id, ts, reason): rejected cells with a stream and a time; `kinds`: LEVEL, INTERVAL or COUNTER
    per stream code (all LEVEL when not given)."""
    codes = stream_codes(obs["stream_id"]) if codes is None else codes
    ts = obs["ts"].to_numpy()
    values = obs["value"].to_numpy()
    kinds = np.zeros(int(codes.max()) + 1 if len(codes) else 0, dtype=np.int8) if kinds is None else kinds
    interval = _intervals(
        ts,
        obs["gap_us"].cast(pl.Float64).fill_null(np.nan).to_numpy(),
        obs["step_us"].cast(pl.Float64).fill_null(np.nan).to_numpy(),
        kinds[codes] if len(codes) else np.zeros(0, dtype=np.int8),
    )
    gap = obs["gap_us"].fill_null(np.iinfo(np.int64).max).to_numpy()
    frames = []
    for period, seg in window_segments(codes, ts).items():
        start, end = window_bounds(ts[seg], period)  # bounds of each window, from its first row
        ends = np.append(seg[1:], len(ts)) - 1
        # The longest gap inside a window: a later row's gap lies inside (its predecessor is in the window);
        # the first row's gap is cut at the window start.
        cut = gap.copy()
        cut[seg] = np.minimum(gap[seg], ts[seg] - start)
        inner = np.maximum.reduceat(cut, seg) if len(seg) else cut[:0]
        longest = np.maximum(inner, end - ts[ends])
        frame = pl.DataFrame(
            {
                "stream_id": obs["stream_id"].gather(seg),
                "period": pl.Series([period] * len(seg), dtype=pl.String),
                "window_start": start,
                "window_end": end,
                **window_moments(values, ts, interval, seg, kinds[codes[seg]] if len(seg) else codes[:0], start, ddof),
                "first_ts": ts[seg],
                "last_ts": ts[ends],
                "longest_gap_us": longest,
            }
        )
        steps = segment_medians(obs["step_us"], seg)
        counts = _reject_counts(rejects, period, obs.schema["stream_id"])
        frame = frame.with_columns(step_us=steps).join(
            counts, on=["stream_id", "window_start"], how="left", maintain_order="left"
        )
        frames.append(frame.with_columns(pl.col("rejected", "duplicates", "non_finite").fill_null(0)))
    out = pl.concat(frames)
    length = (pl.col("window_end") - pl.col("window_start")).cast(pl.Float64)
    step = pl.col("step_us").cast(pl.Float64)
    return out.with_columns(
        coverage=pl.when(step > 0)
        .then(pl.min_horizontal(pl.lit(1.0), pl.col("count") / (length / step)))
        .otherwise(0.0),
        gap_ratio=pl.when(step > 0).then(pl.col("longest_gap_us") / step).otherwise(None),
        std=pl.col("std").fill_nan(None),
    ).sort("stream_id", "period", "window_start")


def profiles(obs: pl.DataFrame, ddof: int, codes: np.ndarray | None = None) -> pl.DataFrame:
    """Calendar profile: count, mean, std, min, max per stream x UTC day of week (0 = Monday) x hour."""
    codes = stream_codes(obs["stream_id"]) if codes is None else codes
    ts = obs["ts"].to_numpy()
    slot = np.mod(ts - MONDAY, 7 * DAY) // HOUR  # hour of the Monday-based week, 0..167
    # A stable sort on one integer key keeps time order inside each (stream, slot) group.
    order = np.argsort(codes * 168 + slot, kind="stable")
    key, values = (codes * 168 + slot)[order], obs["value"].to_numpy()[order]
    seg = _segments([key])
    return pl.DataFrame(
        {
            "stream_id": obs["stream_id"].gather(order[seg]),
            "dow": slot[order[seg]] // 24,
            "hour": slot[order[seg]] % 24,
            **_moments(values, seg, ddof),
        }
    ).with_columns(std=pl.col("std").fill_nan(None))


def previews(obs: pl.DataFrame, points: int) -> pl.DataFrame:
    """`points` evenly spaced observations per stream (all of them when fewer)."""
    counts = obs.group_by("stream_id", maintain_order=True).len()
    picks = []
    offset = 0
    for n in counts["len"].to_list():
        picks.append(offset + np.unique(np.rint(np.arange(points) * (n - 1) / (points - 1)).astype(np.int64)))
        offset += n
    chosen = obs.select("stream_id", "ts", "value")[np.concatenate(picks) if picks else []]
    return chosen.with_columns(idx=pl.int_range(pl.len()).over("stream_id").cast(pl.Int64)).select(
        "stream_id", "idx", "ts", "value"
    )


def _fraction(hits: np.ndarray, defined: np.ndarray, seg: np.ndarray) -> pl.Series:
    """Per run of rows, the share of its defined rows that hit (polars' mean of a boolean); null when none is
    defined."""
    total = np.add.reduceat(defined.astype(np.int64), seg) if len(seg) else np.zeros(0, dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = (np.add.reduceat((hits & defined).astype(np.int64), seg) if len(seg) else total) / total
    return pl.Series(share, dtype=pl.Float64).scatter(np.flatnonzero(total == 0), None)


def quality_parts(obs: pl.DataFrame) -> pl.DataFrame:
    """The per-stream half of the quality table (needs only that stream's rows): counts, times, gaps, expected count.

    Counts, times, the longest gap and the zero and constant fractions are reductions over each stream's run of rows;
    the median step and the distinct values are polars' (NaN equals NaN as in polars, nulls are left out)."""
    per = obs.group_by("stream_id", maintain_order=True).agg(
        step_us=pl.col("gap_us").median().round(0).cast(pl.Int64),
        distinct_values=pl.col("value").n_unique().cast(pl.Int64),
    )
    seg = runs.run_starts(obs["stream_id"])
    ends = np.append(seg[1:], obs.height) if len(seg) else seg
    ts = obs["ts"].to_numpy()
    values, valid = obs["value"].fill_null(0.0).to_numpy(), obs["value"].is_not_null().to_numpy()
    zero = _fraction(values == 0, valid, seg)
    same = np.zeros(obs.height, dtype=bool)
    same[1:] = (values[1:] == values[:-1]) | (np.isnan(values[1:]) & np.isnan(values[:-1]))
    paired = np.zeros(obs.height, dtype=bool)
    paired[1:] = valid[1:] & valid[:-1]
    paired[seg] = False
    gaps = obs["gap_us"]
    longest = np.maximum.reduceat(gaps.fill_null(np.iinfo(np.int64).min).to_numpy(), seg) if len(seg) else ts[:0]
    # Expected observations = 1 + sum over gaps of gap / local step: the spec's span / step + 1 with a step
    # that follows cadence changes (60 -> 15 -> 3 minutes) instead of one median for the whole stream.
    gap = gaps.cast(pl.Float64).fill_null(0.0).to_numpy()
    local = obs["step_us"].cast(pl.Float64).fill_null(0.0).to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(local > 0, gap / local, 0.0)
    return per.select(
        "stream_id",
        n=pl.Series(ends - seg, dtype=pl.UInt32),
        first_ts=pl.Series(ts[seg], dtype=pl.Int64),
        last_ts=pl.Series(ts[ends - 1], dtype=pl.Int64),
        step_us="step_us",
        longest_gap_us=pl.Series(longest, dtype=pl.Int64).scatter(
            np.flatnonzero(np.add.reduceat(gaps.is_not_null().to_numpy().astype(np.int64), seg) == 0)
            if len(seg)
            else [],
            None,
        ),
        zero_fraction=zero,
        constant_fraction=_fraction(same, paired, seg),
        distinct_values="distinct_values",
        expected=pl.Series(
            (1.0 + np.add.reduceat(ratio, seg)) if len(seg) else np.array([], dtype=np.float64),
            dtype=pl.Float64,
        ),
    )


def quality_table(streams: pl.DataFrame, parts: pl.DataFrame, rejects: pl.DataFrame) -> pl.DataFrame:
    """Whole-stream quality (step, longest gap, coverage, gap ratio and the defect fractions) from the per-stream parts
    of every stream and all rejects (a stream without rows gets zeros)."""
    bad = (
        rejects.filter(pl.col("stream_id").is_not_null())
        .group_by("stream_id")
        .agg(
            rejected=pl.len(),
            duplicates=(pl.col("reason") == "duplicate_timestamp").sum(),
            non_finite=(pl.col("reason") == "non_finite").sum(),
        )
    )
    table = streams.select("stream_id").join(parts, on="stream_id", how="left").join(bad, on="stream_id", how="left")
    total = (pl.col("n").fill_null(0) + pl.col("rejected").fill_null(0)).clip(lower_bound=1).cast(pl.Float64)
    step = pl.col("step_us").cast(pl.Float64)
    expected = pl.col("expected")
    return table.select(
        "stream_id",
        n=pl.col("n").fill_null(0).cast(pl.Int64),
        first_ts="first_ts",
        last_ts="last_ts",
        step_us="step_us",
        longest_gap_us="longest_gap_us",
        coverage=pl.when(step > 0).then(pl.min_horizontal(pl.lit(1.0), pl.col("n") / expected)).otherwise(0.0),
        expected_count=expected,
        gap_ratio=pl.when(step > 0).then(pl.col("longest_gap_us") / step).otherwise(None),
        duplicate_fraction=pl.col("duplicates").fill_null(0) / total,
        nan_fraction=pl.col("non_finite").fill_null(0) / total,
        reject_fraction=pl.col("rejected").fill_null(0) / total,
        zero_fraction=pl.col("zero_fraction").fill_null(0.0).cast(pl.Float64),
        constant_fraction=pl.col("constant_fraction").fill_null(0.0).cast(pl.Float64),
        distinct_values=pl.col("distinct_values").fill_null(0),
    ).sort("stream_id")


def window_stats(
    ts: np.ndarray, values: np.ndarray, steps: np.ndarray, start: int, end: int, ddof: int, kind: int = LEVEL
) -> dict | None:
    """The `aggregates` row of one arbitrary window [start, end), computed exactly as the table is.

    Same reductions and the same step, gap and coverage definitions, so a custom window that
    equals a calendar window gives the same bits as the stored row. None when it is empty. `ts` may start with the
    stream's rows before the window (a counter's first reading in it takes its interval from them)."""
    first, last = int(np.searchsorted(ts, start, "left")), int(np.searchsorted(ts, end, "left"))
    if last <= first:
        return None
    inside = ts[first:last]
    gaps = np.diff(ts[max(first - 1, 0) : last])
    if first == 0:
        gaps = np.concatenate([[np.iinfo(np.int64).max], gaps])
    interval = _intervals(
        inside,
        np.where(gaps == np.iinfo(np.int64).max, np.nan, gaps.astype(np.float64)),
        steps[first:last],
        np.full(last - first, kind, dtype=np.int8),
    )
    moments = {
        k: v[0]
        for k, v in window_moments(
            values[first:last],
            inside,
            interval,
            np.array([0]),
            np.array([kind], dtype=np.int8),
            np.array([start], dtype=np.int64),
            ddof,
        ).items()
    }
    inner = int(np.max(np.minimum(gaps, inside - start)))
    longest = max(inner, end - int(inside[-1]))
    step_us = median_step(steps[first:last])
    length = float(end - start)
    coverage = min(1.0, moments["count"] / (length / float(step_us))) if step_us and step_us > 0 else 0.0
    return {
        **moments,
        "std": None if np.isnan(moments["std"]) else float(moments["std"]),
        "count": int(moments["count"]),
        "total": float(moments["total"]),
        "first_ts": int(inside[0]),
        "last_ts": int(inside[-1]),
        "longest_gap_us": longest,
        "step_us": step_us,
        "coverage": coverage,
        "gap_ratio": longest / float(step_us) if step_us and step_us > 0 else None,
    }
