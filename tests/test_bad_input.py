"""Bad input gets a one-line error naming file, row and fix (exit 1, no traceback), or a recorded reject."""

from __future__ import annotations

import hashlib

import polars as pl
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from tests.helpers import fails, make_workspace, real_lines, xai_config
from tests.helpers import run_in as run

L4 = "xai4heat_scada_L4.csv"
GOOD = "\n".join(real_lines("xai4heat/" + L4, range(2, 8))) + "\n"


def workspace(tmp_path, files=None, config=None):
    return make_workspace(tmp_path, "xai4heat", config or xai_config(held_out_sites="[]"), files or {L4: GOOD})


def test_good_slice_ingests(tmp_path):
    result = run(workspace(tmp_path), "ingest", "--corpus", "xai4heat")
    assert result.exit_code == 0, result.output
    assert "48 raw value cells" in result.output


def test_missing_value_file_is_named(tmp_path):
    ws = workspace(tmp_path, files={"README.txt": "no data"})
    fails(run(ws, "ingest"), "no file matches values.files", "xai4heat_scada_*.csv")


def test_file_listed_in_checksums_but_missing(tmp_path):
    ws = workspace(tmp_path, files={L4: GOOD, "SHA256SUMS": "0" * 64 + "  xai4heat_scada_L8.csv\n"})
    fails(run(ws, "ingest"), "xai4heat_scada_L8.csv", "missing", "restore")


def test_checksum_mismatch(tmp_path):
    wrong = hashlib.sha256(b"something else").hexdigest()
    ws = workspace(tmp_path, files={L4: GOOD, "SHA256SUMS": f"{wrong}  {L4}\n"})
    fails(run(ws, "ingest"), L4, "does not match", "checksum --corpus NAME --write")


def test_checksum_write_then_verify(tmp_path):
    ws = workspace(tmp_path)
    assert run(ws, "checksum", "--corpus", "xai4heat", "--write").exit_code == 0
    assert "1 files match" in run(ws, "checksum", "--corpus", "xai4heat").output
    (ws.root / "data/raw/xai4heat" / L4).write_text(GOOD.replace("16.8", "16.9"))
    fails(run(ws, "checksum", "--corpus", "xai4heat"), "does not match")


def test_malformed_rows_are_recorded_not_lost(tmp_path):
    lines = GOOD.splitlines()
    lines[2] = lines[2] + ",extra"
    lines[4] = ",".join(lines[4].split(",")[:3])
    ws = workspace(tmp_path, files={L4: "\n".join(lines) + "\n"})
    assert run(ws, "ingest").exit_code == 0
    rejects = pl.read_parquet(ws.stage_dir("xai4heat", "ingest") / "rejects.parquet")
    malformed = rejects.filter(pl.col("reason") == "malformed_row")
    assert sorted(set(malformed["row"])) == [3, 5] and malformed.height == 16
    observations = pl.read_parquet(ws.stage_dir("xai4heat", "ingest") / "observations.parquet")
    assert observations.height + rejects.height == 6 * 8


def test_wrong_column_name_in_mapping(tmp_path):
    config = xai_config(held_out_sites="[]").replace("[metadata.points.t_amb]", "[metadata.points.t_ambient]")
    fails(run(workspace(tmp_path, config=config), "ingest"), L4, "'t_ambient'", "mark the point optional")


def test_optional_column_may_be_absent(tmp_path):
    config = xai_config(held_out_sites="[]").replace(
        "[metadata.points.t_amb]",
        '[metadata.points.t_extra]\npoint_class = "X"\nlabel = "x"\noptional = true\n\n[metadata.points.t_amb]',
    )
    assert run(workspace(tmp_path, config=config), "ingest").exit_code == 0


def test_wrong_time_column_name(tmp_path):
    config = xai_config(held_out_sites="[]").replace('column = "datetime"', 'column = "timestamp"')
    fails(run(workspace(tmp_path, config=config), "ingest"), "'timestamp'", "the file has datetime")


def test_non_utf8_bytes(tmp_path):
    data = GOOD.encode().replace(b"16.8", b"16\xff8")
    fails(run(workspace(tmp_path, files={L4: data}), "ingest"), L4, "line 2", "not valid utf-8", "values.encoding")


def test_declared_encoding_is_used(tmp_path):
    config = xai_config(held_out_sites="[]").replace('site = "{site}"', 'site = "{site}"\nencoding = "latin-1"', 1)
    data = b"datetime,t_amb,t_ref,t_sup_prim,t_ret_prim,t_sup_sec,t_ret_sec,e,pe\n" + GOOD.encode().split(b"\n", 1)[1]
    assert run(workspace(tmp_path, files={L4: data}, config=config), "ingest").exit_code == 0


def test_empty_file(tmp_path):
    fails(run(workspace(tmp_path, files={L4: ""}), "ingest"), L4, "empty")


def test_blank_line_before_the_header_is_named(tmp_path):
    """Found by the ingest fuzzer: pyarrow's 'Empty CSV file or block' escaped as a traceback."""
    fails(run(workspace(tmp_path, files={L4: "\n" + GOOD}), "ingest"), L4, "line 1 is blank", "remove the blank line")


def test_header_only_file_counts_zero_cells(tmp_path):
    result = run(workspace(tmp_path, files={L4: GOOD.splitlines()[0] + "\n"}), "ingest")
    assert result.exit_code == 0, result.output
    assert "0 observations, 0 rejects of 0 raw value cells" in result.output


@pytest.mark.parametrize("fmt", ['"YYYY-MM-DD hh:mm"', '"unix"'])
def test_unknown_time_format_is_a_config_error(tmp_path, fmt):
    config = xai_config(held_out_sites="[]").replace('format = "%Y-%m-%d %H:%M:%S"', f"format = {fmt}")
    fails(run(workspace(tmp_path, config=config), "ingest"), "time.format", "unknown time format")


def test_time_format_matching_nothing(tmp_path):
    config = xai_config(held_out_sites="[]").replace('format = "%Y-%m-%d %H:%M:%S"', 'format = "%d.%m.%Y %H:%M"')
    fails(run(workspace(tmp_path, config=config), "ingest"), L4, "row 2", "fix time.format")


def test_unknown_key_in_mapping(tmp_path):
    config = xai_config(held_out_sites="[]").replace("[cleaning]", "[cleaning]\nsentinal = [1.0]")
    fails(run(workspace(tmp_path, config=config), "ingest"), "cleaning.sentinal", "Extra inputs are not permitted")


def test_held_out_site_must_exist(tmp_path):
    fails(run(workspace(tmp_path, config=xai_config(held_out_sites='["L99"]')), "ingest"), "L99", "not a site")


def test_unknown_corpus(tmp_path):
    fails(run(workspace(tmp_path), "inspect", "ingest", "--corpus", "nope"), "unknown corpus nope", "xai4heat")


@pytest.mark.parametrize(
    ("command", "takes_release"),
    [
        (["serve", "--corpus", "xai4heat"], True),
        (["tool", "inspect_quality", "--corpus", "xai4heat", "--args", "{}"], True),
        (["run", "--corpus", "xai4heat", "--split", "test", "--agent", "oracle", "--out", "t.jsonl"], True),
        (["inspect", "store", "--corpus", "xai4heat"], False),
        (["ingest", "--corpus", "xai4heat"], False),
    ],
)
def test_unknown_corpus_outside_a_project_points_the_way(tmp_path, command, takes_release):
    message = fails(CliRunner().invoke(main, ["--root", str(tmp_path), *command]), "unknown corpus xai4heat", "--root")
    assert ("--release DIR" in message) is takes_release, message
    assert "known are" not in message


def test_inspect_before_ingest(tmp_path):
    fails(run(workspace(tmp_path), "inspect", "ingest", "--corpus", "xai4heat"), "run `telemetry-bench ingest`")


def test_debug_shows_traceback(tmp_path):
    result = run(workspace(tmp_path, files={L4: ""}), "--debug", "ingest")
    assert result.exit_code != 0 and result.exception is not None
