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
    assert text.output.splitlines()[-1] == f"played on release sha256:{report['release_digest']}"


def test_evaluate_names_the_release_and_refuses_another_than_the_one_expected(tmp_path):
    """Issue 53: the report names the release the trace was played on; --expect refuses a forged release folder, a
    trace played on another release, and a project build of another release."""
    from tests.helpers import fails, forge_release

    release, forged = tmp_path / "release", tmp_path / "forged"
    shutil.copytree(REPO / "artifacts" / "xai4heat" / "release", release)
    shutil.copytree(release, forged)
    forge_release(forged)
    digest = "sha256:" + json.loads((release / "release.json").read_text())["release_digest"]
    cache = ["--cache-dir", str(tmp_path / "cache")]
    traces = {}
    for name, folder in (("genuine", release), ("forged", forged)):
        traces[name] = tmp_path / f"{name}.jsonl"
        run = ["run", "--release", str(folder), *cache, "--split", "test", "--agent", "oracle", "--limit", "1"]
        assert CliRunner().invoke(main, [*run, "--out", str(traces[name])]).exit_code == 0
    evaluate = ["evaluate", "--trace", str(traces["genuine"]), "--json", "--expect", digest]
    report = CliRunner().invoke(main, [*evaluate, "--release", str(release), *cache])
    assert report.exit_code == 0, report.output
    assert "sha256:" + json.loads(report.output)["release_digest"] == digest
    refused = "not the release you trust"
    fails(CliRunner().invoke(main, [*evaluate, "--release", str(forged), *cache]), refused)
    other = ["evaluate", "--trace", str(traces["forged"]), "--release", str(release), *cache, "--expect", digest]
    fails(CliRunner().invoke(main, other), "forged.jsonl was played on release", refused)
    project = [
        "evaluate",
        "--trace",
        str(traces["genuine"]),
        "--ground-truth",
        str(release / "ground_truth/test.jsonl"),
    ]
    fails(CliRunner().invoke(main, [*project, "--expect", "sha256:" + "a" * 64]), refused)
