"""The eight telemetry tools as plain functions of (store, validated input) -> result.

A problem the agent can fix raises ToolFailure; the registry turns it into a ToolError result.
"""

from __future__ import annotations

import numpy as np

from contracts.tools import (
    AggregateWindowInput,
    AggregateWindowResult,
    CompareSide,
    CompareWindowInput,
    CompareWindowResult,
    InspectQualityInput,
    InspectQualityResult,
    InspectQualityWindowInput,
    InspectQualityWindowResult,
    ListPointsInput,
    ListPointsResult,
    LookupObservationInput,
    LookupObservationResult,
    Point,
    RankedStream,
    RankWindowInput,
    RankWindowResult,
    ResolvePointInput,
    ResolvePointResult,
    Thresholds,
    Window,
    WindowInput,
)
from pipeline.core.errors import TimestampError, ToolFailure
from pipeline.store import bands, compute, expected
from pipeline.tools import rounding
from pipeline.tools.access import StreamArrays, ToolStore, compact
from pipeline.tools.timeutil import format_us, parse_us


def _time(text: str, argument: str) -> int:
    try:
        return parse_us(text)
    except TimestampError as exc:
        raise ToolFailure(exc.code, str(exc), argument) from None


def _stream(store: ToolStore, stream_id: str, argument: str = "stream_id") -> dict:
    row = store.streams.get(stream_id)
    if row is None:
        raise ToolFailure(
            "unknown_stream", f"no stream {stream_id!r}; find stream ids with resolve_point or list_points", argument
        )
    if not row["tool_ready"]:
        raise ToolFailure("empty_stream", f"stream {stream_id!r} has no observations", argument)
    return row


def _site(store: ToolStore, text: str) -> str:
    site_id = store.site_id(text)
    if site_id is None:
        known = ", ".join(sorted(store.sites)[:20])
        raise ToolFailure("unknown_site", f"no site {text!r}; sites are {known}", "site")
    return site_id


def _point(row: dict) -> Point:
    return Point(**{k: row[k] for k in Point.model_fields})


def _tail(query: str | None, row: dict, column: str) -> bool:
    """The query's words (compacted) equal the last words of the column: 'primary loop' ~ 'L8.primary_loop'."""
    return compact(query) in row["_tails"][column]


def _same(query: str | None, row: dict, column: str) -> bool:
    return compact(query) == row["_keys"][column]


def resolve_point(store: ToolStore, args: ResolvePointInput) -> ResolvePointResult:
    site_id = _site(store, args.site)
    matches = [
        row
        for row in store.streams.values()
        if row["site_id"] == site_id
        and row["tool_ready"]
        and _same(args.point_class, row, "point_class")
        and (
            args.equipment is None
            or _tail(args.equipment, row, "equipment")
            or _same(args.equipment, row, "equipment_type")
        )
        and (args.location is None or _tail(args.location, row, "location"))
    ]
    return ResolvePointResult(
        match_count=len(matches),
        matches=[_point(r) for r in matches],
        stream_id=matches[0]["stream_id"] if len(matches) == 1 else None,
    )


def list_points(store: ToolStore, args: ListPointsInput) -> ListPointsResult:
    site_id = _site(store, args.site)
    rows = [
        row
        for row in store.streams.values()
        if row["site_id"] == site_id
        and row["tool_ready"]
        and (args.point_class is None or _same(args.point_class, row, "point_class"))
        and (
            args.equipment_type is None
            or _same(args.equipment_type, row, "equipment_type")
            or _tail(args.equipment_type, row, "equipment")
        )
        and (args.location_type is None or _tail(args.location_type, row, "location"))
    ]
    return ListPointsResult(
        site_id=site_id, stream_ids=[r["stream_id"] for r in rows], points=[_point(r) for r in rows]
    )


def _window(args: WindowInput) -> tuple[int, int, Window]:
    start, end = _time(args.window_start, "window_start"), _time(args.window_end, "window_end")
    if end <= start:
        raise ToolFailure(
            "invalid_window", "window_end must be after window_start (windows are [start, end))", "window_end"
        )
    if args.period != "custom":
        bounds = compute.window_bounds(np.array([start], dtype=np.int64), args.period)
        if int(bounds[0][0]) != start or int(bounds[1][0]) != end:
            raise ToolFailure(
                "misaligned_window",
                f"a {args.period} window runs from {format_us(int(bounds[0][0]))} to {format_us(int(bounds[1][0]))} "
                f"(UTC); "
                "use those bounds or period 'custom'",
                "window_start",
            )
    return start, end, Window(window_start=format_us(start), window_end=format_us(end), period=args.period)


def _kind(store: ToolStore, stream_id: str) -> int:
    """What the stream's readings are (compute.LEVEL, INTERVAL or COUNTER): its row in the store says."""
    row = store.streams[stream_id]
    if row.get("rate_unit") is None:
        return compute.LEVEL
    return compute.COUNTER if row.get("is_counter") else compute.INTERVAL


def _unit(store: ToolStore, stream_id: str, metric: str) -> str | None:
    """The unit of a statistic: none for a count, the stream's for a sum, its rate's for a meter's level statistics."""
    row = store.streams[stream_id]
    if metric == "count":
        return None
    return row.get("unit") if metric == "sum" else row.get("rate_unit") or row.get("unit")


def _stats(
    store: ToolStore, stream_id: str, start: int, end: int, period: str, arrays: StreamArrays | None = None
) -> dict | None:
    """A window's statistics: the stored row of a calendar window, or computed for a custom one (from `arrays`, the
    stream's rows that store.window gives, when the caller read them already)."""
    if period != "custom":
        return store.aggregate(stream_id, period, start)
    arrays = arrays if arrays is not None else store.window(stream_id, start, end)
    stats = compute.window_stats(
        arrays.ts, arrays.value, arrays.step, start, end, store.settings["std_ddof"], _kind(store, stream_id)
    )  # the store's own ddof
    return _over_expected_hours(store, stream_id, stats, arrays.ts, start, end)


def _over_expected_hours(
    store: ToolStore, stream_id: str, stats: dict | None, ts: np.ndarray, start: int, end: int
) -> dict | None:
    """A custom window of a stream absent by design: its coverage and gaps over the expected hours only, as the store
    decides its calendar windows (pipeline/store/expected.py); any other stream's statistics as they are."""
    rule = store.expected_hours.get(stream_id)
    if rule is None or stats is None:
        return stats
    inside = ts[(ts >= start) & (ts < end)]
    found = expected.window(expected.Expected.over(rule, start, end), inside, start, end, stats["step_us"])
    return {**stats, **{k: found[k] for k in ("coverage", "longest_gap_us", "gap_ratio")}}


def _expected_count(store: ToolStore, stream_id: str, start: int, end: int, step: int | None) -> float:
    """Readings expected in [start, end) at the window's step: over the expected hours only for a stream absent by
    design."""
    rule = store.expected_hours.get(stream_id)
    if rule is None:
        return (end - start) / step if step else 0.0
    return expected.expected_count(rule, start, end, step)


def _metric(stats: dict, metric: str) -> float:
    if metric == "count":
        return float(stats["count"])
    if metric == "sum":  # what the window's readings add up to (a meter's consumption: docs/store.md, "Meters")
        return rounding.value(stats["total"])
    return rounding.value(stats[metric] if stats[metric] is not None else float("nan"))


def _required_stats(store: ToolStore, stream_id: str, start: int, end: int, period: str, argument: str) -> dict:
    stats = _stats(store, stream_id, start, end, period)
    if stats is None:
        raise ToolFailure(
            "empty_window",
            f"stream {stream_id!r} has no observations in [{format_us(start)}, {format_us(end)})",
            argument,
        )
    if stats.get("std") is None:
        stats = {**stats, "std": None}
    return stats


def aggregate_window(store: ToolStore, args: AggregateWindowInput) -> AggregateWindowResult:
    _stream(store, args.stream_id)
    start, end, window = _window(args)
    stats = _required_stats(store, args.stream_id, start, end, args.period, "stream_id")
    if args.metric == "std" and stats["std"] is None:
        raise ToolFailure("empty_window", "std needs more observations in this window", "metric")
    return AggregateWindowResult(
        stream_id=args.stream_id,
        window=window,
        metric=args.metric,
        value=_metric(stats, args.metric),
        unit=_unit(store, args.stream_id, args.metric),
        count=int(stats["count"]),
        mean=rounding.value(stats["mean"]),
        std=rounding.value(stats["std"]),
        min=rounding.value(stats["min"]),
        max=rounding.value(stats["max"]),
    )


def compare_window(store: ToolStore, args: CompareWindowInput) -> CompareWindowResult:
    _stream(store, args.left_stream_id, "left_stream_id")
    _stream(store, args.right_stream_id, "right_stream_id")
    start, end, window = _window(args)
    sides = []
    for stream_id, argument in ((args.left_stream_id, "left_stream_id"), (args.right_stream_id, "right_stream_id")):
        stats = _required_stats(store, stream_id, start, end, args.period, argument)
        sides.append(
            CompareSide(
                stream_id=stream_id,
                value=_metric(stats, args.metric),
                unit=_unit(store, stream_id, args.metric),
                count=int(stats["count"]),
            )
        )
    left, right = sides
    tie = left.value == right.value
    winner = None if tie else (left.stream_id if left.value > right.value else right.stream_id)
    return CompareWindowResult(
        window=window,
        metric=args.metric,
        left=left,
        right=right,
        winning_stream_id=winner,
        tie=tie,
        difference=rounding.value(left.value - right.value),
    )


def rank_window(store: ToolStore, args: RankWindowInput) -> RankWindowResult:
    for index, stream_id in enumerate(args.stream_ids):
        _stream(store, stream_id, f"stream_ids[{index}]")
    start, end, window = _window(args)
    scored, empty = [], []
    streams = list(dict.fromkeys(args.stream_ids))
    read = store.windows(streams, start, end) if args.period == "custom" else {}  # one query for the large streams
    for stream_id in streams:
        stats = _stats(store, stream_id, start, end, args.period, read.get(stream_id))
        if stats is None:
            empty.append(stream_id)
        else:
            scored.append((_metric(stats, args.metric), stream_id, int(stats["count"])))
    sign = -1 if args.order == "desc" else 1
    scored.sort(key=lambda item: (sign * item[0], item[1]))  # ties: smaller stream id first
    ranked = [
        RankedStream(rank=i + 1, stream_id=s, value=v, unit=_unit(store, s, args.metric), count=n)
        for i, (v, s, n) in enumerate(scored[: args.top_k])
    ]
    return RankWindowResult(
        window=window, metric=args.metric, order=args.order, ranked_streams=ranked, without_data=sorted(empty)
    )


def nearest_index(ts: np.ndarray, at: int) -> int:
    """Index of the observation closest to `at` in sorted, non-empty `ts`; a tie goes to the earlier one."""
    after = int(np.searchsorted(ts, at, "left"))
    if after == 0:
        return 0
    if after == len(ts):
        return len(ts) - 1
    return after - 1 if at - int(ts[after - 1]) <= int(ts[after]) - at else after


def lookup_observation(store: ToolStore, args: LookupObservationInput) -> LookupObservationResult:
    _stream(store, args.stream_id)
    at = _time(args.timestamp, "timestamp")
    arrays = store.around(args.stream_id, at)
    index = int(np.searchsorted(arrays.ts, at, "left"))
    exact = index < len(arrays.ts) and int(arrays.ts[index]) == at
    base = {
        "stream_id": args.stream_id,
        "requested_timestamp": format_us(at),
        "mode": args.mode,
        "exact_match_found": exact,
    }
    if exact:
        found = index
    elif args.mode == "exact":
        return LookupObservationResult(
            **base,
            observed_timestamp=None,
            value=None,
            offset_seconds=None,
            fallback_reason="no_exact_match",
            outside_expected_hours=_outside(store, args.stream_id, at),
        )
    else:
        found = nearest_index(arrays.ts, at)
    observed = int(arrays.ts[found])
    return LookupObservationResult(
        **base,
        observed_timestamp=format_us(observed),
        value=rounding.value(arrays.value[found]),
        offset_seconds=rounding.seconds(observed - at),
        fallback_reason=None if exact else "nearest_observation",
        outside_expected_hours=None if exact else _outside(store, args.stream_id, at),
    )


def _outside(store: ToolStore, stream_id: str, at: int) -> str | None:
    """What the stream's expected hours are, when the instant lies outside them (no reading is missing there: it is
    absent by design); None for an instant inside them, or a stream without any."""
    rule = store.expected_hours.get(stream_id)
    if rule is None or bool(expected.Expected.over(rule, at, at).inside(np.array([at]))[0]):
        return None
    return f"outside the expected hours: {expected.says(rule)}"


def _says(store: ToolStore, stream_id: str) -> str | None:
    """When a stream silent by design is expected, and why it is silent otherwise (None: always expected)."""
    rule = store.expected_hours.get(stream_id)
    return expected.says(rule) if rule is not None else None


def _thresholds(store: ToolStore) -> Thresholds:
    return Thresholds(**{name: store.thresholds[name] for name in Thresholds.model_fields})


def inspect_quality(store: ToolStore, args: InspectQualityInput) -> InspectQualityResult:
    _stream(store, args.stream_id)
    q = store.quality[args.stream_id]
    return InspectQualityResult(
        stream_id=args.stream_id,
        observations=int(q["n"]),
        first_timestamp=format_us(q["first_ts"]) if q["first_ts"] is not None else None,
        last_timestamp=format_us(q["last_ts"]) if q["last_ts"] is not None else None,
        step_seconds=rounding.seconds(q["step_us"]),
        longest_gap_seconds=rounding.seconds(q["longest_gap_us"]),
        coverage=rounding.value(q["coverage"]),
        gap_ratio=rounding.value(q["gap_ratio"]),
        duplicate_fraction=rounding.value(q["duplicate_fraction"]),
        nan_fraction=rounding.value(q["nan_fraction"]),
        zero_fraction=rounding.value(q["zero_fraction"]),
        constant_fraction=rounding.value(q["constant_fraction"]),
        quality_band=q["quality_band"],
        thresholds=_thresholds(store),
        expected_hours=_says(store, args.stream_id),
    )


def window_band(store: ToolStore, coverage: float, gap_ratio: float | None, clean: bool) -> str:
    """A window's quality band by the store's rule (bands.py) on the values as shown (rounded), so an agent reading
    the result can reach the same band."""
    return bands.band(coverage, gap_ratio, clean, store.thresholds, "gap_ratio_abstain_window")


def inspect_quality_window(store: ToolStore, args: InspectQualityWindowInput) -> InspectQualityWindowResult:
    _stream(store, args.stream_id)
    start, end, window = _window(args)
    stats = _required_stats(store, args.stream_id, start, end, args.period, "stream_id")
    if args.period == "custom":
        counts = store.reject_counts(args.stream_id, start, end)
        rejected, dups, bad = sum(counts.values()), counts.get("duplicate_timestamp", 0), counts.get("non_finite", 0)
    else:
        rejected, dups, bad = stats["rejected"], stats["duplicates"], stats["non_finite"]
    total = stats["count"] + rejected
    duplicates, nans = dups / total, bad / total
    step = stats["step_us"]
    expected_count = _expected_count(store, args.stream_id, start, end, step)
    return InspectQualityWindowResult(
        stream_id=args.stream_id,
        window=window,
        count=int(stats["count"]),
        expected_count=rounding.value(expected_count),
        step_seconds=rounding.seconds(step),
        longest_gap_seconds=rounding.seconds(stats["longest_gap_us"]),
        coverage=rounding.value(stats["coverage"]),
        gap_ratio=rounding.value(stats["gap_ratio"]),
        duplicate_fraction=rounding.value(duplicates),
        nan_fraction=rounding.value(nans),
        quality_band=window_band(
            store, rounding.value(stats["coverage"]), rounding.value(stats["gap_ratio"]), duplicates == 0 and nans == 0
        ),
        thresholds=_thresholds(store),
        expected_hours=_says(store, args.stream_id),
    )
