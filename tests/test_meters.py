"""Meters: a cumulative counter with a reset and a rollover becomes per-interval consumption by its declared counter
rule, and the consumption a tool reports over a window equals an independent computation from the raw readings."""

from __future__ import annotations

import polars as pl
import pytest

from contracts.tools import AggregateWindowInput, RankWindowInput
from pipeline.harness.build import build
from pipeline.tools import functions
from pipeline.tools.access import ToolStore
from tests.helpers import ingest, make_workspace

HOUR = 3600
START = 1_700_438_400  # 2023-11-20T00:00:00Z, a Monday
ROLLOVER = 10_000.0


def _usage(i: int) -> float:
    """What the meter really measured in hour i (litres): deterministic, varied, never negative."""
    return float((i * 37) % 23 + (i % 5) * 0.5)


def _readings(n: int, reset_at: int, rollover_from: float) -> list[tuple[int, float]]:
    """A counter starting at `rollover_from` that wraps at ROLLOVER and is reset to 0 (then counts on) at `reset_at`."""
    out, total = [], rollover_from
    for i in range(n):
        if i == reset_at:
            total = 0.0
        total += _usage(i)
        out.append((START + i * HOUR, round(total % ROLLOVER, 3)))
    return out


READINGS = _readings(24 * 14, reset_at=200, rollover_from=ROLLOVER - 500.0)


def _mapping(counter: str) -> str:
    return f"""
name = "meter"
title = "a generated water meter"

[time]
column = "unix_ts"
format = "epoch_s"

[values]
kind = "file_per_stream"
files = "*.csv"
file_pattern = '(?P<key>water)-(?P<part>\\d+)\\.csv'
site = "house"
value_column = "counter"

[metadata]
kind = "inline"

[metadata.points.water]
point_class = "Water_Usage_Sensor"
label = "water use at {{site}}"
unit = "L"
equipment = "water_meter"
equipment_type = "Water_Meter"
counter = {counter}
"""


def _files() -> dict[str, str]:
    half = len(READINGS) // 2  # two numbered shards of one stream
    chunks = [READINGS[:half], READINGS[half:]]
    return {
        f"water-{n + 1}.csv": "unix_ts,counter\n" + "".join(f"{t},{v}\n" for t, v in chunk)
        for n, chunk in enumerate(chunks)
    }


def _expected_increments() -> list[float]:
    """Independent of the ingest code: what was used in each hour after the first reading."""
    return [_usage(i) for i in range(1, len(READINGS))]


def test_rollover_and_reset_become_true_increments(tmp_path):
    wraps = sum(1 for (_, a), (_, b) in zip(READINGS, READINGS[1:], strict=False) if b < a)
    assert wraps == 2  # the generated counter wraps once and is reset once
    ws = make_workspace(tmp_path, "meter", _mapping(f"{{ rollover = {ROLLOVER}, resets = true }}"), _files())
    tables = ingest(ws, "meter")
    obs = tables["observations"].sort("ts")
    assert obs["value"].to_list() == pytest.approx(_expected_increments(), abs=1e-6)
    assert dict(tables["rejects"].group_by("reason").len().iter_rows()) == {"counter_first": 1}


def test_without_the_rules_a_decrease_is_rejected_not_counted(tmp_path):
    ws = make_workspace(tmp_path, "meter", _mapping("{}"), _files())
    tables = ingest(ws, "meter")
    reasons = dict(tables["rejects"].group_by("reason").len().iter_rows())
    assert reasons == {"counter_first": 1, "counter_decrease": 2}
    assert (tables["observations"]["value"] >= 0).all()


def test_reset_alone_is_not_a_rollover(tmp_path):
    # resets without rollover: the wrap (a drop from near the top) counts as a reset too, so only the value after it
    # is counted: an undercount an operator must declare `rollover` to avoid. The test pins the rule's meaning.
    ws = make_workspace(tmp_path, "meter", _mapping("{ resets = true }"), _files())
    obs = ingest(ws, "meter")["observations"].sort("ts")
    values = obs["value"].to_list()
    expected = _expected_increments()
    wrapped = next(i for i, ((_, a), (_, b)) in enumerate(zip(READINGS, READINGS[1:], strict=False)) if b < a)
    assert values[wrapped] == pytest.approx(READINGS[wrapped + 1][1])
    assert values[wrapped] != pytest.approx(expected[wrapped])


def test_consumption_over_a_window_matches_an_independent_sum(tmp_path):
    ws = make_workspace(tmp_path, "meter", _mapping(f"{{ rollover = {ROLLOVER}, resets = true }}"), _files())
    build(ws, ["meter"], until="store")
    store = ToolStore(ws.stage_dir("meter", "store") / "store.duckdb")
    stream = "house__water"
    for week in range(2):
        start, end = START + week * 7 * 24 * HOUR, START + (week + 1) * 7 * 24 * HOUR
        # usage of hour i is recorded at reading i (the increment since reading i-1); a window's consumption is the
        # register difference between its first and last readings: the hours after its first reading
        independent = sum(_usage(i) for i in range(1, len(READINGS)) if start < START + i * HOUR < end)
        for period in ("week", "custom"):
            args = AggregateWindowInput(
                stream_id=stream,
                window_start=pl.from_epoch(pl.Series([start]), "s").dt.strftime("%Y-%m-%dT%H:%M:%SZ")[0],
                window_end=pl.from_epoch(pl.Series([end]), "s").dt.strftime("%Y-%m-%dT%H:%M:%SZ")[0],
                period=period,
                metric="sum",
            )
            result = functions.aggregate_window(store, args)
            assert result.value == pytest.approx(independent, abs=1e-3)
    ranked = functions.rank_window(
        store,
        RankWindowInput(
            stream_ids=[stream],
            window_start="2023-11-20T00:00:00Z",
            window_end="2023-11-27T00:00:00Z",
            period="week",
            metric="sum",
        ),
    )
    first_week = sum(_usage(i) for i in range(1, 7 * 24))
    assert ranked.ranked_streams[0].value == pytest.approx(first_week, abs=1e-3)
