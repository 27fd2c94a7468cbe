"""The construction audit: each policy lacks one capability, fails rows that need it, wins rows that do not."""

from __future__ import annotations

import json
import tomllib

import pytest

from contracts.episodes import AuditConfig, EpisodesConfig
from contracts.tasks import FamiliesConfig
from pipeline.audit.policies import ShortcutPolicy
from pipeline.audit.stage import required_capabilities
from pipeline.episodes.stage import read_episodes
from pipeline.runtime.runner import run_episode
from pipeline.runtime.scoring import score_episode
from pipeline.runtime.simulator import slot_keywords
from tests.helpers import REPO, run_cli

AUDIT = AuditConfig.model_validate(tomllib.loads((REPO / "configs" / "audit.toml").read_text()))
LIFTS = EpisodesConfig.model_validate(tomllib.loads((REPO / "configs" / "episodes.toml").read_text()))
FAMILIES = FamiliesConfig.model_validate(tomllib.loads((REPO / "configs" / "families.toml").read_text()))
KEYWORDS = slot_keywords(LIFTS)


@pytest.fixture(scope="session")
def candidates(real_artifacts):
    return read_episodes(real_artifacts / "xai4heat" / "episodes")


def play(policy, episode, xai_store):
    turns = [r for r in run_episode(policy, episode, xai_store, KEYWORDS) if r.type == "turn"]
    return score_episode(episode, turns, KEYWORDS)


def test_audit_json_and_controls(real_artifacts):
    for corpus in ("xai4heat", "hhw"):
        result = run_cli(real_artifacts, "audit", "--corpus", corpus, "--json")
        assert result.exit_code == 0, result.output
        report = json.loads(result.output)
        wins = report["completions_on_candidates"]
        assert all(wins[p.name] > 0 for p in AUDIT.policies if p.kind == "shortcut"), wins
        assert report["commitment_mix_gate"]["status"] == "pass", report["commitment_mix_gate"]
        trimmed = sum(n for split in report["trimmed_for_mix"].values() for n in split.values())
        trimmed += sum(n for codes in report["trimmed_for_balance"].values() for n in codes.values())
        assert report["released"] == report["candidates"] - sum(report["excluded_by_policy"].values()) - trimmed
        controls = report["controls"]
        assert (
            controls["every_policy_wins_some_candidate"]
            and controls["oracle_all_released"]
            and controls["commitment_mix_ok"]
        )
        assert controls["preflight_issue_count"] == 0 and controls["oracle_accomplished_released"] == report["released"]


def test_test_split_scores(real_artifacts, tmp_path):
    expected = {"oracle": 1.0, "controller": 0.0, "noop": 0.0}
    for agent, rate in expected.items():
        out = tmp_path / f"{agent}.jsonl"
        result = run_cli(
            real_artifacts,
            "run",
            "--corpus",
            "xai4heat",
            "--split",
            "test",
            "--agent",
            agent,
            "--out",
            str(out),
            "--json",
        )
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["accomplished_rate"] == rate, agent
        assert (
            json.loads(run_cli(real_artifacts, "score", str(out), "--json").output)["summaries"][0]["accomplished_rate"]
            == rate
        )


# The symptom a missing capability leaves in the score.
SYMPTOMS = {
    "clarify": lambda e, s: "missing_clarification" in s.issues,
    "carry_state": lambda e, s: not all(s.phase_results[1:-1]),
    "revise": lambda e, s: not all(s.phase_results[1:-1]),
    "abstain": lambda e, s: not s.phase_results[-1],
    "nearest": lambda e, s: (
        not all(
            r for p, r in zip(e.phases, s.phase_results, strict=True) if p.type in ("nearest_timestamp", "commitment")
        )
    ),
}


@pytest.mark.parametrize("policy_spec", [p for p in AUDIT.policies if p.kind == "shortcut"], ids=lambda p: p.name)
def test_each_policy_fails_for_its_gap_and_wins_without_it(xai_store, candidates, policy_spec):
    policy = ShortcutPolicy(policy_spec.name, policy_spec.lacks, xai_store, FAMILIES, LIFTS)
    needing = [e for e in candidates if policy_spec.lacks in required_capabilities(e, AUDIT)]
    failing = next(e for e in needing if not play(policy, e, xai_store).accomplished)
    score = play(policy, failing, xai_store)
    assert SYMPTOMS[policy_spec.lacks](failing, score), (failing.id, score)
    free = next(e for e in candidates if policy_spec.lacks not in required_capabilities(e, AUDIT))
    assert play(policy, free, xai_store).accomplished, free.id


def test_policies_read_no_gold(xai_store, candidates):
    """A policy's answers do not change when every gold and the hidden instruction are blanked."""
    episode = next(e for e in candidates if e.family == "window_pairwise_compare")
    blank = episode.model_copy(
        update={
            "hidden_instruction": "",
            "phases": [p.model_copy(update={"gold": {}}) for p in episode.phases],
        }
    )
    policy = ShortcutPolicy("always_answer", "abstain", xai_store, FAMILIES, LIFTS)
    actions = [r.action for r in run_episode(policy, episode, xai_store, KEYWORDS) if r.type == "turn"]
    blanked = [r.action for r in run_episode(policy, blank, xai_store, KEYWORDS) if r.type == "turn"]
    assert actions == blanked
