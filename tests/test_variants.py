"""Withheld and complete variants (issue 43 item 4) and doubled words (item 6) on the shipped corpora, built from the
shipped raw data into a temporary folder: the answer form says what to answer, never what is missing; both variants
are released in every family that withholds a slot; no released text says a word twice in a row."""

from __future__ import annotations

import math

import pytest

from contracts.tasks import SPLITS
from pipeline.audit.policies import ShortcutPolicy
from pipeline.core.config import load_answers, load_episodes_config, load_families, load_mapping
from pipeline.core.workspace import Workspace
from pipeline.episodes.lift import reply_template, variant
from pipeline.episodes.stage import Variants, read_tasks
from pipeline.harness.traces import load_episodes
from pipeline.runtime.preflight import ambiguous_questions, check_episode, messages
from pipeline.runtime.runner import run_episode
from pipeline.runtime.scoring import score_episode
from pipeline.runtime.simulator import slot_keywords
from pipeline.tasks.render import doubled_words
from pipeline.tools.access import ToolStore
from tests.helpers import REPO, SHIPPED

WS = Workspace.from_root(REPO)
LIFTS, FAMILIES, ANSWERS = load_episodes_config(WS), load_families(WS), load_answers(WS)
KEYWORDS = slot_keywords(LIFTS)


def shipped_release(artifacts, corpus):
    return [e for split in SPLITS for e in load_episodes(artifacts / corpus / "release" / f"{split}.jsonl")]


def variants_of(artifacts, corpus, store):
    zone = load_mapping(WS.corpus_config(corpus)).time.timezone
    return Variants(store, artifacts / corpus / "tasks", LIFTS, FAMILIES, ANSWERS, zone)


def enough_rows(share: float) -> int:
    """Rows of a family past which both variants must be there: missing one by chance is under 1 in 1000."""
    return math.ceil(math.log(1e-3) / math.log(max(share, 1 - share)))


@pytest.mark.parametrize("corpus", SHIPPED)
def test_released_forms_equal_between_the_variants(real_artifacts, corpus):
    """Every released row's other variant, lifted again from its task, has the same answer form in every phase and
    follow-up; and every family that withholds a slot releases both variants once it has enough rows."""
    rows = shipped_release(real_artifacts, corpus)
    store = ToolStore(real_artifacts / corpus / "store" / "store.duckdb", remember_results=True)
    try:
        variants = variants_of(real_artifacts, corpus, store)
        differing = []
        for episode in rows:
            other = variants.other(episode)
            if other is None:
                assert LIFTS.families[episode.family].withhold == "none"
                continue
            assert variant(other, LIFTS) != variant(episode, LIFTS), episode.id
            mine = [s.form for s in (*episode.phases, *episode.follow_ups)]
            theirs = [s.form for s in (*other.phases, *other.follow_ups)]
            if mine != theirs:
                differing.append(episode.id)
    finally:
        store.close()
    assert not differing, differing[:5]
    by_family: dict[str, set[str]] = {}
    counts: dict[str, int] = {}
    for episode in rows:
        if variant(episode, LIFTS) != "none":
            by_family.setdefault(episode.family, set()).add(variant(episode, LIFTS))
            counts[episode.family] = counts.get(episode.family, 0) + 1
    enough = enough_rows(LIFTS.complete_share)
    assert by_family, "no family of the release withholds a slot"
    for family, kinds in by_family.items():
        if counts[family] >= enough:
            assert kinds == {"withheld", "complete"}, (corpus, family, counts[family], kinds)


def test_complete_variant_is_the_withheld_one_with_the_reply_said_up_front(real_artifacts, xai_store):
    """The complete variant of a task: the withheld opening, a space, the very reply; nothing withheld, no clarify
    obligation, a turn less of budget; everything else as in the withheld variant."""
    lifter = variants_of(real_artifacts, "xai4heat", xai_store).lifter
    tasks = read_tasks(real_artifacts / "xai4heat" / "tasks")
    seen = set()
    for task in tasks:
        if LIFTS.families[task.family].withhold == "none" or task.family in seen:
            continue
        try:
            withheld, _ = lifter.lift(task, complete=False)
        except ValueError:  # LiftError, GoldError, RenderError: a task that does not lift, in either variant
            continue
        complete, _ = lifter.lift(task, complete=True)
        seen.add(task.family)
        (slot,) = withheld["withheld"]
        assert slot.slot == LIFTS.families[task.family].withhold and reply_template(LIFTS, LIFTS.families[task.family])
        assert complete["initial_message"] == f"{withheld['initial_message']} {slot.reply}"
        assert complete["phases"][0].prompt == complete["initial_message"]
        assert complete["withheld"] == [] and complete["obligations"] == withheld["obligations"][1:]
        assert complete["interaction_mode"] == "+".join(complete["obligations"])
        assert complete["turn_budget"] in (withheld["turn_budget"], withheld["turn_budget"] - 1)
        same = {"initial_message", "withheld", "obligations", "interaction_mode", "turn_budget", "phases"}
        assert {k: v for k, v in complete.items() if k not in same} == {
            k: v for k, v in withheld.items() if k not in same
        }
        assert complete["phases"][1:] == withheld["phases"][1:]
        assert complete["phases"][0].model_copy(update={"prompt": ""}) == withheld["phases"][0].model_copy(
            update={"prompt": ""}
        )
    assert seen == {f for f, lift in LIFTS.families.items() if lift.withhold != "none"} & {t.family for t in tasks}


def test_the_form_check_refuses_a_form_that_differs(real_artifacts, xai_store):
    """A row whose answer form is not the one its other variant gets fails form_depends_on_withholding; as it is, it
    passes."""
    rows = [e for e in shipped_release(real_artifacts, "xai4heat") if variant(e, LIFTS) == "complete"]
    variants = variants_of(real_artifacts, "xai4heat", xai_store)
    episode = rows[0]
    assert "form_depends_on_withholding" not in check_episode(episode, xai_store, LIFTS, FAMILIES, variants)
    first = episode.phases[0]
    fields = [f.model_copy(update={"name": f"{f.name}_told"}) for f in first.form.fields]
    changed = first.model_copy(update={"form": first.form.model_copy(update={"fields": fields})})
    moved = episode.model_copy(update={"phases": [changed, *episode.phases[1:]]})
    assert "form_depends_on_withholding" in check_episode(moved, xai_store, LIFTS, FAMILIES, variants)


def test_a_slot_said_up_front_asks_the_same_question_as_one_told_when_asked(real_artifacts):
    """same_question_different_gold compares what the agent learns: the opening and the replies, in either variant."""
    episode = next(
        e for e in shipped_release(real_artifacts, "xai4heat") if variant(e, LIFTS) == "withheld" and e.withheld
    )
    told = episode.model_copy(
        update={
            "id": f"{episode.id}.told",
            "initial_message": f"{episode.initial_message} {episode.withheld[0].reply}",
            "withheld": [],
            "phases": [episode.phases[0].model_copy(update={"gold": {"other": 1}}), *episode.phases[1:]],
        }
    )
    assert ambiguous_questions([episode, told]) == {episode.id, told.id}


def test_canned_clarification_asks_only_when_a_slot_is_withheld(real_artifacts, xai_store):
    """The canned question is asked on rows that leave a slot out, never on complete or nearest rows (where any
    question is an unnecessary clarification); the policies read a complete opening and ask nothing."""
    rows = shipped_release(real_artifacts, "xai4heat")
    canned = ShortcutPolicy("canned", "clarify", xai_store, FAMILIES, LIFTS, kind="canned_clarification")
    capable = ShortcutPolicy("capable", "nothing", xai_store, FAMILIES, LIFTS)
    played = {"withheld": 0, "complete": 0, "none": 0}
    for episode in rows:
        kind = variant(episode, LIFTS)
        if played[kind] >= 5:
            continue
        played[kind] += 1
        for policy in (canned, capable):
            turns = [r for r in run_episode(policy, episode, xai_store, KEYWORDS) if r.type == "turn"]
            asked = sum((t.action or {}).get("kind") == "ask_user" for t in turns)
            assert asked == (kind == "withheld"), (policy.name, episode.id, kind, asked)
            if policy is capable:
                score = score_episode(episode, turns, KEYWORDS)
                assert "unnecessary_clarification" not in score.issues, episode.id
    assert all(n for n in played.values()), played


@pytest.mark.parametrize(
    "text, doubled",
    [
        ("The week starting Monday Monday 12 October 2020 (UTC).", ["monday"]),
        ("Is the the data fit to report?", ["the"]),
        ("It was Monday, Monday 4 May 2020.", ["monday"]),
        ("The 24 hours up to 2020-11-20T14:00:00+00:00.", []),  # numbers repeat in dates and times
        ("Building 110, Building 127 and Building 29", []),
        ("an ISO 8601 timestamp with Z or an offset), `offset_seconds` in s", []),
        ("The week of 5 December 2022 (Monday to Sunday, UTC).", []),
    ],
)
def test_doubled_words(text, doubled):
    assert doubled_words(text) == doubled


@pytest.mark.parametrize("corpus", SHIPPED)
def test_no_released_text_says_a_word_twice(real_artifacts, corpus):
    found = {
        e.id: words
        for e in shipped_release(real_artifacts, corpus)
        for text in messages(e)
        if (words := doubled_words(text))
    }
    assert not found, list(found.items())[:5]


def test_the_doubled_word_check_fails_a_doubled_word(real_artifacts, xai_store):
    episode = shipped_release(real_artifacts, "xai4heat")[0]
    assert "doubled_word" not in check_episode(episode, xai_store, LIFTS, FAMILIES)
    last = episode.phases[-1]
    said_twice = last.model_copy(update={"prompt": last.prompt.replace("report", "report report", 1)})
    assert said_twice.prompt != last.prompt
    broken = episode.model_copy(update={"phases": [*episode.phases[:-1], said_twice]})
    assert "doubled_word" in check_episode(broken, xai_store, LIFTS, FAMILIES)
    replied = episode.model_copy(update={"idle_reply": "That's all all I know."})
    assert "doubled_word" in check_episode(replied, xai_store, LIFTS, FAMILIES)
