"""Random bytes, rows and cells through each text value layout (issues 25 and 44): ingest either keeps its accounting
(every raw value cell one observation or one reject, in every file and in all, the tables as the report says) or stops
with one error line, never a traceback. Cells may be quoted, span lines, hold delimiters and quotes, or be larger than
a cell may be. Few examples in make test, many in make fuzz."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from pipeline.cli import main
from pipeline.ingest.csvread import MAX_CELL_BYTES
from tests.helpers import fuzz_settings, make_workspace, real_lines, xai_config
from tests.test_layouts import _long_rows, _values_block

LINES = real_lines("xai4heat/xai4heat_scada_L4.csv", range(36000, 36012))
COLUMNS = LINES[0].split(",")[1:]
LONG = (
    '[values]\nkind = "long_csv"\nfiles = "*_long.csv"\nfile_pattern = \'(?P<site>L\\d+)_long\\.csv\'\n'
    'site = "{site}"\nstream_column = "stream"\nvalue_column = "value"\n'
)
PER_STREAM = (
    '[values]\nkind = "file_per_stream"\nfiles = "streams/*.csv"\n'
    'file_pattern = \'(?P<site>L\\d+)__(?P<key>\\w+)\\.csv\'\nsite = "{site}"\nvalue_column = "value"\n'
)


def layouts() -> dict[str, tuple[str, dict[str, str]]]:
    """Each text layout: its mapping and its files, from the same real rows."""
    wide = xai_config(held_out_sites="[]", dropout_rows="false")
    long = (
        _values_block(LONG)
        .replace('column = "datetime"', 'column = "time"')
        .replace('row_order = "descending"', 'row_order = "any"')
    )
    per_stream = {
        f"streams/L4__{column}.csv": "datetime,value\n"
        + "".join(f"{line.split(',')[0]},{line.split(',')[i]}\n" for line in LINES[1:])
        for i, column in enumerate(COLUMNS, start=1)
    }
    return {
        "wide_csv": (wide, {"xai4heat_scada_L4.csv": "\n".join(LINES) + "\n"}),
        "long_csv": (
            long,
            {"L4_long.csv": "time,stream,value\n" + "".join(",".join(r) + "\n" for r in _long_rows()[:80])},
        ),
        "file_per_stream": (_values_block(PER_STREAM), dict(sorted(per_stream.items())[:3])),
    }


CSV_CHARS = st.sampled_from(
    list("0123456789,;.:-+eET \"'\t\r\n")
    + ["NaN", "inf", "null", "2022-01-10 10:00:00", "\x00", "\ufeff", "é", "\udcff", "1e400", ",,,,", "\\"]
)
ROW = st.lists(CSV_CHARS, max_size=30).map("".join)


@st.composite
def damaged(draw, files: dict[str, str]) -> dict[str, bytes]:
    """The layout's files with one of: bytes flipped, bytes inserted, rows replaced or added, the file cut short."""
    name = draw(st.sampled_from(sorted(files)))
    data = bytearray(files[name].encode("utf-8"))
    how = draw(st.sampled_from(["flip", "insert", "rows", "cut"]))
    if how == "flip":
        for _ in range(draw(st.integers(1, 8))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    elif how == "insert":
        at = draw(st.integers(0, len(data)))
        data[at:at] = draw(st.binary(min_size=1, max_size=40))
    elif how == "rows":
        lines = bytes(data).split(b"\n")
        for _ in range(draw(st.integers(1, 4))):
            row = draw(ROW).encode("utf-8", "surrogateescape")
            at = draw(st.integers(0, len(lines)))
            if draw(st.booleans()) and at < len(lines):
                lines[at] = row
            else:
                lines.insert(at, row)
        data = bytearray(b"\n".join(lines))
    else:
        data = data[: draw(st.integers(0, len(data)))]
    return {**{k: v.encode("utf-8") for k, v in files.items()}, name: bytes(data)}


def check(config: str, files: dict[str, bytes]) -> None:
    root = Path(tempfile.mkdtemp())  # under the test's own temporary folder (conftest)
    ws = make_workspace(root, "xai4heat", config, files)
    result = CliRunner().invoke(main, ["--root", str(ws.root), "ingest", "--corpus", "xai4heat"])
    if result.exit_code != 0:
        message = result.output.strip()
        assert isinstance(result.exception, SystemExit), repr(result.exception)  # not an exception escaping the handler
        assert result.exit_code == 1 and message.startswith("error: ") and "\n" not in message, result.output
        return
    out = ws.stage_dir("xai4heat", "ingest")
    report = json.loads((out / "report.json").read_text())
    assert report["observations"] + report["rejects"] == report["raw_value_cells"]
    assert all(f["observations"] + f["rejects"] == f["raw_value_cells"] for f in report["files"]), report["files"]
    assert pl.read_parquet(out / "observations.parquet").height == report["observations"]
    assert pl.read_parquet(out / "rejects.parquet").height == report["rejects"]
    assert sum(report["rejects_by_reason"].values()) == report["rejects"]


CELL_TEXT = st.sampled_from(
    ["1.5", "x", "", " ", ",", ";", '"', '""', "\n", "\r\n", "\r", "NaN", "é", "2022-01-10 10:00:00"]
)


@st.composite
def cells(draw, files: dict[str, str]) -> dict[str, bytes]:
    """The layout's files with up to four fields replaced: quoted or not, over lines, with delimiters and quotes inside,
    around MAX_CELL_BYTES or megabytes long, or an opening quote never closed."""
    name = draw(st.sampled_from(sorted(files)))
    lines = files[name].split("\n")
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, max(len(lines) - 2, 0)))
        fields = lines[at].split(",")
        column = draw(st.integers(0, len(fields) - 1))
        how = draw(st.sampled_from(["text", "huge", "open"]))
        if how == "text":
            text = "".join(draw(st.lists(CELL_TEXT, max_size=8)))
        elif how == "huge":
            size = draw(st.sampled_from([MAX_CELL_BYTES - 2, MAX_CELL_BYTES - 1, MAX_CELL_BYTES + 1, 3 << 20]))
            text = (draw(st.sampled_from(["x", "1\n", '""'])) * size)[:size]
        else:
            fields[column] = '"' + "".join(draw(st.lists(CELL_TEXT, max_size=4)))
            lines[at] = ",".join(fields)
            continue
        quoted = draw(st.booleans()) or any(c in text for c in ',"\r\n')
        fields[column] = '"' + text.replace('"', '""') + '"' if quoted else text
        lines[at] = ",".join(fields)
    return {**{k: v.encode("utf-8") for k, v in files.items()}, name: "\n".join(lines).encode("utf-8")}


@pytest.mark.fuzz
@pytest.mark.parametrize("layout", ["wide_csv", "long_csv", "file_per_stream"])
@pytest.mark.parametrize("change", [damaged, cells], ids=["bytes and rows", "cells"])
def test_random_damage_keeps_the_accounting_or_is_one_line(layout, change):
    config, files = layouts()[layout]

    @fuzz_settings(8, 150)
    @given(change(files))
    def ingest_changed(changed):
        check(config, changed)

    check(config, {k: v.encode("utf-8") for k, v in files.items()})  # the unchanged files ingest
    ingest_changed()
