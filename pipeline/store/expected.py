"""Streams absent by design: when a declared stream is expected to report ([[silence]] in its mapping: a local
schedule, or daylight at the site), and its coverage, gaps and expected counts over those hours only.

The one home of the rule: the store decides its windows and whole streams with it, the tools their custom windows
and lookups. A stream without a declaration never comes here, so it is computed exactly as before. Expected time is
a union of [start, end) intervals in integer microseconds, so every measure of it is exact integer arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import polars as pl
from pydantic import TypeAdapter

from contracts.corpus_metadata import WEEKDAYS, NightSilence, ScheduleSilence, Silence, hour_range
from pipeline.core import patterns
from pipeline.core.errors import StageError
from pipeline.core.timeunits import DAY_US

TABLE = "expected_hours"  # the store table of the declared streams' rules; written only when a corpus declares any
DAY = DAY_US
MINUTE = 60_000_000
MARGIN = 2 * DAY  # intervals are computed this far around a span, so that a day straddling its edge is whole
RULE = TypeAdapter(Silence)


@dataclass(frozen=True)
class Declared:
    """A corpus's [[silence]] declarations and what resolving them to streams needs."""

    declarations: tuple
    timezone: str  # the mapping's time.timezone: a schedule's zone when it names none
    corpus: str

    def resolve(self, stream_ids: list[str]) -> dict[str, Silence]:
        return rules_for(list(self.declarations), stream_ids, self.corpus, self.timezone)


def rules_for(declared: list, stream_ids: list[str], corpus: str, timezone: str) -> dict[str, Silence]:
    """Each declared stream's rule (a schedule without a zone takes the corpus's), refused in one line when a
    declaration matches no stream or a stream matches two."""
    rules: dict[str, Silence] = {}
    for index, rule in enumerate(declared):
        matched = [sid for sid in stream_ids if patterns.fullmatch(rule.streams, sid, f"silence[{index}] streams")]
        if not matched:
            raise StageError(
                f"configs/corpora/{corpus}.toml: silence[{index}] streams {rule.streams!r} matches no stream; fix the "
                "regex (it must match whole stream ids)"
            )
        rule = completed(rule, timezone)
        if isinstance(rule, ScheduleSilence):
            _zone(rule.timezone, corpus, index)
        for sid in matched:
            if sid in rules:
                raise StageError(
                    f"configs/corpora/{corpus}.toml: stream {sid} matches silence[{index}] and an earlier declaration; "
                    "a stream may match one at most"
                )
            rules[sid] = rule
    return rules


def completed(rule: Silence, timezone: str) -> Silence:
    """The rule with a schedule's zone filled in: the mapping's time.timezone when it names none."""
    if isinstance(rule, ScheduleSilence) and rule.timezone is None:
        return rule.model_copy(update={"timezone": timezone})
    return rule


def _zone(name: str, corpus: str = "?", index: int = 0) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise StageError(
            f"configs/corpora/{corpus}.toml: silence[{index}] timezone {name!r} is not an IANA zone (e.g. "
            "'Europe/Berlin')"
        ) from None


def encode(rule: Silence) -> str:
    """The rule as the store keeps it (JSON), read back by `decode`."""
    return rule.model_dump_json()


def decode(text: str) -> Silence:
    return RULE.validate_json(text)


def says(rule: Silence) -> str:
    """The rule in one line, as the tools and the dataset card say it."""
    if isinstance(rule, NightSilence):
        lat = f"{abs(rule.latitude):g}{'N' if rule.latitude >= 0 else 'S'}"
        lon = f"{abs(rule.longitude):g}{'E' if rule.longitude >= 0 else 'W'}"
        when = f"expected while the sun is at least {rule.sun_above_deg:g} degrees above the horizon at {lat} {lon}"
    else:
        days = "every day" if len(rule.weekdays) == 7 else ", ".join(rule.weekdays)
        when = f"expected {', '.join(rule.hours)} ({rule.timezone}), {days}"
    return f"{when}; silent otherwise: {rule.reason}"


# ---------------------------------------------------------------- the sun (NOAA's solar calculator equations)


def _sun(ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sun's declination (degrees) and the equation of time (minutes) at microsecond times, by the equations of
    NOAA's solar calculator (after Meeus, Astronomical Algorithms); about a minute of sunrise from 1800 to 2100."""
    jc = (ts / DAY + 2440587.5 - 2451545.0) / 36525.0
    mean_long = np.mod(280.46646 + jc * (36000.76983 + jc * 0.0003032), 360.0)
    anomaly = 357.52911 + jc * (35999.05029 - 0.0001537 * jc)
    ecc = 0.016708634 - jc * (0.000042037 + 0.0000001267 * jc)
    m = np.radians(anomaly)
    centre = (
        np.sin(m) * (1.914602 - jc * (0.004817 + 0.000014 * jc))
        + np.sin(2 * m) * (0.019993 - 0.000101 * jc)
        + np.sin(3 * m) * 0.000289
    )
    omega = np.radians(125.04 - 1934.136 * jc)
    apparent = np.radians(mean_long + centre - 0.00569 - 0.00478 * np.sin(omega))
    obliquity = np.radians(
        23.0
        + (26.0 + (21.448 - jc * (46.815 + jc * (0.00059 - jc * 0.001813))) / 60.0) / 60.0
        + 0.00256 * np.cos(omega)
    )
    declination = np.degrees(np.arcsin(np.sin(obliquity) * np.sin(apparent)))
    y = np.tan(obliquity / 2) ** 2
    long_r = np.radians(mean_long)
    eot = 4.0 * np.degrees(
        y * np.sin(2 * long_r)
        - 2 * ecc * np.sin(m)
        + 4 * ecc * y * np.sin(m) * np.cos(2 * long_r)
        - 0.5 * y * y * np.sin(4 * long_r)
        - 1.25 * ecc * ecc * np.sin(2 * m)
    )
    return declination, eot


def sun_elevation(latitude: float, longitude: float, ts: np.ndarray) -> np.ndarray:
    """Geometric elevation of the sun's centre (degrees, no refraction) at the site, at microsecond UTC times."""
    ts = np.asarray(ts, dtype=np.int64)
    declination, eot = _sun(ts.astype(np.float64))
    minutes = np.mod(ts, DAY) / MINUTE
    hour_angle = np.radians(np.mod(minutes + eot + 4.0 * longitude, 1440.0) / 4.0 - 180.0)
    lat, dec = np.radians(latitude), np.radians(declination)
    cos_zenith = np.sin(lat) * np.sin(dec) + np.cos(lat) * np.cos(dec) * np.cos(hour_angle)
    return 90.0 - np.degrees(np.arccos(np.clip(cos_zenith, -1.0, 1.0)))


def _daylight(rule: NightSilence, lo: int, hi: int) -> np.ndarray:
    """[rise, set) of every day around [lo, hi): the sun at or above the threshold, from NOAA's hour angle at the
    threshold, with the declination and equation of time of that day's solar noon."""
    days = np.arange(lo // DAY - 1, hi // DAY + 2, dtype=np.int64) * DAY
    noon_guess = days + np.int64(round((720.0 - 4.0 * rule.longitude) * MINUTE))
    declination, eot = _sun(noon_guess.astype(np.float64))
    lat, dec = np.radians(rule.latitude), np.radians(declination)
    cos_h = np.sin(np.radians(rule.sun_above_deg)) / (np.cos(lat) * np.cos(dec)) - np.tan(lat) * np.tan(dec)
    half = np.degrees(np.arccos(np.clip(cos_h, -1.0, 1.0))) * 4.0  # minutes: 0 in polar night, 720 in polar day
    noon = 720.0 - 4.0 * rule.longitude - eot
    rise = days + np.rint((noon - half) * MINUTE).astype(np.int64)
    sets = days + np.rint((noon + half) * MINUTE).astype(np.int64)
    keep = cos_h < 1.0  # some of the day above the threshold
    return np.stack([rise[keep], sets[keep]], axis=1)


def _scheduled(rule: ScheduleSilence, lo: int, hi: int) -> np.ndarray:
    """[start, end) of every scheduled range of every local day around [lo, hi), in UTC (zoneinfo's offsets; a
    local time skipped or repeated by a clock change takes the offset before the change)."""
    zone, ranges = _zone(rule.timezone), [hour_range(text) for text in rule.hours]
    wanted = {WEEKDAYS.index(day) for day in rule.weekdays}
    first = datetime.fromtimestamp(lo // DAY * 86400, UTC).date() - timedelta(days=1)
    spans = []
    for offset in range((hi - lo) // DAY + 4):
        day = first + timedelta(days=offset)
        if day.weekday() not in wanted:
            continue
        midnight = datetime(day.year, day.month, day.day, tzinfo=zone)
        for start, end in ranges:
            spans.append([_us(midnight + timedelta(minutes=start)), _us(midnight + timedelta(minutes=end))])
    return np.array(spans, dtype=np.int64).reshape(-1, 2)


def _us(moment: datetime) -> int:
    return int(moment.timestamp()) * 1_000_000


# ---------------------------------------------------------------- expected time


@dataclass(frozen=True)
class Expected:
    """The expected hours of one rule over a span: sorted disjoint [start, end) intervals and the expected time
    before each, so that the expected time up to any instant is one binary search."""

    starts: np.ndarray
    ends: np.ndarray
    before: np.ndarray  # expected time before each interval (since the span's start)

    @classmethod
    def over(cls, rule: Silence, lo: int, hi: int) -> Expected:
        """The rule's intervals around [lo, hi] (a margin of days either side), overlapping ones merged."""
        lo, hi = int(lo) - MARGIN, int(hi) + MARGIN
        spans = _daylight(rule, lo, hi) if isinstance(rule, NightSilence) else _scheduled(rule, lo, hi)
        spans = spans[np.argsort(spans[:, 0], kind="stable")] if len(spans) else spans
        merged: list[list[int]] = []
        for start, end in spans.tolist():
            if end <= start:
                continue
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        array = np.array(merged, dtype=np.int64).reshape(-1, 2)
        lengths = array[:, 1] - array[:, 0]
        return cls(array[:, 0], array[:, 1], np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64))

    def upto(self, ts: np.ndarray) -> np.ndarray:
        """Expected time from the span's start up to each instant (integer microseconds, non-decreasing)."""
        ts = np.asarray(ts, dtype=np.int64)
        if not len(self.starts):  # polar night, or no scheduled day in the span
            return np.zeros(ts.shape, dtype=np.int64)
        k = np.searchsorted(self.starts, ts, "right") - 1
        inside = np.clip(
            ts - self.starts[np.maximum(k, 0)], 0, self.ends[np.maximum(k, 0)] - self.starts[np.maximum(k, 0)]
        )
        return np.where(k >= 0, self.before[np.maximum(k, 0)] + inside, 0)

    def inside(self, ts: np.ndarray) -> np.ndarray:
        """Whether each instant lies in the expected hours."""
        ts = np.asarray(ts, dtype=np.int64)
        if not len(self.starts):
            return np.zeros(ts.shape, dtype=bool)
        k = np.searchsorted(self.starts, ts, "right") - 1
        return (k >= 0) & (ts < self.ends[np.maximum(k, 0)])

    def counted(self, ts: np.ndarray, steps: np.ndarray | int) -> np.ndarray:
        """Whether each reading counts towards the expected hours: its slot, half a step either side, overlaps them.
        A logger at a fixed cadence cannot start on the second the hours do, and one that reads through them fills
        them (coverage 1); a reading deep in the silent hours counts for nothing."""
        ts = np.asarray(ts, dtype=np.int64)
        half = np.asarray(steps, dtype=np.int64) // 2
        return self.upto(ts + half) > self.upto(ts - half)


def window(exp: Expected, ts: np.ndarray, start: int, end: int, step_us: int | None) -> dict:
    """Coverage, longest gap, gap ratio and expected count of the window [start, end) over the expected hours only:
    `ts` are the stream's sorted times inside the window (at least one). A window without expected hours has nothing
    missing (coverage 1, no gap)."""
    ts = np.asarray(ts, dtype=np.int64)
    at = exp.upto(ts)
    low, high = (int(v) for v in exp.upto(np.array([start, end], dtype=np.int64)))
    gaps = [int(at[0]) - low, high - int(at[-1])]
    if len(at) > 1:
        gaps.append(int(np.max(np.diff(at))))
    longest = max(gaps)
    step = float(step_us) if step_us else 0.0
    count = int(np.count_nonzero(exp.counted(ts, int(step_us)))) if step > 0 else 0
    if step <= 0:
        return {"coverage": 0.0, "longest_gap_us": longest, "gap_ratio": None, "expected_count": 0.0}
    expected = (high - low) / step
    return {
        "coverage": min(1.0, count / expected) if expected > 0 else 1.0,
        "longest_gap_us": longest,
        "gap_ratio": longest / step,
        "expected_count": expected,
    }


def expected_count(rule: Silence, start: int, end: int, step_us: int | None) -> float:
    """Readings expected in [start, end) at the step: its expected time over the step (0 without a step)."""
    if not step_us:
        return 0.0
    exp = Expected.over(rule, start, end)
    low, high = (int(v) for v in exp.upto(np.array([start, end], dtype=np.int64)))
    return (high - low) / float(step_us)


def stream(exp: Expected, ts: np.ndarray, local_steps: np.ndarray) -> dict:
    """Whole-stream figures over the expected hours: readings that count towards them (`Expected.counted`, at their
    local step), expected count (1 + the sum of each gap's expected time over its local step, the store's rule) and
    the longest gap of expected time."""
    ts = np.asarray(ts, dtype=np.int64)
    gaps = np.diff(exp.upto(ts))
    steps = np.asarray(local_steps, dtype=np.float64)
    local = steps[1:]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(local > 0, gaps / local, 0.0)
    return {
        "n_expected": int(np.count_nonzero(exp.counted(ts, np.nan_to_num(steps).astype(np.int64)))),
        "expected": 1.0 + float(np.sum(ratio)),
        "longest_gap_us": int(gaps.max()) if len(gaps) else None,
    }


# ---------------------------------------------------------------- the store's tables of declared streams

SPAN_MARGIN = 32 * DAY  # a calendar month holding a stream's first or last reading reaches this far past it
PARTS_SCHEMA = {"stream_id": pl.Int32, "n_expected": pl.Int64, "expected": pl.Float64, "longest_gap_us": pl.Int64}


def adjust_unit(
    obs: pl.DataFrame, ids: list[str], aggregates: pl.DataFrame, rules: dict[str, Silence]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A store unit's aggregates with the coverage, longest gap and gap ratio of its declared streams' windows over
    their expected hours, and those streams' whole-stream parts (`adjust_quality`). Streams are integer codes (the
    index in `ids`), as in the unit."""
    codes = obs["stream_id"].to_numpy()
    ts_all, local = obs["ts"].to_numpy(), obs["step_us"].cast(pl.Float64).fill_null(0.0).to_numpy()
    rows = aggregates.with_row_index("_row")
    updates: dict[str, list] = {"_row": [], "coverage": [], "longest_gap_us": [], "gap_ratio": []}
    parts = []
    for code, sid in enumerate(ids):
        if sid not in rules:
            continue
        lo, hi = np.searchsorted(codes, [code, code + 1], "left")
        ts = ts_all[lo:hi]
        if not len(ts):
            continue
        exp = Expected.over(rules[sid], int(ts[0]) - SPAN_MARGIN, int(ts[-1]) + SPAN_MARGIN)
        mine = rows.filter(pl.col("stream_id") == code).select("_row", "window_start", "window_end", "step_us")
        for row, start, end, step in mine.iter_rows():
            first, last = np.searchsorted(ts, [start, end], "left")
            found = window(exp, ts[first:last], start, end, step)
            for name in ("coverage", "longest_gap_us", "gap_ratio"):
                updates[name].append(found[name])
            updates["_row"].append(row)
        parts.append({"stream_id": code, **stream(exp, ts, local[lo:hi])})
    if updates["_row"]:
        index = pl.Series(updates["_row"], dtype=pl.UInt32)
        aggregates = aggregates.with_columns(
            aggregates[name].scatter(index, pl.Series(updates[name], dtype=aggregates.schema[name]))
            for name in ("coverage", "longest_gap_us", "gap_ratio")
        )
    return aggregates, pl.DataFrame(parts, schema=PARTS_SCHEMA)


def adjust_quality(quality: pl.DataFrame, parts: pl.DataFrame | None) -> pl.DataFrame:
    """Whole-stream coverage, expected count, longest gap and gap ratio of the declared streams (their `parts`, by
    stream id) over their expected hours; every other row as it was."""
    if parts is None or parts.height == 0:
        return quality
    joined = quality.join(parts.rename(lambda c: f"_{c}" if c != "stream_id" else c), on="stream_id", how="left")
    declared, step = pl.col("_expected").is_not_null(), pl.col("step_us").cast(pl.Float64)
    return joined.with_columns(
        coverage=pl.when(~declared)
        .then(pl.col("coverage"))
        .when(step > 0)
        .then(pl.min_horizontal(pl.lit(1.0), pl.col("_n_expected") / pl.col("_expected")))
        .otherwise(0.0),
        expected_count=pl.when(declared).then(pl.col("_expected")).otherwise(pl.col("expected_count")),
        longest_gap_us=pl.when(declared).then(pl.col("_longest_gap_us")).otherwise(pl.col("longest_gap_us")),
        gap_ratio=pl.when(~declared)
        .then(pl.col("gap_ratio"))
        .when(step > 0)
        .then(pl.col("_longest_gap_us") / step)
        .otherwise(None),
    ).select(quality.columns)


def table(rules: dict[str, Silence]) -> pl.DataFrame:
    """The `expected_hours` store table: each declared stream's rule (JSON) and what it says."""
    return pl.DataFrame(
        {
            "stream_id": sorted(rules),
            "rule": [encode(rules[sid]) for sid in sorted(rules)],
            "says": [says(rules[sid]) for sid in sorted(rules)],
        },
        schema={"stream_id": pl.String, "rule": pl.String, "says": pl.String},
    )
