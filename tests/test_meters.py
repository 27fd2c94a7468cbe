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


def _plain_counter(read: range, jump_at: int, jump: float) -> dict[str, str]:
    """A register counting _usage for 200 hours, read each hour in `read` and from hour 100 on, that jumps by `jump`
    litres at reading `jump_at` (a meter fault: the register moves without water flowing)."""
    total, rows = 1000.0, []
    for i in range(200):
        total += _usage(i) + (jump if i == jump_at else 0.0)
        if i in read or i >= 100:
            rows.append(f"{START + i * HOUR},{round(total, 3)}\n")
    return {"water-1.csv": "unix_ts,counter\n" + "".join(rows)}


def test_max_rate_keeps_the_water_used_across_a_gap_and_rejects_a_jump(tmp_path):
    # Readings 0..39, a 60-hour gap, then 100..199; at 150 the register jumps by 5,000 L within an hour. The most a
    # reading may add is max_rate times the hours since the reading before: 60 h of use (~600 L) is kept, the jump is
    # not. A bound per reading (the old max_increment) rejected the first reading after the gap.
    max_rate = 40.0  # L/h: above every hour of _usage (at most 24.0)
    assert max(_usage(i) for i in range(200)) < max_rate < 5000
    ws = make_workspace(
        tmp_path, "meter", _mapping(f"{{ max_rate = {max_rate} }}"), _plain_counter(range(40), 150, 5000)
    )
    tables = ingest(ws, "meter")
    reasons = dict(tables["rejects"].group_by("reason").len().iter_rows())
    assert reasons == {"counter_first": 1, "counter_jump": 1}
    obs = tables["observations"].sort("ts")
    across = obs.filter(pl.col("ts") == (START + 100 * HOUR) * 1_000_000)["value"].item()
    assert across == pytest.approx(sum(_usage(i) for i in range(40, 101)))  # hours 40..100: the water used in the gap
    assert across > max_rate  # one reading's amount above the hourly rate: kept because 61 hours passed
    jumped = tables["rejects"].filter(pl.col("reason") == "counter_jump")["ts"].item()
    assert jumped == (START + 150 * HOUR) * 1_000_000


def test_the_old_per_reading_bound_is_refused_in_one_line(tmp_path):
    ws = make_workspace(tmp_path, "meter", _mapping("{ max_increment = 5000.0 }"), _plain_counter(range(40), 150, 0))
    with pytest.raises(Exception) as caught:
        ingest(ws, "meter")
    message = str(caught.value)
    assert "max_rate" in message and "max_increment" in message and "\n" not in message.strip()
