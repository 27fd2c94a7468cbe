"""Streams absent by design (pipeline/store/expected.py): the expected-hours rule, coverage and gaps over those hours,
and what the store and the tools make of a declared stream."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import polars as pl
import pytest
from pydantic import ValidationError

from contracts.corpus import CorpusMapping
from contracts.corpus_metadata import NightSilence, ScheduleSilence
from pipeline.core.errors import StageError
from pipeline.store import compute, expected

DAY, MIN = 86_400_000_000, 60_000_000


def us(*args: int) -> int:
    return int(datetime(*args, tzinfo=UTC).timestamp()) * 1_000_000


def night(latitude: float, longitude: float, above: float = -0.833) -> NightSilence:
    return NightSilence(
        kind="night", streams=".*", reason="PV", latitude=latitude, longitude=longitude, sun_above_deg=above
    )


def daylight(rule, *date: int) -> tuple[int, int]:
    """The expected interval whose middle falls on the UTC date."""
    start = us(*date)
    exp = expected.Expected.over(rule, start, start + DAY)
    middle = exp.starts + (exp.ends - exp.starts) // 2
    (index,) = np.flatnonzero((middle >= start) & (middle < start + DAY))
    return int(exp.starts[index]), int(exp.ends[index])


# Sunrise and sunset with the sun's centre 0.833 degrees below the horizon (refraction and its radius), as astral 3.2
# gives them (an independent implementation of the same NOAA/Meeus equations): Greenwich at the June solstice, Sydney
# at the December one (east of Greenwich: its day straddles midnight UTC), Boulder at the March equinox.
@pytest.mark.parametrize(
    ("rule", "date", "rise", "sets"),
    [
        (night(51.4769, -0.0005), (2016, 6, 21), us(2016, 6, 21, 3, 43, 13), us(2016, 6, 21, 20, 20, 33)),
        (night(-33.8688, 151.2093), (2018, 12, 21), us(2018, 12, 20, 18, 40, 53), us(2018, 12, 21, 9, 5, 10)),
        (night(40.015, -105.27), (2019, 3, 20), us(2019, 3, 20, 13, 4, 58), us(2019, 3, 21, 1, 12, 44)),
    ],
)
def test_sunrise_and_sunset_at_a_known_place_and_date(rule, date, rise, sets):
    start, end = daylight(rule, *date)
    assert abs(start - rise) <= MIN and abs(end - sets) <= MIN, (start - rise, end - sets)
    at_edges = expected.sun_elevation(rule.latitude, rule.longitude, np.array([start, end]))
    assert np.allclose(at_edges, -0.833, atol=0.15)  # the interval ends where the sun crosses the threshold


def test_polar_night_expects_nothing_and_misses_nothing():
    rule, start = night(69.6492, 18.9553, 0.0), us(2017, 1, 3)  # Tromso: the sun stays down
    exp = expected.Expected.over(rule, start, start + DAY)
    assert len(exp.starts) == 0 and exp.upto(np.array([start, start + DAY])).tolist() == [0, 0]
    found = expected.window(exp, np.array([start + DAY // 2]), start, start + DAY, 5 * MIN)
    assert found["coverage"] == 1.0 and found["longest_gap_us"] == 0 and found["expected_count"] == 0.0


def test_a_schedule_is_local_hours_on_its_weekdays_across_a_clock_change():
    rule = ScheduleSilence(
        kind="schedule",
        streams=".*",
        reason="occupancy",
        hours=["07:00-19:00"],
        weekdays=["mon", "fri"],
        timezone="Europe/Berlin",
    )
    exp = expected.Expected.over(rule, us(2023, 3, 20), us(2023, 4, 3))  # Berlin moves to summer time on 2023-03-26
    spans = list(zip(exp.starts.tolist(), exp.ends.tolist(), strict=True))
    inside = [(a, b) for a, b in spans if us(2023, 3, 20) <= a < us(2023, 4, 3)]
    assert inside == [
        (us(2023, 3, 20, 6), us(2023, 3, 20, 18)),  # Monday, CET (UTC+1)
        (us(2023, 3, 24, 6), us(2023, 3, 24, 18)),  # Friday
        (us(2023, 3, 27, 5), us(2023, 3, 27, 17)),  # Monday, CEST (UTC+2)
        (us(2023, 3, 31, 5), us(2023, 3, 31, 17)),
    ]
    week = us(2023, 3, 20), us(2023, 3, 27)
    assert expected.expected_count(rule, *week, 60 * MIN) == 24.0  # two days of 12 hours, hourly


def test_schedule_hours_are_refused_in_one_line():
    for hours, says in (
        (["7-19"], "HH:MM-HH:MM"),
        (["19:00-07:00"], "end after"),
        (["07:00-12:00", "11:00-13:00"], "overlap"),
    ):
        with pytest.raises(ValidationError, match=says):
            ScheduleSilence(kind="schedule", streams=".*", reason="r", hours=hours)


def stream_frame(times: list[int]) -> pl.DataFrame:
    frame = pl.DataFrame(
        {"stream_id": [0] * len(times), "ts": times, "value": [1.0] * len(times)},
        schema={"stream_id": pl.Int32, "ts": pl.Int64, "value": pl.Float64},
    )
    return compute.with_steps(frame, 12)


def pv_logger(rule, start: int, days: int, skip: tuple[int, int] | None = None) -> list[int]:
    """A 5-minute logger running from 20 minutes before each expected interval to 20 minutes after it (as real
    inverters' loggers do), silent in between; `skip` leaves out readings in [a, b)."""
    exp = expected.Expected.over(rule, start, start + days * DAY)
    times = []
    for a, b in zip(exp.starts.tolist(), exp.ends.tolist(), strict=True):
        first = (a - 20 * MIN) // (5 * MIN) * (5 * MIN)
        times += [t for t in range(first, b + 20 * MIN, 5 * MIN) if start <= t < start + days * DAY]
    return [t for t in times if skip is None or not skip[0] <= t < skip[1]]


def declared_windows(rule, times: list[int]) -> tuple[pl.DataFrame, pl.DataFrame]:
    obs = stream_frame(times)
    table = compute.aggregates(obs, 0, obs["stream_id"].to_numpy())
    return expected.adjust_unit(obs, ["pv"], table, {"pv": rule})


def test_a_night_silent_stream_with_every_expected_hour_has_coverage_one():
    rule, week = night(33.25, -119.0, 3.0), us(2016, 7, 4)  # a Monday
    aggregates, parts = declared_windows(rule, pv_logger(rule, week - DAY, 9))
    row = aggregates.filter((pl.col("period") == "week") & (pl.col("window_start") == week)).row(0, named=True)
    assert row["coverage"] == 1.0 and row["gap_ratio"] <= 1.0  # nights are no gap
    plain = compute.aggregates(stream_frame(pv_logger(rule, week - DAY, 9)), 0)
    undeclared = plain.filter((pl.col("period") == "week") & (pl.col("window_start") == week)).row(0, named=True)
    assert undeclared["coverage"] < 0.7 and undeclared["gap_ratio"] > 100  # what the store said before
    quality = parts.row(0, named=True)
    assert quality["n_expected"] / quality["expected"] >= 1.0


def test_a_daytime_outage_still_counts_against_a_night_silent_stream():
    rule, week = night(33.25, -119.0, 3.0), us(2016, 7, 4)
    outage = (us(2016, 7, 6, 18), us(2016, 7, 6, 21))  # three daylight hours in California (UTC)
    aggregates, _ = declared_windows(rule, pv_logger(rule, week - DAY, 9, outage))
    row = aggregates.filter((pl.col("period") == "week") & (pl.col("window_start") == week)).row(0, named=True)
    assert row["longest_gap_us"] == 3 * 60 * MIN + 5 * MIN and row["gap_ratio"] == 37.0
    assert 0.95 < row["coverage"] < 0.99  # 36 readings of about a thousand expected


def test_adjusting_leaves_undeclared_streams_alone():
    rule = night(33.25, -119.0, 3.0)
    obs = stream_frame(pv_logger(rule, us(2016, 7, 4), 3))
    table = compute.aggregates(obs, 0, obs["stream_id"].to_numpy())
    same, parts = expected.adjust_unit(obs, ["other"], table, {"pv": rule})
    assert same.equals(table) and parts.height == 0
    quality = pl.DataFrame({"stream_id": ["other"], "coverage": [0.5]})
    assert expected.adjust_quality(quality, parts).equals(quality)


def test_declarations_must_match_streams_once():
    declared = [night(0, 0).model_copy(update={"streams": "a.*"}), night(0, 0).model_copy(update={"streams": "ab"})]
    with pytest.raises(StageError, match=r"stream ab matches silence\[1\]"):
        expected.rules_for(declared, ["ab", "ac"], "pv", "UTC")
    with pytest.raises(StageError, match=r"silence\[0\] streams 'x' matches no stream"):
        expected.rules_for([night(0, 0).model_copy(update={"streams": "x"})], ["ab"], "pv", "UTC")
    schedule = ScheduleSilence(kind="schedule", streams="ab", reason="r", hours=["08:00-17:00"])
    assert expected.rules_for([schedule], ["ab"], "pv", "Europe/Paris")["ab"].timezone == "Europe/Paris"
    with pytest.raises(StageError, match="not an IANA zone"):
        expected.rules_for([schedule], ["ab"], "pv", "Mars/Olympus")


def test_a_mapping_without_declarations_keeps_its_identity():
    from pipeline.core.config import load_mapping
    from tests.helpers import REPO

    mapping = load_mapping(REPO / "configs" / "corpora" / "hhw.toml")
    assert "silence" not in mapping.model_dump(mode="json")
    pv = load_mapping(REPO / "configs" / "corpora" / "pvdaq.toml")
    assert [rule.kind for rule in pv.silence] == ["night", "night"]
    assert isinstance(CorpusMapping.model_validate(pv.model_dump(mode="json")).silence[0], NightSilence)


@pytest.fixture(scope="session")
def pv_store(tmp_path_factory):
    """The pvdaq corpus (its mapping and raw files) built up to the episodes, and its tool store."""
    from pipeline.core.workspace import Workspace
    from pipeline.harness.build import build
    from pipeline.tools.access import ToolStore
    from tests.helpers import copy_config, copy_real, copy_shared_configs

    root = tmp_path_factory.mktemp("pv")
    (root / "configs" / "corpora").mkdir(parents=True)
    copy_shared_configs(root)
    (root / "configs" / "corpora" / "pvdaq.toml").write_text(copy_config("pvdaq"))
    copy_real(root, "pvdaq", ["TAEFC1044741.csv", "ZT162185000441C1203.csv"])
    ws = Workspace.from_root(root)
    build(ws, ["pvdaq"], until="episodes")
    store = ToolStore(ws.stage_dir("pvdaq", "store") / "store.duckdb")
    yield store
    store.close()


def test_tools_measure_a_night_silent_week_over_its_daylight(pv_store):
    from pipeline.tools import registry

    sid = "TAEFC1044741__ac_power"
    week = {"stream_id": sid, "window_start": "2016-07-04T00:00:00Z", "window_end": "2016-07-11T00:00:00Z"}
    stored = registry.call(pv_store, "inspect_quality_window", {**week, "period": "week"})
    custom = registry.call(pv_store, "inspect_quality_window", {**week, "period": "custom"})
    assert {**custom, "window": None} == {**stored, "window": None}  # the tools decide as the store did
    assert stored["quality_band"] == "healthy" and stored["coverage"] == 1.0 and stored["gap_ratio"] <= 2.0
    assert 7 * 12 * 12 < stored["expected_count"] < 7 * 15 * 12  # five-minute readings over 12-15 hours a day
    assert stored["expected_hours"].startswith("expected while the sun is at least 3 degrees above the horizon")
    assert "PV inverter" in registry.call(pv_store, "inspect_quality", {"stream_id": sid})["expected_hours"]


def test_a_lookup_at_night_says_the_reading_is_absent_by_design(pv_store):
    from pipeline.tools import registry

    sid = "TAEFC1044741__ac_power"
    at_night = registry.call(
        pv_store, "lookup_observation", {"stream_id": sid, "timestamp": "2016-07-06T09:00:00Z", "mode": "nearest"}
    )
    assert at_night["fallback_reason"] == "nearest_observation"  # 02:00 in California: the nearest reading is hours off
    assert at_night["outside_expected_hours"].startswith("outside the expected hours: expected while the sun")
    exact = {"stream_id": sid, "timestamp": "2016-07-06T09:00:00Z", "mode": "exact"}
    assert registry.call(pv_store, "lookup_observation", exact)["outside_expected_hours"] is not None
    at_noon = registry.call(
        pv_store, "lookup_observation", {"stream_id": sid, "timestamp": "2016-07-06T20:02:30Z", "mode": "nearest"}
    )
    assert at_noon["fallback_reason"] == "nearest_observation" and "outside_expected_hours" not in at_noon


def test_commitments_never_probe_the_silent_hours_as_a_gap(pv_store):
    """A reading missing at night is absent by design: a probe there would make the commitment follow the clock (night
    abstain, day answer), so the lift draws its re_clarify and abstain probes from the expected hours only."""
    import json

    from pipeline.tools.timeutil import parse_us

    folder = pv_store.path.parent.parent / "episodes"
    probes = []
    for split in ("train", "dev", "test"):
        for line in (folder / f"{split}.jsonl").read_text().splitlines():
            commit = json.loads(line)["phases"][-1]
            lookups = [c for c in commit["canonical_calls"] if c["tool"] == "lookup_observation"]
            if lookups and commit["gold"]["decision"] != "answer":
                probes.append((commit["evidence_stream_ids"][0], parse_us(lookups[0]["arguments"]["timestamp"])))
    assert probes  # the lift still finds daytime gaps to ask about
    for sid, at in probes:
        rule = pv_store.expected_hours[sid]
        assert expected.Expected.over(rule, at, at).inside(np.array([at]))[0], (sid, at)


def test_the_card_states_each_declaration_and_its_reason():
    from pipeline.core.config import load_mapping
    from pipeline.release.card import _silence_lines
    from tests.helpers import REPO

    lines = _silence_lines(load_mapping(REPO / "configs" / "corpora" / "pvdaq.toml"))
    assert lines[0] == "## Streams absent by design"
    rows = [line for line in lines if line.startswith("| `")]
    assert len(rows) == 2 and all("a PV inverter produces and logs nothing while the sun is down" in r for r in rows)
    assert "33.25N 119W" in rows[0] and "at least 3 degrees above the horizon" in rows[0]
    assert _silence_lines(load_mapping(REPO / "configs" / "corpora" / "hhw.toml")) == []  # no section, same card


def test_pvdaq_declared_night_fits_its_rows():
    """SOURCE.md's claim, from the raw files: at each system's declared location the loggers are running before the
    sun reaches the threshold and until after it drops below it, on nearly every whole day (the rest are outages)."""
    from pipeline.core.config import load_mapping
    from tests.helpers import REPO

    mapping = load_mapping(REPO / "configs" / "corpora" / "pvdaq.toml")
    for rule in mapping.silence:
        site = rule.streams.split("__")[0]
        rows = pl.read_csv(REPO / "data" / "raw" / "pvdaq" / f"{site}.csv", columns=["ts"])
        ts = rows["ts"].str.to_datetime("%Y-%m-%d %H:%M:%S", time_unit="us").dt.epoch("us")
        days = (
            pl.DataFrame({"ts": ts, "day": (ts - 8 * 3_600_000_000) // DAY})  # a daylight run is one UTC-8 day
            .group_by("day")
            .agg(first=pl.col("ts").min(), last=pl.col("ts").max(), n=pl.len())
            .filter(pl.col("n") > 100)
        )
        first = expected.sun_elevation(rule.latitude, rule.longitude, days["first"].to_numpy())
        last = expected.sun_elevation(rule.latitude, rule.longitude, days["last"].to_numpy())
        assert np.mean(first <= rule.sun_above_deg) >= 0.98 and np.mean(last <= rule.sun_above_deg) >= 0.98, site
        assert np.median(first) < 0 and np.median(last) < 0  # the loggers start and stop with the sun below the horizon
