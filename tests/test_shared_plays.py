"""The audit's shared plays (pipeline/audit/shared.py): a policy that plays as an earlier one did gets that play's
score and decision without the session being stepped again, and every play, shared or not, scores what a play of its
own scores: for every policy, for agents that break off from an earlier play at some turn, and for one that raises."""

from __future__ import annotations

import threading

import pytest

from pipeline.audit.shared import SharedPlays, _same
from pipeline.audit.stage import play, policies
from pipeline.core.config import load_audit_config, load_episodes_config, load_families
from pipeline.core.workspace import Workspace
from pipeline.episodes.stage import read_episodes
from pipeline.runtime.agents import Agent
from pipeline.runtime.runner import Fault
from pipeline.runtime.simulator import slot_keywords
from pipeline.store.reader import STORE_FILE
from pipeline.tools.access import ToolStore
from tests.helpers import REPO

WS = Workspace.from_root(REPO)
AUDIT, LIFTS, FAMILIES = load_audit_config(WS), load_episodes_config(WS), load_families(WS)
KEYWORDS = slot_keywords(LIFTS)


class BreaksOff(Agent):
    """An earlier policy's play until turn `at`, then `output` (a value, or an exception to raise) once."""

    def __init__(self, policy: Agent, at: int, output: object) -> None:
        self.policy, self.at, self.output, self.name = policy, at, output, f"breaks off at {at}"

    def start(self, episode) -> None:
        self.turn = 0
        self.policy.start(episode)

    def act(self, observation):
        self.turn += 1
        if self.turn - 1 == self.at:
            if isinstance(self.output, Exception):
                raise self.output
            return self.output
        return self.policy.act(observation)


class FailsToStartOnce(Agent):
    """A policy whose first start raises (its process would not come up), then starts as the policy does."""

    def __init__(self, policy: Agent) -> None:
        self.policy, self.started, self.name = policy, 0, "fails to start once"

    def start(self, episode) -> None:
        self.started += 1
        if self.started == 1:
            raise RuntimeError("no process")
        self.policy.start(episode)

    def act(self, observation):
        return self.policy.act(observation)


class Watching(Agent):
    """A policy that notes everything it is shown at each turn (as a copy: it changes nothing it is shown)."""

    def __init__(self, policy: Agent) -> None:
        self.policy, self.shown, self.name = policy, [], "watching"

    def start(self, episode) -> None:
        self.policy.start(episode)

    def act(self, observation):
        form = observation.answer_form.model_dump() if observation.answer_form is not None else None
        seen = (observation.episode_id, observation.turn, observation.budget, form, repr(observation.messages))
        self.shown.append(seen)
        return self.policy.act(observation)


@pytest.fixture(scope="module")
def episodes(real_artifacts):
    every = read_episodes(real_artifacts / "xai4heat" / "episodes")
    return every[:: max(1, len(every) // 40)]  # about 40 episodes, spread over the corpus's order


@pytest.fixture(scope="module")
def memo_store(real_artifacts):
    """The store as the audit opens it: tool results remembered across plays."""
    opened = ToolStore(real_artifacts / "xai4heat" / "store" / STORE_FILE, remember_results=True)
    yield opened
    opened.close()


def test_every_play_shared_or_not_scores_what_its_own_play_scores(memo_store, episodes, monkeypatch):
    players = policies(memo_store, AUDIT, FAMILIES, LIFTS, episodes)
    capable = players[0]

    def breaking() -> list[Agent]:  # made anew for each play: some hold state of their own
        return [
            BreaksOff(capable, 0, {"kind": "answer", "text": "no idea", "fields": {}}),
            BreaksOff(capable, 1, "not an action"),
            BreaksOff(capable, 2, RuntimeError("the agent's own failure")),
            BreaksOff(capable, 3, [{"kind": "stop"}, {"kind": "stop"}]),
            BreaksOff(capable, 1, threading.Lock()),  # no JSON type, and no copy of it can be made
            FailsToStartOnce(capable),
        ]

    stepped = []
    record = SharedPlays._record
    monkeypatch.setattr(SharedPlays, "_record", lambda self, *a: stepped.append(1) or record(self, *a))
    shared = SharedPlays(memo_store, KEYWORDS)
    plays = stepped_by_policies = 0
    for episode in episodes:
        stepped.clear()
        for index, agent in enumerate([*players, *breaking()]):
            own = [*players, *breaking()][index]
            assert shared.play(agent, episode) == play(own, episode, memo_store, KEYWORDS), (agent.name, episode.id)
            if index == len(players) - 1:
                plays, stepped_by_policies = plays + len(players), stepped_by_policies + len(stepped)
        watched, alone = Watching(capable), Watching(capable)
        assert shared.play(watched, episode) == play(alone, episode, memo_store, KEYWORDS)
        assert len(alone.shown) > 1 and watched.shown == alone.shown  # the same conversation, turn, budget, form
    assert stepped_by_policies < plays / 2  # most of the policies' plays repeat an earlier one
    assert list(shared.plays) == [episodes[-1].id]  # an episode's plays are let go when the next is played


def test_outputs_are_the_same_only_with_the_same_types_and_key_order():
    assert _same({"a": [1, "x", None], "b": {"c": 0.5}}, {"a": [1, "x", None], "b": {"c": 0.5}})
    assert not _same({"a": 1}, {"a": 1.0})  # equal in Python, "1" and "1.0" to the session
    assert not _same({"a": True}, {"a": 1})
    assert not _same(-0.0, 0.0)
    assert not _same({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert not _same({1: "x"}, {True: "x"})  # keys too: {"1": ...} and {"true": ...} to JSON
    assert not _same([1], (1,))  # a list is parallel calls to the session, a tuple is not
    assert _same(Fault("agent_error", "x"), Fault("agent_error", "x"))
    assert not _same(Fault("agent_error", "x"), Fault("infra_error", "x"))
    assert _same(float("nan"), float("nan"))  # the same to the session (refused alike): written alike
