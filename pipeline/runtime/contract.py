"""The answer contract over one episode (design/VALIDITY.md §1): what the scorer checks, the agent was shown.

Played along the gold path by `RandomFillAgent`, which asks the oracle's questions and makes its tool calls but
fills every answer form with random values of the right types. The episode keeps the contract when
- every gold field is a field of the form shown with its question, and every string a gold uses is in the
  agent view before the answer is due (codes in the form's enum, stream ids in a tool result or message);
- timestamps are graded as instants (the gold written in another offset passes);
- the random filler accomplishes nothing (a positive control for the scorer).
"""

from __future__ import annotations

import json
import random
from datetime import timedelta, timezone
from typing import Any

from contracts.answers import AnswerForm, FormField
from contracts.episodes import Episode
from pipeline.core.canonical import digest
from pipeline.runtime.agents import Observation, OracleAgent
from pipeline.runtime.runner import run_episode
from pipeline.runtime.scoring import score_episode
from pipeline.runtime.simulator import Lexicon
from pipeline.tasks.grading import instant, passes
from pipeline.tools.access import ToolStore
from pipeline.tools.timeutil import EPOCH, format_us

SEED = "telemetry-bench/random-fill/v1"
SHIFTED = timezone(timedelta(hours=5, minutes=30))
CHECKS = ("answer_contract_visible", "timestamps_as_instants", "random_fill_fails")


def random_value(rng: random.Random, field: FormField, gold: Any, catalog: list[str]) -> Any:
    """A value of the field's type that is wrong with certainty for numbers and instants, by chance for choices."""
    if field.type == "number":
        g = float(gold)
        band = (field.tolerance.allows(g) if field.tolerance else 0.0) * (1 + 1e-6) + 1e-9
        center = abs(g)
        low, high = (0.5 * center, 1.5 * center) if g else (-1.0, 1.0)
        below, above = max(0.0, center - band - low), max(0.0, high - center - band)  # [low, g-band] and [g+band, high]
        if below + above == 0:  # the band covers the interval: just outside it
            x = center + band + (0.5 * center + 1e-3) * (0.01 + rng.random())
        else:
            u = rng.random() * (below + above)
            x = low + u if u < below else center + band + (u - below)
        return x if g >= 0 else -x
    if field.type == "timestamp":
        at = instant(gold) or 0
        return format_us(at + (1 if rng.random() < 0.5 else -1) * rng.randint(1, 30 * 86_400) * 1_000_000)
    if field.type == "code":
        return rng.choice(list(field.codes))
    if field.type == "stream_ids":
        return rng.sample(catalog, min(len(catalog), max(1, len(gold or []))))
    return rng.choice(catalog)


class RandomFillAgent(OracleAgent):
    """The oracle's questions and tool calls, every answer form filled with random values of the right types
    (fixed seed per episode). Records what the agent view held before each answer."""

    name = "random_fill"

    def __init__(self, catalog: list[str]) -> None:
        self.catalog = catalog

    def start(self, episode: Episode) -> None:
        super().start(episode)
        self.rng = random.Random(int(digest(f"{SEED}|{episode.id}")[:16], 16))
        self.shown: list[tuple[AnswerForm | None, str]] = []  # per answer: the open form, the view's text so far

    def act(self, observation: Observation) -> Any:
        action = super().act(observation)
        if action.get("kind") != "answer":
            return action
        form = observation.answer_form
        self.shown.append(
            (form, json.dumps([_visible(m) for m in observation.messages], ensure_ascii=False, default=str))
        )
        if form is None:
            return action
        gold = action.get("fields") or {}
        fields = {f.name: random_value(self.rng, f, gold.get(f.name), self.catalog) for f in form.fields}
        return {"kind": "answer", "text": "", "fields": fields}


def _in_offset(value: Any) -> str | None:
    """The same instant written in another offset (+05:30)."""
    at = instant(value)
    return None if at is None else (EPOCH + timedelta(microseconds=at)).astimezone(SHIFTED).isoformat()


def _visible(message: dict) -> Any:
    return {k: v for k, v in message.items() if k != "answer_form"}


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def contract_failures(episode: Episode, store: ToolStore, keywords: Lexicon) -> list[str]:
    """The contract checks this episode fails (empty: it keeps the contract)."""
    agent = RandomFillAgent(sorted(store.streams))
    turns = [r for r in run_episode(agent, episode, store, keywords) if r.type == "turn"]
    failed = set()
    steps = [*episode.phases, *episode.follow_ups]
    for index, step in enumerate(steps):
        if index >= len(agent.shown):
            failed.add("answer_contract_visible")
            break
        form, seen = agent.shown[index]
        if form is None or form != step.form or set(step.gold) != set(form.names):
            failed.add("answer_contract_visible")
            continue
        for field in form.fields:
            value = step.gold[field.name]
            if (
                field.type == "code"
                and value not in field.codes
                or field.type in ("stream_id", "stream_ids")
                and any(json.dumps(s)[1:-1] not in seen for s in _strings(value))
            ):
                failed.add("answer_contract_visible")
            elif field.type == "timestamp":
                shifted = _in_offset(value)
                if (
                    not shifted
                    or shifted == value
                    or not passes(AnswerForm(fields=[field]), {field.name: value}, {field.name: shifted})
                ):
                    failed.add("timestamps_as_instants")
    if score_episode(episode, turns, keywords).accomplished:
        failed.add("random_fill_fails")
    return sorted(failed)
