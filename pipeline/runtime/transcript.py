"""A readable transcript of an episode played along its gold path (what `inspect episode` prints)."""

from __future__ import annotations

import json

from contracts.episodes import Episode
from contracts.protocol import Answer, AskUser, CallTool
from pipeline.runtime.gold_path import gold_actions
from pipeline.runtime.simulator import UserSimulator
from pipeline.tools import registry
from pipeline.tools.access import ToolStore

SHOWN = ("stream_id", "match_count", "value", "mean", "observed_timestamp", "offset_seconds", "winning_stream_id",
         "quality_band", "coverage", "gap_ratio", "step_seconds", "code")


def _short(result: dict) -> str:
    parts = {k: result[k] for k in SHOWN if k in result}
    if "ranked_streams" in result:
        parts["ranked"] = [(r["stream_id"], r["value"]) for r in result["ranked_streams"]]
    return json.dumps(parts, ensure_ascii=False)


def transcript(episode: Episode, store: ToolStore, keywords: dict[str, set[str]]) -> list[str]:
    """Lines of the gold-path conversation, each tool result shown in short."""
    sim = UserSimulator(episode, keywords)
    lines = [f"episode {episode.id}  [{episode.split}]  {episode.interaction_mode}", f"USER   {sim.opening()}"]
    outputs: dict = {}
    turns = 0
    for action in gold_actions(episode):
        turns += 1
        if isinstance(action, AskUser):
            lines.append(f"AGENT  ask: {action.text}")
        elif isinstance(action, CallTool):
            result = registry.call(store, action.name, action.arguments, outputs)
            outputs[action.id] = result
            lines.append(f"AGENT  {action.id} {action.name}({json.dumps(action.arguments, ensure_ascii=False)})")
            lines.append(f"       -> {_short(result)}")
        elif isinstance(action, Answer):
            lines.append(f"AGENT  answer: {json.dumps(action.fields, ensure_ascii=False)}")
        reply = sim.respond(action)
        if reply is not None:
            lines.append(f"USER   {reply.text}")
    lines.append(f"({turns} agent turns, budget {episode.turn_budget}; commitment {episode.commitment_outcome})")
    return lines
