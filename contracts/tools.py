"""Inputs and outputs of the read-only telemetry tools (one toolset for every task).

Timestamps are ISO 8601 strings with a UTC offset or `Z`; results give them in UTC with `Z`.
Windows are half-open [window_start, window_end). Values are rounded to the decimals declared here
(pipeline/tools/rounding.py rounds results; the store's quality bands decide on the same rounded values).
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field

from contracts.base import Frozen

VALUE_DP = 4  # values, means, stds, coverage, ratios, fractions
OFFSET_DP = 3  # offsets and durations in seconds
Period = Literal["day", "week", "month", "custom"]
# sum: the total of the readings in the window, a meter's consumption there (its interval readings, or the per-interval
# increments its cumulative counter was differenced into at ingest).
Metric = Literal["mean", "min", "max", "std", "count", "sum"]
# The quality bands in the order they are decided (pipeline/store/bands.py): the first whose condition holds.
QualityBand = Literal["low_coverage", "long_gap", "healthy", "marginal"]
QUALITY_BANDS: tuple[str, ...] = get_args(QualityBand)
ErrorCode = Literal[
    "invalid_argument",
    "malformed_timestamp",
    "naive_timestamp",
    "unknown_stream",
    "unknown_site",
    "unknown_tool",
    "dangling_reference",
    "invalid_window",
    "misaligned_window",
    "empty_window",
    "empty_stream",
]


class ToolError(Frozen):
    """A tool call that could not be answered; an ordinary result the agent can read and act on."""

    error: Literal[True] = Field(True, description="Always true: marks an error result.")
    code: ErrorCode = Field(description="Machine-readable reason.")
    message: str = Field(description="What was wrong and how to fix the call.")
    argument: str | None = Field(None, description="The argument at fault, if one is.")


# ---------------------------------------------------------------- inputs


class ResolvePointInput(Frozen):
    """Find the stream of a point from its site, class, equipment and location."""

    # No example names a shipped corpus's site, class or stream: models copied them onto other corpora (issue 54)
    site: str = Field(description="Site id or label, as the user or list_points names it.")
    point_class: str = Field(
        description="Point class: a Brick class name, or the words the user used for the quantity."
    )
    equipment: str | None = Field(
        None, description="Equipment (id, its last words such as 'primary loop', or its type)."
    )
    location: str | None = Field(None, description="Location (id or its last words).")


class ListPointsInput(Frozen):
    """List the points (streams) of a site, optionally filtered."""

    site: str = Field(description="Site id or label.")
    point_class: str | None = Field(None, description="Only points of this class.")
    equipment_type: str | None = Field(
        None, description="Only points on equipment of this type (a Brick equipment class or its words)."
    )
    location_type: str | None = Field(None, description="Only points at this location (id or last words).")


class WindowInput(Frozen):
    """A half-open time window and its kind."""

    window_start: str = Field(description="Window start, ISO 8601 with offset or Z (inclusive).")
    window_end: str = Field(description="Window end, ISO 8601 with offset or Z (exclusive).")
    period: Period = Field(
        description="'day', 'week' (Monday 00:00 UTC), 'month' (calendar windows in UTC) or 'custom' (any window)."
    )


class AggregateWindowInput(WindowInput):
    """Statistics of one stream over a window."""

    stream_id: str = Field(description="Stream id, as resolve_point or list_points returns it.")
    metric: Metric = Field(
        "mean",
        description="Which statistic `value` reports; the others are returned too. sum: what the readings add up to "
        "(a meter's consumption; a cumulative meter's is the register difference between its first and last reading "
        "in the window); for a meter of amounts (energy, volume) mean, min, max and std are of its rate per hour.",
    )


class CompareWindowInput(WindowInput):
    """Compare two streams on one statistic over the same window."""

    left_stream_id: str = Field(description="First stream id.")
    right_stream_id: str = Field(description="Second stream id.")
    metric: Metric = Field("mean", description="Statistic to compare.")


class RankWindowInput(WindowInput):
    """Rank several streams on one statistic over the same window."""

    stream_ids: list[str] = Field(min_length=1, description="Stream ids to rank.")
    metric: Metric = Field("mean", description="Statistic to rank by.")
    order: Literal["desc", "asc"] = Field("desc", description="'desc': largest first.")
    top_k: int = Field(3, ge=1, le=1000, description="How many ranked streams to return.")


class LookupObservationInput(Frozen):
    """The observation of a stream at (or nearest to) a timestamp."""

    stream_id: str = Field(description="Stream id.")
    timestamp: str = Field(description="ISO 8601 with offset or Z; fractional seconds allowed.")
    mode: Literal["exact", "nearest"] = Field(
        "exact",
        description="'exact': only an observation at that instant; 'nearest': the closest one (a tie goes to the "
        "earlier).",
    )


class InspectQualityInput(Frozen):
    """Whole-stream data quality."""

    stream_id: str = Field(description="Stream id.")


class InspectQualityWindowInput(WindowInput):
    """Data quality of one stream over a window, with the quality decision."""

    stream_id: str = Field(description="Stream id.")


# ---------------------------------------------------------------- outputs


class Point(Frozen):
    """One point (stream) as the tools describe it."""

    stream_id: str
    site_id: str
    point_class: str
    equipment: str | None
    equipment_type: str | None
    location: str | None
    unit: str | None
    label: str


class ResolvePointResult(Frozen):
    """Matches of a point description; `stream_id` is set only when exactly one stream matches."""

    match_count: int
    matches: list[Point]
    stream_id: str | None


class ListPointsResult(Frozen):
    """The points of a site that pass the filters, sorted by stream id."""

    site_id: str
    stream_ids: list[str]
    points: list[Point]


class Window(Frozen):
    """The window a result refers to, normalized to UTC."""

    window_start: str
    window_end: str
    period: Period


class AggregateWindowResult(Frozen):
    """count, mean, std (population), min, max of the stream's observations in the window; for a meter of amounts
    (energy, volume) mean, std, min and max are of its rate per hour, and sum is what it recorded."""

    stream_id: str
    window: Window
    metric: Metric
    value: float
    unit: str | None = Field(
        None,
        description="The unit of `value`: the stream's; for a meter of amounts (energy, volume) its rate per hour "
        "(e.g. L-PER-HR, KiloW) for mean, min, max and std; none for count.",
    )
    count: int
    mean: float
    std: float | None
    min: float
    max: float


class CompareSide(Frozen):
    stream_id: str
    value: float
    unit: str | None = Field(
        None,
        description="The unit of `value`: the stream's; for a meter of amounts (energy, volume) its rate per hour "
        "(e.g. L-PER-HR, KiloW) for mean, min, max and std; none for count.",
    )
    count: int


class CompareWindowResult(Frozen):
    """Both values; the winner has the larger value (null on a tie of the rounded values)."""

    window: Window
    metric: Metric
    left: CompareSide
    right: CompareSide
    winning_stream_id: str | None
    tie: bool
    difference: float = Field(description="left value - right value.")


class RankedStream(Frozen):
    rank: int
    stream_id: str
    value: float
    unit: str | None = Field(
        None,
        description="The unit of `value`: the stream's; for a meter of amounts (energy, volume) its rate per hour "
        "(e.g. L-PER-HR, KiloW) for mean, min, max and std; none for count.",
    )
    count: int


class RankWindowResult(Frozen):
    """Streams ordered by value (ties by stream id); streams without data in the window are listed apart."""

    window: Window
    metric: Metric
    order: Literal["desc", "asc"]
    ranked_streams: list[RankedStream]
    without_data: list[str]


class LookupObservationResult(Frozen):
    """The observation found; offset_seconds = observed - requested."""

    stream_id: str
    requested_timestamp: str
    mode: Literal["exact", "nearest"]
    exact_match_found: bool
    observed_timestamp: str | None
    value: float | None
    offset_seconds: float | None
    fallback_reason: Literal["no_exact_match", "nearest_observation"] | None = Field(
        description="Exact mode without an observation at that instant: 'no_exact_match'; nearest mode away from the "
        "instant: 'nearest_observation'."
    )
    outside_expected_hours: str | None = Field(
        None,
        # Left out unless it applies: every other lookup's result stays as it was.
        exclude_if=lambda says: says is None,
        description="Set when the instant lies outside the expected hours of a stream silent by design part of the "
        "time (e.g. a PV inverter at night): no reading there is missing, it is absent by design. Says when the "
        "stream is expected and why it is silent otherwise.",
    )


class Thresholds(Frozen):
    """Quality thresholds of the corpus (quantiles recorded in the store)."""

    coverage_abstain: float
    coverage_answer: float
    gap_ratio_answer: float
    gap_ratio_abstain_window: float
    gap_ratio_abstain_stream: float


class InspectQualityResult(Frozen):
    """Whole-stream quality and its band (low_coverage, long_gap, healthy, marginal)."""

    stream_id: str
    observations: int
    first_timestamp: str | None
    last_timestamp: str | None
    step_seconds: float | None
    longest_gap_seconds: float | None
    coverage: float
    gap_ratio: float | None
    duplicate_fraction: float
    nan_fraction: float
    zero_fraction: float
    constant_fraction: float
    quality_band: str
    thresholds: Thresholds
    expected_hours: str | None = Field(
        None,
        # Left out for a stream without one: those results stay as they were.
        exclude_if=lambda says: says is None,
        description="For a stream silent by design part of the time: when it is expected to report, and why it is "
        "silent otherwise; coverage, gaps and expected counts then count those hours only (absent: always expected).",
    )


class InspectQualityWindowResult(Frozen):
    """Quality of one window: coverage = min(1, count / expected), gap ratio = longest gap / step."""

    stream_id: str
    window: Window
    count: int
    expected_count: float
    step_seconds: float | None
    longest_gap_seconds: float
    coverage: float
    gap_ratio: float | None
    duplicate_fraction: float
    nan_fraction: float
    quality_band: QualityBand
    thresholds: Thresholds
    expected_hours: str | None = Field(
        None,
        # Left out for a stream without one: those results stay as they were.
        exclude_if=lambda says: says is None,
        description="For a stream silent by design part of the time: when it is expected to report, and why it is "
        "silent otherwise; coverage, gaps and expected counts then count those hours only (absent: always expected).",
    )
