"""`make bench` at a tiny size: it times the corpora with CSV value files and names the ones it skips, and why."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from pipeline.bench.throughput import main
from tests.helpers import copy_config, tiny_workspace

pytestmark = pytest.mark.slow  # builds a corpus of its own (make test-fast skips it)


def test_bench_times_csv_corpora_and_names_the_skipped(tmp_path):
    ws = tiny_workspace(tmp_path / "project")
    (ws.corpora_config_dir / "bts.toml").write_text(copy_config("bts"))  # pickles, and no raw folder given
    result = CliRunner(env={"TELEMETRY_BENCH_BTS_RAW": None}).invoke(
        main,
        ["--root", str(ws.root), "--repeat", "1", "--tool-calls", "2", "--cached-corpora", "2", "--fleet-sites", "40"]
        + ["--corpus", "xai4heat", "--corpus", "bts"],
    )
    assert result.exit_code == 0, result.output
    assert "skipped bts: its values are bts_pickle archives, not CSV" in result.output
    assert "input: xai4heat:" in result.output  # one corpus timed is enough here: make bench times every one
    assert "| xai4heat | " in result.output  # DuckDB's plans, the winner named
    assert "| **ratio ours / DuckDB, stage against stage** |" in result.output
    assert "| **ratio ours / DuckDB, whole processes (floor 0.55, goal 0.75)** |" in result.output
    assert "nothing changed, 1 corpora" in result.output and "nothing changed, 2 corpora" in result.output
    assert "| lookup_observation |" in result.output  # the tool latency table ran on both stores
    # The fleet file at a tiny size (make bench: 100,000 sites): 2 hours x 2 points of each of 40 sites.
    assert "| generated, 2 hours x 2 points per site | 40 | 160 |" in result.output


def test_bench_with_nothing_to_time_says_so(tmp_path):
    ws = tiny_workspace(tmp_path / "project")
    (ws.corpora_config_dir / "bts.toml").write_text(copy_config("bts"))
    result = CliRunner().invoke(main, ["--root", str(ws.root), "--corpus", "bts", "--repeat", "1"])
    assert result.exit_code == 0, result.output
    assert "skipped bts:" in result.output and "nothing to time" in result.output
