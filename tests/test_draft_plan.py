"""`corpus draft` knows before the build (issue 39): it reads each value file's first and last rows for the corpus's
span, states the split plan and the families the build would keep (the tasks stage's own rule), proposes point
classes from configs/lexicon.toml as `CHECK <Class>` (refused by the build until confirmed), writes labels with
{site} and a site_label, and tells shards of the same streams (data_1.csv, 2019.csv) from sites, down nested trees."""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from contracts.corpus_metadata import TableMetadata
from pipeline.cli import main
from pipeline.core.config import load_lexicon
from pipeline.core.errors import IngestError
from pipeline.core.workspace import Workspace
from pipeline.ingest.draft import draft
from pipeline.ingest.draft_points import propose
from pipeline.ingest.metadata import _read_table
from tests.helpers import REPO, copy_shared_configs, fill_drafted_mapping
from tests.shapes import write_office

LEXICON = load_lexicon(Workspace.from_root(REPO))


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    (root / "configs" / "corpora").mkdir(parents=True)
    copy_shared_configs(root)
    return root


def _draft(root: Path, name: str, *args: str):
    return CliRunner().invoke(
        main, ["--root", str(root), "corpus", "draft", str(root / "data" / "raw" / name), "--name", name, *args]
    )


def _mapping(root: Path, name: str) -> tuple[str, dict]:
    text = (root / "configs" / "corpora" / f"{name}.toml").read_text(encoding="utf-8")
    return text, tomllib.loads(text)


def _points(root: Path, name: str) -> dict[str, dict[str, str]]:
    text = (root / "configs" / "corpora" / name / "points.csv").read_text(encoding="utf-8")
    return {row["key"]: row for row in csv.DictReader(io.StringIO(text))}


def _write(path: Path, header: list[str], rows: list[list[object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(",".join(map(str, r)) for r in [header, *rows]) + "\n", encoding="utf-8")


def _times(start: dt.datetime, step: dt.timedelta, n: int) -> list[str]:
    return [(start + i * step).strftime("%Y-%m-%d %H:%M:%S") for i in range(n)]


def test_office_of_45_rooms_drafts_a_site_plan_and_names_the_families_left_out(tmp_path):
    root = _root(tmp_path)
    write_office(root / "data" / "raw" / "office", rooms=45, days=8)
    result = _draft(root, "office")
    assert result.exit_code == 0, result.output
    out = result.output.splitlines()
    assert "span: 8.0 days (2 calendar weeks) at 45 sites" in out
    assert "split plan: site (whole sites per split, 45 sites)" in out
    assert "families that fit: timestamp_nearest_lookup, timestamp_value_lookup" in out
    left_out = [line for line in out if line.startswith("  left out: ")]
    assert any("window_rank: its month window (31 days) needs a span of 93 days" in line for line in left_out)
    assert any("day_mean_lookup" in line and "whole weeks" in line for line in left_out)
    assert len(out) < 25  # short: one line per reason, not per family
    text, mapping = _mapping(root, "office")
    header = text.split("\nname = ")[0]  # the same plan, as a comment block above the mapping
    assert "#   split plan: site (whole sites per split, 45 sites)" in header and "#     left out: " in header
    assert mapping["values"]["file_pattern"] == r"room_(?P<site>\d+)\.csv" and mapping["values"]["site"] == "{site}"
    assert mapping["metadata"]["site_label"] == "room {site}"
    points = _points(root, "office")
    assert points["co2"]["point_class"] == "CHECK CO2_Sensor" and points["co2"]["label"] == "CO2 in {site}"
    assert points["co2"]["unit"] == "PPM"
    again = _draft(root, "office", "--force")  # deterministic: the same bytes again
    assert again.exit_code == 0 and _mapping(root, "office")[0] == text


def test_one_room_of_eight_days_drafts_a_group_plan_of_its_sensors(tmp_path):
    root = _root(tmp_path)
    write_office(root / "data" / "raw" / "one", rooms=1, days=8)
    result = _draft(root, "one")
    assert result.exit_code == 0, result.output
    [plan] = [line for line in result.output.splitlines() if line.startswith("split plan: ")]
    assert plan == "split plan: group (whole zones, rooms or stream groups per split, 5 groups at 1 site)"
    assert "#   split plan: group" in _mapping(root, "one")[0]


def test_one_sensor_of_eight_days_is_one_line_naming_span_sites_groups_and_each_minimum(tmp_path):
    root = _root(tmp_path)
    _write(
        root / "data" / "raw" / "one" / "room.csv",
        ["timestamp", "temperature"],
        [[t, 21.5] for t in _times(dt.datetime(2023, 3, 1), dt.timedelta(minutes=10), 8 * 144)],
    )
    result = _draft(root, "one")
    assert result.exit_code == 0, result.output  # the draft is still written: the user may add data or set [splits]
    [reason] = [line for line in result.output.splitlines() if line.startswith("split plan: ")]
    assert reason.startswith(
        "split plan: none; its data spans 8.0 days (2 calendar weeks) at 1 site with 1 zone, room or stream group: "
        "no split plan"
    )
    assert "a time split needs" in reason and "calendar weeks" in reason and "a site split needs 5 sites" in reason
    assert "a group split needs 5 zones, rooms or stream groups" in reason and "configs/corpora/one.toml" in reason
    assert "families the span would keep under a plan: timestamp_nearest_lookup, timestamp_value_lookup" in (
        result.output
    )
    assert "#   split plan: none; its data spans 8.0 days" in _mapping(root, "one")[0]


def test_the_build_refuses_check_markers_like_todo_naming_the_row_and_the_fix(tmp_path):
    folder = tmp_path / "meta"
    folder.mkdir()
    (folder / "points.csv").write_text(
        "key,point_class,label\nco2,CO2_Sensor,CO2 in {site}\ntemperature,CHECK Temperature_Sensor,t in {site}\n"
    )
    meta = TableMetadata(
        kind="table", file="points.csv", key_column="key", point_class_column="point_class", label_column="label"
    )
    with pytest.raises(IngestError) as info:
        _read_table(folder, meta)
    message = str(info.value)
    assert "\n" not in message and "points.csv: row 3" in message and "'temperature'" in message
    assert "'CHECK Temperature_Sensor'" in message and "delete 'CHECK '" in message
    (folder / "points.csv").write_text("key,point_class,label\nco2,CHECK,CO2\n")
    with pytest.raises(IngestError, match="row 2"):
        _read_table(folder, meta)
    (folder / "points.csv").write_text("key,point_class,label\nco2,CO2_Sensor,CO2 in {site}\n")
    assert _read_table(folder, meta).points_by_key["co2"].point_class == "CO2_Sensor"


def test_a_drafted_office_build_stops_at_the_first_check_in_one_line(tmp_path):
    root = _root(tmp_path)
    write_office(root / "data" / "raw" / "office", rooms=5, days=2)
    assert _draft(root, "office").exit_code == 0
    mapping = root / "configs" / "corpora" / "office.toml"
    fill_drafted_mapping(mapping)
    built = CliRunner().invoke(main, ["--root", str(root), "build", "--corpus", "office"])
    assert built.exit_code == 1 and "Traceback" not in built.output
    [error] = [line for line in built.output.splitlines() if line.startswith("error:")]
    assert "points.csv: row 2" in error and "'CHECK CO2_Sensor'" in error and "delete 'CHECK '" in error


def test_numbered_chunks_are_shards_of_one_site_not_sites(tmp_path):
    root = _root(tmp_path)
    start = dt.datetime(2023, 1, 2)
    for part in range(1, 12):
        times = _times(start + dt.timedelta(days=part - 1), dt.timedelta(minutes=30), 48)
        _write(
            root / "data" / "raw" / "chunks" / "exports" / f"data_{part}.csv",
            ["time", "co2", "temp"],
            [[t, 400 + i % 7, 21.5] for i, t in enumerate(times)],
        )
    result = _draft(root, "chunks", "--json")
    assert result.exit_code == 0, result.output
    _, mapping = _mapping(root, "chunks")
    values = mapping["values"]
    assert (values["files"], values["file_pattern"]) == (
        "exports/data_*.csv",
        r"data_(?P<part>\d+)\.csv",
    )  # a folder alike: the name
    assert values["site"] == "chunks" and values["kind"] == "wide_csv"
    assert "span: 11 days (2 calendar weeks) at 1 site" in result.output  # every chunk's rows, one site
    assert sorted(_points(root, "chunks")) == ["co2", "temp"]


def test_year_files_are_shards_and_a_large_file_is_read_at_its_ends(tmp_path):
    root = _root(tmp_path)
    for year in (2019, 2020):
        times = _times(dt.datetime(year, 1, 1), dt.timedelta(hours=1), 24 * 365)
        _write(
            root / "data" / "raw" / "meter" / f"meter_{year}.csv",
            ["timestamp", "kwh", "kw"],
            [[t, f"{i * 0.25:.3f}", f"{1.5 + i % 10 / 10:.2f}"] for i, t in enumerate(times)],
        )
    assert (root / "data" / "raw" / "meter" / "meter_2019.csv").stat().st_size > 256 * 1024  # beyond the sample
    result = _draft(root, "meter")
    assert result.exit_code == 0, result.output
    assert "span: 730 days" in result.output and "at 1 site" in result.output  # the last row of 2020, by a seek
    assert "split plan: time" in result.output
    values = _mapping(root, "meter")[1]["values"]
    assert values["file_pattern"] == r"meter_(?P<year>\d{4})\.csv" and values["files"] == "meter_*.csv"
    points = _points(root, "meter")
    assert points["kwh"]["point_class"] == "CHECK Electrical_Energy_Sensor" and points["kwh"]["unit"] == "KiloW-HR"
    assert points["kw"]["point_class"] == "CHECK Electrical_Power_Sensor"


def test_a_nested_tree_drafts_site_meter_year_as_a_path_pattern(tmp_path):
    root = _root(tmp_path)
    raw = root / "data" / "raw" / "campus"
    for building in ("b12", "b7"):
        for meter in ("electricity", "gas", "water"):
            for year in (2019, 2020):
                times = _times(dt.datetime(year, 1, 1), dt.timedelta(days=1), 365)
                _write(
                    raw / building / meter / f"{year}.csv",
                    ["date", "value"],
                    [[t, 10 + i % 5] for i, t in enumerate(times)],
                )
    result = _draft(root, "campus")
    assert result.exit_code == 0, result.output
    values = _mapping(root, "campus")[1]["values"]
    assert values["kind"] == "file_per_stream" and values["files"] == "*/*/*.csv"
    assert values["file_pattern"] == r"(?P<site>b\d+)/(?P<key>[^/]+)/(?P<year>\d{4})\.csv"
    assert values["site"] == "{site}" and values["value_column"] == "value"
    assert "at 2 sites" in result.output
    points = _points(root, "campus")
    assert {k: p["point_class"] for k, p in points.items()} == {
        "electricity": "CHECK Electrical_Energy_Sensor",
        "gas": "CHECK Natural_Gas_Usage_Sensor",
        "water": "CHECK Water_Usage_Sensor",
    }
    assert points["gas"]["label"] == "gas use in {site}"


@pytest.mark.parametrize("folder", ["", "Estate_Building_"])
def test_a_nested_tree_with_one_meter_keeps_the_building_folder_as_the_site(tmp_path, folder):
    """Only the building folder varies (one meter, chosen from a larger archive): it is still the site, and the meter
    folder below it, the same in every path, is the stream (not one stream per building at one site)."""
    root = _root(tmp_path)
    raw = root / "data" / "raw" / "estate"
    for building in ("b3", "b12", "b40"):
        for year in (2019, 2020):
            times = _times(dt.datetime(year, 1, 1), dt.timedelta(days=1), 365)
            _write(
                raw / f"{folder}{building}" / "electricity" / f"{year}.csv", ["date", "value"], [[t, 5] for t in times]
            )
    result = _draft(root, "estate")
    assert result.exit_code == 0, result.output
    values = _mapping(root, "estate")[1]["values"]
    assert values["file_pattern"] == re.escape(folder) + r"(?P<site>b\d+)/(?P<key>[^/]+)/(?P<year>\d{4})\.csv"
    assert values["site"] == "{site}" and "at 3 sites" in result.output
    assert set(_points(root, "estate")) == {"electricity"}


@pytest.mark.parametrize("layout", ["long_csv", "wide_csv"])
def test_a_column_of_site_ids_becomes_site_column(tmp_path, layout):
    root = _root(tmp_path)
    times = _times(dt.datetime(2023, 5, 1), dt.timedelta(hours=1), 72)
    buildings = [f"B{n}" for n in range(1, 7)]
    if layout == "long_csv":
        rows = [[b, s, t, 1.0] for b in buildings for s in ("co2", "humidity", "temperature") for t in times]
        _write(root / "data" / "raw" / "sites" / "readings.csv", ["building", "sensor", "timestamp", "value"], rows)
    else:
        rows = [[b, t, 420, 21.0] for b in buildings for t in times]
        _write(
            root / "data" / "raw" / "sites" / "readings.csv", ["building_id", "timestamp", "co2", "temperature"], rows
        )
    result = _draft(root, "sites")
    assert result.exit_code == 0, result.output
    _, mapping = _mapping(root, "sites")
    values = mapping["values"]
    assert values["kind"] == layout and values["site"] == "{site}"
    assert values["site_column"] == ("building" if layout == "long_csv" else "building_id")
    assert "ignore_columns" not in values
    assert mapping["metadata"]["site_label"] == "building {site}"
    assert "at 6 sites" in result.output and "split plan: site" in result.output
    assert _points(root, "sites")["co2"]["point_class"] == "CHECK CO2_Sensor"


def test_the_lexicon_proposes_the_office_sensors_and_the_most_specific_phrase():
    proposed = {key: propose(key, LEXICON) for key in ("co2", "humidity", "light", "pir", "temperature")}
    assert {k: (e.point_class, e.unit) for k, e in proposed.items() if e} == {
        "co2": ("CO2_Sensor", "PPM"),
        "humidity": ("Relative_Humidity_Sensor", "PERCENT_RH"),
        "light": ("Illuminance_Sensor", "LUX"),
        "pir": ("Occupancy_Sensor", None),
        "temperature": ("Temperature_Sensor", "DEG_C"),
    }
    assert propose("ZoneTempSetpoint", LEXICON).point_class == "Temperature_Setpoint"
    assert propose("SupplyWaterTemp", LEXICON).point_class == "Supply_Water_Temperature_Sensor"
    assert propose("Lux_Level", LEXICON).point_class == "Illuminance_Sensor"
    assert propose("motion_detected", LEXICON).point_class == "Occupancy_Sensor"
    assert propose("t_sup_prim", LEXICON) is None


def test_the_library_draft_without_a_plan_writes_no_plan_block(tmp_path):
    raw = tmp_path / "office"
    write_office(raw, rooms=2, days=2)
    result = draft(raw, "office", None)
    assert result.plan == [] and "What a build would do" not in result.mapping
    assert "TODO" in result.points and "CHECK" not in result.points  # no lexicon given: nothing proposed


def test_a_damaged_unix_time_past_the_sniffed_rows_is_no_time_not_a_traceback(tmp_path):
    """Unix times are sniffed on a file's first rows; a damaged cell further down, among the rows the draft spreads
    through the file for the row order and the weeks, is read as no time (ingest rejects it), never a traceback."""
    root = _root(tmp_path)
    rows = [[1_600_000_000 + 300 * i, 20 + i % 7] for i in range(3000)]
    rows[2500][0] = "garbage"
    _write(root / "data" / "raw" / "meters" / "meter_a.csv", ["time", "value"], rows)
    done = _draft(root, "meters")
    assert done.exit_code == 0, done.output
    text, mapping = _mapping(root, "meters")
    assert mapping["time"]["format"] == "epoch_s" and mapping["time"]["row_order"] == "ascending", text
