"""The user simulator on scripted agent turns: right, wrong and missing questions, tool turns, extra questions."""

from __future__ import annotations

import tomllib

import pytest

from contracts.episodes import CommitmentPhase, Episode, EpisodesConfig, FollowUp, LookupPhase, WithheldSlot
from contracts.protocol import Answer, AskUser, CallTool, Plan
from contracts.runtime import TurnRecord
from pipeline.core.config import load_answers
from pipeline.core.workspace import Workspace
from pipeline.runtime.scoring import score_episode
from pipeline.runtime.simulator import UserSimulator, asked_slots, asks_for, slot_keywords
from pipeline.tasks.forms import form
from tests.helpers import REPO

CFG = EpisodesConfig.model_validate(tomllib.loads((REPO / "configs" / "episodes.toml").read_text()))
KEYWORDS = slot_keywords(CFG)
ANSWERS = load_answers(Workspace.from_root(REPO))
LOOKUP, COMMIT, EVIDENCE = (form(names, ANSWERS) for names in (["stream_id"], ["decision", "reason"], ["stream_ids"]))


def episode(withheld=True, slot="site") -> Episode:
    return Episode(
        id="x.ep",
        corpus="x",
        split="train",
        family="point_disambiguation",
        task_id="x",
        site_ids=["L8"],
        interaction_mode="clarify_site+answer+commit+evidence",
        obligations=["clarify_site", "answer", "commit", "evidence"],
        initial_message="Which stream is the primary supply temperature?",
        hidden_instruction="(full)",
        withheld=[WithheldSlot(slot=slot, value="substation L8", reply="It's substation L8.")] if withheld else [],
        phases=[
            LookupPhase(
                obligation="answer",
                prompt="Which stream is the primary supply temperature?",
                gold={"stream_id": "L8__a"},
                form=LOOKUP,
                canonical_calls=[],
                evidence_stream_ids=["L8__a"],
            ),
            CommitmentPhase(
                obligation="commit",
                prompt="Can I report it? " + CFG.commit_options,
                gold={"decision": "answer", "reason": "healthy_quality"},
                form=COMMIT,
                canonical_calls=[],
                evidence_stream_ids=["L8__a"],
            ),
        ],
        follow_ups=[
            FollowUp(kind="evidence", prompt=CFG.evidence_prompt, gold={"stream_ids": ["L8__a"]}, form=EVIDENCE)
        ],
        stop_reply=CFG.stop_reply,
        nudge_reply=CFG.nudge,
        idle_reply=CFG.after_release,
        commitment_outcome="answer",
        evidence_stream_ids=["L8__a"],
        turn_budget=12,
        difficulty={},
        provenance_ref="x.ep",
    )


SITE_QUESTIONS = [
    "Which site do you mean?",
    "WHICH BUILDING?!",
    "Where is it?",
    "Which substations?",
    "What site is this about?",
    "Which building are we talking about?",
    "Could you tell me which substation?",
    "Which plant?",
    "Where is that sensor?",
    "What location do you mean?",
    "Which facility is it?",
    "Which station, please?",
    "Which site or building do you mean?",
]
TIME_QUESTIONS = [
    "When was that?",
    "Which day, in UTC?",
    "What dates?",
    "Which week do you mean?",
    "What date?",
    "Which month?",
    "What time exactly?",
    "Which date and time (UTC) do you mean?",
    "For which date?",
    "What period do you have in mind?",
    "Which timestamp?",
    "What's the date you need?",
    "Which hour?",
    "Which time window?",
    "What day do you mean?",
]
NOTHING = [
    "Is it a good day?",
    "Can you tell me more?",
    "Which one?",
    "the sitemap please",
    "Anything else?",
    "Is the sensor working?",
    "Which sensor do you mean?",
    "Do you want the mean?",
    "Should I use UTC?",
    "Day or night?",
    "What unit do you want?",
    "Is this about temperature?",
    "Do you mean the supply side?",
    "How precise should the answer be?",
    "Is the building heated with gas?",
    "Was it a cold week?",
    "Shall I proceed?",
    "Good day to you!",
    "Is the timing important?",
    "Do you need it daily or weekly?",
    "Is the data for this site reliable?",
    "",
]


@pytest.mark.parametrize("text", SITE_QUESTIONS)
def test_site_questions_ask_for_the_site_only(text):
    assert asked_slots(text, KEYWORDS) == {"site"}


@pytest.mark.parametrize("text", TIME_QUESTIONS)
def test_time_questions_ask_for_the_time_only(text):
    assert asked_slots(text, KEYWORDS) == {"time"}


@pytest.mark.parametrize("text", NOTHING)
def test_questions_about_nothing_in_particular_ask_for_no_slot(text):
    assert asked_slots(text, KEYWORDS) == set()
    assert not asks_for(text, "site", KEYWORDS) and not asks_for(text, "time", KEYWORDS)


def test_the_lexicons_hold_enough_examples():
    assert len(SITE_QUESTIONS) + len(TIME_QUESTIONS) >= 20 and len(NOTHING) >= 20
    assert asked_slots("Which site, sensor, date, time and week do you mean?", KEYWORDS) == {"site", "time"}


def turns_of(actions) -> list[TurnRecord]:
    """Trace turns of scripted actions (the scorer reads only the actions and the stop event)."""
    return [
        TurnRecord(
            episode_id="x.ep", run=0, turn=i, action=a.model_dump(), event="stop" if i == len(actions) - 1 else None
        )
        for i, a in enumerate(actions)
    ]


GOLD_ANSWERS = [
    Answer(fields={"stream_id": "L8__a"}),
    Answer(fields={"decision": "answer", "reason": "healthy_quality"}),
    Answer(fields={"stream_ids": ["L8__a"]}),
]


@pytest.mark.parametrize(
    ("slot", "question", "accomplished", "issue"),
    [
        ("site", "Which site do you mean?", True, None),
        ("site", "Is it a good day?", False, "missing_clarification"),  # nudged: the slot stays pending
        ("site", "Which site, sensor, date, time and week do you mean?", False, "off_target_clarification"),
        ("time", "Which site, sensor, date, time and week do you mean?", False, "off_target_clarification"),
        ("time", "Which building?", False, "off_target_clarification"),
    ],
)
def test_the_scorer_knows_what_a_question_asked(slot, question, accomplished, issue):
    score = score_episode(episode(slot=slot), turns_of([AskUser(text=question), *GOLD_ANSWERS]), KEYWORDS)
    assert score.accomplished is accomplished
    assert (issue in score.issues) if issue else not score.issues


def test_questions_where_nothing_is_withheld_or_already_released():
    assert (
        "unnecessary_clarification"
        in score_episode(
            episode(withheld=False), turns_of([AskUser(text="Which site?"), *GOLD_ANSWERS]), KEYWORDS
        ).issues
    )
    twice = [AskUser(text="Which site?"), AskUser(text="Which site again?"), *GOLD_ANSWERS]
    assert score_episode(episode(), turns_of(twice), KEYWORDS).issues == ["redundant_clarification"]


def test_right_question_releases_the_slot_once():
    sim = UserSimulator(episode(), KEYWORDS)
    assert sim.opening() == "Which stream is the primary supply temperature? Reply with `stream_id` (a stream id)."
    assert sim.form == LOOKUP
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
    assert (
        first.event == "prompt"
        and first.text.endswith(CFG.commit_options + " " + COMMIT.sentence())
        and first.form == COMMIT
    )
    assert (
        sim.respond(Answer(fields={"decision": "answer", "reason": "healthy_quality"})).text
        == f"{CFG.evidence_prompt} {EVIDENCE.sentence()}"
    )
    stop = sim.respond(Answer(fields={"stream_ids": ["L8__a"]}))
    assert stop.event == "stop" and sim.done and sim.form is None
    assert sim.respond(AskUser(text="Anything else?")).event == "stop"


def test_answer_before_asking_moves_on_without_releasing():
    sim = UserSimulator(episode(), KEYWORDS)
    assert sim.respond(Answer(fields={"stream_id": "L8__b"})).event == "prompt"
    assert sim.pending_slots == ["site"]


def test_nothing_withheld_questions_get_the_idle_reply():
    sim = UserSimulator(episode(withheld=False), KEYWORDS)
    assert sim.respond(AskUser(text="Which site?")).text == CFG.after_release


def test_same_inputs_same_outputs():
    script = [
        AskUser(text="where?"),
        CallTool(name="x", arguments={}),
        Answer(fields={}),
        AskUser(text="when?"),
        Answer(fields={}),
        Answer(fields={}),
    ]
    runs = []
    for _ in range(2):
        sim = UserSimulator(episode(), KEYWORDS)
        runs.append([(r.text, r.event) if (r := sim.respond(a)) else None for a in script])
    assert runs[0] == runs[1]


def test_one_question_for_both_slots_releases_both_a_line_each():
    """Only fixtures withhold two slots; one question naming both is then the right one, answered in one reply."""
    both = episode().model_copy(
        update={
            "withheld": [
                WithheldSlot(slot="site", value="substation L8", reply="It's substation L8."),
                WithheldSlot(slot="time", value="2023-01-02", reply="I mean 2023-01-02 (UTC)."),
            ]
        }
    )
    sim = UserSimulator(both, KEYWORDS)
    reply = sim.respond(AskUser(text="Which site or building is it? Which date and time (UTC)?"))
    assert reply.event == "release" and reply.text == "It's substation L8.\nI mean 2023-01-02 (UTC)."
    assert sim.pending_slots == []
    score = score_episode(both, turns_of([AskUser(text="Which site, and which date?"), *GOLD_ANSWERS]), KEYWORDS)
    assert score.accomplished and not score.issues
    one = score_episode(episode(), turns_of([AskUser(text="Which site, and which date?"), *GOLD_ANSWERS]), KEYWORDS)
    assert "off_target_clarification" in one.issues and not one.accomplished
