"""Corpus shapes by configuration alone (issue 39, items 4 and 5): sharded and nested trees, shards merged into one
stream, a site column inside a file, time formats per file, and points tables keyed by site or files with counters.
Every test builds its tiny raw tree under tmp_path and checks that each raw value cell is accounted for."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.core.config import load_mapping
from pipeline.core.errors import ConfigError
from pipeline.core.resources import Resources
from pipeline.harness.build import build
from tests.helpers import fails, ingest, make_workspace
from tests.helpers import run_in as run

INLINE = """
[metadata]
kind = "inline"
site_label = "building {site}"

[metadata.points.heat]
point_class = "Thermal_Power_Sensor"
label = "heat power at {site}"
unit = "KiloW"

[metadata.points.flow]
point_class = "Water_Flow_Sensor"
label = "flow at {site}"
"""

TABLE = """
[metadata]
kind = "table"
location = "config"
file = "points.csv"
key_column = "key"
point_class_column = "class"
label_column = "label"
unit_column = "unit"
"""


def mapping(values: str, metadata: str = INLINE, time: str = "", cleaning: str = "") -> str:
    return (
        'name = "shapes"\ntitle = "shapes"\n\n[time]\ncolumn = "time"\nformat = "%Y-%m-%d %H:%M"\n'
        + time
        + "\n[values]\n"
        + values
        + metadata
        + ("\n[cleaning]\n" + cleaning if cleaning else "")
    )


def hourly(day: str, hours: range, values: list[float | str], header: str = "time,value") -> str:
    return header + "\n" + "".join(f"{day} {h:02d}:00,{v}\n" for h, v in zip(hours, values, strict=True))


def workspace(tmp_path, config: str, files: dict[str, str], points: str | None = None):
    ws = make_workspace(tmp_path, "shapes", config, files)
    if points is not None:
        folder = ws.root / "configs" / "corpora" / "shapes"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "points.csv").write_text(points, encoding="utf-8")
    return ws


def accounted(tables: dict[str, pl.DataFrame], cells: int) -> None:
    """Every raw value cell is one observation or one reject, exactly."""
    assert tables["observations"].height + tables["rejects"].height == cells


SHARDED = """kind = "file_per_stream"
files = "**/*.csv"
file_pattern = '(?P<site>b\\d+)/(?P<meter>[^/]+)/(?P<year>\\d{4})\\.csv'
key = "{meter}"
site = "{site}"
stream_id = "{site}__{meter}"
value_column = "value"
"""

TREE = {
    # b1/heat: two yearly shards overlapping at the turn of the year (2019's last hour is also 2020's first).
    "b1/heat/2019.csv": hourly("2019-12-31", range(22, 24), [1.0, 2.0])
    + "2020-01-01 00:00,3.0\n",  # the overlap, as 2019's file has it
    "b1/heat/2020.csv": hourly("2020-01-01", range(0, 3), [30.0, 4.0, 5.0]),
    "b1/flow/2020.csv": hourly("2020-01-01", range(0, 2), [7.0, 8.0]),
    "b2/heat/2020.csv": hourly("2020-01-01", range(0, 2), [9.0, ""]),
}
TREE_CELLS = 3 + 3 + 2 + 2


def test_sharded_tree_becomes_streams_in_time_order(tmp_path):
    ws = workspace(tmp_path, mapping(SHARDED), TREE)
    tables = ingest(ws, "shapes")
    accounted(tables, TREE_CELLS)
    streams = tables["streams"].sort("stream_id")
    assert streams["stream_id"].to_list() == ["b1__flow", "b1__heat", "b2__heat"]
    assert streams["site_id"].to_list() == ["b1", "b1", "b2"]
    heat = streams.filter(pl.col("stream_id") == "b1__heat")
    assert heat["source_file"].item() == "b1/heat/2019.csv;b1/heat/2020.csv"
    assert heat["label"].item() == "heat power at building b1"
    obs = tables["observations"].filter(pl.col("stream_id") == "b1__heat")
    assert obs["ts"].is_sorted() and obs["ts"].n_unique() == obs.height == 5
    # keep_first_row (the default): the earlier shard's value survives, the later one's is a duplicate reject.
    assert obs["value"].to_list() == [1.0, 2.0, 3.0, 4.0, 5.0]
    duplicate = tables["rejects"].filter(pl.col("reason") == "duplicate_timestamp")
    assert duplicate.select("source", "row", "stream_id", "raw").rows() == [("b1/heat/2020.csv", 2, "b1__heat", "30.0")]
    missing = tables["rejects"].filter(pl.col("reason") == "missing")
    assert missing.select("source", "stream_id").rows() == [("b2/heat/2020.csv", "b2__heat")]


def test_shard_overlap_follows_the_duplicate_rule(tmp_path):
    ws = workspace(tmp_path, mapping(SHARDED, cleaning='duplicates = "keep_last_row"\n'), TREE)
    tables = ingest(ws, "shapes")
    accounted(tables, TREE_CELLS)
    obs = tables["observations"].filter(pl.col("stream_id") == "b1__heat")
    assert obs["value"].to_list() == [1.0, 2.0, 30.0, 4.0, 5.0]
    duplicate = tables["rejects"].filter(pl.col("reason") == "duplicate_timestamp")
    assert duplicate.select("source", "row").rows() == [("b1/heat/2019.csv", 4)]


def test_numbered_parts_merge_in_natural_order(tmp_path):
    """part_1 .. part_11 of one wide file: each part repeats the previous part's last hour with another value; the
    first part in natural order (part_9 before part_10) keeps it."""
    files = {}
    for n in range(1, 12):
        hour = n - 1
        body = f"time,heat,flow\n2020-01-01 {hour:02d}:00,{100 + n},{n}\n2020-01-01 {hour + 1:02d}:00,{n},{n}\n"
        files[f"b7/part_{n}.csv"] = body
    values = (
        'kind = "wide_csv"\nfiles = "**/part_*.csv"\n'
        "file_pattern = '(?P<site>[^/]+)/part_(?P<n>\\d+)\\.csv'\nsite = \"{site}\"\n"
    )
    tables = ingest(workspace(tmp_path, mapping(values), files), "shapes")
    accounted(tables, 11 * 2 * 2)
    heat = tables["observations"].filter(pl.col("stream_id") == "b7__heat")
    assert heat["ts"].is_sorted() and heat.height == 12
    # hour 0 from part_1 (101); hour h (1..10) first written by part_h (value h), again by part_h+1 (100 + h + 1)
    assert heat["value"].to_list() == [101.0] + [float(h) for h in range(1, 12)]
    duplicate = tables["rejects"].filter((pl.col("reason") == "duplicate_timestamp") & (pl.col("column") == "heat"))
    assert sorted(duplicate["source"].to_list()) == sorted(f"b7/part_{n}.csv" for n in range(2, 12))
    streams = tables["streams"].filter(pl.col("stream_id") == "b7__heat")
    assert streams["source_file"].item() == ";".join(f"b7/part_{n}.csv" for n in range(1, 12))


def test_output_does_not_depend_on_listing_order(tmp_path):
    first = ingest(workspace(tmp_path / "a", mapping(SHARDED), TREE), "shapes")
    second = ingest(workspace(tmp_path / "b", mapping(SHARDED), dict(reversed(TREE.items()))), "shapes")
    for name in ("observations", "rejects", "streams", "sites"):
        assert first[name].equals(second[name]), name


WIDE_SITES = """kind = "wide_csv"
files = "all.csv"
file_pattern = 'all\\.csv'
site_column = "building"
site = "b{site}"
"""


def test_site_column_in_a_wide_file(tmp_path):
    body = (
        "time,building,heat,flow\n"
        "2020-01-01 00:00, 1 ,1.0,2.0\n"  # a padded id is its stripped self
        "2020-01-01 00:00,2,3.0,4.0\n"
        "2020-01-01 01:00,,5.0,6.0\n"  # no site: both cells are missing_site
        "2020-01-01 01:00,2,7.0,NA\n"
    )
    tables = ingest(workspace(tmp_path, mapping(WIDE_SITES), {"all.csv": body}), "shapes")
    accounted(tables, 4 * 2)
    assert sorted(tables["sites"]["site_id"]) == ["b1", "b2"]
    assert sorted(tables["streams"]["stream_id"]) == ["b1__flow", "b1__heat", "b2__flow", "b2__heat"]
    missing_site = tables["rejects"].filter(pl.col("reason") == "missing_site")
    assert missing_site.select("row", "column", "stream_id").sort("column").rows() == [
        (4, "flow", None),
        (4, "heat", None),
    ]
    obs = tables["observations"]
    assert obs.filter(pl.col("stream_id") == "b2__heat")["value"].to_list() == [3.0, 7.0]
    assert tables["rejects"].filter(pl.col("reason") == "missing")["stream_id"].to_list() == ["b2__flow"]


LONG_SITES = """kind = "long_csv"
files = "*.csv"
file_pattern = 'readings_(?P<batch>\\d+)\\.csv'
site_column = "site"
stream_column = "point"
value_column = "value"
stream_id = "{site}__{key}"
"""


def test_site_column_in_a_long_file_with_a_table_keyed_by_site(tmp_path):
    """Site A's 't' is a room temperature, site B's the outside air; 'h' means the same everywhere."""
    body = (
        "time,site,point,value\n"
        "2020-01-01 00:00,A,t,21.0\n"
        "2020-01-01 00:00,B,t,-3.0\n"
        "2020-01-01 00:00,B,h,40\n"
        "2020-01-01 01:00,,t,22.0\n"
        "2020-01-01 01:00,A,h,41\n"
    )
    points = (
        "key,site,class,label,unit\n"
        "t,A,Zone_Air_Temperature_Sensor,room temperature at {site},DEG_C\n"
        "t,B,Outside_Air_Temperature_Sensor,outside air at {site},DEG_C\n"
        "h,,Relative_Humidity_Sensor,humidity at {site},PERCENT_RH\n"
    )
    metadata = TABLE + 'site_column = "site"\n'
    ws = workspace(tmp_path, mapping(LONG_SITES, metadata), {"readings_1.csv": body}, points)
    tables = ingest(ws, "shapes")
    accounted(tables, 5)
    classes = dict(tables["streams"].select("stream_id", "point_class").iter_rows())
    assert classes == {
        "A__t": "Zone_Air_Temperature_Sensor",
        "B__t": "Outside_Air_Temperature_Sensor",
        "A__h": "Relative_Humidity_Sensor",
        "B__h": "Relative_Humidity_Sensor",
    }
    missing_site = tables["rejects"].filter(pl.col("reason") == "missing_site")
    assert missing_site.select("row", "raw").rows() == [(5, "22.0")]


def test_a_site_no_table_row_maps_follows_unmapped_columns(tmp_path):
    body = "time,site,point,value\n2020-01-01 00:00,A,t,21.0\n2020-01-01 00:00,C,t,5.0\n"
    points = "key,site,class,label,unit\nt,A,Zone_Air_Temperature_Sensor,room,DEG_C\n"
    config = mapping(LONG_SITES, TABLE + 'site_column = "site"\n')
    ws = workspace(tmp_path, config, {"readings_1.csv": body}, points)
    fails(run(ws, "ingest"), "readings_1.csv", "no metadata for 't' at site 'C'", "unmapped_columns")
    ws = workspace(tmp_path / "reject", config + 'unmapped_columns = "reject"\n', {"readings_1.csv": body}, points)
    tables = ingest(ws, "shapes")
    accounted(tables, 2)
    assert tables["rejects"].select("row", "reason").rows() == [(3, "unmapped_column")]


def test_time_formats_per_file(tmp_path):
    time = (
        'timezone = "UTC"\n'
        "file_formats = [\n"
        '  {files = \'old/.*\', format = "%d.%m.%Y %H:%M", timezone = "Europe/Berlin"},\n'
        "  {files = '.*epoch.*', format = \"epoch_s\"},\n"
        "]\n"
    )
    values = (
        'kind = "wide_csv"\nfiles = "**/*.csv"\n'
        "file_pattern = '(?:old/|new/)?(?P<site>[a-z]+)[^/]*\\.csv'\nsite = \"{site}\"\n"
    )
    files = {
        "old/alpha.csv": "time,heat,flow\n01.07.2020 02:00,1.0,1.5\n",  # CEST: 00:00 UTC
        "new/beta_epoch.csv": "time,heat,flow\n1593561600,2.0,2.5\n",  # 2020-07-01 00:00 UTC
        "gamma.csv": "time,heat,flow\n2020-07-01 00:00,3.0,3.5\n",
    }
    tables = ingest(workspace(tmp_path, mapping(values, time=time), files), "shapes")
    accounted(tables, 6)
    assert tables["rejects"].height == 0
    assert set(tables["observations"]["ts"]) == {1593561600 * 1_000_000}


def test_points_table_keyed_by_files_and_counter_column(tmp_path):
    """Meter 'm1' is heat power in building 1's files and a cumulative energy counter in building 2's."""
    points = (
        "key,files,class,label,unit,counter\n"
        "m1,b1/.*,Thermal_Power_Sensor,heat power at {site},KiloW,\n"
        "m1,b2/.*,Thermal_Energy_Sensor,heat energy at {site},KiloW-HR,yes\n"
        "m2,,Water_Flow_Sensor,flow at {site},,0\n"
    )
    metadata = TABLE + 'files_column = "files"\ncounter_column = "counter"\n'
    files = {
        "b1/m1/2020.csv": hourly("2020-01-01", range(0, 3), [5.0, 6.0, 7.0]),
        "b2/m1/2020.csv": hourly("2020-01-01", range(0, 3), [100.0, 102.5, 106.0]),
        "b2/m2/2020.csv": hourly("2020-01-01", range(0, 3), [1.0, 1.0, 1.0]),
    }
    tables = ingest(workspace(tmp_path, mapping(SHARDED, metadata), files, points), "shapes")
    accounted(tables, 9)
    streams = {row["stream_id"]: row for row in tables["streams"].iter_rows(named=True)}
    assert streams["b1__m1"]["point_class"] == "Thermal_Power_Sensor" and not streams["b1__m1"]["is_counter"]
    assert streams["b2__m1"]["point_class"] == "Thermal_Energy_Sensor" and streams["b2__m1"]["is_counter"]
    assert not streams["b2__m2"]["is_counter"]
    energy = tables["observations"].filter(pl.col("stream_id") == "b2__m1")
    assert energy["value"].to_list() == [2.5, 3.5]
    assert tables["rejects"].select("stream_id", "reason").rows() == [("b2__m1", "counter_first")]


def test_table_precedence_site_and_files_over_site_over_files(tmp_path):
    points = (
        "key,site,files,class,label,unit\n"
        "m1,,,Generic_Sensor,any,\n"
        "m1,,.*/2020\\.csv,Files_Sensor,files,\n"
        "m1,b1,,Site_Sensor,site,\n"
        "m1,b1,b1/m1/2021\\.csv,Both_Sensor,both,\n"
    )
    metadata = TABLE + 'site_column = "site"\nfiles_column = "files"\n'
    values = SHARDED.replace('stream_id = "{site}__{meter}"', 'stream_id = "{site}__{meter}__{year}"')
    files = {
        rel: hourly("2020-01-01", range(0, 1), [1.0])
        for rel in ("b1/m1/2019.csv", "b1/m1/2021.csv", "b2/m1/2019.csv", "b2/m1/2020.csv")
    }
    tables = ingest(workspace(tmp_path, mapping(values, metadata), files, points), "shapes")
    classes = dict(tables["streams"].select("stream_id", "point_class").iter_rows())
    assert classes == {
        "b1__m1__2019": "Site_Sensor",
        "b1__m1__2021": "Both_Sensor",
        "b2__m1__2019": "Generic_Sensor",
        "b2__m1__2020": "Files_Sensor",
    }


# One-line errors: what was wrong, where, and the fix.


def test_shards_with_conflicting_metadata_are_an_error(tmp_path):
    points = (
        "key,files,class,label,unit\n"
        "m1,.*/2019\\.csv,Thermal_Power_Sensor,heat,KiloW\n"
        "m1,.*/2020\\.csv,Thermal_Power_Sensor,heat,W\n"
    )
    files = {rel: hourly("2020-01-01", range(0, 1), [1.0]) for rel in ("b1/m1/2019.csv", "b1/m1/2020.csv")}
    ws = workspace(tmp_path, mapping(SHARDED, TABLE + 'files_column = "files"\n'), files, points)
    fails(run(ws, "ingest"), "b1/m1/2020.csv", "stream 'b1__m1'", "b1/m1/2019.csv", "unit", "values.stream_id")


def test_a_stream_id_two_sites_share_is_an_error(tmp_path):
    values = SHARDED.replace('stream_id = "{site}__{meter}"', 'stream_id = "{meter}"')
    files = {rel: hourly("2020-01-01", range(0, 1), [1.0]) for rel in ("b1/heat/2020.csv", "b2/heat/2020.csv")}
    fails(run(workspace(tmp_path, mapping(values), files), "ingest"), "stream 'heat'", "another site")


def test_ambiguous_table_rows_are_an_error(tmp_path):
    points = "key,files,class,label,unit\nm1,b1/.*,A_Sensor,a,\nm1,.*/2020\\.csv,B_Sensor,b,\n"
    files = {"b1/m1/2020.csv": hourly("2020-01-01", range(0, 1), [1.0])}
    ws = workspace(tmp_path, mapping(SHARDED, TABLE + 'files_column = "files"\n'), files, points)
    fails(run(ws, "ingest"), "points.csv", "rows 2, 3", "'m1'", "b1/m1/2020.csv", "narrow")


def test_bad_counter_cell_is_an_error(tmp_path):
    points = "key,class,label,unit,counter\nm1,Thermal_Energy_Sensor,e,,maybe\n"
    files = {"b1/m1/2020.csv": hourly("2020-01-01", range(0, 1), [1.0])}
    ws = workspace(tmp_path, mapping(SHARDED, TABLE + 'counter_column = "counter"\n'), files, points)
    fails(run(ws, "ingest"), "points.csv", "row 2", "'maybe'", "counter")


def test_path_not_matching_the_pattern_is_named(tmp_path):
    files = {"b1/heat/2020.csv": hourly("2020-01-01", range(0, 1), [1.0]), "b1/heat.csv": "time,value\n"}
    fails(run(workspace(tmp_path, mapping(SHARDED), files), "ingest"), "b1/heat.csv", "relative path does not match")


def test_site_column_with_brick_metadata_is_refused(tmp_path):
    brick = '\n[metadata]\nkind = "brick"\nfiles = "*.ttl"\n'
    ws = workspace(tmp_path, mapping(WIDE_SITES.replace('site = "b{site}"\n', ""), brick), {"all.csv": "x\n"})
    fails(run(ws, "ingest"), "site_column cannot be combined with brick metadata")


def test_template_naming_an_uncaptured_group_is_refused(tmp_path):
    values = SHARDED.replace('stream_id = "{site}__{meter}"', 'stream_id = "{site}__{floor}"')
    ws = workspace(tmp_path, mapping(values), TREE)
    fails(run(ws, "ingest"), "values.stream_id", "{floor}", "named group of file_pattern")


def test_unknown_per_file_time_format_is_refused(tmp_path):
    time = "file_formats = [{files = 'old/.*', format = \"DD.MM.YYYY\"}]\n"
    ws = workspace(tmp_path, mapping(SHARDED, time=time), TREE)
    fails(run(ws, "ingest"), "time.file_formats.0.format", "unknown time format")


def test_per_file_format_matching_nothing_names_its_entry(tmp_path):
    time = "file_formats = [{files = 'b2/.*', format = \"epoch_ms\"}]\n"
    ws = workspace(tmp_path, mapping(SHARDED, time=time), TREE)
    fails(run(ws, "ingest"), "b2/heat/2020.csv", "time.file_formats entry 1")


def _ingest_bytes(ws, resources) -> dict[str, bytes]:
    build(ws, ["shapes"], until="ingest", resources=resources)
    out = ws.stage_dir("shapes", "ingest")
    return {p.name: p.read_bytes() for p in sorted(out.glob("*")) if p.suffix in (".parquet", ".json")}


def test_shards_and_site_columns_are_partition_invariant(tmp_path):
    """Shards of a stream go to one batch; a file of many sites is read by every batch, each keeping its streams."""
    body = "time,building,heat,flow\n" + "".join(
        f"2020-01-01 {h:02d}:00,{site},{h}.5,{'' if h == 3 else h}\n" for h in range(6) for site in ("1", "2", "", "3")
    )
    for config, files in ((mapping(SHARDED), TREE), (mapping(WIDE_SITES), {"all.csv": body})):
        runs = [Resources(partitions=1, workers=1), Resources(partitions=3, workers=1, memory_budget=300_000)]
        outputs = [_ingest_bytes(workspace(tmp_path / f"{i}", config, files), r) for i, r in enumerate(runs)]
        assert outputs[0].keys() == outputs[1].keys() and len(outputs[0]) >= 7
        for name in outputs[0]:
            if name != "manifest.json":
                assert outputs[0][name] == outputs[1][name], name
        tmp_path = tmp_path / "next"


def test_two_columns_of_one_file_giving_one_stream_id_is_an_error(tmp_path):
    values = 'kind = "wide_csv"\nfiles = "*.csv"\nfile_pattern = \'(?P<site>b\\d+)\\.csv\'\nsite = "{site}"\n'
    values += 'stream_id = "{site}"\n'
    body = "time,heat,flow\n2020-01-01 00:00,1.0,2.0\n"
    fails(run(workspace(tmp_path, mapping(values), {"b1.csv": body}), "ingest"), "stream 'b1'", "another key")


def test_per_file_time_formats_are_for_csv_layouts(tmp_path):
    config = (
        'name = "shapes"\ntitle = "t"\n[time]\ncolumn = "timestamp"\nformat = "epoch_us"\n'
        "file_formats = [{files = '.*', format = \"epoch_s\"}]\n"
        '[values]\nkind = "bts_pickle"\nfiles = "*.zip"\nsite = "s"\n' + INLINE
    )
    path = tmp_path / "shapes.toml"
    path.write_text(config, encoding="utf-8")
    with pytest.raises(ConfigError, match="time.file_formats applies to CSV layouts") as info:
        load_mapping(path)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("first", "second"),
    [("Caf\u00e9", "Cafe\u0301"), ("2", "2 ")],  # NFC vs NFD; a trailing space
)
def test_two_spellings_of_one_site_id_in_a_file_are_one_error_line(tmp_path, first, second):
    body = f"time,building,heat,flow\n2020-01-01 00:00,{first},1.0,2.0\n2020-01-01 00:00,{second},3.0,4.0\n"
    ws = workspace(tmp_path, mapping(WIDE_SITES), {"all.csv": body})
    fails(run(ws, "ingest"), "all.csv", "once NFC-normalized and stripped; write one spelling")


def test_a_site_id_is_nfc_normalized_across_files(tmp_path):
    values = WIDE_SITES.replace('files = "all.csv"', 'files = "*.csv"').replace(
        "file_pattern = 'all\\.csv'", "file_pattern = '[ab]\\.csv'"
    )
    files = {
        "a.csv": "time,building,heat,flow\n2020-01-01 00:00,Caf\u00e9,1.0,2.0\n",
        "b.csv": "time,building,heat,flow\n2020-01-01 01:00,Cafe\u0301,3.0,4.0\n",
    }
    tables = ingest(workspace(tmp_path, mapping(values), files), "shapes")
    assert tables["sites"]["site_id"].to_list() == ["bCaf\u00e9"]
    assert tables["observations"].height == 4
