"""Results bound to the release they were played on (issue 53): a release forged consistently with the project's own
functions (`forge_release`: one stream's day means moved inside their min..max, every digest, the card, the Croissant
hash and both manifests recomputed) is intact to `verify --release`, yet refused by `run`, `serve`, `tool` and
`score` given the trusted digest (--expect); traces record the digest they were played on, `score --expect` refuses
another, and `score` and `leaderboard` warn of traces side by side on different releases or on none. And the
project's own store edited in place (DuckDB's UPDATE, or an edit left in a write-ahead log) is refused by every
reader, not served."""

from __future__ import annotations

import json
import shutil

import duckdb
import pytest

from tests.helpers import fails, forge_release

DAY = {
    "stream_id": "L4__t_amb",
    "metric": "mean",
    "period": "day",
    "window_start": "2022-01-10T00:00:00Z",
    "window_end": "2022-01-11T00:00:00Z",
}


def trusted(release) -> str:
    return "sha256:" + json.loads((release / "release.json").read_text())["release_digest"]


@pytest.fixture
def forged(release, tmp_path):
    """The genuine release's digest, and a forged copy of it."""
    digest = trusted(release)
    copy = tmp_path / "forged"
    shutil.copytree(release, copy)
    assert forge_release(copy) > 1000
    return digest, copy


def cli(*args: str, input: str | None = None):
    from click.testing import CliRunner

    from pipeline.cli import main

    return CliRunner().invoke(main, list(args), input=input)


def header(trace) -> dict:
    return json.loads(trace.read_text().splitlines()[0])


def play(where, cache, out, *extra: str, agent: str = "oracle"):
    """`run` of the first two test episodes of a release folder."""
    played = ["--release", str(where), "--cache-dir", str(cache), "--split", "test", "--agent", agent]
    return cli("run", *played, "--limit", "2", "--out", str(out), *extra)


def ask(where, cache, *extra: str):
    """`tool aggregate_window` of a release folder: the day of L4__t_amb whose mean the forgery moves."""
    return cli(
        "tool",
        "aggregate_window",
        "--release",
        str(where),
        "--cache-dir",
        str(cache),
        *extra,
        "--args",
        json.dumps(DAY),
    )


def test_a_forged_release_is_intact_to_itself_and_serves_its_values_without_a_digest(forged, tmp_path):
    """The reproduction: verify --release says intact, and the forged mean is served (-2.5667 became -2.1333)."""
    _, folder = forged
    assert cli("verify", "--release", str(folder)).exit_code == 0
    result = ask(folder, tmp_path / "c")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["mean"] == -2.1333


@pytest.mark.parametrize("command", ["run", "tool", "serve", "score"])
def test_each_command_refuses_a_forged_release_given_the_trusted_digest(forged, release, tmp_path, command):
    digest, folder = forged
    cache, out = str(tmp_path / "cache"), tmp_path / "t.jsonl"
    refused = "not the release you trust"
    if command == "run":
        fails(play(folder, cache, out, "--expect", digest), refused)
        assert not out.exists()
    elif command == "tool":
        fails(ask(folder, cache, "--expect", digest), refused)
        answered = ask(release, cache, "--expect", digest)  # the genuine release, with its digest, answers as built
        assert answered.exit_code == 0 and json.loads(answered.stdout)["mean"] == -2.5667, answered.output
    elif command == "serve":
        fails(cli("serve", "--release", str(folder), "--cache-dir", cache, "--expect", digest, input=""), refused)
    else:
        ran = play(release, cache, out, "--expect", digest)
        assert ran.exit_code == 0, ran.output
        fails(cli("score", str(out), "--release", str(folder), "--expect", digest), refused)


def test_verify_refuses_a_forged_release_given_the_trusted_digest(forged):
    digest, folder = forged
    verified = cli("verify", "--release", str(folder), "--expect", digest)  # the problems, then the error line
    assert verified.exit_code == 1 and "not the release you trust" in verified.output, verified.output


def test_traces_record_the_release_digest_and_score_refuses_another(forged, release, tmp_path):
    digest, folder = forged
    cache = str(tmp_path / "cache")
    traces = {}
    for name, where in (("genuine", release), ("forged", folder)):
        traces[name] = tmp_path / f"{name}.jsonl"
        ran = play(where, cache, traces[name])
        assert ran.exit_code == 0, ran.output
    assert "sha256:" + header(traces["genuine"])["release_digest"] == digest
    forged_digest = header(traces["forged"])["release_digest"]
    assert forged_digest != digest.removeprefix("sha256:")
    fails(cli("score", str(traces["forged"]), "--expect", digest), "forged.jsonl was played on release")
    scored = cli("score", str(traces["genuine"]), "--expect", digest, "--json")
    assert scored.exit_code == 0, scored.output
    summaries = json.loads(scored.stdout)["summaries"]
    assert [s["release_digest"] for s in summaries] == [digest.removeprefix("sha256:")]
    both = cli("score", str(traces["genuine"]), str(traces["forged"]), "--json")
    assert both.exit_code == 0, both.output
    printed = json.loads(both.stdout)
    assert any("side by side were played on different releases" in w for w in printed["warnings"]), printed
    assert (
        f"forged.jsonl: played on release sha256:{forged_digest}, not the {digest} this project's build made of "
        "xai4heat" in printed["warnings"]
    ), printed  # the project's build printed the genuine digest
    assert sorted(s["release_digest"] for s in printed["summaries"]) == sorted(
        [digest.removeprefix("sha256:"), forged_digest]
    )  # one summary per release: runs on two releases are never pooled


def test_leaderboard_warns_of_mixed_and_unbound_traces_and_refuses_another_release(forged, release, tmp_path):
    digest, folder = forged
    cache = str(tmp_path / "cache")
    genuine, forged_trace, old = tmp_path / "genuine.jsonl", tmp_path / "forged.jsonl", tmp_path / "old.jsonl"
    for trace, where in ((genuine, release), (forged_trace, folder)):
        ran = play(where, cache, trace, agent="noop")
        assert ran.exit_code == 0, ran.output
    lines = genuine.read_text().splitlines()
    first = json.loads(lines[0])
    first.pop("release_digest")  # a trace written before traces recorded the digest: still scored, warned unbound
    old.write_text("\n".join([json.dumps(first, sort_keys=True), *lines[1:]]) + "\n")
    board = tmp_path / "board.json"
    ranked = ["leaderboard", str(genuine), str(forged_trace), str(old), "--release", str(release)]
    made = cli(*ranked, "--out", str(board))
    assert made.exit_code == 0, made.output
    written = json.loads(board.read_text())
    assert any("different releases" in w for w in written["warnings"]), written["warnings"]
    assert any(w.startswith("old.jsonl: bound to no release") for w in written["warnings"]), written["warnings"]
    assert "warning: old.jsonl: bound to no release" in made.stderr
    assert {r["release_digest"] for r in written["rows"]} == {
        None,
        digest.removeprefix("sha256:"),
        header(forged_trace)["release_digest"],
    }
    expected = cli(*ranked, "--expect", digest, "--out", str(board))
    assert expected.exit_code == 0, expected.output
    refused = {r["trace"] for r in json.loads(board.read_text())["refused"]}
    assert refused == {"forged.jsonl", "old.jsonl"}


def project_copy(real_artifacts, tmp_path):
    """A workspace on a copy of the built xai4heat artifacts (store, stages and release), the test's own to edit."""
    from pipeline.core.workspace import Workspace
    from tests.helpers import REPO

    artifacts = tmp_path / "artifacts"
    shutil.copytree(real_artifacts / "xai4heat", artifacts / "xai4heat", ignore=shutil.ignore_patterns(".build.lock"))
    return Workspace.from_root(REPO, artifacts)


def project_cli(ws, *args: str):
    """The CLI on a workspace of its own artifacts folder."""
    from click.testing import CliRunner

    from pipeline.cli import main

    return CliRunner().invoke(main, ["--root", str(ws.root), "--artifacts", str(ws.artifacts_dir), *args])


def test_the_projects_store_edited_in_place_is_refused_by_its_readers(real_artifacts, tmp_path):
    """The reproduction: UPDATE aggregates SET mean = mean + 1000 in the project's store; `tool --corpus` answered
    997.4333 with no warning. Every reader checks the store against the build's record first."""
    ws = project_copy(real_artifacts, tmp_path)
    call = ("tool", "aggregate_window", "--corpus", "xai4heat", "--args", json.dumps(DAY))
    before = project_cli(ws, *call)
    assert before.exit_code == 0 and json.loads(before.stdout)["mean"] == -2.5667, before.output
    store = ws.stage_dir("xai4heat", "store") / "store.duckdb"
    store.chmod(0o644)
    with duckdb.connect(str(store)) as con:
        con.execute("UPDATE aggregates SET mean = mean + 1000")
    fails(project_cli(ws, *call), "store.duckdb differs from its size and xxh3 in outputs.local.json")
    run = ["run", "--corpus", "xai4heat", "--split", "test", "--agent", "oracle", "--out", str(tmp_path / "t.jsonl")]
    fails(project_cli(ws, *run), "store.duckdb differs")


def test_an_edit_left_in_a_write_ahead_log_is_refused(real_artifacts, tmp_path):
    """A writer that ends before its checkpoint leaves the edit in store.duckdb.wal: the file keeps its recorded
    bytes, and DuckDB replays the log on a read-only open. The log beside the store is refused, by readers and by
    `build` (which rebuilds the stage)."""
    ws = project_copy(real_artifacts, tmp_path)
    store = ws.stage_dir("xai4heat", "store") / "store.duckdb"
    store.chmod(0o644)
    before = store.read_bytes()
    with duckdb.connect(str(store)) as con:
        con.execute("PRAGMA disable_checkpoint_on_shutdown")
        con.execute("SET checkpoint_threshold = '10GB'")
        con.execute("UPDATE aggregates SET mean = mean + 1000")
    assert store.read_bytes() == before and store.with_name("store.duckdb.wal").exists()
    call = ("tool", "aggregate_window", "--corpus", "xai4heat", "--args", json.dumps(DAY))
    fails(project_cli(ws, *call), "store.duckdb has a write-ahead log beside it")

    from pipeline.core.manifest import damaged_output, read_manifest

    folder = store.parent
    assert "write-ahead log" in damaged_output(folder, read_manifest(folder))


def test_a_project_play_records_the_projects_release_and_expect_checks_it(real_artifacts, tmp_path):
    ws = project_copy(real_artifacts, tmp_path)
    digest = trusted(ws.stage_dir("xai4heat", "release"))
    out = tmp_path / "p.jsonl"
    run = ["run", "--corpus", "xai4heat", "--split", "test", "--agent", "oracle", "--limit", "2", "--out", str(out)]
    ran = project_cli(ws, *run, "--expect", digest)
    assert ran.exit_code == 0, ran.output
    assert "sha256:" + header(out)["release_digest"] == digest
    other = "sha256:" + "a" * 64
    call = ("tool", "aggregate_window", "--corpus", "xai4heat", "--args", json.dumps(DAY))
    fails(project_cli(ws, *call, "--expect", other), "the project's build of xai4heat is release")
    answered = project_cli(ws, *call, "--expect", digest)
    assert answered.exit_code == 0, answered.output


def test_the_inspect_task_refuses_a_forged_release_given_the_trusted_digest(forged, release, tmp_path):
    """`-T expect=DIGEST` (comma-separated: one per corpus of an eval-set) as `run --expect`: the forged folder stops
    the task in one line; the genuine one plays, bound to its digest."""
    pytest.importorskip("inspect_ai")
    from inspect_ai._util.error import PrerequisiteError

    from pipeline.harness.inspect_task import episode_source_for

    digest, folder = forged
    cache, other = tmp_path / "cache", "sha256:" + "b" * 64
    with pytest.raises(PrerequisiteError) as caught:
        episode_source_for(None, "test", folder, cache_dir=cache, expect=digest)
    message = str(caught.value.message)
    assert "not the release you trust" in message and "\n" not in message, message
    with pytest.raises(PrerequisiteError, match="nor sha256:b{64} you expect"):
        episode_source_for(None, "test", folder, cache_dir=cache, expect=f"{digest},{other}")
    for expect in (digest, f"{other},{digest}"):
        source = episode_source_for(None, "test", release, cache_dir=cache, expect=expect)
        assert "sha256:" + source.release_digest == digest
