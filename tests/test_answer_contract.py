"""The answer contract on the released rows: the agent sees every field and code the scorer checks, grading is
tolerant of form and strict on substance, and a clarification counts only when it asks for the missing thing."""

from __future__ import annotations

import json
import math

import pytest

from pipeline.core.config import load_episodes_config
from pipeline.core.workspace import Workspace
from pipeline.harness.traces import load_episodes
from pipeline.runtime.contract import contract_failures
from pipeline.runtime.simulator import slot_keywords
from pipeline.tools.access import ToolStore
from tests.helpers import REPO, run_cli

KEYWORDS = slot_keywords(load_episodes_config(Workspace.from_root(REPO)))


def released(artifacts, corpus):
    return [
        e for split in ("train", "dev", "test") for e in load_episodes(artifacts / corpus / "audit" / f"{split}.jsonl")
    ]


@pytest.mark.parametrize("corpus", ["xai4heat", "hhw"])
def test_every_released_row_keeps_the_contract(real_artifacts, corpus):
    store = ToolStore(real_artifacts / corpus / "store" / "store.duckdb")
    try:
        failing = {e.id: f for e in released(real_artifacts, corpus) if (f := contract_failures(e, store, KEYWORDS))}
    finally:
        store.close()
    assert not failing, dict(list(failing.items())[:5])


def test_the_contract_check_can_fail(real_artifacts, xai_store):
    """Hidden codes, a gold id never shown, and a scorer too lax to fail random answers are each caught."""
    episodes = released(real_artifacts, "xai4heat")
    commit = next(e for e in episodes if e.phases[-1].gold["reason"] == "healthy_quality")
    last = commit.phases[-1]
    reason = last.form.field("reason")
    hidden = reason.model_copy(update={"codes": {c: m for c, m in reason.codes.items() if c != "healthy_quality"}})
    form = last.form.model_copy(update={"fields": [last.form.field("decision"), hidden]})
    cut = commit.model_copy(update={"phases": [*commit.phases[:-1], last.model_copy(update={"form": form})]})
    assert "answer_contract_visible" in contract_failures(cut, xai_store, KEYWORDS)

    lookup = next(e for e in episodes if e.family == "point_disambiguation")
    evidence = lookup.follow_ups[-1]
    unseen = lookup.model_copy(
        update={"follow_ups": [evidence.model_copy(update={"gold": {"stream_ids": ["never__shown"]}})]}
    )
    assert "answer_contract_visible" in contract_failures(unseen, xai_store, KEYWORDS)

    mean = next(e for e in episodes if e.family == "day_mean_lookup")

    def lax(step):  # a question a guess passes: numbers no longer asked, each code field offering only the gold code
        fields = [
            f.model_copy(update={"codes": {step.gold[f.name]: "the only code"}})
            for f in step.form.fields
            if f.type == "code"
        ]
        if not fields:
            fields = [
                step.form.fields[0].model_copy(
                    update={
                        "name": "decision",
                        "type": "code",
                        "unit": None,
                        "tolerance": None,
                        "codes": {"answer": "the only code"},
                    }
                )
            ]
        gold = {f.name: step.gold.get(f.name, "answer") for f in fields}
        return step.model_copy(update={"form": step.form.model_copy(update={"fields": fields}), "gold": gold})

    guessable = mean.model_copy(update={"phases": [lax(p) for p in mean.phases], "follow_ups": []})
    assert contract_failures(guessable, xai_store, KEYWORDS) == ["random_fill_fails"]


# ---------------------------------------------------------------- the perturbation table of the issue


def _perturbed(records: list[dict], edit) -> list[dict]:
    out = []
    for record in records:
        record = json.loads(json.dumps(record))
        action = record.get("action") or {}
        if record.get("type") == "turn" and action:
            edit(action)
        out.append(record)
    return out


def _numbers(change):
    def edit(action):
        if action["kind"] == "answer":
            for key, value in action["fields"].items():
                if isinstance(value, float):
                    action["fields"][key] = change(value)

    return edit


def _codes(action):
    if action["kind"] == "answer":
        for key in ("decision", "reason"):
            if key in action["fields"]:
                action["fields"][key] = action["fields"][key].upper().replace("_", " ")


def _prose(action):
    if action["kind"] == "answer":
        action["text"] = "Having checked the data carefully, here is my answer. " + action.get("text", "")


def _ask(text):
    def edit(action):
        if action["kind"] == "ask_user":
            action["text"] = text

    return edit


PERTURBATIONS = {
    "plus_1e-4": (_numbers(lambda v: v + 1e-4), "all"),
    "4_significant_digits": (_numbers(lambda v: float(f"{v:.4g}")), "all"),
    "times_1.01": (_numbers(lambda v: v * 1.01 if abs(v) > 0.1 else v), "none_with_float"),
    "codes_upper_spaced": (_codes, "all"),
    "extra_prose": (_prose, "all"),
    "good_day_question": (_ask("Is it a good day?"), "none_that_ask"),
    "every_slot_question": (_ask("Which site, sensor, date, time and week do you mean?"), "none_that_ask"),
}


@pytest.fixture(scope="session")
def oracle_trace(real_artifacts, tmp_path_factory):
    out = tmp_path_factory.mktemp("oracle") / "oracle.jsonl"
    assert (
        run_cli(
            real_artifacts, "run", "--corpus", "xai4heat", "--split", "test", "--agent", "oracle", "--out", str(out)
        ).exit_code
        == 0
    )
    return [json.loads(line) for line in out.read_text().splitlines()]


@pytest.mark.parametrize("name", sorted(PERTURBATIONS))
def test_perturbed_oracle_answers(real_artifacts, oracle_trace, tmp_path, name):
    edit, expected = PERTURBATIONS[name]
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _perturbed(oracle_trace, edit)))
    result = run_cli(real_artifacts, "score", str(path), "--json")
    assert result.exit_code == 0, result.output
    (summary,) = json.loads(result.output)["summaries"]
    rows = {r["episode_id"]: r for r in summary["rows"]}
    if expected == "all":
        assert summary["accomplished_rate"] == 1.0, {
            k: r["rejections"] for k, r in rows.items() if not r["accomplished"]
        }
        return
    turns = [r for r in oracle_trace if r.get("type") == "turn"]
    if expected == "none_with_float":
        marked = {
            t["episode_id"]
            for t in turns
            if t["action"]["kind"] == "answer"
            and any(isinstance(v, float) and abs(v) > 0.1 for v in t["action"]["fields"].values())
        }
        assert all(
            r["rejections"] and {j["reason"] for j in r["rejections"]} == {"wrong_value"}
            for i, r in rows.items()
            if i in marked
        )
    else:
        marked = {t["episode_id"] for t in turns if t["action"]["kind"] == "ask_user"}
    assert len(marked) >= 10 and not [i for i in marked if rows[i]["accomplished"]]
    assert all(rows[i]["accomplished"] for i in rows if i not in marked) or expected == "none_with_float"
    assert math.isclose(
        summary["accomplished_rate"], sum(r["accomplished"] for r in rows.values()) / len(rows), abs_tol=1e-4
    )


def test_agent_view_shows_every_form_before_its_answer(real_artifacts):
    episode = load_episodes(real_artifacts / "xai4heat" / "audit" / "test.jsonl")[0]
    result = run_cli(real_artifacts, "inspect", "episode", episode.id, "--corpus", "xai4heat", "--agent-view", "--json")
    assert result.exit_code == 0, result.output
    turns = json.loads(result.output)["turns"]
    assert turns[0]["messages"][0]["answer_form"]["fields"][0]["name"] == episode.phases[0].form.names[0]
    opened = [m["answer_form"] for m in turns[-1]["messages"] if m.get("answer_form")]
    steps = [*episode.phases, *episode.follow_ups]
    assert [[f["name"] for f in form["fields"]] for form in opened] == [s.form.names for s in steps]
    assert turns[0]["messages"][0]["text"].endswith(episode.phases[0].form.sentence())
    text = run_cli(
        real_artifacts, "inspect", "episode", episode.id, "--corpus", "xai4heat", "--agent-view", "--width", "100"
    )
    assert text.exit_code == 0 and "what the agent receives" in text.output
    wrong = run_cli(real_artifacts, "inspect", "episode", episode.id, "--corpus", "xai4heat", "--json")
    assert wrong.exit_code != 0 and "--json goes with --agent-view" in wrong.output
