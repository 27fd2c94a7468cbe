"""Windows, local steps, quality and the corpus thresholds of cleaned streams, written from docs/store.md.

A window is half-open [start, end) in UTC. An observation's local step is the median of the gaps (to the previous
observation) of the `step_window` observations on each side of it and its own; a window's step is the median of its
observations' local steps; its coverage is count / ((end - start) / step), at most 1; its longest gap the largest of
(first - start), the gaps inside and (end - last), its gap ratio that / step. Medians round half to even."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tests.second_route.clean import Stream
from tests.second_route.daylight import Hours

DAY_US = 86_400_000_000
WEEK_US = 7 * DAY_US
MONDAY_US = 4 * DAY_US  # 1970-01-05, the first Monday after the epoch


def store_settings(root: Path) -> dict:
    return tomllib.loads((root / "configs" / "build.toml").read_text(encoding="utf-8"))["store"]


def local_steps(ts: np.ndarray, half: int) -> np.ndarray:
    """Each observation's local step (us, float; NaN for a stream of one observation)."""
    gaps = pd.Series(np.r_[np.nan, np.diff(ts)].astype(np.float64))
    return np.round(gaps.rolling(2 * half + 1, center=True, min_periods=1).median().to_numpy())


def stream_step(ts: np.ndarray) -> float | None:
    """The whole stream's step (inspect_quality's step_seconds): the median of all its gaps."""
    return float(np.round(np.median(np.diff(ts)))) if len(ts) > 1 else None


@dataclass
class Quality:
    count: int
    step_us: float | None
    coverage: float
    gap_ratio: float | None
    clean: bool  # no duplicate or non-finite cell of the stream has its time in the window


def quality(stream: Stream, steps: np.ndarray, start: int, end: int, hours: Hours | None = None) -> Quality | None:
    """The window's quality; for a stream silent by design (`hours`: its expected hours) over those hours alone."""
    lo, hi = np.searchsorted(stream.ts, [start, end])
    if hi <= lo:
        return None
    inside = stream.ts[lo:hi]
    local = steps[lo:hi]
    local = local[~np.isnan(local)]
    step = float(np.round(np.median(local))) if len(local) else None
    ok = step is not None and step > 0
    dirty = [t for t in (stream.duplicate_ts, stream.non_finite_ts) if np.any((t >= start) & (t < end))]
    if hours is None:
        longest = max(int(inside[0] - start), int(np.max(np.diff(inside), initial=0)), int(end - inside[-1]))
        coverage = min(1.0, (hi - lo) / ((end - start) / step)) if ok else 0.0
    else:
        longest, coverage = _over_expected(hours, inside, start, end, step if ok else None)
    return Quality(
        count=hi - lo,
        step_us=step,
        coverage=coverage,
        gap_ratio=longest / step if ok else None,
        clean=not dirty,
    )


def _over_expected(hours: Hours, inside: np.ndarray, start: int, end: int, step: float | None) -> tuple[int, float]:
    """(longest gap, coverage) counting expected time only: gaps are the expected time from the window's start to its
    first reading, between readings and from the last to its end; a reading counts when the expected hours overlap
    its slot (half the window's step either side); coverage = counted / (E(start, end) / step), 1 without any E."""
    edges = np.r_[start, inside, end]
    longest = int(np.max(hours.between(edges[:-1], edges[1:])))
    if step is None:
        return longest, 0.0
    half = int(step) // 2
    counted = int(np.count_nonzero(hours.between(inside - half, inside + half) > 0))
    expected = int(hours.between(np.array([start]), np.array([end]))[0]) / step
    return longest, min(1.0, counted / expected) if expected > 0 else 1.0


def weeks(ts: np.ndarray) -> np.ndarray:
    """The Monday-based UTC weeks (their start, us) holding a reading."""
    return np.unique((ts - MONDAY_US) // WEEK_US) * WEEK_US + MONDAY_US


def thresholds(
    streams: dict[str, Stream], steps: dict[str, np.ndarray], hours: dict[str, Hours], settings: dict
) -> dict[str, float]:
    """The corpus's band thresholds: declared quantiles (linear) of every stream-week's coverage and gap ratio (over
    the expected hours of a stream silent by design), rounded to 4 dp and clamped into the declared floor and ceiling
    (the stream-level long-gap limit is not used by a gold)."""
    coverage, ratio = [], []
    for sid, stream in streams.items():
        for start in weeks(stream.ts).tolist():
            q = quality(stream, steps[sid], start, start + WEEK_US, hours.get(sid))
            coverage.append(q.coverage)
            if q.gap_ratio is not None:
                ratio.append(q.gap_ratio)
    population = {"coverage_abstain": coverage, "coverage_answer": coverage}
    population |= {"gap_ratio_answer": ratio, "gap_ratio_abstain_window": ratio}
    out = {}
    for name, values in population.items():
        corpus = round(float(np.quantile(np.sort(values), settings["thresholds"][name])), 4)
        bound = settings["threshold_bounds"][name]
        out[name] = min(max(corpus, bound["floor"]), bound["ceiling"])
    return out


def band(q: Quality, limits: dict[str, float]) -> str:
    """The week's quality band on its shown (4 dp) coverage and gap ratio: low coverage first, then a long gap, then
    healthy (coverage and gap within the answer limits, and clean), else marginal."""
    coverage = round(q.coverage, 4)
    ratio = None if q.gap_ratio is None else round(q.gap_ratio, 4)
    if coverage < limits["coverage_abstain"]:
        return "low_coverage"
    if ratio is None or ratio > limits["gap_ratio_abstain_window"]:
        return "long_gap"
    if coverage >= limits["coverage_answer"] and ratio <= limits["gap_ratio_answer"] and q.clean:
        return "healthy"
    return "marginal"
