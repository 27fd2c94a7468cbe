"""The benchmark inside inspect_ai: the shipped task, played from a read-only release copy with inspect's mock model,
scores the gold path 1.0 and silence 0, agrees row by row with `telemetry-bench score`, and refuses bad input in one
line."""

from __future__ import annotations

import json
import shutil
import stat

import pytest
from click.testing import CliRunner
from inspect_ai import eval as inspect_eval
from inspect_ai.model import ModelOutput, ModelUsage, get_model

from pipeline.cli import main
from pipeline.harness.inspect_task import _Conversation, episode_source_for, write_trace
from pipeline.harness.traces import load_episodes
from pipeline.release.playable import Release
from pipeline.runtime.gold_path import gold_actions
from pipeline.runtime.simulator import UserSimulator

LIMIT = 3  # episodes of the test split played per run: enough for several families and interaction modes
USAGE = ModelUsage(input_tokens=100, output_tokens=7, total_tokens=107)  # set, so mockllm counts no tokens itself
PARTS = (
    "final",
    "evidence",
    "phase",
    "temporal",
    "task",
    "protocol",
    "accomplished",
    "phase_results",
    "issues",
    "commitment_outcome",
    "commitment_correct",
)


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """inspect's log, data and cache folders under the test's own tmp path."""
    for name in ("INSPECT_LOG_DIR", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    return tmp_path


@pytest.fixture
def copy(real_artifacts, tmp_path):
    """A read-only copy of the built xai4heat release."""
    folder = tmp_path / "download" / "xai4heat"
    shutil.copytree(real_artifacts / "xai4heat" / "release", folder)
    for path in [folder, *folder.rglob("*")]:
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    yield folder
    for path in [folder, *folder.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)


def gold_model(release):
    """A scripted model that plays each episode's gold path, as the oracle agent does: it knows the episode by the
    user's opening message and its step by the replies it has made."""
    played = Release(release)
    scripts = {
        UserSimulator(e, played.keywords()).opening(): list(gold_actions(e))
        for e in load_episodes(played.episodes_path("test"))
    }

    def reply(messages, tools, tool_choice, config):
        opening = next(m.text for m in messages if m.role == "user")
        step = sum(1 for m in messages if m.role == "assistant")
        action = scripts[opening][step].model_dump()
        kind = action.pop("kind")
        name, arguments, call_id = kind, action, f"call{step}"
        if kind == "call_tool":
            name, arguments, call_id = action["name"], action["arguments"], action["id"] or call_id
        output = ModelOutput.for_tool_call("mockllm/model", name, arguments, tool_call_id=call_id)
        output.usage = USAGE
        return output

    return get_model("mockllm/model", custom_outputs=reply)


def silent_model():
    def reply(messages, tools, tool_choice, config):
        output = ModelOutput.from_content("mockllm/model", "")
        output.usage = USAGE
        return output

    return get_model("mockllm/model", custom_outputs=reply)


def play(model, copy, folder):
    (log,) = inspect_eval(
        "telemetry_bench/xai4heat",
        model=model,
        task_args={
            "release": str(copy),
            "split": "test",
            "cache_dir": str(folder / "cache"),
            "expect": "sha256:" + digest_of(copy),  # issue 53: the task takes the digest the user trusts
        },
        limit=LIMIT,
        log_dir=str(folder / "logs"),
        display="none",
    )
    assert log.status == "success", log.error
    return log


def digest_of(release) -> str:
    return json.loads((release / "release.json").read_text())["release_digest"]


def scores(log):
    return {str(s.id): s.scores["episode_score"] for s in log.samples}


def test_the_gold_path_scores_one_and_agrees_with_telemetry_bench_score(isolated, copy):
    log = play(gold_model(copy), copy, isolated)
    by_episode = scores(log)
    assert len(by_episode) == LIMIT
    assert {s.value for s in by_episode.values()} == {1.0}
    assert {s.metadata["score"]["commitment_correct"] for s in by_episode.values()} == {True}
    assert log.results.scores[0].metrics["mean"].value == 1.0
    first = next(iter(by_episode.values())).metadata
    assert first["usage"]["tokens_in"] > 0 and first["usage"]["tokens_out"] > 0  # inspect's token counts
    assert log.stats.model_usage["mockllm/model"].input_tokens == sum(
        s.metadata["usage"]["tokens_in"] for s in by_episode.values()
    )

    trace = write_trace(log.location, isolated / "inspect.jsonl")
    result = CliRunner().invoke(main, ["score", str(trace), "--release", str(copy), "--json"])
    assert result.exit_code == 0, result.output
    (summary,) = json.loads(result.output)["summaries"]
    assert summary["identity"]["model"] == "mockllm/model" and summary["partial"]
    assert summary["identity"]["agent"] == "inspect"
    assert summary["release_digest"] == digest_of(copy)  # the trace names the release its log was played on
    assert summary["usage"]["tokens_in"] == sum(s.metadata["usage"]["tokens_in"] for s in by_episode.values())
    rows = {row["episode_id"]: row for row in summary["rows"]}
    assert sorted(rows) == sorted(by_episode)
    for episode_id, score in by_episode.items():
        assert {k: rows[episode_id][k] for k in PARTS} == {k: score.metadata["score"][k] for k in PARTS}


def test_a_silent_model_scores_zero_and_agrees_with_telemetry_bench_score(isolated, copy):
    log = play(silent_model(), copy, isolated)
    by_episode = scores(log)
    assert {s.value for s in by_episode.values()} == {0.0}
    assert all("parse_error" in s.metadata["score"]["issues"] for s in by_episode.values())
    assert {s.metadata["score"]["commitment_correct"] for s in by_episode.values()} == {False}
    trace = write_trace(log, isolated / "silent.jsonl")
    result = CliRunner().invoke(main, ["score", str(trace), "--release", str(copy), "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["episode_id"]: row for row in json.loads(result.output)["summaries"][0]["rows"]}
    for episode_id, score in by_episode.items():
        assert {k: rows[episode_id][k] for k in PARTS} == {k: score.metadata["score"][k] for k in PARTS}


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"corpus": "xai4heat", "split": "holdout"}, "unknown split 'holdout'"),
        ({"corpus": "nope"}, "unknown corpus nope"),
        ({"corpus": None, "release": "MISSING"}, "no release.json"),
        ({"corpus": "hhw", "release": "COPY"}, "a release of xai4heat: -T applies to every task of the run"),
        ({"corpus": "hhw", "releases": "DOWNLOADS"}, "no hhw/release/release.json nor hhw/release.json"),
        ({"corpus": "hhw", "release": "COPY", "releases": "DOWNLOADS"}, "not both"),
    ],
    ids=["split", "corpus", "missing-release", "other-corpus", "releases-without-it", "release-and-releases"],
)
def test_bad_input_is_one_line(copy, tmp_path, arguments, says):
    from inspect_ai._util.error import PrerequisiteError

    given = dict(arguments)
    if given.get("release") == "MISSING":
        given["release"] = str(tmp_path / "nowhere")
    elif given.get("release") == "COPY":
        given["release"] = str(copy)
    if given.get("releases") == "DOWNLOADS":
        given["releases"] = str(copy.parent)  # holds xai4heat/ only
    with pytest.raises(PrerequisiteError) as caught:
        episode_source_for(**given, cache_dir=tmp_path / "cache")
    message = str(caught.value.message)
    assert says in message and "\n" not in message, message
    assert "--corpus" not in message  # issue 54: a flag inspect does not have


def test_releases_picks_each_tasks_own_release(copy, tmp_path):
    """`-T releases=FOLDER` serves every task of an eval-set: <corpus>/ or <corpus>/release/ under it."""
    source = episode_source_for("xai4heat", "test", releases=copy.parent, cache_dir=tmp_path / "cache")
    assert source.corpus == "xai4heat" and source.stage == "release"
    assert source.path.name == "test.jsonl" and source.path.parent.resolve() == copy.resolve()


def test_two_runs_write_the_same_trace_but_for_turn_times(isolated, copy):
    traces = []
    for number in (1, 2):
        log = play(gold_model(copy), copy, isolated / f"run{number}")
        lines = write_trace(log, isolated / f"run{number}.jsonl").read_text(encoding="utf-8").splitlines()
        traces.append([{k: v for k, v in json.loads(line).items() if k != "elapsed_ms"} for line in lines])
    assert traces[0] == traces[1]
    assert len(traces[0]) > 1 + LIMIT


def test_every_shipped_corpus_has_a_task():
    from inspect_ai._util.registry import registry_lookup

    from tests.helpers import SHIPPED

    assert SHIPPED
    for corpus in [*SHIPPED, "release"]:
        assert registry_lookup("task", f"telemetry_bench/{corpus}") is not None, corpus


def test_a_repeated_tool_call_id_is_renamed_where_the_model_sees_it():
    """Some models number calls per reply: a second `call0` gets a fresh id in the conversation (the assistant message
    and the action agree on it), so its tool reply answers the right call, as with the openai agent."""
    conversation = _Conversation([])
    ids = []
    for _ in range(2):
        output = ModelOutput.for_tool_call("mockllm/model", "list_sites", {}, tool_call_id="call0")
        conversation.take(output)
        (call,) = conversation.messages[-1].tool_calls
        assert conversation.pending == [call.id]
        ids.append(call.id)
    assert ids[0] == "call0" and ids[1] != "call0"
