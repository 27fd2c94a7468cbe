"""Episodes as conversations: the gold path and an agent's played turns, turn by turn, with where the agent left the
gold path.

One structure feeds both renderers (the HTML episode browser and `inspect episode` in the terminal).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from contracts.episodes import Episode
from contracts.runtime import TurnRecord
from pipeline.harness.evaluation import resolved_signature, row_failure_modes
from pipeline.harness.traces import Played
from pipeline.release.ground_truth import execution, render_action
from pipeline.runtime.agents import OracleAgent
from pipeline.runtime.runner import run_episode
from pipeline.runtime.simulator import Lexicon, asked_slots, asks_for, opening_message
from pipeline.tasks.grading import passes
from pipeline.tools.access import ToolStore

# Result fields shown in one line; the whole result is shown folded (HTML) or not at all (terminal).
SHOWN = (
    "error",
    "message",
    "stream_id",
    "match_count",
    "value",
    "mean",
    "observed_timestamp",
    "offset_seconds",
    "winning_stream_id",
    "quality_band",
    "coverage",
    "gap_ratio",
    "step_seconds",
    "code",
)
FULL_RESULT_CHARS = 4000
# The simulator's last reply (configs/episodes.toml stop_reply) ends with this token: a signal to the agent that the
# episode is over, not words the user says, so it is not shown (the reply's event says `stop`).
STOP_TOKEN = " STOP"


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
    stopped_early: str | None = None  # when it stopped before the gold path ended: what the gold path does next
    note: str | None = None  # e.g. which controller policy played
    run: int | None = None  # which run of a trace with repeated runs (None: the trace has one run per episode)


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


def shown_reply(reply: str | None) -> str | None:
    """The user's reply as displayed: without the simulator's STOP token."""
    return reply.removesuffix(STOP_TOKEN) if reply is not None else None


def turns_of(records: list[TurnRecord]) -> list[Turn]:
    out = []
    for record in records:
        kind, text = describe(record.action, record.raw)
        out.append(
            Turn(
                number=record.turn + 1,
                kind=kind,
                text=text,
                call_id=record.call_id,
                result_short=short_result(record.tool_result) if kind == "call_tool" else None,
                result_full=_full_result(record.tool_result) if kind == "call_tool" else None,
                reply=shown_reply(record.reply),
                event=record.event,
                issues=tuple(record.issues),
            )
        )
    return out


def gold_records(episode: Episode, store: ToolStore, keywords: Lexicon) -> list[TurnRecord]:
    """The gold path as played by the oracle through the real runner, simulator and tools."""
    return [r for r in run_episode(OracleAgent(), episode, store, keywords) if isinstance(r, TurnRecord)]


@dataclass(frozen=True)
class Departure:
    """Where an agent left the gold path: the turn's index (len(turns): it stopped early) and what the gold path does
    there."""

    index: int
    expected: str


def departure(episode: Episode, agent: list[TurnRecord], gold: list[TurnRecord], keywords: Lexicon) -> Departure | None:
    """The agent's first turn off the gold path; None when it kept to the path to its end.

    The gold path asks for every withheld slot first (in any order), then per phase makes the phase's canonical
    calls (or the calls of one of its acceptable variants) and answers, then answers the follow-ups. So a question
    is on the path when it asks for a slot still withheld; a call when nothing is withheld and the call, with its
    references resolved to the values they pointed to at that turn, is one of the current phase's canonical or
    acceptable calls; an answer when nothing is withheld and it passes the checks of the step it answers.
    Plans are neutral. Anything else (a repeated question, a call during the follow-ups, a call of an earlier
    phase, an unreadable turn) leaves the path.
    """
    path = _GoldPath(episode, gold, keywords)
    for index, record in enumerate(agent):
        if not path.follows(record):
            return Departure(index, path.expected())
    return None if path.answered >= len(path.steps) else Departure(len(agent), path.expected())


class _GoldPath:
    """How far an agent has come along the gold path: slots still withheld, the calls made and steps answered."""

    def __init__(self, episode: Episode, gold: list[TurnRecord], keywords: Lexicon) -> None:
        self.episode, self.keywords = episode, keywords
        self.steps = [*episode.phases, *episode.follow_ups]
        self.gold_outputs = {r.call_id: r.tool_result for r in gold if r.call_id}
        self.gold_calls = {r.call_id: r.action for r in gold if r.call_id and r.action}
        self.pending = [w.slot for w in episode.withheld]
        self.outputs: dict[str, Any] = {}
        self.made: set[tuple] = set()
        self.answered = 0

    def expected(self) -> str:
        """What the gold path does next, rendered as a turn."""
        if self.pending:
            return render_action({"kind": "ask_user"})
        if self.answered < len(self.episode.phases):
            for call in self.episode.phases[self.answered].canonical_calls:
                if resolved_signature(call.tool, call.arguments, self.gold_outputs) not in self.made:
                    return render_action(
                        self.gold_calls.get(call.id)
                        or {"kind": "call_tool", "name": call.tool, "arguments": call.arguments}
                    )
        if self.answered < len(self.steps):
            return render_action({"kind": "answer", "fields": self.steps[self.answered].gold})
        return "stop"

    def follows(self, record: TurnRecord) -> bool:
        """Whether the turn keeps to the path (advancing along it); plans are neutral, unreadable turns leave it."""
        action = record.action or {}
        kind = action.get("kind")
        if kind == "plan":
            return True
        if kind == "ask_user":
            return self._asks(action)
        if kind == "call_tool":
            return self._calls(action, record)
        if kind == "answer":
            return self._answers(action)
        return False

    def _asks(self, action: dict) -> bool:
        slot = next((s for s in self.pending if asks_for(action.get("text", ""), s, self.keywords)), None)
        if slot is None or asked_slots(action.get("text", ""), self.keywords) - {w.slot for w in self.episode.withheld}:
            return False  # nothing missing asked for, or something never withheld (off target)
        self.pending.remove(slot)
        return True

    def _calls(self, action: dict, record: TurnRecord) -> bool:
        if self.pending or self.answered >= len(self.episode.phases):
            return False
        phase = self.episode.phases[self.answered]
        allowed = {
            resolved_signature(c.tool, c.arguments, self.gold_outputs)
            for variant in (phase.canonical_calls, *phase.acceptable_calls)
            for c in variant
        }
        signature = resolved_signature(action.get("name", ""), action.get("arguments") or {}, self.outputs)
        if signature not in allowed:
            return False
        self.made.add(signature)
        if record.call_id:
            self.outputs[record.call_id] = record.tool_result
        return True

    def _answers(self, action: dict) -> bool:
        if self.pending or self.answered >= len(self.steps):
            return False
        step = self.steps[self.answered]
        if not passes(step.form, step.gold, action.get("fields") or {}):
            return False
        self.answered += 1
        return True


def gold_conversation(episode: Episode, gold: list[TurnRecord]) -> Conversation:
    return Conversation(who="gold path", opening=opening_message(episode), turns=turns_of(gold), accomplished=True)


def agent_conversation(
    episode: Episode,
    who: str,
    records: list[TurnRecord],
    gold: list[TurnRecord],
    keywords: Lexicon,
    accomplished: bool | None,
    issues: tuple[str, ...] = (),
    failure_modes: tuple[str, ...] = (),
    note: str | None = None,
    run: int | None = None,
) -> Conversation:
    turns = turns_of(records)
    left = departure(episode, records, gold, keywords)
    if left is not None and left.index < len(turns):
        turns[left.index] = replace(turns[left.index], off_path=f"the gold path would {left.expected}")
    return Conversation(
        who=who,
        opening=opening_message(episode),
        turns=turns,
        accomplished=accomplished,
        issues=issues,
        failure_modes=failure_modes,
        left_at=left.index if left else None,
        stopped_early=f"the gold path would {left.expected}" if left and left.index == len(turns) else None,
        note=note,
        run=run,
    )


def failure_modes_of(episode: Episode, turns: list[TurnRecord], store: ToolStore, keywords: Lexicon) -> tuple[str, ...]:
    """The evaluator's failure modes of one run against the episode's ground-truth trajectory."""
    return tuple(row_failure_modes(execution(episode), episode, turns, store, keywords))


def played_conversation(
    who: str,
    played: Played,
    gold: list[TurnRecord],
    keywords: Lexicon,
    failure_modes: tuple[str, ...],
    run: int | None = None,
) -> Conversation:
    """A scored run of a trace as a conversation (a controller run names the policy that played it; `run` numbers
    one of repeated runs)."""
    return agent_conversation(
        played.episode,
        who,
        played.turns,
        gold,
        keywords,
        played.score.accomplished,
        tuple(played.score.issues),
        failure_modes,
        note=f"policy {played.player}" if played.player else None,
        run=run,
    )
