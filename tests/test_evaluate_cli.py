"""`telemetry-bench evaluate` prints a header line naming its columns above the rows; --json stays the report."""

from __future__ import annotations

import json
import shutil

from click.testing import CliRunner

from pipeline.cli import main
from tests.helpers import REPO

HEADER = ["final", "outcome", "process", "planning", "episode", "failure", "modes"]


def test_the_rows_have_a_header_and_json_has_none(tmp_path):
    release = tmp_path / "release"
    shutil.copytree(REPO / "artifacts" / "xai4heat" / "release", release)
    trace, where = tmp_path / "oracle.jsonl", ["--release", str(release), "--cache-dir", str(tmp_path / "cache")]
    played = CliRunner().invoke(
        main, ["run", *where, "--split", "test", "--agent", "oracle", "--limit", "3", "--out", str(trace)]
    )
    assert played.exit_code == 0, played.output
    text = CliRunner().invoke(main, ["evaluate", *where, "--trace", str(trace)])
    assert text.exit_code == 0, text.output
    header, *rows = text.output.splitlines()
    assert header.split() == HEADER
    report = json.loads(CliRunner().invoke(main, ["evaluate", *where, "--trace", str(trace), "--json"]).output)
    assert len(report["rows"]) == 3
    for line, row in zip(rows, report["rows"], strict=False):
        final, outcome, process, planning, episode, modes = line.split()
        assert (episode, float(final), float(outcome)) == (row["episode_id"], row["final"], row["outcome"]["score"])
        assert header.index("episode") == line.index(episode)  # the columns line up under their names
    assert rows[3].startswith("mean final")
