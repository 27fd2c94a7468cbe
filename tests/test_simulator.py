"""The user simulator on scripted agent turns: right, wrong and missing questions, tool turns, extra questions."""

from __future__ import annotations

import tomllib

import pytest

from contracts.episodes import Checks, CommitmentPhase, Episode, EpisodesConfig, FollowUp, LookupPhase, WithheldSlot
from contracts.protocol import Answer, AskUser, CallTool, Plan
from pipeline.runtime.simulator import UserSimulator, asks_for, slot_keywords
from tests.helpers import REPO

CFG = EpisodesConfig.model_validate(tomllib.loads((REPO / "configs" / "episodes.toml").read_text()))
KEYWORDS = slot_keywords(CFG)
CHECKS = Checks(answer_fields=["stream_id"], exact_fields=["stream_id"])


def episode(withheld=True) -> Episode:
    return Episode(
        id="x.ep", corpus="x", split="train", family="point_disambiguation", task_id="x", site_ids=["L8"],
        interaction_mode="clarify_site+answer+commit+evidence", obligations=["clarify_site", "answer", "commit", "evidence"],
        initial_message="Which stream is the primary supply temperature?", hidden_instruction="(full)",
        withheld=[WithheldSlot(slot="site", value="substation L8", reply="It's substation L8.")] if withheld else [],
        phases=[
            LookupPhase(obligation="answer", prompt="Which stream is the primary supply temperature?", gold={"stream_id": "L8__a"},
                        checks=CHECKS, canonical_calls=[], evidence_stream_ids=["L8__a"]),
            CommitmentPhase(obligation="commit", prompt="Can I report it? " + CFG.commit_options,
                            gold={"decision": "answer", "reason": "healthy_quality"},
                            checks=Checks(answer_fields=["decision", "reason"]), canonical_calls=[], evidence_stream_ids=["L8__a"]),
        ],
        follow_ups=[FollowUp(kind="evidence", prompt=CFG.evidence_prompt, gold={"stream_ids": ["L8__a"]}, checks=CHECKS)],
        stop_reply=CFG.stop_reply, nudge_reply=CFG.nudge, idle_reply=CFG.after_release, commitment_outcome="answer",
        evidence_stream_ids=["L8__a"], turn_budget=12, difficulty={}, provenance_ref="x.ep",
    )


@pytest.mark.parametrize(("text", "slot", "expected"), [
    ("Which site do you mean?", "site", True), ("WHICH BUILDING?!", "site", True), ("Where is it?", "site", True),
    ("Which substations?", "site", True), ("When was that?", "time", True), ("Which day, in UTC?", "time", True),
    ("What dates?", "time", True), ("Can you tell me more?", "site", False), ("Which one?", "time", False),
    ("the sitemap please", "site", False),
])
def test_classifier(text, slot, expected):
    assert asks_for(text, slot, KEYWORDS) is expected


def test_right_question_releases_the_slot_once():
    sim = UserSimulator(episode(), KEYWORDS)
    assert sim.opening() == "Which stream is the primary supply temperature?"
    assert sim.respond(AskUser(text="Which substation is it?")).text == "It's substation L8."
    assert sim.respond(AskUser(text="Which substation again?")).text == CFG.after_release


def test_wrong_question_is_nudged_and_never_leaks():
    sim = UserSimulator(episode(), KEYWORDS)
    reply = sim.respond(AskUser(text="Could you tell me more?"))
    assert reply.event == "nudge" and "L8" not in reply.text
    assert sim.pending_slots == ["site"]


def test_tool_calls_and_plans_are_invisible():
    sim = UserSimulator(episode(), KEYWORDS)
    assert sim.respond(CallTool(name="list_points", arguments={"site": "L8"})) is None
    assert sim.respond(Plan(text="I will look it up")) is None
    assert sim.position == 0


def test_answers_walk_phases_follow_ups_and_stop():
    sim = UserSimulator(episode(), KEYWORDS)
    sim.respond(AskUser(text="Which site?"))
    first = sim.respond(Answer(fields={"stream_id": "L8__a"}))
    assert first.event == "prompt" and first.text.endswith(CFG.commit_options)
    assert sim.respond(Answer(fields={"decision": "answer", "reason": "healthy_quality"})).text == CFG.evidence_prompt
    stop = sim.respond(Answer(fields={"stream_ids": ["L8__a"]}))
    assert stop.event == "stop" and sim.done
    assert sim.respond(AskUser(text="Anything else?")).event == "stop"


def test_answer_before_asking_moves_on_without_releasing():
    sim = UserSimulator(episode(), KEYWORDS)
    assert sim.respond(Answer(fields={"stream_id": "L8__b"})).event == "prompt"
    assert sim.pending_slots == ["site"]


def test_nothing_withheld_questions_get_the_idle_reply():
    sim = UserSimulator(episode(withheld=False), KEYWORDS)
    assert sim.respond(AskUser(text="Which site?")).text == CFG.after_release


def test_same_inputs_same_outputs():
    script = [AskUser(text="where?"), CallTool(name="x", arguments={}), Answer(fields={}), AskUser(text="when?"),
              Answer(fields={}), Answer(fields={})]
    runs = []
    for _ in range(2):
        sim = UserSimulator(episode(), KEYWORDS)
        runs.append([(r.text, r.event) if (r := sim.respond(a)) else None for a in script])
    assert runs[0] == runs[1]
