"""Every tool on both real stores, checked against values computed here from the normalized Parquet."""

from __future__ import annotations

import statistics
from bisect import bisect_left
from datetime import UTC, datetime

import polars as pl
import pytest

from pipeline.tools import registry
from pipeline.tools.access import ToolStore
from pipeline.tools.timeutil import format_us

CORPORA = ["hhw", "xai4heat"]
AMOUNT_UNITS = {"MegaW-HR": "MegaW"}  # configs/build.toml amount_units of these corpora
DAY = 86_400_000_000


@pytest.fixture(scope="session")
def stores(real_artifacts):
    opened = {c: ToolStore(real_artifacts / c / "store" / "store.duckdb") for c in CORPORA}
    yield opened
    for store in opened.values():
        store.close()


@pytest.fixture(scope="session")
def observations(real_artifacts):
    """stream id -> (sorted ts list, values list), from the ingest stage's Parquet (not the store)."""
    out = {}
    for corpus in CORPORA:
        frame = pl.read_parquet(real_artifacts / corpus / "ingest" / "observations.parquet")
        for (stream,), part in frame.group_by("stream_id"):
            out[stream] = (part["ts"].to_list(), part["value"].to_list())
    return out


@pytest.fixture(scope="session")
def streams(real_artifacts):
    return {c: pl.read_parquet(real_artifacts / c / "ingest" / "streams.parquet") for c in CORPORA}


def call(store, name, **arguments):
    return registry.call(store, name, arguments)


def busiest_day(ts: list[int]) -> int:
    days = pl.Series(ts) // DAY
    return int(days.value_counts(sort=True)[0, 0]) * DAY


def in_window(data, start, end):
    ts, values = data
    lo, hi = bisect_left(ts, start), bisect_left(ts, end)
    return ts[lo:hi], values[lo:hi]


@pytest.mark.parametrize("corpus", CORPORA)
def test_resolve_point_and_list_points_match_the_streams_table(stores, streams, corpus):
    table = streams[corpus]
    groups = table.group_by("site_id", "point_class").len().filter(pl.col("len") >= 2).sort("site_id", "point_class")
    assert groups.height > 0
    for site, point_class, count in groups.iter_rows():
        result = call(stores[corpus], "resolve_point", site=site, point_class=point_class)
        assert result["match_count"] == count and result["stream_id"] is None
        for row in table.filter((pl.col("site_id") == site) & (pl.col("point_class") == point_class)).iter_rows(
            named=True
        ):
            unique = call(
                stores[corpus], "resolve_point", site=site, point_class=point_class, equipment=row["equipment"]
            )
            assert unique["stream_id"] == row["stream_id"], row
    site = table["site_id"][0]
    listed = call(stores[corpus], "list_points", site=site)
    assert listed["stream_ids"] == sorted(table.filter(pl.col("site_id") == site)["stream_id"])


def test_resolve_point_accepts_labels_and_plain_words(stores):
    result = call(
        stores["hhw"],
        "resolve_point",
        site="Building 127",
        point_class="leaving hot water temperature sensor",
        equipment="primary loop",
    )
    assert result["stream_id"] == "building127__supp"
    result = call(
        stores["xai4heat"],
        "resolve_point",
        site="substation L8",
        point_class="Leaving_Hot_Water_Temperature_Sensor",
        equipment="L8.secondary_loop",
    )
    assert result["stream_id"] == "L8__t_sup_sec"


@pytest.mark.parametrize("corpus", CORPORA)
def test_aggregate_window_matches_plain_python(stores, observations, streams, corpus):
    for stream in streams[corpus]["stream_id"].to_list()[::7]:
        data = observations[stream]
        day = busiest_day(data[0])
        for period, end in (("day", day + DAY), ("custom", day + DAY // 2)):
            _, values = in_window(data, day, end)
            result = call(
                stores[corpus],
                "aggregate_window",
                stream_id=stream,
                window_start=format_us(day),
                window_end=format_us(end),
                period=period,
            )
            assert result["count"] == len(values)
            unit = streams[corpus].filter(pl.col("stream_id") == stream)["unit"].item()
            if unit in AMOUNT_UNITS:  # a meter: mean, min and max of its rate per hour (docs/store.md, "Meters")
                summed = call(
                    stores[corpus], "aggregate_window", **{**result["window"], "stream_id": stream}, metric="sum"
                )
                check_meter_window(result, summed, data, unit, stream)
                continue
            assert result["mean"] == pytest.approx(statistics.fmean(values), abs=1e-4)
            assert result["std"] == pytest.approx(statistics.pstdev(values), abs=1e-4)
            assert (result["min"], result["max"]) == (round(min(values), 4), round(max(values), 4))


def check_meter_window(result, summed, data, unit, stream):
    """A counter's window in plain Python: rates are each reading's amount over the time since the reading before,
    the mean is the register difference between the window's first and last readings per hour between them."""
    ts, values = data
    start, end = (
        int(datetime.fromisoformat(result["window"][k]).timestamp() * 1e6) for k in ("window_start", "window_end")
    )
    lo, hi = bisect_left(ts, start), bisect_left(ts, end)
    assert stream.endswith("__e") and lo > 0  # xai4heat's heat meter: a counter, read after its first reading
    rates = [values[i] * 3.6e9 / (ts[i] - ts[i - 1]) for i in range(lo, hi)]
    total = sum(values[lo + 1 : hi])
    mean = total / ((ts[hi - 1] - ts[lo]) / 3.6e9) if hi - lo > 1 else rates[0]
    assert result["unit"] == AMOUNT_UNITS[unit]
    assert result["mean"] == pytest.approx(mean, abs=1e-4, rel=1e-6)
    assert result["std"] == pytest.approx(statistics.pstdev(rates), abs=1e-4, rel=1e-6)
    assert (result["min"], result["max"]) == (round(min(rates), 4), round(max(rates), 4))
    assert (summed["value"], summed["unit"]) == (pytest.approx(total, abs=1e-4), unit)  # the register difference


@pytest.mark.parametrize("corpus", CORPORA)
def test_custom_window_equal_to_a_calendar_window_gives_the_same_answer(stores, observations, streams, corpus):
    stream = streams[corpus]["stream_id"][0]
    day = busiest_day(observations[stream][0])
    monday = day - ((day // DAY + 3) % 7) * DAY
    month = int(datetime.fromtimestamp(day / 1e6, UTC).replace(day=1, hour=0).timestamp() * 1e6)
    next_month = int(datetime.fromtimestamp(month / 1e6 + 40 * 86400, UTC).replace(day=1).timestamp() * 1e6)
    for period, start, end in (
        ("day", day, day + DAY),
        ("week", monday, monday + 7 * DAY),
        ("month", month, next_month),
    ):
        args = {"stream_id": stream, "window_start": format_us(start), "window_end": format_us(end)}
        calendar = call(stores[corpus], "aggregate_window", period=period, **args)
        custom = call(stores[corpus], "aggregate_window", period="custom", **args)
        assert {k: v for k, v in calendar.items() if k != "window"} == {
            k: v for k, v in custom.items() if k != "window"
        }
        q_calendar = call(stores[corpus], "inspect_quality_window", period=period, **args)
        q_custom = call(stores[corpus], "inspect_quality_window", period="custom", **args)
        assert {k: v for k, v in q_calendar.items() if k != "window"} == {
            k: v for k, v in q_custom.items() if k != "window"
        }


def test_compare_and_rank_match_plain_python(stores, observations):
    ids = ["L12__t_sup_sec", "L22__t_sup_sec", "L4__t_sup_sec", "L8__t_sup_sec"]
    start, end = (
        int(datetime(2022, 1, 1, tzinfo=UTC).timestamp() * 1e6),
        int(datetime(2022, 2, 1, tzinfo=UTC).timestamp() * 1e6),
    )
    means = {s: round(statistics.fmean(in_window(observations[s], start, end)[1]), 4) for s in ids}
    window = {"window_start": format_us(start), "window_end": format_us(end), "period": "month"}
    ranked = call(stores["xai4heat"], "rank_window", stream_ids=ids, top_k=4, **window)
    expected = sorted(ids, key=lambda s: (-means[s], s))
    assert [r["stream_id"] for r in ranked["ranked_streams"]] == expected
    assert [r["value"] for r in ranked["ranked_streams"]] == pytest.approx([means[s] for s in expected], abs=1e-4)
    ascending = call(stores["xai4heat"], "rank_window", stream_ids=ids, order="asc", top_k=2, **window)
    assert [r["stream_id"] for r in ascending["ranked_streams"]] == expected[::-1][:2]
    compared = call(stores["xai4heat"], "compare_window", left_stream_id=ids[0], right_stream_id=ids[1], **window)
    assert compared["winning_stream_id"] == max(ids[:2], key=lambda s: means[s])
    assert compared["difference"] == pytest.approx(means[ids[0]] - means[ids[1]], abs=2e-4)


@pytest.mark.parametrize("corpus", CORPORA)
def test_lookup_observation_exact_and_nearest(stores, observations, streams, corpus):
    for stream in streams[corpus]["stream_id"].to_list()[::5]:
        ts, values = observations[stream]
        middle = len(ts) // 2
        exact = call(
            stores[corpus], "lookup_observation", stream_id=stream, timestamp=format_us(ts[middle]), mode="exact"
        )
        assert (
            exact["exact_match_found"] and exact["value"] == round(values[middle], 4) and exact["offset_seconds"] == 0.0
        )
        probe = ts[middle] + (ts[middle + 1] - ts[middle]) * 2 // 5  # 0.4 of the gap after: nearer the left
        near = call(stores[corpus], "lookup_observation", stream_id=stream, timestamp=format_us(probe), mode="nearest")
        assert near["observed_timestamp"] == format_us(ts[middle]) and near["fallback_reason"] == "nearest_observation"
        assert near["offset_seconds"] == pytest.approx((ts[middle] - probe) / 1e6, abs=1e-3)
        missed = call(stores[corpus], "lookup_observation", stream_id=stream, timestamp=format_us(probe), mode="exact")
        assert (
            missed["exact_match_found"] is False
            and missed["value"] is None
            and missed["fallback_reason"] == "no_exact_match"
        )


def test_lookup_tie_goes_to_the_earlier_observation(stores, observations):
    ts, values = observations["L8__t_amb"]
    middle = len(ts) // 2
    halfway = (ts[middle] + ts[middle + 1]) // 2
    assert halfway - ts[middle] == ts[middle + 1] - halfway
    result = call(
        stores["xai4heat"], "lookup_observation", stream_id="L8__t_amb", timestamp=format_us(halfway), mode="nearest"
    )
    assert result["observed_timestamp"] == format_us(ts[middle])


@pytest.mark.parametrize("corpus", CORPORA)
def test_quality_tools_match_plain_python(stores, observations, streams, corpus):
    stream = streams[corpus]["stream_id"][1]
    ts, _ = observations[stream]
    whole = call(stores[corpus], "inspect_quality", stream_id=stream)
    assert whole["observations"] == len(ts)
    assert whole["first_timestamp"] == format_us(ts[0]) and whole["last_timestamp"] == format_us(ts[-1])
    gaps = [b - a for a, b in zip(ts, ts[1:], strict=False)]
    assert whole["longest_gap_seconds"] == pytest.approx(max(gaps) / 1e6)
    assert whole["step_seconds"] == pytest.approx(statistics.median(gaps) / 1e6, abs=1e-3)
    day = busiest_day(ts)
    window = call(
        stores[corpus],
        "inspect_quality_window",
        stream_id=stream,
        window_start=format_us(day),
        window_end=format_us(day + DAY),
        period="day",
    )
    inside, _ = in_window(observations[stream], day, day + DAY)
    assert window["count"] == len(inside)
    assert window["coverage"] == pytest.approx(min(1.0, len(inside) / window["expected_count"]), abs=1e-4)
    assert window["quality_band"] in {"healthy", "marginal", "low_coverage", "long_gap"}
    assert set(window["thresholds"]) == set(whole["thresholds"])
