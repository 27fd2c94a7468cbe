"""Each declared cleaning rule on a tiny slice cut from the real xai4heat and hhw files."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.core.errors import IngestError
from tests.helpers import copy_config, copy_real, ingest, make_workspace, real_lines, xai_config

L4 = "xai4heat_scada_L4.csv"
X = "xai4heat/"
HOUR = 3_600_000_000


def xai(tmp_path, lines: list[str], site: str = "L4", **overrides: str):
    overrides.setdefault("held_out_sites", "[]")
    ws = make_workspace(
        tmp_path, "xai4heat", xai_config(**overrides), {f"xai4heat_scada_{site}.csv": "\n".join(lines) + "\n"}
    )
    return ingest(ws, "xai4heat")


def reasons(tables, column: str | None = None) -> dict[str, int]:
    rejects = tables["rejects"]
    if column:
        rejects = rejects.filter(pl.col("column") == column)
    return dict(rejects.group_by("reason").len().iter_rows())


def test_accounting_holds_on_a_slice(tmp_path):
    tables = xai(tmp_path, real_lines(X + L4, range(2, 40)))
    assert tables["observations"].height + tables["rejects"].height == 38 * 8


def test_nonexistent_local_time_is_rejected_whole_row(tmp_path):
    # 2021-03-28: L4 carries a 02:00 row, a local time that does not exist in Europe/Belgrade.
    tables = xai(tmp_path, real_lines(X + L4, [32614, 32615, 32616]))
    rejected = tables["rejects"].filter(pl.col("reason") == "nonexistent_local_time")
    assert rejected.height == 8
    assert set(rejected["row"]) == {3}
    assert rejected.filter(pl.col("column") == "t_amb")["raw"].item() == "2.9"


@pytest.mark.parametrize(("rule", "utc_hour"), [("earliest", 0), ("latest", 1)])
def test_ambiguous_local_time_takes_declared_offset(tmp_path, rule, utc_hour):
    # 2021-10-31 02:00 local happens twice; the file holds it once.
    tables = xai(tmp_path, real_lines(X + L4, [27925, 27926, 27927, 27928]), ambiguous=f'"{rule}"')
    amb = tables["observations"].filter(pl.col("stream_id") == "L4__t_amb")
    day = 1635638400000000  # 2021-10-31T00:00:00Z
    assert day + utc_hour * HOUR in set(amb["ts"])
    assert amb.filter(pl.col("ts") == day + utc_hour * HOUR)["value"].item() == 6.0


def test_ambiguous_local_time_can_be_rejected(tmp_path):
    tables = xai(tmp_path, real_lines(X + L4, [27925, 27926, 27927, 27928]), ambiguous='"reject"')
    assert reasons(tables)["ambiguous_local_time"] == 8


def test_newest_first_rows_are_sorted_and_order_is_checked(tmp_path):
    tables = xai(tmp_path, real_lines(X + L4, range(2, 12)))
    ts = tables["observations"].filter(pl.col("stream_id") == "L4__t_amb")["ts"]
    assert ts.is_sorted() and ts.n_unique() == 10
    with pytest.raises(IngestError, match=r"row 3: time goes against the declared ascending row order"):
        xai(tmp_path / "b", real_lines(X + L4, range(2, 12)), row_order='"ascending"')


def test_unsorted_rows_are_an_error_naming_the_row_unless_declared_any(tmp_path):
    lines = real_lines(X + L4, [2, 3, 5, 4, 6])
    with pytest.raises(IngestError, match=r"row 5: time goes against the declared descending row order"):
        xai(tmp_path, lines)
    tables = xai(tmp_path / "any", lines, row_order='"any"')
    assert tables["observations"].filter(pl.col("stream_id") == "L4__t_amb").height == 5


def test_sentinel_missing_and_zero_dropouts(tmp_path):
    # 2019-10-04: -39.9 in t_amb, t_sup_sec, t_ret_sec; pe empty; zero water temperatures and counter.
    tables = xai(tmp_path, real_lines(X + L4, [44815, 44816, 44817]))
    assert reasons(tables, "t_amb") == {"sentinel": 3}
    assert reasons(tables, "t_sup_sec") == {"sentinel": 3}
    assert reasons(tables, "pe") == {"missing": 3}
    assert reasons(tables, "t_sup_prim") == {"zero_dropout": 3}
    assert reasons(tables, "e") == {"zero_dropout": 3}
    assert tables["observations"].filter(pl.col("stream_id") == "L4__t_ref")["value"].to_list() == [80.0] * 3


def test_all_zero_row_is_a_dropout_row(tmp_path):
    lines = real_lines(X + "xai4heat_scada_L8.csv", [3405, 3406, 3407])
    assert lines[2].endswith(",0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0")
    tables = xai(tmp_path, lines, site="L8")
    dropped = tables["rejects"].filter(pl.col("reason") == "dropout_row")
    assert dropped.height == 8 and set(dropped["row"]) == {3}


def test_counter_becomes_per_interval_increments(tmp_path):
    lines = real_lines(X + L4, range(2, 14))
    tables = xai(tmp_path, lines)
    readings = sorted((line.split(",")[0], float(line.split(",")[7])) for line in lines[1:])
    energy = tables["observations"].filter(pl.col("stream_id") == "L4__e").sort("ts")
    expected = [b[1] - a[1] for a, b in zip(readings, readings[1:], strict=False)]
    assert energy["value"].to_list() == pytest.approx(expected)
    assert reasons(tables, "e") == {"counter_first": 1}


def test_counter_differenced_across_a_dropout(tmp_path):
    # L12 2024-03-13: a dropout row between two 15-minute readings; the readings around it are two steps apart. The
    # reading after the dropout keeps what the register recorded across it (a gap changes quality, not the total).
    lines = real_lines(X + "xai4heat_scada_L12.csv", range(3395, 3416))
    tables = xai(tmp_path, lines, site="L12")
    counter = reasons(tables, "e")
    assert "counter_gap" not in counter and counter.get("dropout_row") == 1
    energy = tables["observations"].filter(pl.col("stream_id") == "L12__e").sort("ts")
    assert energy.height == len(lines) - 1 - 2  # every reading but the first (counter_first) and the dropout row
    total = sum(energy["value"].to_list())
    cells = sorted((line.split(",")[0], line.split(",")[7]) for line in lines[1:])  # by time: the file runs backwards
    readings = [float(cell) for _, cell in cells if cell not in ("", "0", "0.0")]
    assert total == pytest.approx(readings[-1] - readings[0])  # the register difference, gap included


def test_counter_jump_above_declared_rate(tmp_path):
    text = xai_config(held_out_sites="[]").replace("max_rate = 50.0", "max_rate = 0.25")
    ws = make_workspace(tmp_path, "xai4heat", text, {L4: "\n".join(real_lines(X + L4, range(36000, 36013))) + "\n"})
    tables = ingest(ws, "xai4heat")
    assert reasons(tables, "e").get("counter_jump", 0) >= 1


def test_value_outside_plausible_range(tmp_path):
    # L17 2021-11-22 22:00: pe reads 8,000,001.4.
    tables = xai(tmp_path, real_lines(X + "xai4heat_scada_L17.csv", [27378, 27379, 27380]), site="L17")
    bad = tables["rejects"].filter(pl.col("reason") == "out_of_range")
    assert bad["raw"].to_list() == ["8000001.4"] and bad["column"].to_list() == ["pe"]


@pytest.mark.parametrize(
    ("rule", "kept", "rejected"),
    [("keep_first_row", ["16.8"], 1), ("keep_last_row", ["19.9"], 1), ("reject_all", [], 2)],
)
def test_duplicate_timestamps_follow_the_declared_rule(tmp_path, rule, kept, rejected):
    lines = real_lines(X + L4, [2, 3])
    twin = lines[1].split(",")
    twin[1] = "19.9"
    lines.insert(2, ",".join(twin))
    text = xai_config(held_out_sites="[]").replace('duplicates = "keep_first_row"', f'duplicates = "{rule}"')
    ws = make_workspace(tmp_path, "xai4heat", text, {L4: "\n".join(lines) + "\n"})
    tables = ingest(ws, "xai4heat")
    first_ts = tables["observations"].filter(pl.col("stream_id") == "L4__t_amb")["ts"].max()
    amb = tables["observations"].filter((pl.col("stream_id") == "L4__t_amb") & (pl.col("ts") == first_ts))
    raw_kept = [f"{v:.1f}" for v in amb["value"]] if kept else []
    if kept:
        assert raw_kept == kept
    dups = tables["rejects"].filter((pl.col("reason") == "duplicate_timestamp") & (pl.col("column") == "t_amb"))
    assert dups.height == rejected


@pytest.mark.parametrize(
    ("text", "reason"),
    [("nan", "non_finite"), ("inf", "non_finite"), ("-Infinity", "non_finite"), ("abc", "unparseable")],
)
def test_nan_inf_and_garbage_are_recorded(tmp_path, text, reason):
    lines = real_lines(X + L4, [2, 3])
    cells = lines[1].split(",")
    cells[2] = text
    lines[1] = ",".join(cells)
    tables = xai(tmp_path, lines)
    assert tables["rejects"].filter(pl.col("column") == "t_ref")["reason"].to_list() == [reason]


def test_hhw_na_and_empty_cells_are_missing(tmp_path):
    ws = make_workspace(
        tmp_path, "hhw", copy_config("hhw").replace('held_out_sites = ["building124"]', "held_out_sites = []"), {}
    )
    copy_real(tmp_path, "hhw", ["brick/building_105_non-condensing_h.ttl", "brick/building_127_condensing_m.ttl"])
    raw = tmp_path / "data" / "raw" / "hhw" / "timeseries"
    raw.mkdir(parents=True)
    (raw / "105hhw_system_data.csv").write_text(
        "\n".join(real_lines("hhw/timeseries/105hhw_system_data.csv", [2, 3])) + "\n"
    )
    (raw / "127hhw_system_data.csv").write_text(
        "\n".join(real_lines("hhw/timeseries/127hhw_system_data.csv", [2, 33])) + "\n"
    )
    tables = ingest(ws, "hhw")
    missing = tables["rejects"].filter(pl.col("reason") == "missing")
    assert missing.filter(pl.col("source").str.contains("105")).height == 12  # six NA cells on each of two rows
    assert set(missing.filter(pl.col("source").str.contains("127"))["column"]) == {"gas", "flow"}
    assert tables["observations"].height + tables["rejects"].height == 2 * 7 + 2 * 10
