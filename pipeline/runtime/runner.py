"""The runner: plays an agent against an episode (simulator, read-only tools, one action per turn, budget)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from contracts.episodes import Episode
from contracts.protocol import ACTION, Action, CallTool
from contracts.runtime import EpisodeEnd, TurnRecord
from pipeline.core.canonical import MAX_JSON_DEPTH, canonical_bytes, json_depth, not_unicode
from pipeline.core.errors import AgentFailure, FatalAgentError
from pipeline.runtime.agents import Agent, InfraFailure, Observation, unparsed
from pipeline.runtime.plugins import PythonAgent
from pipeline.runtime.simulator import Lexicon, UserSimulator
from pipeline.tools import registry
from pipeline.tools.access import ToolStore


@dataclass(frozen=True)
class Fault:
    """A failure the runner saw (never read from the agent's output, which cannot fake one): `agent_error` (the agent
    raised, crashed or stayed silent) or `infra_error` (what it stands on failed, e.g. a model endpoint)."""

    kind: str
    message: str


# How deeply a trace record nests: it holds an agent's output (at most MAX_JSON_DEPTH deep, as untrusted JSON may be)
# one level down, as `raw` or as `action`; the trace's readers take this much.
RECORD_DEPTH = MAX_JSON_DEPTH + 1


def unrecordable(raw: Any) -> str | None:
    """Why an agent's output cannot enter the trace as it came, where it enters (every agent's, whatever its kind): a
    string that is not Unicode text (a lone surrogate), a number no JSON writer writes (NaN, infinity, an integer
    longer than Python writes), or nesting deeper than MAX_JSON_DEPTH (a trace that could not be read back); None when
    it can. A type JSON has no name for is refused too: the record of the action could not be written."""
    # depth first: not_unicode names the path of every level it walks, quadratic in the depth (6.7 GB at 100,000)
    if json_depth(raw) > MAX_JSON_DEPTH:
        return f"nested deeper than {MAX_JSON_DEPTH} levels"
    try:  # the common case in one pass of the JSON writer: UTF-8 text (no lone surrogate) of finite numbers
        canonical_bytes(raw)
        return None
    except (TypeError, ValueError, RecursionError):
        pass  # the checks below say what is wrong, as they always have
    problem = not_unicode(raw)
    if problem is not None:
        return problem
    try:
        canonical_bytes(raw)
    except TypeError as exc:
        return f"not JSON ({exc})"
    except (ValueError, RecursionError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _usage(raw: Any) -> dict[str, int] | None:
    """The token usage an output reports (taken out of it), when it is counts by name; anything else stays in the
    output, whose parse it fails."""
    for item in raw if isinstance(raw, list) else [raw]:
        usage = item.get("usage") if isinstance(item, dict) else None
        if isinstance(usage, dict) and all(type(v) is int for v in usage.values()):
            return item.pop("usage")
    return None


def _parse(raw: Any) -> tuple[Action | None, list[str]]:
    """One action from the agent's output; several or garbage are protocol issues, never a crash."""
    issues = []
    if isinstance(raw, list):
        if len(raw) > 1:
            issues.append("parallel_calls")
        raw = raw[0] if raw else None
    try:
        return ACTION.validate_python(raw), issues
    except ValidationError:
        return None, [*issues, "parse_error"]


class EpisodeSession:
    """One episode in play, a turn at a time: the simulator, the read-only tools and the observation the agent sees.
    `run_episode` drives it with an Agent; the gym API (pipeline.harness.gym) lets a caller drive it action by
    action."""

    def __init__(
        self, episode: Episode, store: ToolStore, keywords: Lexicon, run: int = 0, player: str | None = None
    ) -> None:
        self.episode, self.store, self.run, self.player = episode, store, run, player
        self.sim = UserSimulator(episode, keywords)
        self.observation = Observation(
            episode_id=episode.id,
            messages=[{"role": "user", "text": self.sim.opening(), "answer_form": self.sim.form}],
            budget=episode.turn_budget,
            answer_form=self.sim.form,
        )
        self.outputs: dict[str, Any] = {}
        self.turn = 0
        self.failed = False  # the agent itself failed (a crashed or silent process): the episode ends there
        self.infra_error: str | None = (
            None  # what the agent stands on failed (a model endpoint): the episode does not count
        )

    @property
    def done(self) -> bool:
        return self.failed or self.sim.done or self.turn >= self.episode.turn_budget

    def step(self, raw: Any, elapsed_ms: float = 0.0) -> TurnRecord:
        """Play one agent output (an action dict, a list of them, or anything else) and return its record."""
        self.observation.turn = self.turn
        usage = None
        if isinstance(raw, Fault):
            self.failed = True
            if raw.kind == "infra_error":
                self.infra_error = raw.message
            action, issues, raw = None, [raw.kind], {raw.kind: raw.message}
        elif (problem := unrecordable(raw)) is not None:  # the agent's own output error, recorded as it came
            action, issues, raw = None, ["parse_error"], unparsed(raw, problem)
        else:
            usage = _usage(raw)
            action, issues = _parse(raw)
        record: dict[str, Any] = {
            "episode_id": self.episode.id,
            "run": self.run,
            "player": self.player,
            "turn": self.turn,
            "issues": issues,
            "elapsed_ms": round(elapsed_ms, 3),
            "usage": usage,
        }
        observation = self.observation
        if action is None:
            record.update(action=None, raw=raw)
            observation.messages.append({"role": "user", "text": "(your last output was not a valid action)"})
        else:
            record["action"] = action.model_dump(mode="json")
            if isinstance(raw, list):
                record["raw"] = raw
            observation.messages.append({"role": "agent", "action": record["action"]})
            if isinstance(action, CallTool):
                call_id = action.id if action.id and action.id not in self.outputs else f"c{len(self.outputs) + 1}"
                while call_id in self.outputs:
                    call_id = f"{call_id}_"
                result = registry.call(self.store, action.name, action.arguments, self.outputs)
                self.outputs[call_id] = result
                record.update(call_id=call_id, tool_result=result)
                observation.messages.append({"role": "tool", "call_id": call_id, "result": result})
            reply = self.sim.respond(action)
            if reply is not None:
                record.update(reply=reply.text, event=reply.event)
                message = {"role": "user", "text": reply.text}
                if reply.form is not None:
                    message["answer_form"] = reply.form
                observation.messages.append(message)
                observation.answer_form = self.sim.form
        self.turn += 1
        return TurnRecord(**record)

    def end(self) -> EpisodeEnd:
        return EpisodeEnd(
            episode_id=self.episode.id,
            run=self.run,
            player=self.player,
            turns=self.turn,
            stopped=self.sim.done,
            infra_error=self.infra_error,
        )


def run_episode(
    agent: Agent | Any, episode: Episode, store: ToolStore, keywords: Lexicon, run: int = 0, player: str | None = None
) -> Iterator[TurnRecord | EpisodeEnd]:
    """Yield one record per agent turn, then the end record; stops on STOP, at the turn budget, or when the agent
    itself fails (AgentFailure: a crashed or silent process), which is recorded as agent_error."""
    if not isinstance(agent, Agent):  # an agent of the documented protocol: it is given the agent view only
        agent = PythonAgent(agent, getattr(agent, "name", type(agent).__name__))
    session = EpisodeSession(episode, store, keywords, run, player)
    started = time.perf_counter()
    fault = guarded(agent.start, episode)
    if isinstance(
        fault, Fault
    ):  # the agent could not begin the episode (its process would not start, its start() raised)
        yield session.step(fault, (time.perf_counter() - started) * 1000)
    while not session.done:
        session.observation.turn = session.turn
        started = time.perf_counter()
        raw = guarded(agent.act, session.observation)
        yield session.step(raw, (time.perf_counter() - started) * 1000)
    end = session.end()
    guarded(agent.finish, end)  # a failure to say goodbye changes nothing that was played
    yield end


def guarded(hook: Callable[[Any], Any], argument: Any) -> Any:
    """An agent hook's return value, or its failure as a Fault (a fatal error, e.g. a refused key, stops the run)."""
    try:
        return hook(argument)
    except FatalAgentError:
        raise
    except InfraFailure as exc:
        return Fault("infra_error", str(exc))
    except AgentFailure as exc:
        return Fault("agent_error", str(exc))
    except Exception as exc:  # an agent's own failure is recorded and ends its episode, never the run
        return Fault("agent_error", f"{type(exc).__name__}: {exc}")
