"""Agents behind one small interface: see the conversation, return one action (or several, which is a protocol
issue)."""

from __future__ import annotations

import json
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

from contracts.agent_view import AgentObservation, ViewMessage
from contracts.answers import AnswerForm
from contracts.episodes import Episode
from pipeline.core.canonical import loads_untrusted, printable
from pipeline.core.errors import AgentFailure
from pipeline.runtime.gold_path import gold_actions


@dataclass
class Observation:
    """What an agent sees: the conversation so far (user turns, its own actions, tool results) and the answer form
    of the question now open. Messages are dicts of the shape of contracts.agent_view.ViewMessage; `view()` is the
    typed AgentObservation."""

    episode_id: str
    messages: list[dict[str, Any]] = field(default_factory=list)  # {"role": "user"|"agent"|"tool", ...}
    turn: int = 0
    budget: int = 0
    answer_form: AnswerForm | None = None

    def view(self) -> AgentObservation:
        return AgentObservation(
            episode_id=self.episode_id,
            turn=self.turn,
            budget=self.budget,
            messages=[ViewMessage(**m) for m in self.messages],
            answer_form=self.answer_form,
        )


def unparsed(raw: Any, why: str) -> dict[str, str]:
    """An output refused before parsing, as the trace records it: its text, strings that are not Unicode written with
    backslash escapes, and why."""
    try:
        text = raw if isinstance(raw, str) else json.dumps(printable(raw), ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = f"(a {type(raw).__name__} that JSON cannot show)"
    return {"unparsed": printable(text), "error": printable(why)}


class InfraFailure(AgentFailure):
    """What the agent stands on failed, not the agent (a model endpoint answering 5xx, refusing, timing out, or
    replying with something that is not a completion, after retries): the episode ends as infra_error, is left out
    of the scores and counted apart, and `run` exits non-zero; `run --resume` plays it again."""


class Agent(ABC):
    """The runner's interface. `start` receives the episode (agents that play fair ignore all but its id, and agents
    brought by users go through pipeline.runtime.plugins, which gives them the agent view only); `act` returns an
    action."""

    name = "agent"

    def start(self, episode: Episode) -> None:  # noqa: B027 (an optional hook, empty by default)
        """Called before the first turn of an episode."""

    def finish(self, end: Any) -> None:  # noqa: B027 (an optional hook, empty by default)
        """Called after the last turn of an episode with its end record (contracts.runtime.EpisodeEnd)."""

    @abstractmethod
    def act(self, observation: Observation) -> Any:
        """One action as a dict (or a list of them, which the runner records as parallel calls)."""


class OracleAgent(Agent):
    """Plays the gold path: asks for the withheld slot, runs the canonical calls, answers the gold."""

    name = "oracle"

    def start(self, episode: Episode) -> None:
        self._actions: Iterator = gold_actions(episode)

    def act(self, observation: Observation) -> Any:
        action = next(self._actions, None)
        return action.model_dump() if action is not None else {"kind": "answer", "text": "done", "fields": {}}


class NoopAgent:
    """Answers every turn with nothing useful: a floor every score must beat. (Built-in agents other than the oracle
    and the audit's policies take the same agent view as agents brought by users: pipeline.runtime.plugins.)"""

    name = "noop"

    def act(self, observation: AgentObservation) -> Any:
        return {"kind": "answer", "text": "I don't know.", "fields": {}}


def form_text(form: AnswerForm) -> str:
    """An answer form for a person: each field with its type, unit, codes and their meanings."""
    lines = ['  answer form (answer {"field": value, ...}):']
    for f in form.fields:
        unit = f" in {f.unit_label}" if f.unit else ""
        lines.append(f"    {f.name}: {f.type}{unit}. {f.description}")
        lines += [f"      {code}: {meaning}" for code, meaning in f.codes.items()]
    return "\n".join(lines) + "\n"


class HumanAgent:
    """A person at the terminal: `ask TEXT`, `tool NAME {json}`, `answer {json} [text]`, `plan TEXT`."""

    name = "human"

    def __init__(self, stdin: TextIO | None = None, stdout: TextIO | None = None) -> None:
        self.stdin, self.stdout = stdin or sys.stdin, stdout or sys.stdout
        self._shown = 0

    def start(self, episode: Any) -> None:
        self._shown = 0

    def act(self, observation: AgentObservation) -> Any:
        for message in observation.messages[self._shown :]:
            if message.role != "agent":
                self.stdout.write(
                    f"[{message.role}] {message.text or json.dumps(message.result, ensure_ascii=False)}\n"
                )
            if message.answer_form:
                self.stdout.write(form_text(message.answer_form))
        self._shown = len(observation.messages)
        self.stdout.write(f"turn {observation.turn + 1}/{observation.budget} > ")
        self.stdout.flush()
        line = self.stdin.readline()
        if not line:
            return {"kind": "answer", "text": "(end of input)", "fields": {}}
        verb, _, rest = line.strip().partition(" ")
        try:
            if verb == "ask":
                return {"kind": "ask_user", "text": rest}
            if verb == "plan":
                return {"kind": "plan", "text": rest}
            if verb == "tool":
                name, _, arguments = rest.partition(" ")
                return {"kind": "call_tool", "name": name, "arguments": loads_untrusted(arguments or "{}")}
            if verb == "answer":
                fields, end = json.JSONDecoder().raw_decode(rest.strip() or "{}")
                return {"kind": "answer", "fields": fields, "text": rest.strip()[end:].strip()}
        except json.JSONDecodeError:
            pass
        return {"unparsed": line.strip()}


AGENTS: dict[str, Callable[[], Any]] = {"oracle": OracleAgent, "noop": NoopAgent, "human": HumanAgent}
