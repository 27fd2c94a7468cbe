"""Rolling medians over runs of rows (a stream's rows, sorted by time), computed over the whole column at once."""

from __future__ import annotations

import numpy as np
import polars as pl


def run_starts(keys: pl.Series) -> np.ndarray:
    """The first row of each run of equal keys (rows sorted by them)."""
    return np.flatnonzero((keys != keys.shift(1)).fill_null(True).to_numpy())


def gaps(ts: np.ndarray, starts: np.ndarray, name: str) -> pl.Series:
    """Each row's time minus the previous row's in its run; null on a run's first row."""
    out = np.zeros(len(ts), dtype=np.int64)
    out[1:] = np.diff(ts)
    return pl.Series(name, out).scatter(starts, None) if len(ts) else pl.Series(name, [], dtype=pl.Int64)


def rolling_median(values: pl.Series, starts: np.ndarray, half: int) -> pl.Series:
    """polars' `rolling_median(2 * half + 1, center=True, min_samples=1).over(run)` of `values` (as Float64).

    The medians are taken over the whole column and only the rows whose window crosses a run's edge are computed
    again within their run, from slices of 3 * half + 1 rows at each end (the whole run when short), which hold every
    value of those rows' windows: the same values, without a pass per run."""
    median = lambda v: v.cast(pl.Float64).rolling_median(2 * half + 1, center=True, min_samples=1)  # noqa: E731
    out = median(values)
    n, span = len(values), 3 * half + 1
    if not n:
        return out
    pieces, targets, sources, offset = [], [], [], 0
    for start, end in zip(starts.tolist(), np.append(starts[1:], n).tolist(), strict=True):
        slices = [(start, end)] if end - start <= 2 * span else [(start, start + span), (end - span, end)]
        for low, high in slices:
            pieces.append(values.slice(low, high - low))
            rows = np.arange(low, high)
            edge = (rows < start + half) | (rows >= end - half)
            targets.append(rows[edge])
            sources.append(offset + np.flatnonzero(edge))
            offset += high - low
    if not pieces:
        return out
    recomputed = (
        pl.DataFrame({"_run": np.repeat(np.arange(len(pieces)), [len(p) for p in pieces]), "_v": pl.concat(pieces)})
        .select(median(pl.col("_v")).over("_run"))
        .to_series()
    )
    return out.scatter(np.concatenate(targets), recomputed.gather(np.concatenate(sources)))
