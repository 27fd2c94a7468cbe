"""Window boundaries and quality definitions on hand-made series (the store's compute layer)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from pipeline.store import compute

H = 3_600_000_000


def us(*args: int) -> int:
    return int(datetime(*args, tzinfo=UTC).timestamp() * 1_000_000)


def series(times: list[int], values: list[float] | None = None, stream: str = "s") -> pl.DataFrame:
    values = values if values is not None else [float(i) for i in range(len(times))]
    frame = pl.DataFrame(
        {"stream_id": [stream] * len(times), "ts": times, "value": values},
        schema={"stream_id": pl.String, "ts": pl.Int64, "value": pl.Float64},
    )
    return compute.with_steps(frame, 12)


def windows(frame: pl.DataFrame, period: str) -> pl.DataFrame:
    return compute.aggregates(frame, 0).filter(pl.col("period") == period)


def hourly(start: int, hours: int, skip: set[int] = frozenset()) -> list[int]:
    return [start + i * H for i in range(hours) if i not in skip]


def test_complete_hourly_day_scores_one():
    day = windows(series(hourly(us(2023, 5, 10), 24)), "day").row(0, named=True)
    assert day["count"] == 24 and day["coverage"] == 1.0 and day["gap_ratio"] == 1.0
    assert day["window_start"] == us(2023, 5, 10) and day["window_end"] == us(2023, 5, 11)


def test_hole_lowers_coverage_and_raises_gap_ratio():
    times = hourly(us(2023, 5, 9), 72, skip=set(range(30, 36)))  # six hours missing on May 10
    day = windows(series(times), "day").filter(pl.col("window_start") == us(2023, 5, 10)).row(0, named=True)
    assert day["count"] == 18 and day["coverage"] == pytest.approx(0.75)
    assert day["longest_gap_us"] == 7 * H and day["gap_ratio"] == 7.0


def test_data_only_in_first_half_counts_the_edge_gap():
    day = windows(series(hourly(us(2023, 5, 10), 12)), "day").row(0, named=True)
    assert day["coverage"] == 0.5 and day["gap_ratio"] == 13.0


def test_cadence_change_uses_the_local_step():
    hours = hourly(us(2024, 1, 1), 48)
    quarters = [us(2024, 1, 3) + i * H // 4 for i in range(96 * 2)]
    days = windows(series(hours + quarters), "day").sort("window_start")
    assert days["count"].to_list() == [24, 24, 96, 96]
    assert days["coverage"].to_list() == [1.0] * 4
    assert days["step_us"].to_list() == [H, H, H // 4, H // 4]


def test_dst_dates_are_24_hour_utc_days():
    # 2021-03-28 and 2021-10-31 change clocks in Europe; UTC windows do not notice.
    for date in ((2021, 3, 28), (2021, 10, 31)):
        day = windows(series(hourly(us(*date), 24)), "day").row(0, named=True)
        assert day["window_end"] - day["window_start"] == 24 * H and day["coverage"] == 1.0


def test_month_ends_and_leap_february():
    times = [us(2024, 1, 31, 23) + 3_599_999_999, us(2024, 2, 1), us(2024, 2, 29, 23), us(2024, 3, 1)]
    months = windows(series(times), "month").sort("window_start")
    assert months["window_start"].to_list() == [us(2024, 1, 1), us(2024, 2, 1), us(2024, 3, 1)]
    assert months["window_end"].to_list() == [us(2024, 2, 1), us(2024, 3, 1), us(2024, 4, 1)]
    assert months["count"].to_list() == [1, 2, 1]


def test_weeks_start_on_monday():
    sunday_late, monday = us(2023, 5, 14, 23), us(2023, 5, 15)  # 2023-05-15 is a Monday
    weeks = windows(series([sunday_late, monday]), "week").sort("window_start")
    assert weeks["window_start"].to_list() == [us(2023, 5, 8), us(2023, 5, 15)]
    assert all(e - s == 7 * 24 * H for s, e in zip(weeks["window_start"], weeks["window_end"], strict=True))


def test_moments_match_numpy_with_declared_ddof():
    rng = np.random.default_rng(3)
    values = rng.normal(20, 5, 24).tolist()
    frame = series(hourly(us(2023, 5, 10), 24), values)
    for ddof in (0, 1):
        day = compute.aggregates(frame, ddof).filter(pl.col("period") == "day").row(0, named=True)
        assert day["mean"] == pytest.approx(np.mean(values), abs=1e-12)
        assert day["std"] == pytest.approx(np.std(values, ddof=ddof), abs=1e-12)
        assert (day["min"], day["max"]) == (min(values), max(values))


def test_single_observation_std_is_null_with_ddof_1():
    day = compute.aggregates(series([us(2023, 5, 10)]), 1).filter(pl.col("period") == "day").row(0, named=True)
    assert day["std"] is None and day["count"] == 1


def test_whole_stream_quality():
    times = hourly(us(2023, 5, 10), 48, skip={10, 11, 12})
    obs = series(times, [0.0, 0.0] + [1.0] * 43)
    streams = pl.DataFrame({"stream_id": ["s"]})
    rejects = pl.DataFrame({"stream_id": ["s", "s"], "reason": ["duplicate_timestamp", "missing"]})
    row = compute.quality_table(streams, compute.quality_parts(obs), rejects).row(0, named=True)
    assert row["n"] == 45 and row["step_us"] == H and row["longest_gap_us"] == 4 * H
    assert row["coverage"] == pytest.approx(45 / 48) and row["gap_ratio"] == 4.0
    assert row["duplicate_fraction"] == pytest.approx(1 / 47) and row["reject_fraction"] == pytest.approx(2 / 47)
    assert row["zero_fraction"] == pytest.approx(2 / 45)


def test_previews_are_evenly_spaced():
    obs = series(hourly(us(2023, 1, 1), 1000))
    preview = compute.previews(obs, 96)
    assert preview.height == 96 and preview["ts"][0] == us(2023, 1, 1) and preview["ts"][-1] == us(2023, 1, 1) + 999 * H
    short = compute.previews(series(hourly(us(2023, 1, 1), 10)), 96)
    assert short.height == 10


def test_profiles_by_monday_based_weekday_and_utc_hour():
    monday_9 = datetime(2023, 5, 15, 9, tzinfo=UTC)
    times = [int((monday_9 + timedelta(weeks=w)).timestamp() * 1e6) for w in range(3)]
    profile = compute.profiles(series(times, [1.0, 2.0, 3.0]), 0).row(0, named=True)
    assert (profile["dow"], profile["hour"], profile["count"], profile["mean"]) == (0, 9, 3, 2.0)


def test_thresholds_are_clamped_so_a_week_missing_one_step_is_healthy():
    """Every week complete: the corpus quantiles say coverage 1.0 and gap ratio 1.0 are needed to be healthy; the
    declared floor and ceiling (configs/build.toml) make one missing hour harmless."""
    import tomllib

    from contracts.build import BuildConfig
    from pipeline.store.build import thresholds
    from tests.helpers import REPO

    cfg = BuildConfig.model_validate(tomllib.loads((REPO / "configs" / "build.toml").read_text())).store
    start = us(2023, 5, 1)  # a Monday
    complete = series(hourly(start, 24 * 7 * 8))
    weekly = compute.aggregates(complete, 0)
    limits = {r["name"]: r for r in thresholds(weekly, pl.DataFrame({"gap_ratio": [1.0]}), cfg).to_dicts()}
    assert limits["coverage_answer"]["corpus_value"] == 1.0 and limits["coverage_answer"]["value"] <= 0.95
    assert limits["gap_ratio_answer"]["corpus_value"] == 1.0 and limits["gap_ratio_answer"]["value"] >= 3
    missing = series(hourly(start, 24 * 7, skip={50}))
    week = windows(missing, "week").row(0, named=True)
    assert week["coverage"] == pytest.approx(167 / 168) and week["gap_ratio"] == 2.0
    values = {k: v["value"] for k, v in limits.items()}
    assert week["coverage"] >= values["coverage_answer"] and week["gap_ratio"] <= values["gap_ratio_answer"]
    assert values["coverage_abstain"] <= values["coverage_answer"] <= 0.95
    assert 3 <= values["gap_ratio_answer"] <= values["gap_ratio_abstain_window"]


def test_threshold_bounds_must_keep_the_bands_ordered():
    from pydantic import ValidationError

    from contracts.build import ThresholdBounds

    with pytest.raises(ValidationError, match="coverage_abstain.floor"):
        ThresholdBounds.model_validate(
            {"coverage_abstain": {"floor": 0.99, "ceiling": 0.99}, "coverage_answer": {"floor": 0.9, "ceiling": 0.95}}
        )


HALVES = [k / 1e4 + 5e-5 for k in range(-300, 300)] + [0.5, 0.00015, 2.5e-5, -0.0, 1e300, 1.7e308, 4.5e15, 5e-324]


def _same_float(a: float, b: float) -> bool:
    return (a != a and b != b) or (a == b and np.signbit(a) == np.signbit(b))


def test_rounded_is_pythons_round_on_halves_and_extremes():
    """The store's vectorised rounding (quality bands decide on what the tools show) is Python's round + 0.0, on the
    values where rint of the scaled value and Python's decimal rounding can part."""
    from pipeline.store.build import rounded

    values = np.array(HALVES + [float("nan"), float("inf"), -float("inf")], dtype=np.float64)
    assert all(
        _same_float(got, round(x, 4) + 0.0) for x, got in zip(values.tolist(), rounded(values).tolist(), strict=True)
    )


@pytest.mark.fuzz
def test_rounded_is_pythons_round_on_any_double():
    from hypothesis import given
    from hypothesis import strategies as st

    from pipeline.store.build import rounded
    from tests.helpers import fuzz_settings

    @fuzz_settings(200, 5000)
    @given(st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=1, max_size=50))
    def check(xs):
        got = rounded(np.array(xs, dtype=np.float64)).tolist()
        assert all(_same_float(g, round(x, 4) + 0.0) for x, g in zip(xs, got, strict=True))

    check()


def test_shown_keeps_nulls_and_rounds_the_rest():
    from pipeline.store.build import shown

    frame = pl.DataFrame({"v": [0.00005, None, 0.12345, float("nan"), -0.00001]}, schema={"v": pl.Float64})
    out = frame.select(shown("v"))["v"].to_list()
    assert out[0] == round(0.00005, 4) == 0.0001 and out[1] is None and out[2] == round(0.12345, 4) and out[3] != out[3]
    assert out[4] == 0.0 and not np.signbit(out[4])  # -0.0 is shown as 0.0


@pytest.mark.slow
def test_a_custom_window_std_follows_the_ddof_the_store_was_built_with(tmp_path):
    """std_ddof lives in configs/build.toml only: the store records it and the tools' custom windows read it back, so a
    custom window over a calendar day gives that day's stored std under either ddof."""
    from pipeline.harness.build import build
    from pipeline.tools import registry
    from pipeline.tools.access import ToolStore
    from pipeline.tools.timeutil import format_us
    from tests.helpers import tiny_workspace

    stds = {}
    for ddof in (0, 1):
        ws = tiny_workspace(tmp_path / f"ddof{ddof}")
        (ws.configs_dir / "corpora" / "hhw.toml").unlink()
        build_toml = ws.configs_dir / "build.toml"
        build_toml.write_text(build_toml.read_text().replace("std_ddof = 0 ", f"std_ddof = {ddof} "))
        build(ws, ["xai4heat"], until="store")
        store = ToolStore(ws.stage_dir("xai4heat", "store") / "store.duckdb")
        try:
            assert store.settings["std_ddof"] == ddof
            day = store._rows(
                "SELECT stream_id, window_start, window_end FROM aggregates WHERE period = 'day' AND count >= 3 "
                "AND std > 0 ORDER BY stream_id, window_start LIMIT 1"
            )[0]
            args = {
                "stream_id": day["stream_id"],
                "window_start": format_us(day["window_start"]),
                "window_end": format_us(day["window_end"]),
                "period": "custom",
                "metric": "std",
            }
            custom = registry.call(store, "aggregate_window", args)
            stored = registry.call(store, "aggregate_window", {**args, "period": "day"})
            assert custom["value"] == stored["value"], (ddof, custom, stored)
            stds[ddof] = custom["value"]
        finally:
            store.close()
    assert stds[1] > stds[0]  # the setting reached the tools: a sample std is larger than a population std


@settings(max_examples=200, deadline=None)
@given(
    runs=st.lists(
        st.lists(st.none() | st.integers(-3, 3).map(lambda k: 60_000_000 + k * 15_000_000), min_size=1, max_size=7),
        min_size=1,
        max_size=8,
    )
)
def test_segment_medians_equal_a_median_per_group(runs):
    """Constant runs skip the sort; runs with several values or nulls take polars' median: both equal a group_by."""
    values = pl.Series("step_us", [v for run in runs for v in run], dtype=pl.Int64)
    seg = np.cumsum([0] + [len(run) for run in runs[:-1]])
    expected = (
        pl.DataFrame({"_seg": np.repeat(np.arange(len(runs)), [len(run) for run in runs]), "step_us": values})
        .group_by("_seg", maintain_order=True)
        .agg(pl.col("step_us").median().round(0).cast(pl.Int64))["step_us"]
    )
    assert compute.segment_medians(values, seg).to_list() == expected.to_list()


@settings(max_examples=150, deadline=None)
@given(
    streams=st.lists(
        st.lists(st.sampled_from([1, 1, 1, 2, 3, 60, 61, 3600]), min_size=1, max_size=90), min_size=1, max_size=5
    ),
    window=st.integers(0, 13),
)
def test_steps_equal_a_median_per_stream(streams, window):
    """The local step is the median of each stream's gaps alone: rows near a stream's edges are computed again."""
    frame = pl.DataFrame(
        {
            "stream_id": [f"s{i}" for i, gaps in enumerate(streams) for _ in gaps],
            "ts": [t for gaps in streams for t in np.cumsum(gaps).tolist()],
            "value": [0.0] * sum(len(g) for g in streams),
        },
        schema={"stream_id": pl.String, "ts": pl.Int64, "value": pl.Float64},
    )
    expected = frame.with_columns(gap_us=pl.col("ts").diff().over("stream_id")).with_columns(
        step_us=pl.col("gap_us")
        .cast(pl.Float64)
        .rolling_median(2 * window + 1, center=True, min_samples=1)
        .over("stream_id")
        .round(0)
        .cast(pl.Int64)
    )
    assert compute.with_steps(frame, window).equals(expected)


def _quality_parts_by_group_by(obs: pl.DataFrame) -> pl.DataFrame:
    """The straightforward per-stream aggregation that quality_parts computes with run reductions."""
    seg = np.flatnonzero((obs["stream_id"] != obs["stream_id"].shift(1)).fill_null(True).to_numpy())
    gap = obs["gap_us"].cast(pl.Float64).fill_null(0.0).to_numpy()
    local = obs["step_us"].cast(pl.Float64).fill_null(0.0).to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(local > 0, gap / local, 0.0)
    per = obs.group_by("stream_id", maintain_order=True).agg(
        n=pl.len(),
        first_ts=pl.col("ts").first(),
        last_ts=pl.col("ts").last(),
        step_us=pl.col("gap_us").median().round(0).cast(pl.Int64),
        longest_gap_us=pl.col("gap_us").max(),
        zero_fraction=(pl.col("value") == 0).mean(),
        constant_fraction=(pl.col("value") == pl.col("value").shift(1)).drop_nulls().mean(),
        distinct_values=pl.col("value").n_unique().cast(pl.Int64),
    )
    return per.with_columns(expected=pl.Series(1.0 + np.add.reduceat(ratio, seg) if len(seg) else [], dtype=pl.Float64))


@settings(max_examples=200, deadline=None)
@given(
    streams=st.lists(
        st.lists(st.none() | st.sampled_from([0.0, -0.0, 1.5, 2.0, float("nan")]), min_size=1, max_size=12),
        min_size=1,
        max_size=5,
    )
)
def test_quality_parts_equal_a_group_by(streams):
    frame = pl.DataFrame(
        {
            "stream_id": [f"s{i}" for i, values in enumerate(streams) for _ in values],
            "ts": [t * 60_000_000 + (t % 3) for values in streams for t in range(len(values))],
            "value": [v for values in streams for v in values],
        },
        schema={"stream_id": pl.String, "ts": pl.Int64, "value": pl.Float64},
    )
    obs = compute.with_steps(frame, 2)
    assert_frame_equal(compute.quality_parts(obs), _quality_parts_by_group_by(obs))


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(
        st.one_of(st.none(), st.integers(1, 2**52), st.sampled_from([60_000_000, 900_000_000, 3_600_000_000])),
        max_size=12,
    )
)
def test_median_step_is_polars_median_and_round(steps):
    """A window's step (compute.median_step, numpy) is what polars' median and round(0) give, halves included."""
    values = np.array([np.nan if s is None else float(s) for s in steps], dtype=np.float64)
    median = pl.Series(values, nan_to_null=True).median()
    expected = int(pl.Series([median]).round(0).cast(pl.Int64)[0]) if median is not None else None
    assert compute.median_step(values) == expected
