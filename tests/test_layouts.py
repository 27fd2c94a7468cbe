"""long_csv and file_per_stream give the same observations as wide_csv on the same real rows."""

from __future__ import annotations

import re

import polars as pl

from tests.helpers import ingest, make_workspace, real_lines, xai_config

LINES = real_lines("xai4heat/xai4heat_scada_L4.csv", range(36000, 36040))
COLUMNS = LINES[0].split(",")[1:]


def _values_block(block: str, **over: str) -> str:
    text = xai_config(held_out_sites="[]", dropout_rows="false", **over)
    return re.sub(r"\[values\]\n(?:.+\n)+", lambda _: block, text, count=1)


def _wide(tmp_path) -> pl.DataFrame:
    text = xai_config(held_out_sites="[]", dropout_rows="false")
    ws = make_workspace(tmp_path / "wide", "xai4heat", text, {"xai4heat_scada_L4.csv": "\n".join(LINES) + "\n"})
    return ingest(ws, "xai4heat")


def _long_rows() -> list[list[str]]:
    rows = []
    for line in LINES[1:]:
        cells = line.split(",")
        rows += [[cells[0], column, value] for column, value in zip(COLUMNS, cells[1:], strict=True)]
    return rows


def test_long_csv_matches_wide(tmp_path):
    block = (
        '[values]\nkind = "long_csv"\nfiles = "*_long.csv"\nfile_pattern = \'(?P<site>L\\d+)_long\\.csv\'\n'
        'site = "{site}"\nstream_column = "stream"\nvalue_column = "value"\n'
    )
    text = (
        _values_block(block)
        .replace('column = "datetime"', 'column = "time"')
        .replace('row_order = "descending"', 'row_order = "any"')
    )
    body = "time,stream,value\n" + "".join(",".join(r) + "\n" for r in _long_rows())
    ws = make_workspace(tmp_path / "long", "xai4heat", text, {"L4_long.csv": body})
    long, wide = ingest(ws, "xai4heat"), _wide(tmp_path)
    assert long["observations"].equals(wide["observations"])
    assert long["streams"].drop("source_file").equals(wide["streams"].drop("source_file"))
    assert long["rejects"].height == wide["rejects"].height


def test_file_per_stream_matches_wide(tmp_path):
    block = (
        '[values]\nkind = "file_per_stream"\nfiles = "streams/*.csv"\n'
        'file_pattern = \'(?P<site>L\\d+)__(?P<key>\\w+)\\.csv\'\nsite = "{site}"\nvalue_column = "value"\n'
    )
    text = _values_block(block)
    files = {}
    for index, column in enumerate(COLUMNS, start=1):
        body = "datetime,value\n" + "".join(f"{line.split(',')[0]},{line.split(',')[index]}\n" for line in LINES[1:])
        files[f"streams/L4__{column}.csv"] = body
    ws = make_workspace(tmp_path / "fps", "xai4heat", text, files)
    per_stream, wide = ingest(ws, "xai4heat"), _wide(tmp_path)
    assert per_stream["observations"].equals(wide["observations"])
    assert per_stream["rejects"].height == wide["rejects"].height
    assert sorted(per_stream["streams"]["source_file"]) == sorted(f"streams/L4__{c}.csv" for c in COLUMNS)


def test_table_metadata_with_long_csv(tmp_path):
    block = (
        '[values]\nkind = "long_csv"\nfiles = "*_long.csv"\nfile_pattern = \'(?P<site>L\\d+)_long\\.csv\'\n'
        'site = "{site}"\nstream_column = "stream"\nvalue_column = "value"\n'
    )
    text = (
        _values_block(block)
        .replace('column = "datetime"', 'column = "time"')
        .replace('row_order = "descending"', 'row_order = "any"')
    )
    metadata = (
        '[metadata]\nkind = "table"\nfile = "points.csv"\nkey_column = "key"\npoint_class_column = "class"\n'
        'label_column = "label"\nunit_column = "unit"\nequipment_column = "equipment"\n\n'
    )
    text = re.sub(r"\[metadata\]\n(?:.*\n)*?(?=\[cleaning\])", lambda _: metadata, text, count=1)
    points = "key,class,label,unit,equipment\n" + "".join(
        f"{c},{'Energy_Counter' if c == 'e' else 'Temperature_Sensor'},{c} at {{site}},DEG_C,loop\n" for c in COLUMNS
    )
    body = "time,stream,value\n" + "".join(",".join(r) + "\n" for r in _long_rows())
    ws = make_workspace(tmp_path, "xai4heat", text, {"L4_long.csv": body, "points.csv": points})
    tables = ingest(ws, "xai4heat")
    streams = tables["streams"]
    assert streams.height == 8 and set(streams["unit"]) == {"DEG_C"}
    assert streams.filter(pl.col("stream_id") == "L4__t_amb")["label"].item() == "t_amb at L4"
    assert tables["observations"].height + tables["rejects"].height == len(_long_rows())


def test_a_time_column_with_an_empty_name_is_read(tmp_path):
    """A pandas index written by to_csv has an empty header cell (`,t_amb,...`): `time.column = ""` names it, as the
    draft proposes, and the values are those of the named column."""
    unnamed = ["," + ",".join(COLUMNS)] + LINES[1:]
    text = re.sub(r'column = "datetime"', 'column = ""', xai_config(held_out_sites="[]", dropout_rows="false"))
    ws = make_workspace(tmp_path / "unnamed", "xai4heat", text, {"xai4heat_scada_L4.csv": "\n".join(unnamed) + "\n"})
    assert ingest(ws, "xai4heat")["observations"].equals(_wide(tmp_path)["observations"])
