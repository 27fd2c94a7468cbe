"""Commitment accuracy per gold outcome and balanced (issue 43): of the runs whose gold commitment is answer, abstain
or re_clarify, the share whose decision graded right, and their mean. A quality-blind agent that always answers gets
answer 1, abstain 0, re_clarify 0 and 1/3 balanced however skewed the corpus is toward answer, where its accomplished
rate looks good; `score` (text and --json) and the leaderboard (JSON, CSV, Markdown) show both. Played on a copy of
the committed xai4heat release (no build)."""

from __future__ import annotations

import csv
import json
import shutil
import tomllib
from collections import Counter

import jsonschema
import pytest

from contracts.episodes import EpisodesConfig
from contracts.runtime import EpisodeScore, TurnRecord
from pipeline.harness.traces import load_episodes
from pipeline.runtime.gold_path import gold_actions
from pipeline.runtime.scoring import score_episode, summarize
from pipeline.runtime.simulator import slot_keywords
from tests.helpers import REPO, always_answer, run_cli

KEYWORDS = slot_keywords(EpisodesConfig.model_validate(tomllib.loads((REPO / "configs" / "episodes.toml").read_text())))
SHIPPED_RELEASE = REPO / "artifacts" / "xai4heat" / "release"
SCHEMA = json.loads((REPO / "contracts" / "schemas" / "leaderboard.schema.json").read_text())


def run_score(i: int, outcome: str | None, correct: bool | None) -> EpisodeScore:
    """A scored run whose task stands or falls with its commitment decision."""
    ok = bool(correct)
    return EpisodeScore(
        episode_id=f"e{i}",
        run=0,
        family="f",
        split="test",
        interaction_mode="answer+commit",
        final=ok,
        evidence=True,
        phase=ok,
        temporal=True,
        task=ok,
        protocol=True,
        accomplished=ok,
        phase_results=[True, ok],
        issues=[],
        commitment_outcome=outcome,
        commitment_correct=correct,
    )


SKEWED = ["answer"] * 8 + ["abstain", "re_clarify"]  # 80% of the gold commitments are answer


def test_always_answering_a_skewed_corpus_is_a_third_balanced():
    blind = summarize(run_score(i, gold, gold == "answer") for i, gold in enumerate(SKEWED))
    assert blind["accomplished_rate"] == 0.8
    assert blind["commitment_accuracy"] == {"answer": 1.0, "abstain": 0.0, "re_clarify": 0.0}
    assert blind["commitment_runs"] == {"answer": 8, "abstain": 1, "re_clarify": 1}
    assert blind["balanced_commitment_accuracy"] == 0.3333
    gold = summarize(run_score(i, outcome, True) for i, outcome in enumerate(SKEWED))
    assert gold["commitment_accuracy"] == {"answer": 1.0, "abstain": 1.0, "re_clarify": 1.0}
    assert gold["balanced_commitment_accuracy"] == 1.0


def test_the_balanced_mean_is_over_the_outcomes_present_and_ignores_runs_without_a_commitment():
    runs = [run_score(i, "answer", i % 2 == 0) for i in range(4)]  # answer right in 2 of 4
    runs += [run_score(4, "abstain", True), run_score(5, None, None), run_score(6, None, None)]
    summary = summarize(runs)
    assert list(summary["commitment_accuracy"]) == ["answer", "abstain"]  # no re_clarify run: not a key, not a zero
    assert summary["commitment_accuracy"] == {"answer": 0.5, "abstain": 1.0}
    assert summary["commitment_runs"] == {"answer": 4, "abstain": 1}
    assert summary["balanced_commitment_accuracy"] == 0.75  # (0.5 + 1.0) / 2
    none = summarize([run_score(0, None, None)])
    assert none["commitment_accuracy"] == {} and none["balanced_commitment_accuracy"] is None
    assert summarize([])["balanced_commitment_accuracy"] is None


def test_a_score_saved_before_the_commitment_fields_still_reads():
    saved = run_score(0, "answer", True).model_dump(mode="json")
    del saved["commitment_outcome"], saved["commitment_correct"]
    old = EpisodeScore.model_validate(saved)
    assert old.commitment_outcome is None and old.commitment_correct is None


def played(episode, edit=lambda actions: actions) -> list[TurnRecord]:
    """The episode's gold path as trace turns (edited first), the last one ending the episode."""
    actions = edit([a.model_dump() for a in gold_actions(episode)])
    return [
        TurnRecord(
            episode_id=episode.id,
            run=0,
            turn=i,
            action=a,
            event="stop" if i == len(actions) - 1 else None,
            # a call as the runner records it: its id and a result without an error (all the scorer reads of it)
            **({"call_id": a["id"], "tool_result": {"rows": []}} if a["kind"] == "call_tool" else {}),
        )
        for i, a in enumerate(actions)
    ]


def with_commitment(fields: dict):
    """An edit of the gold path: the commitment answer's fields updated."""

    def edit(actions: list[dict]) -> list[dict]:
        return [
            {**a, "fields": {**a["fields"], **fields}} if "decision" in (a.get("fields") or {}) else a for a in actions
        ]

    return edit


@pytest.mark.parametrize("gold", ["abstain", "re_clarify", "answer"])
def test_score_episode_grades_the_commitment_decision(gold):
    episode = next(e for e in load_episodes(SHIPPED_RELEASE / "test.jsonl") if e.commitment_outcome == gold)
    assert episode.phases[-1].gold["decision"] == gold
    right = score_episode(episode, played(episode), KEYWORDS)
    assert right.accomplished and (right.commitment_outcome, right.commitment_correct) == (gold, True)
    other = next(o for o in ("answer", "abstain") if o != gold)
    wrong = score_episode(episode, played(episode, with_commitment({"decision": other})), KEYWORDS)
    assert (wrong.commitment_outcome, wrong.commitment_correct, wrong.final) == (gold, False, False)
    spelled = score_episode(episode, played(episode, with_commitment({"decision": f" {gold.upper()} "})), KEYWORDS)
    assert spelled.commitment_correct and spelled.accomplished  # codes match ignoring case and spaces (grading.py)
    reason = next(r for r in ("low_coverage", "healthy_quality") if r != episode.phases[-1].gold["reason"])
    bad_reason = score_episode(episode, played(episode, with_commitment({"reason": reason})), KEYWORDS)
    assert bad_reason.commitment_correct and not bad_reason.final  # the decision alone counts here
    unanswered = [a for a in gold_actions(episode) if a.kind == "answer"][: len(episode.phases) - 1]
    cut = score_episode(episode, played(episode, lambda a: a[: a.index(unanswered[-1].model_dump()) + 1]), KEYWORDS)
    assert (cut.commitment_outcome, cut.commitment_correct) == (gold, False)  # never answered: not right
    bare = episode.model_copy(update={"phases": episode.phases[:-1]})  # no commitment phase: left out
    assert score_episode(bare, played(bare), KEYWORDS).commitment_outcome is None


@pytest.fixture(scope="session")
def release_traces(tmp_path_factory):
    """The oracle and an always-answer agent (the oracle's trace with every decision "answer") on a copy of the
    committed xai4heat release's test split."""
    folder = tmp_path_factory.mktemp("commitment")
    release = folder / "release"
    shutil.copytree(SHIPPED_RELEASE, release)
    where = ["--release", str(release)]
    oracle = folder / "oracle.jsonl"
    result = run_cli(
        folder / "artifacts",
        "run",
        *where,
        "--cache-dir",
        str(folder / "cache"),
        "--split",
        "test",
        "--agent",
        "oracle",
        "--out",
        str(oracle),
    )
    assert result.exit_code == 0, result.output
    gold = Counter(e.commitment_outcome for e in load_episodes(release / "test.jsonl"))
    assert len(gold) == 3 and gold["answer"] > max(gold["abstain"], gold["re_clarify"])  # answer the most common
    return folder, where, oracle, always_answer(oracle, folder / "blind.jsonl"), gold


def test_score_shows_per_outcome_and_balanced_commitment_accuracy(release_traces):
    folder, where, oracle, blind, gold = release_traces
    result = run_cli(folder / "artifacts", "score", str(oracle), str(blind), *where, "--json")
    assert result.exit_code == 0, result.output
    summaries = {s["identity"]["agent"]: s for s in json.loads(result.output)["summaries"]}
    runs = {o: gold[o] for o in ("answer", "abstain", "re_clarify")}
    blind_summary, oracle_summary = summaries["always-answer"], summaries["oracle"]
    assert blind_summary["accomplished_rate"] == round(gold["answer"] / sum(gold.values()), 4)  # looks fine...
    assert blind_summary["commitment_accuracy"] == {"answer": 1.0, "abstain": 0.0, "re_clarify": 0.0}  # ...is not
    assert blind_summary["balanced_commitment_accuracy"] == 0.3333
    assert blind_summary["commitment_runs"] == runs == oracle_summary["commitment_runs"]
    assert oracle_summary["commitment_accuracy"] == {"answer": 1.0, "abstain": 1.0, "re_clarify": 1.0}
    assert oracle_summary["balanced_commitment_accuracy"] == 1.0
    rows = [r for r in blind_summary["rows"] if r["commitment_outcome"] == "abstain"]
    assert len(rows) == gold["abstain"] and not any(r["commitment_correct"] for r in rows)

    text = run_cli(folder / "artifacts", "score", str(blind), *where)
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    assert lines[1].startswith(f"  accomplished {blind_summary['accomplished_rate']:.4f} over")
    assert lines[2] == (
        "  balanced commitment accuracy 0.3333 (per gold outcome: "
        f"answer 1.0000 of {gold['answer']} runs, abstain 0.0000 of {gold['abstain']} runs, "
        f"re_clarify 0.0000 of {gold['re_clarify']} runs)"
    )


def test_the_leaderboard_shows_the_balanced_commitment_accuracy_beside_the_rate(release_traces):
    folder, where, oracle, blind, gold = release_traces
    outs = [folder / "board.json", folder / "board.csv", folder / "board.md"]
    args = [str(oracle), str(blind), *where, *[a for o in outs for a in ("--out", str(o))]]
    result = run_cli(folder / "artifacts", "leaderboard", *args)
    assert result.exit_code == 0, result.output
    board = json.loads(outs[0].read_text())
    jsonschema.validate(board, SCHEMA)
    rows = {r["identity"]["agent"]: r for r in board["rows"]}
    assert rows["oracle"]["rank"] == 1 and rows["always-answer"]["rank"] == 2
    assert rows["always-answer"]["balanced_commitment_accuracy"] == 0.3333
    assert rows["always-answer"]["commitment_accuracy"] == {"answer": 1.0, "abstain": 0.0, "re_clarify": 0.0}
    assert rows["always-answer"]["commitment_runs"] == {o: gold[o] for o in ("answer", "abstain", "re_clarify")}
    assert rows["oracle"]["balanced_commitment_accuracy"] == 1.0
    with outs[1].open() as handle:
        table = {r["agent"]: r for r in csv.DictReader(handle)}
    blind_row = table["always-answer"]
    assert blind_row["accomplished_rate"] == str(rows["always-answer"]["accomplished_rate"])
    assert blind_row["balanced_commitment_accuracy"] == "0.3333"
    assert [blind_row[f"commitment_accuracy_{o}"] for o in ("answer", "abstain", "re_clarify")] == ["1.0", "0.0", "0.0"]
    markdown = outs[2].read_text()
    assert "| accomplished | 95% interval | balanced commitment | commitment by gold outcome |" in markdown
    blind_line = next(line for line in markdown.splitlines() if "| always-answer #" in line)
    cells = [c.strip() for c in blind_line.strip("|").split("|")]
    assert cells[2] == f"{rows['always-answer']['accomplished_rate']:.4f}"
    assert cells[4:6] == ["0.3333", "answer 1.0000, abstain 0.0000, re_clarify 0.0000"]
