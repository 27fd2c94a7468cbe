"""Expected hours of a stream silent by design, written again from docs/ingest.md ([[silence]], kind "night": expected
while the geometric elevation of the sun's centre, no refraction, is at least sun_above_deg at the site) and
docs/store.md "Expected hours" (what a window's coverage and gaps count).

The sun is not the product's: its NOAA solar-calculator equations (after Meeus) take each day's declination and
equation of time at solar noon and solve the hour angle at the threshold. Here the elevation comes from NREL's Solar
Position Algorithm (Reda and Andreas 2004, about 0.0003 degrees) as pvlib ships it, evaluated at the instant itself,
and each crossing of the threshold is found by bisection to the microsecond. SPA's elevation is topocentric (seen
from the site, not the Earth's centre): 8.8 arc seconds at most below the geocentric one, under a second of time at
these latitudes' sunrise."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from pvlib import spa

SECOND_US = 1_000_000
DAY_US = 86_400 * SECOND_US
GRID_US = 600 * SECOND_US  # the sun crosses a threshold at most once in 10 minutes away from the poles
PAD_US = 9 * DAY_US  # around a stream's readings: its first and last week, and a slot's half step
DELTA_T_S = 69.0  # TT - UT1 over 2016-2019 (IERS: 68.1 to 69.2 s); it moves the sun by well under an arc second


def elevation(latitude: float, longitude: float, us: np.ndarray) -> np.ndarray:
    """The sun's elevation without refraction (degrees) at the site at UTC microsecond instants (SPA, pvlib)."""
    seconds = np.asarray(us, dtype=np.int64) / SECOND_US
    # the pressure, temperature and refraction arguments feed only the refracted elevation, not e0 (index 3)
    found = spa.solar_position_numpy(seconds, latitude, longitude, 0.0, 1013.25, 12.0, DELTA_T_S, 0.5667, 0)
    return np.asarray(found[3], dtype=np.float64)


def _crossings(up, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """For each pair (lo, hi) with up(lo) != up(hi): the first microsecond after lo at which up() equals up(hi)."""
    lo, hi = lo.copy(), hi.copy()
    before = up(lo)
    while np.any(hi - lo > 1):
        mid = lo + (hi - lo) // 2
        same = up(mid) == before
        lo, hi = np.where(same, mid, lo), np.where(same, hi, mid)
    return hi


@dataclass(frozen=True)
class Hours:
    """The expected hours of one stream over a span: disjoint [start, end) intervals, in microseconds."""

    starts: np.ndarray
    ends: np.ndarray

    @classmethod
    def night_rule(cls, rule: dict, first_us: int, last_us: int) -> Hours:
        lat, lon, above = float(rule["latitude"]), float(rule["longitude"]), float(rule["sun_above_deg"])

        def up(us: np.ndarray) -> np.ndarray:
            return elevation(lat, lon, us) >= above

        grid = np.arange(first_us - PAD_US, last_us + PAD_US + GRID_US, GRID_US, dtype=np.int64)
        day = up(grid)
        change = np.flatnonzero(day[1:] != day[:-1])
        at = _crossings(up, grid[change], grid[change + 1])
        rising = day[change + 1]
        starts, ends = at[rising], at[~rising]
        if day[0]:  # the span opens in daylight (the pad keeps this edge far from any window)
            starts = np.r_[grid[0], starts]
        if day[-1]:
            ends = np.r_[ends, grid[-1]]
        assert len(starts) == len(ends) and np.all(starts < ends), "daylight intervals out of order"
        return cls(starts, ends)

    def between(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """E(a, b): the expected time in each [a, b) (microseconds; 0 when b <= a)."""
        return np.maximum(self.before(b) - self.before(a), 0)

    def before(self, t: np.ndarray) -> np.ndarray:
        """The expected time of the span before each instant."""
        t = np.asarray(t, dtype=np.int64)
        done = np.r_[0, np.cumsum(self.ends - self.starts)]  # expected time before each interval, and in all
        k = np.searchsorted(self.starts, t, side="right")  # intervals that start at or before t
        last = np.maximum(k - 1, 0)
        partial = np.where(k > 0, np.minimum(t, self.ends[last]) - self.starts[last], 0)
        return done[last] * (k > 0) + partial

    def inside(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=np.int64)
        k = np.searchsorted(self.starts, t, side="right") - 1
        return (k >= 0) & (t < self.ends[np.maximum(k, 0)])


def declared_hours(silence: list[dict], ts_of: dict[str, np.ndarray]) -> dict[str, Hours]:
    """Each declared stream's expected hours around its readings; a stream matching two declarations is an error."""
    out: dict[str, Hours] = {}
    for rule in silence:
        if rule["kind"] != "night":
            raise AssertionError(f"[[silence]] kind {rule['kind']!r} has no second route yet: write it before using it")
        for sid, ts in ts_of.items():
            if re.fullmatch(rule["streams"], sid) and len(ts):
                assert sid not in out, f"{sid} matches two [[silence]] declarations"
                out[sid] = Hours.night_rule(rule, int(ts[0]), int(ts[-1]))
    return out
