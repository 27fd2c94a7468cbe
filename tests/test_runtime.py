"""Runner, agents, scorer and preflight on the real built corpora and on hand-built traces."""

from __future__ import annotations

import io
import json
import tomllib

import pytest

from contracts.episodes import EpisodesConfig
from contracts.runtime import TurnRecord
from pipeline.harness.traces import load_episodes
from pipeline.runtime.agents import Agent, HumanAgent, OracleAgent
from pipeline.runtime.runner import run_episode
from pipeline.runtime.scoring import score_episode
from pipeline.runtime.simulator import slot_keywords
from tests.helpers import REPO, run_cli

KEYWORDS = slot_keywords(EpisodesConfig.model_validate(tomllib.loads((REPO / "configs" / "episodes.toml").read_text())))


@pytest.fixture(scope="session")
def episodes(real_artifacts):
    return load_episodes(real_artifacts / "xai4heat" / "episodes" / "test.jsonl")


def play(agent, episode, xai_store):
    return [r for r in run_episode(agent, episode, xai_store, KEYWORDS) if isinstance(r, TurnRecord)]


def pick(episodes, family):
    """The family's first episode that withholds a slot (the first one when the family withholds nothing)."""
    rows = [e for e in episodes if e.family == family]
    return next((e for e in rows if e.withheld), rows[0])


@pytest.mark.parametrize("corpus", ["xai4heat", "hhw"])
def test_oracle_accomplishes_everything_and_noop_nothing(real_artifacts, tmp_path, corpus):
    for agent, expected in (("oracle", 1.0), ("noop", 0.0)):
        out = tmp_path / f"{agent}.jsonl"
        result = run_cli(
            real_artifacts, "run", "--corpus", corpus, "--split", "test", "--agent", agent, "--out", str(out), "--json"
        )
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["accomplished_rate"] == expected
        scored = run_cli(real_artifacts, "score", str(out), "--json")
        assert scored.exit_code == 0, scored.output
        (summary,) = json.loads(scored.output)["summaries"]
        assert summary["accomplished_rate"] == expected
        assert {"final", "evidence", "phase", "temporal", "task", "protocol", "per_family"} <= set(summary)


def test_rescoring_is_deterministic(real_artifacts, tmp_path):
    out = tmp_path / "t.jsonl"
    assert (
        run_cli(
            real_artifacts,
            "run",
            "--corpus",
            "xai4heat",
            "--split",
            "dev",
            "--agent",
            "oracle",
            "--repeat",
            "2",
            "--out",
            str(out),
        ).exit_code
        == 0
    )
    (first,) = json.loads(run_cli(real_artifacts, "score", str(out), "--json").output)["summaries"]
    (second,) = json.loads(run_cli(real_artifacts, "score", str(out), "--json").output)["summaries"]
    assert first == second and first["pass^2"] == 1.0 and first["flip_rate"] == 0.0


def test_preflight_finds_no_issue(real_artifacts):
    for corpus in ("xai4heat", "hhw"):
        result = run_cli(real_artifacts, "preflight", "--corpus", corpus, "--json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["issue_count"] == 0


class Scripted(Agent):
    """Plays the oracle's actions after applying an edit to the list."""

    def __init__(self, edit) -> None:
        self.edit = edit

    def start(self, episode) -> None:
        oracle = OracleAgent()
        oracle.start(episode)
        actions = []
        while (action := oracle.act(None))["text" if False else "kind"] and len(actions) < 200:
            actions.append(action)
            if action.get("text") == "done":
                break
        self.actions = iter(self.edit([a for a in actions if a.get("text") != "done"]))

    def act(self, observation):
        return next(self.actions, {"kind": "answer", "text": "", "fields": {}})


def score_with(edit, episode, xai_store):
    return score_episode(episode, play(Scripted(edit), episode, xai_store), KEYWORDS)


def test_oracle_script_scores_perfectly(episodes, xai_store):
    for family in {e.family for e in episodes}:
        score = score_with(lambda a: a, pick(episodes, family), xai_store)
        assert score.accomplished, (family, score)


def test_missing_clarification_and_premature_tool(episodes, xai_store):
    episode = pick(episodes, "day_mean_lookup")
    score = score_with(lambda a: [x for x in a if x["kind"] != "ask_user"], episode, xai_store)
    assert {"missing_clarification", "premature_tool"} <= set(score.issues) and not score.protocol


def test_redundant_and_unnecessary_clarification(episodes, xai_store):
    episode = pick(episodes, "day_mean_lookup")
    score = score_with(lambda a: [a[0], a[0], *a[1:]], episode, xai_store)
    assert "redundant_clarification" in score.issues
    nearest = pick(episodes, "timestamp_nearest_lookup")
    score = score_with(lambda a: [{"kind": "ask_user", "text": "Which site?"}, *a], nearest, xai_store)
    assert "unnecessary_clarification" in score.issues
    told = next(e for e in episodes if e.family == "day_mean_lookup" and not e.withheld)  # the day said up front
    score = score_with(lambda a: [{"kind": "ask_user", "text": "Which day do you mean?"}, *a], told, xai_store)
    assert "unnecessary_clarification" in score.issues and not score.protocol


def _edit_first_answer(actions, fields):
    out, done = [], False
    for action in actions:
        if action["kind"] == "answer" and not done:
            action = {**action, "fields": {**action["fields"], **fields}}
            done = True
        out.append(action)
    return out


def test_wrong_value_fails_the_phase_within_tolerance_passes(episodes, xai_store):
    episode = pick(episodes, "day_mean_lookup")
    gold = episode.phases[0].gold["mean"]
    allowed = max(0.001, 0.001 * abs(gold))
    near = score_with(lambda a: _edit_first_answer(a, {"mean": str(gold + 0.9 * allowed)}), episode, xai_store)
    assert near.accomplished
    far = score_with(lambda a: _edit_first_answer(a, {"mean": gold + 1.5 * allowed}), episode, xai_store)
    assert not far.phase and not far.task and far.phase_results[0] is False
    assert [(r.step, r.field, r.reason) for r in far.rejections] == [(0, "mean", "wrong_value")]


def test_evidence_must_be_cited_not_merely_seen(episodes, xai_store):
    episode = pick(episodes, "day_mean_lookup")
    score = score_with(lambda a: [*a[:-1], {**a[-1], "fields": {"stream_ids": []}}], episode, xai_store)
    assert not score.evidence and not score.accomplished


def test_wrong_window_fails_temporal(episodes, xai_store):
    episode = pick(episodes, "window_mean_lookup")

    def shift(actions):
        out = []
        for action in actions:
            if action["kind"] == "call_tool" and action["name"] == "aggregate_window" and action.get("id") == "c2":
                action = {
                    **action,
                    "arguments": {**action["arguments"], "period": "custom", "window_start": "2000-01-01T00:00:00Z"},
                }
            out.append(action)
        return out

    score = score_with(shift, episode, xai_store)
    assert not score.temporal and not score.task


def test_truncated_run_is_not_terminated(episodes, xai_store):
    episode = pick(episodes, "day_mean_lookup")
    turns = play(Scripted(lambda a: a), episode, xai_store)[:3]
    score = score_episode(episode, turns, KEYWORDS)
    assert {"not_terminated", "missing_phase_answer", "missing_evidence"} <= set(score.issues)


class Garbage(Agent):
    outputs = [
        None,
        "hello",
        {"kind": "teleport"},
        {"kind": "call_tool"},
        42,
        [{"kind": "ask_user", "text": "when?"}, {"kind": "ask_user", "text": "where?"}],
        {"kind": "call_tool", "name": "lookup_observation", "arguments": {"stream_id": "nope", "timestamp": "x"}},
    ]

    def act(self, observation):
        if observation.turn == 7:
            raise RuntimeError("agent crashed")
        return self.outputs[observation.turn % len(self.outputs)]


def test_runner_survives_garbage(episodes, xai_store):
    episode = pick(episodes, "day_mean_lookup")
    turns = play(Garbage(), episode, xai_store)
    assert len(turns) == 8  # the agent's own exception at turn 7 is recorded and ends the episode, not the run
    assert turns[-1].issues == ["agent_error"] and turns[-1].raw == {"agent_error": "RuntimeError: agent crashed"}
    issues = {i for t in turns for i in t.issues}
    assert {"parse_error", "parallel_calls"} <= issues
    score = score_episode(episode, turns, KEYWORDS)
    assert not score.accomplished and {"parse_error", "tool_error", "not_terminated", "agent_error"} <= set(
        score.issues
    )


def test_human_agent_reads_the_terminal(episodes, xai_store):
    episode = pick(episodes, "timestamp_nearest_lookup")
    lines = [
        "plan look it up",
        "ask when?",
        'tool list_points {"site": "L17"}',
        'answer {"value": 1} my guess',
        "garbage",
    ]
    shown = io.StringIO()
    agent = HumanAgent(stdin=io.StringIO("\n".join(lines) + "\n"), stdout=shown)
    turns = play(agent, episode, xai_store)
    assert "answer form" in shown.getvalue() and "fallback_reason: code" in shown.getvalue()
    assert "nearest_observation: " in shown.getvalue()  # every code, with its meaning
    kinds = [t.action["kind"] if t.action else None for t in turns[:5]]
    assert kinds == ["plan", "ask_user", "call_tool", "answer", None]
    assert turns[3].action["text"] == "my guess" and "parse_error" in turns[4].issues


def test_run_errors_are_one_line(real_artifacts, tmp_path):
    result = run_cli(
        real_artifacts,
        "run",
        "--corpus",
        "xai4heat",
        "--split",
        "test",
        "--agent",
        "nobody",
        "--out",
        str(tmp_path / "x"),
    )
    assert result.exit_code == 1 and "unknown agent 'nobody'" in result.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    result = run_cli(real_artifacts, "score", str(bad))
    assert result.exit_code == 1 and "not a trace header" in result.output
