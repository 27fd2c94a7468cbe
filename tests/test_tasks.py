"""Static tasks on the real corpora: gold re-derived through the tools, splits, coverage of families, no leaks."""

from __future__ import annotations

import json
import tomllib
from collections import Counter

import pytest
from click.testing import CliRunner

from contracts.answers import AnswerForm
from contracts.tasks import FamiliesConfig
from pipeline.cli import main
from pipeline.harness.traces import load_episodes
from pipeline.tasks import gold, grading
from pipeline.tasks.grading import instant
from pipeline.tools.access import ToolStore
from tests.helpers import REPO

CORPORA = ["hhw", "xai4heat"]
HELD_OUT = {"hhw": {"building124"}, "xai4heat": {"L17"}}
FAMILIES = FamiliesConfig.model_validate(tomllib.loads((REPO / "configs" / "families.toml").read_text()))


def load(artifacts, corpus):
    return [
        json.loads(line)
        for split in ("train", "dev", "test")
        for line in (artifacts / corpus / "tasks" / f"{split}.jsonl").read_text().splitlines()
    ]


@pytest.fixture(scope="session")
def tasks(real_artifacts):
    return {corpus: load(real_artifacts, corpus) for corpus in CORPORA}


@pytest.mark.parametrize("corpus", CORPORA)
def test_every_gold_is_rederived_by_canonical_and_alternative_calls(real_artifacts, tasks, corpus):
    store = ToolStore(real_artifacts / corpus / "store" / "store.duckdb")
    try:
        for task in tasks[corpus]:
            family = FAMILIES.families[task["family"]]
            verifier = AnswerForm.model_validate(task["verifier"])
            assert verifier.names == family.answer_fields
            again = gold.extract(family.canonical.gold, gold.execute(store, task["canonical_calls"]))
            assert again == task["gold"], task["task_id"]
            assert len(task["alternative_calls"]) == len(family.alternatives)
            for spec, calls in zip(family.alternatives, task["alternative_calls"], strict=True):
                other = gold.extract(spec.gold, gold.execute(store, calls))
                assert grading.grade(verifier, task["gold"], other) == [], (task["task_id"], other)
    finally:
        store.close()


def test_family_coverage(tasks, real_artifacts):
    built = {**tasks, "ucam": load(real_artifacts, "ucam")}  # the meter families exist on the meter corpus
    per_family = Counter(t["family"] for c in built for t in built[c])
    assert set(per_family) == set(FAMILIES.families)
    assert all(n >= 5 for n in per_family.values()), per_family
    for corpus in CORPORA:
        assert len({t["family"] for t in tasks[corpus]}) >= 7


@pytest.mark.parametrize("corpus", CORPORA)
def test_held_out_sites_only_in_test(tasks, corpus):
    for task in tasks[corpus]:
        if HELD_OUT[corpus] & set(task["site_ids"]):
            assert task["split"] == "test", task["task_id"]
        if task["split"] != "test":
            assert not any(s.split("__")[0] in HELD_OUT[corpus] for s in task["evidence_stream_ids"])


@pytest.mark.parametrize("corpus", CORPORA)
def test_tasks_are_well_formed(tasks, corpus):
    ids = [t["task_id"] for t in tasks[corpus]]
    assert len(ids) == len(set(ids))
    for task in tasks[corpus]:
        assert task["query"] and "{" not in task["query"]
        assert set(task["gold"]) == {f["name"] for f in task["verifier"]["fields"]}
        assert task["evidence_stream_ids"] and all(task["provenance"]["raw_files"].values())
        for value in task["gold"].values():
            if isinstance(value, str) and "__" in value:  # a stream id answer is never in the question
                assert value not in task["query"]
        assert "mean" not in task["slots"] and "quality_band" not in task["slots"]


def test_quality_gate_has_both_decisions(tasks):
    for corpus in CORPORA:
        decisions = Counter(t["gold"]["decision"] for t in tasks[corpus] if t["family"] == "quality_gate")
        assert decisions["answer"] > 0 and decisions["abstain"] > 0, decisions


def test_inspect_tasks_json(real_artifacts):
    result = CliRunner().invoke(
        main,
        ["--root", str(REPO), "--artifacts", str(real_artifacts), "inspect", "tasks", "--corpus", "xai4heat", "--json"],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert set(summary["counts"]) == set(FAMILIES.families) == set(summary["pools"])
    assert all(set(v) == {"train", "dev", "test"} for v in summary["counts"].values())


DAY_US = 86_400_000_000


def _monday(at: int) -> int:
    days = at // DAY_US
    return days - (days + 3) % 7  # epoch day of that week's Monday (1970-01-01 was a Thursday)


def _weeks_of_call(arguments: dict) -> set[int]:
    """The Monday-based UTC weeks a call looks at: every week a window overlaps, the week of a reading."""
    start, end = instant(arguments.get("window_start")), instant(arguments.get("window_end"))
    if start is not None and end is not None:
        return set(range(_monday(start), _monday(end - 1) + 1, 7))
    return {_monday(at) for key in ("timestamp",) if (at := instant(arguments.get(key))) is not None}


@pytest.mark.parametrize("corpus", CORPORA)
def test_splits_share_no_week(real_artifacts, corpus):
    """No test window, reading or commitment week shares a Monday week with a train or dev one (splits without
    memory)."""
    touched = {}
    for split in ("train", "dev", "test"):
        episodes = load_episodes(real_artifacts / corpus / "episodes" / f"{split}.jsonl")
        touched[split] = {
            w for e in episodes for p in e.phases for c in p.canonical_calls for w in _weeks_of_call(c.arguments)
        }
    assert touched["test"] and touched["train"] and touched["dev"]
    assert not touched["test"] & (touched["train"] | touched["dev"])
    assert not touched["train"] & touched["dev"]
