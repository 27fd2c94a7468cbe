"""Quoted fields that span lines, and cells too large to be readings (issue 44): a multi-line quoted field is one
cell of one record; a record holding a cell over MAX_CELL_BYTES is set aside, each of its value cells an
`oversized_cell` reject; every file's observations and rejects add up to its raw value cells."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.ingest.csvread import MAX_CELL_BYTES, read_strings
from tests.helpers import make_workspace
from tests.test_fuzz_ingest import layouts


def _with_cell(files: dict[str, str], cell: str) -> tuple[dict[str, str], str]:
    """The layout's first file with the last field of its third data record replaced by `cell` (quoted)."""
    name = sorted(files)[0]
    lines = files[name].splitlines()
    fields = lines[3].split(",")
    lines[3] = ",".join([*fields[:-1], '"' + cell.replace('"', '""') + '"'])
    return {**files, name: "\n".join(lines) + "\n"}, name


def _ingest(config: str, files: dict[str, str]) -> tuple[dict, str]:
    root = Path(tempfile.mkdtemp())  # under the test's own temporary folder (conftest)
    ws = make_workspace(root, "xai4heat", config, files)
    result = CliRunner().invoke(main, ["--root", str(ws.root), "ingest", "--corpus", "xai4heat"])
    assert result.exit_code == 0, result.output
    return json.loads((ws.stage_dir("xai4heat", "ingest") / "report.json").read_text(encoding="utf-8")), result.output


@pytest.mark.parametrize("layout", ["wide_csv", "long_csv", "file_per_stream"])
@pytest.mark.parametrize("size", [1 << 20, 10 << 20])
def test_a_huge_quoted_multiline_cell_is_an_oversized_reject(layout, size):
    config, files = layouts()[layout]
    changed, name = _with_cell(files, ("x" * 999 + "\n") * (size // 1000))
    report, _ = _ingest(config, changed)
    plain, _ = _ingest(config, files)
    account = next(f for f in report["files"] if f["source"] == name)
    before = next(f for f in plain["files"] if f["source"] == name)
    assert account["observations"] + account["rejects"] == account["raw_value_cells"] == before["raw_value_cells"]
    value_columns = 1 if layout != "wide_csv" else before["raw_value_cells"] // (len(files[name].splitlines()) - 1)
    assert report["rejects_by_reason"].get("oversized_cell") == value_columns
    assert account["observations"] > 0  # the other records still read (a counter may lose the step over it)


@pytest.mark.parametrize("layout", ["wide_csv", "long_csv", "file_per_stream"])
def test_a_small_quoted_multiline_cell_is_one_cell(layout):
    config, files = layouts()[layout]
    changed, name = _with_cell(files, "1\n2\n3")
    report, _ = _ingest(config, changed)
    plain, _ = _ingest(config, files)
    account = next(f for f in report["files"] if f["source"] == name)
    before = next(f for f in plain["files"] if f["source"] == name)
    assert account["raw_value_cells"] == before["raw_value_cells"]  # the same records: no line became a record
    assert account["observations"] + account["rejects"] == account["raw_value_cells"]
    assert report["rejects_by_reason"].get("unparseable", 0) == plain["rejects_by_reason"].get("unparseable", 0) + 1


def test_record_numbers_count_records_and_the_set_aside_ones(tmp_path):
    path = tmp_path / "f.csv"
    big = "y" * (MAX_CELL_BYTES + 1)
    path.write_text(f'a,b\n1,"x\ny"\n2,3,4\n5,"{big}"\n6,7\n', encoding="utf-8")
    raw = read_strings(path)
    assert raw.table.to_pylist() == [{"a": "1", "b": "x\ny"}, {"a": "6", "b": "7"}]
    assert raw.rows.tolist() == [2, 5] and raw.records == 4
    assert [(n, reason) for n, _, reason in raw.set_aside] == [(3, "malformed_row"), (4, "oversized_cell")]
    assert raw.oversized[0][1].startswith(f"'b' holds {MAX_CELL_BYTES + 1:,} bytes: yyy")
