"""`inspect store` explains why its rejects table is shorter than the rejects count: the cells without a stream or a
time stay in ingest's rejects.parquet, and the screen names them by reason."""

from __future__ import annotations

import json

from click.testing import CliRunner

from pipeline.cli import main
from pipeline.harness.build import build
from tests.helpers import make_workspace, real_lines, xai_config

L4 = "xai4heat_scada_L4.csv"


def inspect_store(ws, *extra: str):
    result = CliRunner().invoke(main, ["--root", str(ws.root), "inspect", "store", "--corpus", "xai4heat", *extra])
    assert result.exit_code == 0, result.output
    return result.output


def test_the_screen_names_the_rejects_the_store_leaves_out(tmp_path):
    # Two weeks around 2021-03-28, whose 02:00 row is a local time that does not exist: its 8 cells have no time.
    lines = real_lines("xai4heat/" + L4, range(32450, 32790))
    ws = make_workspace(tmp_path, "xai4heat", xai_config(held_out_sites="[]"), {L4: "\n".join(lines) + "\n"})
    build(ws, ["xai4heat"], until="store")
    summary = json.loads(inspect_store(ws, "--json"))
    left_out = summary["rejects_not_in_store"]
    assert left_out["nonexistent_local_time"] == 8
    assert summary["tables"]["rejects"] == summary["rejects"] - sum(left_out.values())
    line = next(line for line in inspect_store(ws).splitlines() if line.startswith("rejects table"))
    n, table = summary["rejects"], summary["tables"]["rejects"]
    assert line.startswith(f"rejects table {table:,} = rejects {n:,} - {n - table:,} without a stream or a time (")
    assert "nonexistent_local_time 8" in line
