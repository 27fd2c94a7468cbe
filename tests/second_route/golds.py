"""Each family's and phase type's gold by its one-sentence definition (configs/families.toml `definition`,
docs/tasks.md), computed from the cleaned raw streams. A phase's calls give only what its question says: the point
(site, class, equipment), the window or the instant; what is computed there is decided here by the family.

Amount streams (a unit of energy, volume or mass: kWh, MWh, L) follow the meter definitions of issue 51: a window's
consumption is the register difference between its last and first reading (a counter) or the sum of its interval
amounts (an interval meter); its level statistics are rates per hour."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path

import numpy as np
import pint

from tests.second_route import daylight, windows
from tests.second_route.clean import Stream

HOUR_US = 3_600_000_000
UNITS = pint.UnitRegistry()
AMOUNT_DIMENSIONS = ("[energy]", "[volume]", "[mass]")
BAND_OUTCOME = {
    "healthy": ("answer", "healthy_quality"),
    "low_coverage": ("abstain", "low_coverage"),
    "long_gap": ("abstain", "long_gap"),
    "marginal": ("re_clarify", "marginal_quality"),
}


def instant(text: str) -> int:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return int(moment.astimezone(UTC).timestamp()) * 1_000_000 + moment.microsecond


def iso(us: int) -> str:
    return datetime.fromtimestamp(us // 1_000_000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Quantity:
    """A number and the pint unit it is in (None: a plain number or a unitless code)."""

    value: float | None
    unit: str | None


class Corpus:
    """One corpus's cleaned streams and everything a gold is defined over."""

    def __init__(self, root: Path, streams: dict[str, Stream], silence: list[dict] | None = None) -> None:
        self.streams = streams
        settings = windows.store_settings(root)
        self.steps = {sid: windows.local_steps(s.ts, settings["step_window"]) for sid, s in streams.items()}
        # the mapping's [[silence]]: streams measured over their expected hours only
        self.hours = daylight.declared_hours(silence or [], {sid: s.ts for sid, s in streams.items()})
        self.limits = windows.thresholds(streams, self.steps, self.hours, settings)
        answers = tomllib.loads((root / "configs" / "answers.toml").read_text(encoding="utf-8"))
        self.pint_of = {code: spec["pint"] for code, spec in answers["units"].items()}
        episodes = tomllib.loads((root / "configs" / "episodes.toml").read_text(encoding="utf-8"))
        self.acceptable_s = float(episodes["acceptable_offset_seconds"])

    # ------------------------------------------------------------------ points
    def resolve(self, site: str, point_class: str, equipment: str | None) -> str | None:
        """The one stream at the site of the class (and equipment, when named); None unless exactly one."""
        found = [
            sid
            for sid, s in self.streams.items()
            if len(s.ts)
            and s.point.site_id == site
            and s.point.point_class == point_class
            and (equipment is None or s.point.equipment == equipment)
        ]
        return found[0] if len(found) == 1 else None

    def unit(self, sid: str) -> str | None:
        code = self.streams[sid].point.unit
        return self.pint_of.get(code) if code else None

    def is_amount(self, sid: str) -> bool:
        unit = self.unit(sid)
        return unit is not None and any(UNITS.Quantity(1, unit).check(d) for d in AMOUNT_DIMENSIONS)

    @cached_property
    def amount_streams(self) -> set[str]:
        return {sid for sid in self.streams if self.is_amount(sid)}

    # ------------------------------------------------------------------ windows
    def _window(self, sid: str, start: int, end: int) -> tuple[int, int]:
        lo, hi = np.searchsorted(self.streams[sid].ts, [start, end])
        return int(lo), int(hi)

    def intervals_h(self, sid: str) -> np.ndarray:
        """The interval each reading's amount covers, in hours: since the previous stored reading for a counter (the
        local step for its first), the local step for an interval meter."""
        s, steps = self.streams[sid], self.steps[sid]
        if not s.is_counter:
            return steps / HOUR_US
        since = np.r_[steps[:1], np.diff(s.ts)].astype(np.float64)
        return since / HOUR_US

    def consumption(self, sid: str, start: int, end: int) -> Quantity:
        """What the meter recorded in the window: a counter's register difference between its last and first reading
        there (its amounts but the first), an interval meter's amounts summed."""
        lo, hi = self._window(sid, start, end)
        if hi <= lo:
            return Quantity(None, self.unit(sid))
        first = lo + 1 if self.streams[sid].is_counter else lo
        return Quantity(float(np.sum(self.streams[sid].value[first:hi])), self.unit(sid))

    def mean(self, sid: str, start: int, end: int) -> Quantity:
        """The mean of the readings in the window; for an amount stream, its rate per hour: the consumption over the
        hours its readings cover (a counter: last - first reading; an interval meter: the readings' intervals)."""
        lo, hi = self._window(sid, start, end)
        if hi <= lo:
            return Quantity(None, None)
        s = self.streams[sid]
        if not self.is_amount(sid):
            return Quantity(float(np.mean(s.value[lo:hi])), self.unit(sid))
        rate_unit = f"({self.unit(sid)}) / hour"
        if s.is_counter:
            if hi - lo == 1:
                return Quantity(float(s.value[lo] / self.intervals_h(sid)[lo]), rate_unit)
            hours = (s.ts[hi - 1] - s.ts[lo]) / HOUR_US
            return Quantity(self.consumption(sid, start, end).value / hours, rate_unit)
        hours = float(np.sum(self.steps[sid][lo:hi])) / HOUR_US
        return Quantity(float(np.sum(s.value[lo:hi])) / hours, rate_unit)

    def baseload(self, sid: str, start: int, end: int) -> Quantity:
        """The lowest reading of the window; for an amount stream its lowest rate per hour."""
        lo, hi = self._window(sid, start, end)
        s = self.streams[sid]
        if not self.is_amount(sid):
            return Quantity(float(np.min(s.value[lo:hi])), self.unit(sid))
        rates = s.value[lo:hi] / self.intervals_h(sid)[lo:hi]
        return Quantity(float(np.min(rates)), f"({self.unit(sid)}) / hour")

    def week_band(self, sid: str, start: int, end: int) -> str | None:
        q = windows.quality(self.streams[sid], self.steps[sid], start, end, self.hours.get(sid))
        return None if q is None else windows.band(q, self.limits)

    def shown_quality(self, sid: str, start: int, end: int) -> tuple[float, float | None]:
        """(coverage, gap ratio) as inspect_quality_window shows them (4 dp); no reading: no coverage."""
        q = windows.quality(self.streams[sid], self.steps[sid], start, end, self.hours.get(sid))
        if q is None:
            return 0.0, None
        return round(q.coverage, 4), None if q.gap_ratio is None else round(q.gap_ratio, 4)

    # ------------------------------------------------------------------ readings
    def reading(self, sid: str, at: int, nearest: bool) -> dict | None:
        """The reading at the instant, else (nearest) the closest one (the earlier of two as close): its value (an
        amount for an amount stream), time, signed offset in seconds and why it is not exact."""
        ts = self.streams[sid].ts
        i = int(np.searchsorted(ts, at))
        exact = i < len(ts) and int(ts[i]) == at
        if not exact and not nearest:
            return None
        if not exact:
            i = i - 1 if i == len(ts) or (i > 0 and at - ts[i - 1] <= ts[i] - at) else i
        return {
            "value": Quantity(float(self.streams[sid].value[i]), self.unit(sid)),
            "observed_timestamp": iso(int(ts[i])),
            "offset_seconds": Quantity((int(ts[i]) - at) / 1e6, "second"),
            "fallback_reason": None if exact else "nearest_observation",
        }

    def reading_commitment(self, sid: str, at: int) -> tuple[str, str]:
        """Report a reading when one is at the instant or within the acceptable offset; ask for a more precise time
        when the nearest is within gap_ratio_abstain_window whole-stream steps; else abstain (a long gap). Asking again
        or abstaining is about a missing reading, so for a stream silent by design it is defined only inside its
        expected hours (docs/episodes.md): outside them no reading is missing, and no such gold is defined."""
        decision = self._offset_commitment(sid, at)
        hours = self.hours.get(sid)
        if decision[0] != "answer" and hours is not None and not hours.inside(np.array([at]))[0]:
            return "undefined", "absent_by_design"
        return decision

    def _offset_commitment(self, sid: str, at: int) -> tuple[str, str]:
        offset = round(abs(self.reading(sid, at, nearest=True)["offset_seconds"].value), 3)  # as shown
        step_s = round((windows.stream_step(self.streams[sid].ts) or 0) / 1e6, 3)
        if offset == 0:
            return "answer", "exact_timestamp"
        if offset <= self.acceptable_s:
            return "answer", "nearest_but_acceptable"
        if offset <= step_s * self.limits["gap_ratio_abstain_window"]:
            return "re_clarify", "timestamp_too_imprecise"
        return "abstain", "long_gap"
