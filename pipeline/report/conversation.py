"""Episodes as conversations: the gold path and an agent's played turns, turn by turn, with where the agent left the gold path.

One structure feeds both renderers (the HTML episode browser and `inspect episode` in the terminal).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from contracts.episodes import Episode
from contracts.runtime import TurnRecord
from pipeline.evaluation import call_signature
from pipeline.release.ground_truth import render_action
from pipeline.runtime.agents import OracleAgent
from pipeline.runtime.parse import failed_fields
from pipeline.runtime.runner import run_episode
from pipeline.runtime.simulator import asks_for
from pipeline.tools import refs
from pipeline.tools.access import ToolStore

# Result fields shown in one line; the whole result is shown folded (HTML) or not at all (terminal).
SHOWN = ("error", "message", "stream_id", "match_count", "value", "mean", "observed_timestamp", "offset_seconds",
         "winning_stream_id", "quality_band", "coverage", "gap_ratio", "step_seconds", "code")
FULL_RESULT_CHARS = 4000


@dataclass(frozen=True)
class Turn:
    """One agent turn and what followed it: the tool's result and the user's reply."""

    number: int
    kind: str  # ask_user, call_tool, answer, plan, unreadable
    text: str  # what the agent said or did, one line
    call_id: str | None = None
    result_short: str | None = None
    result_full: str | None = None
    reply: str | None = None
    event: str | None = None
    issues: tuple[str, ...] = ()
    off_path: str | None = None  # set on the first turn that leaves the gold path: what the gold path does there


@dataclass(frozen=True)
class Conversation:
    """An episode played by one player (the gold path, or an agent's run)."""

    who: str
    opening: str
    turns: list[Turn]
    accomplished: bool | None = None
    issues: tuple[str, ...] = ()
    failure_modes: tuple[str, ...] = ()
    left_at: int | None = None  # index into turns of the first turn off the gold path (len(turns): stopped early)
    note: str | None = None  # e.g. which controller policy played
    extra: dict[str, Any] = field(default_factory=dict)


def short_result(result: dict | None) -> str:
    if not result:
        return "{}"
    parts = {k: result[k] for k in SHOWN if k in result}
    if "ranked_streams" in result:
        parts["ranked"] = [(r.get("stream_id"), r.get("value")) for r in result["ranked_streams"]]
    if "matches" in result and "match_count" not in parts:
        parts["matches"] = len(result["matches"])
    if not parts:
        parts = {k: result[k] for k in sorted(result)[:4]}
    return json.dumps(parts, ensure_ascii=False, default=str)


def _full_result(result: dict | None) -> str | None:
    if result is None:
        return None
    text = json.dumps(result, ensure_ascii=False, indent=1, sort_keys=True, default=str)
    if len(text) > FULL_RESULT_CHARS:
        text = text[:FULL_RESULT_CHARS] + f"\n... ({len(text) - FULL_RESULT_CHARS:,} more characters)"
    return text


def describe(action: dict | None, raw: Any = None) -> tuple[str, str]:
    """(kind, one line) for a recorded action."""
    if action is None:
        return "unreadable", "unreadable output: " + json.dumps(raw, ensure_ascii=False, default=str)[:300]
    kind = action.get("kind", "unreadable")
    if kind == "ask_user":
        return kind, f"ask: {action.get('text', '')}"
    if kind == "call_tool":
        return kind, f"{action.get('name')}({json.dumps(action.get('arguments') or {}, ensure_ascii=False)})"
    if kind == "answer":
        fields = action.get("fields") or {}
        return kind, "answer: " + (json.dumps(fields, ensure_ascii=False) if fields else repr(action.get("text", "")))
    if kind == "plan":
        return kind, f"plan: {action.get('text', '')}"
    return "unreadable", json.dumps(action, ensure_ascii=False, default=str)[:300]


def turns_of(records: list[TurnRecord]) -> list[Turn]:
    out = []
    for record in records:
        kind, text = describe(record.action, record.raw)
        out.append(Turn(
            number=record.turn + 1, kind=kind, text=text, call_id=record.call_id,
            result_short=short_result(record.tool_result) if kind == "call_tool" else None,
            result_full=_full_result(record.tool_result) if kind == "call_tool" else None,
            reply=record.reply, event=record.event, issues=tuple(record.issues),
        ))
    return out


def gold_records(episode: Episode, store: ToolStore, keywords: dict[str, set[str]]) -> list[TurnRecord]:
    """The gold path as played by the oracle through the real runner, simulator and tools."""
    return [r for r in run_episode(OracleAgent(), episode, store, keywords) if isinstance(r, TurnRecord)]


def _call_key(record: TurnRecord, outputs: dict[str, Any]) -> tuple:
    action = record.action or {}
    try:
        arguments = refs.resolve(action.get("arguments") or {}, outputs)
    except refs.ReferenceError_:
        arguments = action.get("arguments") or {}
    return call_signature(action.get("name", ""), arguments)


def departure(episode: Episode, agent: list[TurnRecord], gold: list[TurnRecord], keywords: dict[str, set[str]]) -> int | None:
    """Index of the agent's first turn that is not the gold path's turn at that position (plans are neutral).

    Asking matches when it asks for the gold question's slot; a call when tool and resolved arguments equal the
    gold call's; an answer when it passes the checks of the step it answers. len(agent) means the agent stopped
    before the gold path ended; None means it followed the gold path to its end.
    """
    steps = [*episode.phases, *episode.follow_ups]
    gold_outputs = {r.call_id: r.tool_result for r in gold if r.call_id}
    agent_outputs = {r.call_id: r.tool_result for r in agent if r.call_id}
    slots = [w.slot for w in episode.withheld]
    position, answers = 0, 0
    for index, record in enumerate(agent):
        action = record.action or {}
        if action.get("kind") == "plan":
            continue
        expected = gold[position].action if position < len(gold) else None
        if expected is None or record.action is None or action.get("kind") != expected.get("kind"):
            return index
        kind = action["kind"]
        if kind == "ask_user":
            asked = sum(1 for r in gold[:position] if (r.action or {}).get("kind") == "ask_user")
            if asked >= len(slots) or not asks_for(action.get("text", ""), slots[asked], keywords):
                return index
        elif kind == "call_tool":
            if _call_key(record, agent_outputs) != _call_key(gold[position], gold_outputs):
                return index
        elif kind == "answer":
            step = steps[answers] if answers < len(steps) else None
            answers += 1
            if step is None or failed_fields(step.checks, step.gold, action.get("fields") or {}):
                return index
        position += 1
    return len(agent) if position < len(gold) else None


def gold_conversation(episode: Episode, gold: list[TurnRecord]) -> Conversation:
    return Conversation(who="gold path", opening=episode.initial_message, turns=turns_of(gold), accomplished=True)


def agent_conversation(episode: Episode, who: str, records: list[TurnRecord], gold: list[TurnRecord],
                       keywords: dict[str, set[str]], accomplished: bool | None, issues: tuple[str, ...] = (),
                       failure_modes: tuple[str, ...] = (), note: str | None = None) -> Conversation:
    turns = turns_of(records)
    left = departure(episode, records, gold, keywords)
    if left is not None and left < len(turns):
        gold_index = sum(1 for r in records[:left] if (r.action or {}).get("kind") != "plan")
        expected = render_action(gold[gold_index].action) if gold_index < len(gold) and gold[gold_index].action else "stop"
        turns[left] = replace(turns[left], off_path=f"the gold path would {expected}")
    return Conversation(who=who, opening=episode.initial_message, turns=turns, accomplished=accomplished, issues=issues,
                        failure_modes=failure_modes, left_at=left, note=note)
