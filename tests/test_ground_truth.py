"""Ground-truth export, the validator (ours and the seed's examples) and the three-level evaluator."""

from __future__ import annotations

import json
import tomllib

import pytest
from click.testing import CliRunner
from jsonschema import Draft7Validator

from contracts.episodes import EpisodesConfig
from pipeline.cli import main
from pipeline.core.config import load_families
from pipeline.core.workspace import Workspace
from pipeline.harness.evaluation import evaluate_row
from pipeline.harness.traces import load_episodes
from pipeline.release.ground_truth import execution, trajectory
from pipeline.release.gt_validate import SCHEMA_PATH, check
from pipeline.runtime.runner import run_episode
from pipeline.runtime.simulator import slot_keywords
from tests.helpers import REPO, SHIPPED
from tests.test_runtime import Scripted

FIXTURE = REPO / "tests" / "fixtures" / "gt_seed_examples.json"
VALIDATOR = Draft7Validator(json.loads(SCHEMA_PATH.read_text()))
KEYWORDS = slot_keywords(EpisodesConfig.model_validate(tomllib.loads((REPO / "configs" / "episodes.toml").read_text())))


def cli(*args):
    return CliRunner().invoke(main, ["--root", str(REPO), *args])


def test_our_exports_have_no_findings(real_artifacts):
    files = [str(p) for p in sorted((real_artifacts).glob("*/release/ground_truth/*.jsonl"))]
    assert len(files) == 3 * len(SHIPPED)  # train, dev and test of every shipped corpus
    result = cli("validate-gt", *files)
    assert result.exit_code == 0, result.output
    assert "no findings" in result.output


def seed(scenario: int | None, lines: str) -> dict:
    return next(
        e["trajectory"]
        for e in json.loads(FIXTURE.read_text())
        if e["lines"] == lines and e["scenario_id"] == (str(scenario) if scenario is not None else None)
    )


def test_seed_examples_findings():
    result = cli("validate-gt", str(FIXTURE))
    assert result.exit_code == 1
    clean = seed(3, "1954-1985")
    assert check(clean, VALIDATOR) == []
    recovery = check(seed(502, "1282-1454"), VALIDATOR)
    assert any("step history: name is not unique" in f for f in recovery)
    assert any("cycle history -> history" in f for f in recovery)
    assert any("'date_range' is produced by no step" in f for f in check(seed(400, "2192-2227"), VALIDATOR))
    assert any("3 agents" in f and "not 'multiagent'" in f for f in check(seed(501, "2233-2285"), VALIDATOR))
    assert any("'agent' is a required property" in f for f in check(seed(421, "1992-2027"), VALIDATOR))
    assert any("no Finish step" in f for f in check(seed(400, "1107-1188"), VALIDATOR))


def test_validator_rules_on_hand_made_trajectories(real_artifacts):
    episode = load_episodes(real_artifacts / "xai4heat" / "audit" / "test.jsonl")[0]
    good = trajectory(episode, load_families(Workspace.from_root(REPO)).families[episode.family].category)
    assert check(good, VALIDATOR) == []
    bad = json.loads(json.dumps(good))
    bad["execution_links"].append({"source": "finish", "target": bad["execution_steps"][0]["name"]})
    bad["execution_links"].append({"source": "ghost", "target": "finish"})
    bad["execution_steps"][0]["deterministic"] = {"name": False}
    bad["execution_steps"].append(
        {
            "name": "stray",
            "action": "inspect_quality",
            "agent": "other",
            "arguments": {"stream_id": "@nothing.stream_id"},
        }
    )
    bad["type"] = "telemetry-bench"
    findings = check(bad, VALIDATOR)
    for expected in (
        "cycle",
        "'ghost' is not a step",
        "deterministic flags incomplete",
        "step stray: does not reach the Finish step",
        "reference 'nothing' is produced by no step",
        "not 'multiagent'",
    ):
        assert any(expected in f for f in findings), (expected, findings)
    multi = json.loads(json.dumps(good))
    multi["type"] = "multiagent"
    assert any("only one agent" in f for f in check(multi, VALIDATOR))
    no_final = {k: v for k, v in good.items() if k not in ("final_out", "final_out_description")}
    assert check(no_final, VALIDATOR) == []


@pytest.fixture(scope="session")
def world(real_artifacts, xai_store):
    return xai_store, load_episodes(real_artifacts / "xai4heat" / "audit" / "test.jsonl")


def evaluate_with(edit, episode, store):
    turns = [r for r in run_episode(Scripted(edit), episode, store, KEYWORDS) if r.type == "turn"]
    return evaluate_row(execution(episode), episode, turns, store, KEYWORDS)


def test_oracle_scores_one_at_every_level_and_noop_low(real_artifacts, tmp_path, world):
    store, episodes = world
    for family in sorted({e.family for e in episodes}):
        row = evaluate_with(lambda a: a, next(e for e in episodes if e.family == family), store)
        assert (row["final"], row["outcome"]["score"], row["process"]["score"], row["planning"]["score"]) == (
            1.0,
            1.0,
            1.0,
            1.0,
        )
    out = tmp_path / "noop.jsonl"
    assert (
        cli(
            "--artifacts",
            str(real_artifacts),
            "run",
            "--corpus",
            "xai4heat",
            "--split",
            "test",
            "--agent",
            "noop",
            "--out",
            str(out),
        ).exit_code
        == 0
    )
    gt = real_artifacts / "xai4heat" / "release" / "ground_truth" / "test.jsonl"
    report = json.loads(
        cli(
            "--artifacts", str(real_artifacts), "evaluate", "--ground-truth", str(gt), "--trace", str(out), "--json"
        ).output
    )
    assert report["mean_final"] < 0.1 and all(r["outcome"]["score"] == 0 for r in report["rows"])


def _rewrite(actions, name, change):
    return [change(a) if a["kind"] == "call_tool" and a["name"] == name else a for a in actions]


def test_each_failure_mode_is_detected(world):
    store, episodes = world
    compare = next(e for e in episodes if e.family == "window_pairwise_compare")
    tool = evaluate_with(
        lambda a: _rewrite(a, "compare_window", lambda c: {**c, "name": "rank_window"}), compare, store
    )
    assert "tool_selection" in tool["failure_modes"] and "missing_step" in tool["failure_modes"]
    parameter = evaluate_with(
        lambda a: _rewrite(a, "compare_window", lambda c: {**c, "arguments": {**c["arguments"], "metric": "max"}}),
        compare,
        store,
    )
    assert "parameter" in parameter["failure_modes"] and parameter["process"]["node_overlap"] < 1
    missing = evaluate_with(
        lambda a: [x for x in a if not (x["kind"] == "call_tool" and x["name"] == "inspect_quality_window")],
        compare,
        store,
    )
    assert "missing_step" in missing["failure_modes"]
    lookup = next(e for e in episodes if e.family == "day_mean_lookup")
    stream = lookup.evidence_stream_ids[0]

    def reorder(actions):
        calls = [x for x in actions if x["kind"] == "call_tool"]
        resolve, aggregate = calls[0], {**calls[1], "arguments": {**calls[1]["arguments"], "stream_id": stream}}
        rest = [x for x in actions if x is not calls[0] and x is not calls[1]]
        return [rest[0], aggregate, resolve, *rest[1:]]

    assert "sequencing" in evaluate_with(reorder, lookup, store)["failure_modes"]
    truncated = evaluate_with(lambda a: a[:3], lookup, store)
    assert "premature_termination" in truncated["failure_modes"] and truncated["final"] < 0.6
