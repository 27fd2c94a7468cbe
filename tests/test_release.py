"""Release packaging and verification: an intact release passes, a tampered one names file and row; replay."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.release.verify import replay, verify_release
from pipeline.store.reader import KEYS
from tests.helpers import make_workspace, real_lines, verify_cli, xai_config


def test_release_contents(release):
    manifest = json.loads((release / "release.json").read_text())
    assert set(manifest["files"]) == {
        "train.jsonl",
        "dev.jsonl",
        "test.jsonl",
        "provenance.jsonl",
        "README.md",
        "croissant.json",
        "ground_truth/train.jsonl",
        "ground_truth/dev.jsonl",
        "ground_truth/test.jsonl",
        "simulator.json",
        *(f"store/{table}.parquet" for table in KEYS),
    }
    assert sum(manifest["files"][name]["bytes"] for name in manifest["files"]) < 25_000_000  # a release stays small
    assert sum(manifest["splits"].values()) == sum(manifest["counts"]["family"].values())
    assert manifest["tool_registry_version"] and manifest["raw_inputs"] and manifest["thresholds"]
    assert set(manifest["stages"]) == {"ingest", "store", "tasks", "episodes", "audit"}
    card = (release / "README.md").read_text()
    assert card.startswith("---\n") and "## Limitations" in card and "CC-BY-4.0" in card
    croissant = json.loads((release / "croissant.json").read_text())
    assert croissant["@type"] == "sc:Dataset"
    assert {f["@id"] for f in croissant["distribution"]} == set(manifest["files"]) - {"README.md", "croissant.json"}
    assert verify_release(release) == []
    result = verify_cli(release)
    assert result.exit_code == 0 and "intact" in result.output


def test_one_byte_changed_names_file_and_row(release):
    path = release / "test.jsonl"
    data = bytearray(path.read_bytes())
    lines = data.split(b"\n")
    target = 2  # third row
    offset = (
        sum(len(line) + 1 for line in lines[:target]) + lines[target].index(b'"turn_budget":') + len(b'"turn_budget":')
    )
    data[offset] = ord("9") if data[offset] != ord("9") else ord("8")
    path.write_bytes(bytes(data))
    result = verify_cli(release)
    assert result.exit_code == 1
    assert "test.jsonl: row 3 (id " in result.output and "differs from release.json" in result.output


def test_one_row_removed_is_detected(release):
    path = release / "dev.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:4] + lines[5:]))
    problems = verify_release(release)
    assert any("dev.jsonl" in p and "rows" in p for p in problems)
    assert any("dev.jsonl: row 5" in p for p in problems)


def test_invalid_row_is_named(release):
    path = release / "train.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    lines[0] = json.dumps({"id": "broken"}) + "\n"
    path.write_text("".join(lines))
    problems = verify_release(release)
    assert any("train.jsonl: row 1: not a valid episode" in p for p in problems)


def test_missing_manifest(tmp_path):
    assert "not a release folder" in verify_release(tmp_path)[0]


@pytest.mark.slow
def test_replay_matches_under_different_environments(tmp_path, monkeypatch):
    body = "\n".join(real_lines("xai4heat/xai4heat_scada_L8.csv", range(2, 31244, 10))) + "\n"
    ws = make_workspace(tmp_path, "xai4heat", xai_config(held_out_sites="[]"), {"xai4heat_scada_L8.csv": body})
    # Nothing was built or committed here: the two rebuilds still match each other, stage by stage, and not it.
    report = replay(ws, ["xai4heat"])
    assert [r["stage"] for r in report["stages"]] == ["ingest", "store", "tasks", "episodes", "audit", "release"]
    assert all(r["status"] == ["built", "built"] and r["matched"] and not r["differences"] for r in report["stages"])
    committed = report["committed_release"]["xai4heat"]
    assert not report["ok"] and not committed["matched"]
    assert "README.md: missing in the other run" in committed["differences"] and len(committed["differences"]) > 5
    # verify prints that table and names the stale release with how to regenerate it (the same report, not two more
    # builds).
    monkeypatch.setattr("pipeline.release.verify.replay", lambda *_: report)
    stale = CliRunner().invoke(main, ["--root", str(ws.root), "verify"])
    assert stale.exit_code == 1 and "run `make build` and commit artifacts/*/release" in stale.output
    assert (
        "xai4heat    committed release matches the rebuild: False" in stale.output
        and "    README.md: missing" in stale.output
    )
    assert stale.output.count("built   built   True") == 6


def test_a_failed_rebuild_ends_the_replay_in_one_error_naming_its_environment(tmp_path):
    """The two rebuilds run at once: the one that fails is raised with its environment and its own error line, and
    neither is left running (the replay's folder is removed with both ended)."""
    from pipeline.core.errors import StageError

    header = real_lines("xai4heat/xai4heat_scada_L8.csv", [])[0]
    body = "\n".join([header.replace(header.split(",")[0], "not_the_time", 1), "x"]) + "\n"
    ws = make_workspace(tmp_path, "xai4heat", xai_config(held_out_sites="[]"), {"xai4heat_scada_L8.csv": body})
    with pytest.raises(StageError) as failed:
        replay(ws, ["xai4heat"])
    message = str(failed.value)
    assert message.startswith("rebuild failed (TELEMETRY_BENCH_THREADS=1") and "error: " in message, message
    assert "Traceback" not in message


def test_the_two_rebuilds_at_once_share_one_builds_memory_budget(monkeypatch):
    """Each rebuild of a replay gets half of the budget a build would have: together they keep to it."""
    from pipeline.core.errors import ConfigError
    from pipeline.core.resources import DEFAULT_BUDGET, MEMORY_ENV
    from pipeline.release.verify import _halved_budget

    monkeypatch.delenv(MEMORY_ENV, raising=False)
    assert _halved_budget() == {MEMORY_ENV: str(DEFAULT_BUDGET // 2)}
    monkeypatch.setenv(MEMORY_ENV, "3GB")
    assert _halved_budget() == {MEMORY_ENV: str(3 << 29)}
    monkeypatch.setenv(MEMORY_ENV, "100MB")
    with pytest.raises(ConfigError, match=r"TELEMETRY_BENCH_MEMORY=100MB: .* give at least 128MB"):
        _halved_budget()
