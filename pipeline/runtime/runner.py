"""The runner: plays an agent against an episode (simulator, read-only tools, one action per turn, budget)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from pydantic import TypeAdapter, ValidationError

from contracts.episodes import Episode
from contracts.protocol import Action, CallTool
from contracts.runtime import EpisodeEnd, TurnRecord
from pipeline.runtime.agents import Agent, Observation
from pipeline.runtime.simulator import Lexicon, UserSimulator
from pipeline.tools import registry
from pipeline.tools.access import ToolStore

ACTION = TypeAdapter(Action)


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


def run_episode(agent: Agent, episode: Episode, store: ToolStore, keywords: Lexicon, run: int = 0,
                player: str | None = None) -> Iterator[TurnRecord | EpisodeEnd]:
    """Yield one record per agent turn, then the end record; stops on STOP or at the turn budget."""
    sim = UserSimulator(episode, keywords)
    observation = Observation(episode_id=episode.id, messages=[{"role": "user", "text": sim.opening(), "answer_form": sim.form}],
                              budget=episode.turn_budget, answer_form=sim.form)
    outputs: dict[str, Any] = {}
    agent.start(episode)
    turn = 0
    while turn < episode.turn_budget and not sim.done:
        observation.turn = turn
        started = time.perf_counter()
        try:
            raw = agent.act(observation)
        except Exception as exc:  # an agent's own failure is recorded, never fatal to the run
            raw = {"agent_error": f"{type(exc).__name__}: {exc}"}
        elapsed = (time.perf_counter() - started) * 1000
        usage = None
        for item in raw if isinstance(raw, list) else [raw]:
            if isinstance(item, dict) and isinstance(item.get("usage"), dict):
                usage = item.pop("usage")
        action, issues = _parse(raw)
        record: dict[str, Any] = {"episode_id": episode.id, "run": run, "player": player, "turn": turn, "issues": issues,
                                  "elapsed_ms": round(elapsed, 3), "usage": usage}
        if action is None:
            record.update(action=None, raw=raw)
            observation.messages.append({"role": "user", "text": "(your last output was not a valid action)"})
        else:
            record["action"] = action.model_dump(mode="json")
            if isinstance(raw, list):
                record["raw"] = raw
            observation.messages.append({"role": "agent", "action": record["action"]})
            if isinstance(action, CallTool):
                call_id = action.id if action.id and action.id not in outputs else f"c{len(outputs) + 1}"
                while call_id in outputs:
                    call_id = f"{call_id}_"
                result = registry.call(store, action.name, action.arguments, outputs)
                outputs[call_id] = result
                record.update(call_id=call_id, tool_result=result)
                observation.messages.append({"role": "tool", "call_id": call_id, "result": result})
            reply = sim.respond(action)
            if reply is not None:
                record.update(reply=reply.text, event=reply.event)
                message = {"role": "user", "text": reply.text}
                if reply.form is not None:
                    message["answer_form"] = reply.form
                observation.messages.append(message)
                observation.answer_form = sim.form
        yield TurnRecord(**record)
        turn += 1
    yield EpisodeEnd(episode_id=episode.id, run=run, player=player, turns=turn, stopped=sim.done)
