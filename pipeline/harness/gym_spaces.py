"""Gymnasium spaces of the gym-style env (pipeline/harness/gym.py), so that `gymnasium.utils.env_checker.check_env`
and frameworks that read `env.observation_space` / `env.action_space` see what the env takes and gives.

An observation is the agent view (contracts.agent_view.AgentObservation) and an action one of contracts.protocol's
actions (a dict or its model): neither is a fixed-size array, so each space is a gymnasium Space whose `contains`
validates against the contract and whose `sample` draws a real member from the space's own seeded generator.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium
from pydantic import ValidationError

from contracts.agent_view import AgentObservation
from contracts.protocol import ACTION
from pipeline.runtime.plugins import as_action

WORDS = ("mean", "peak", "meter", "site", "which", "period", "daily", "total", "value", "check")


class ObservationSpace(gymnasium.spaces.Space):
    """Agent views (AgentObservation): what reset() and step() return. `sample()` is the opening view of an
    episode of the split drawn at random."""

    def __init__(self, openings: Callable[[int], AgentObservation], count: int, seed: int | None = None) -> None:
        super().__init__(shape=None, dtype=None, seed=seed)
        self.openings, self.count = openings, count

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def contains(self, x: Any) -> bool:
        return isinstance(x, AgentObservation)

    def sample(self, mask: Any = None, probability: Any = None) -> AgentObservation:
        return self.openings(int(self.np_random.integers(self.count)))

    def __repr__(self) -> str:
        return f"ObservationSpace(AgentObservation, {self.count} episodes)"


class ActionSpace(gymnasium.spaces.Space):
    """The protocol's actions, as dicts (or their models): `contains` is the runner's own parse. `sample()` draws a
    kind, then a tool of the registry (with no arguments) or a few words of text."""

    def __init__(self, kinds: Sequence[str], tools: Sequence[str], seed: int | None = None) -> None:
        super().__init__(shape=None, dtype=None, seed=seed)
        self.kinds, self.tools = tuple(kinds), tuple(tools)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def contains(self, x: Any) -> bool:
        try:
            ACTION.validate_python(as_action(x))
        except ValidationError:
            return False
        return True

    def sample(self, mask: Any = None, probability: Any = None) -> dict:
        kind = self.kinds[int(self.np_random.integers(len(self.kinds)))]
        if kind == "call_tool":
            return {"kind": kind, "name": self.tools[int(self.np_random.integers(len(self.tools)))], "arguments": {}}
        text = " ".join(WORDS[int(i)] for i in self.np_random.integers(len(WORDS), size=3))
        return {"kind": kind, "fields": {}, "text": text} if kind == "answer" else {"kind": kind, "text": text}

    def __repr__(self) -> str:
        return f"ActionSpace({', '.join(self.kinds)})"
