"""Random bytes and rows through each text value layout (issue 25): ingest either keeps its accounting (every raw
value cell one observation or one reject, the tables as the report says) or stops with one error line, never a
traceback. Few examples in make test, many in make fuzz."""

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
    assert pl.read_parquet(out / "observations.parquet").height == report["observations"]
    assert pl.read_parquet(out / "rejects.parquet").height == report["rejects"]
    assert sum(report["rejects_by_reason"].values()) == report["rejects"]


@pytest.mark.fuzz
@pytest.mark.parametrize("layout", ["wide_csv", "long_csv", "file_per_stream"])
def test_random_damage_keeps_the_accounting_or_is_one_line(layout):
    config, files = layouts()[layout]

    @fuzz_settings(8, 150)
    @given(damaged(files))
    def ingest_damaged(changed):
        check(config, changed)

    check(config, {k: v.encode("utf-8") for k, v in files.items()})  # the undamaged files ingest
    ingest_damaged()
