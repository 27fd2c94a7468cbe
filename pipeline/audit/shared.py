"""Plays of one episode shared between the audit's policies.

The session answers an agent's outputs alone (the episode, the store and the outputs before decide every reply, tool
result and form). So a policy whose outputs, turn by turn, are those of an earlier policy's play of the episode plays
that very play: it is asked at each turn, against the conversation the earlier play had reached there, and the session
is stepped only from the first turn where its output differs (the earlier play's outputs before that turn replayed
into a session of its own). Measured on a one-building corpus, 42 % of the audit's turns were in plays that repeated an
earlier play of the same episode.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from contracts.episodes import Episode
from contracts.runtime import EpisodeEnd, EpisodeScore, TurnRecord
from pipeline.runtime.agents import Agent, Observation
from pipeline.runtime.runner import EpisodeSession, Fault, guarded
from pipeline.runtime.scoring import score_episode
from pipeline.tasks.grading import code
from pipeline.tools.access import ToolStore

Outcome = tuple[EpisodeScore, str | None]
_NOT_ASKED = object()  # the agent was not asked for the turn yet


def outcome(episode: Episode, turns: list[TurnRecord], keywords: dict) -> Outcome:
    """The score of a play, and the decision it gave at the commitment (None if none)."""
    answers = [t.action.get("fields") or {} for t in turns if t.action and t.action.get("kind") == "answer"]
    commit = len(episode.phases) - 1
    decision = (
        answers[commit].get("decision") if episode.phases[-1].type == "commitment" and commit < len(answers) else None
    )
    return score_episode(episode, turns, keywords), code(decision) if isinstance(decision, str) else None


@dataclass(frozen=True)
class _Play:
    """One play as the agents saw it: each turn's output as it came (a copy taken before the session read it), how
    many messages the agent had seen then and the answer form open, the session's messages at the end, its end."""

    outputs: list[Any]
    seen: list[tuple[int, Any]]
    messages: list[dict]
    end: EpisodeEnd
    outcome: Outcome

    def view(self, episode: Episode, turn: int) -> Observation:
        """What the agent saw at `turn` of this play."""
        count, form = self.seen[turn]
        return Observation(
            episode_id=episode.id,
            messages=self.messages[:count],
            turn=turn,
            budget=episode.turn_budget,
            answer_form=form,
        )


def _judged(judged: dict[int, bool], kept: Any, output: Any) -> bool:
    """Whether an earlier play's output at a turn is this one (_same), judged once per kept object; an output that
    cannot be compared (an object of no JSON type) is another."""
    if id(kept) not in judged:
        try:
            judged[id(kept)] = bool(kept == output) and _same(kept, output)  # == first: most differ, and it is quick
        except Exception:  # noqa: BLE001 (whatever an output's own comparison raises, it is not the same output)
            judged[id(kept)] = False
    return judged[id(kept)]


def _same(a: Any, b: Any) -> bool:
    """The same output to the session: equal values of the same types all the way down, keys of the same types in the
    same order (1, 1.0 and True are equal in Python, not to the session's parser or its JSON; -0.0 and 0.0 neither)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return _same(list(a), list(b)) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return repr(a) == repr(b)
    return bool(a == b)


class SharedPlays:
    """Policies' plays of one episode after another on one store; `play` gives what `pipeline.audit.stage.play`
    gives, for agents that, as the audit's policies (pipeline/audit/policies.py), act on the values of the messages they
    are shown and on their own state (which `start` resets) alone, and never change what they are shown. The plays of
    an episode are kept until another episode is played."""

    def __init__(self, store: ToolStore, keywords: dict) -> None:
        self.store, self.keywords = store, keywords
        self.plays: dict[str, list[_Play]] = {}

    def play(self, agent: Agent, episode: Episode) -> Outcome:
        if episode.id not in self.plays:
            self.plays = {episode.id: []}
        earlier = self.plays[episode.id]
        fault = guarded(agent.start, episode)
        if isinstance(fault, Fault):  # the agent could not begin: that is its first turn, as in run_episode
            return self._record(agent, episode, [], fault, earlier).outcome
        if not earlier:
            return self._record(agent, episode, [], _NOT_ASKED, earlier).outcome
        candidates, turn = earlier, 0
        while True:
            if len(candidates[0].outputs) == turn:  # they all ended here: this play is theirs
                guarded(agent.finish, candidates[0].end)
                return candidates[0].outcome
            output = guarded(agent.act, candidates[0].view(episode, turn))
            judged: dict[int, bool] = {}  # plays that share a turn's output share the object: each is compared once
            same = [c for c in candidates if _judged(judged, c.outputs[turn], output)]
            if not same:
                return self._record(agent, episode, candidates[0].outputs[:turn], output, earlier).outcome
            candidates, turn = same, turn + 1

    def _record(self, agent: Agent, episode: Episode, before: list[Any], pending: Any, earlier: list[_Play]) -> _Play:
        """A play of the started agent stepped in a session of its own: `before` (an earlier play's outputs, which this
        agent gave too) replayed, then `pending` (this agent's output at the next turn, or the Fault of its start, if
        any), then the agent asked turn by turn, as pipeline.runtime.runner.run_episode does. Kept among `earlier`
        unless an output could not be copied (it is then stepped as it came, and shared with no one)."""
        session = EpisodeSession(episode, self.store, self.keywords)
        outputs: list[Any] = []
        seen: list[tuple[int, Any]] = []
        turns: list[TurnRecord] = []
        shareable = True

        def step(output: Any, kept: Any = _NOT_ASKED) -> None:
            nonlocal shareable
            seen.append((len(session.observation.messages), session.observation.answer_form))
            if kept is _NOT_ASKED:  # as it came (the session may take parts out of it): a copy of its own
                try:
                    kept = copy.deepcopy(output)
                except Exception:  # noqa: BLE001 (an object of no JSON type: the session says what is wrong with it)
                    shareable = False
            outputs.append(kept)
            turns.append(session.step(output))

        for output in before:
            step(copy.deepcopy(output), output)  # the earlier play's copy, shared
        if pending is not _NOT_ASKED:
            step(pending)
        while not session.done:
            session.observation.turn = session.turn
            step(guarded(agent.act, session.observation))
        end = session.end()
        guarded(agent.finish, end)
        play = _Play(outputs, seen, session.observation.messages, end, outcome(episode, turns, self.keywords))
        if shareable:
            earlier.append(play)
        return play
