"""The gold path of an episode: the actions a perfect agent takes (ask, call the canonical tools, answer the gold)."""

from __future__ import annotations

from collections.abc import Iterator

from contracts.episodes import Episode
from contracts.protocol import Action, Answer, AskUser, CallTool

QUESTIONS = {"site": "Which site or building do you mean?", "time": "Which date and time (UTC) do you mean?"}


def _answer_text(fields: dict) -> str:
    return "; ".join(f"{k}: {v}" for k, v in fields.items())


def gold_actions(episode: Episode) -> Iterator[Action]:
    for slot in episode.withheld:
        yield AskUser(text=QUESTIONS[slot.slot])
    for phase in episode.phases:
        for call in phase.canonical_calls:
            yield CallTool(name=call.tool, arguments=call.arguments, id=call.id)
        yield Answer(text=_answer_text(phase.gold), fields=phase.gold)
    for follow_up in episode.follow_ups:
        yield Answer(text=_answer_text(follow_up.gold), fields=follow_up.gold)
