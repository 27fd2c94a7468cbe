"""Failure examples per agent: for each way a trace's agent failed, how many runs show it and one of them in the
benchmark's own words (the trace's error text, the scorer's rejection, the turn count), so that a reader sees what a
model did wrong without opening the JSONL trace. The report shows them under each corpus's results."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.harness.traces import Played

CLIP = 240  # characters of a model's own output quoted in an example


@dataclass(frozen=True)
class FailureExample:
    mode: str
    runs: int  # episode runs showing it
    episode_id: str
    family: str
    run: int
    words: str  # what happened, in the trace's and the scorer's words


def _clip(text: Any) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= CLIP else text[: CLIP - 1] + "…"


def _issue_words(issue: str, played: Played) -> str:
    """The first turn that had the issue, as the trace recorded it; an episode-level issue by its counts."""
    turn = next((t for t in played.turns if issue in t.issues), None)
    if turn is not None:
        raw = turn.raw if isinstance(turn.raw, dict) else {}
        said = raw.get("unparsed", turn.raw)
        said = said if said not in ("", None) else "nothing (an empty reply)"
        why = raw.get("error") or {"parse_error": "not a valid action"}.get(issue, issue)
        usage = f" ({turn.usage.get('completion_tokens', 0)} tokens out)" if turn.usage else ""
        return _clip(f"turn {turn.turn}: {why}{usage}; the model said: {said}")
    if issue == "not_terminated":
        budget = played.episode.turn_budget
        return f"the episode ran {len(played.turns)} of its {budget} turns and the model never gave the final answer"
    return f"{issue} over the episode's {len(played.turns)} turns"


def _rejection_words(reason: str, played: Played) -> str:
    rejection = next(r for r in played.score.rejections if r.reason == reason)
    return _clip(f"answer {rejection.step}, field {rejection.field}: {rejection.detail}")


def failure_examples(played: list[Played], modes_of: dict[tuple[str, int], tuple[str, ...]]) -> list[FailureExample]:
    """Every protocol issue, answer rejection reason and evaluator failure mode of a trace's runs, most frequent
    first, each with its first run (in episode order) as the example."""
    found: dict[str, list[tuple[Played, str]]] = {}
    for p in sorted(played, key=lambda p: (p.episode.id, p.run)):
        for issue in dict.fromkeys(p.score.issues):
            found.setdefault(issue, []).append((p, "issue"))
        for reason in dict.fromkeys(r.reason for r in p.score.rejections):
            found.setdefault(reason, []).append((p, "rejection"))
        for mode in modes_of.get((p.episode.id, p.run), ()):
            if mode not in {r.reason for r in p.score.rejections}:  # the rejections are said above, in their words
                found.setdefault(mode, []).append((p, "mode"))
    examples = []
    for mode, runs in found.items():
        first, kind = runs[0]
        if kind == "issue":
            words = _issue_words(mode, first)
        elif kind == "rejection":
            words = _rejection_words(mode, first)
        else:
            calls = [t.action["name"] for t in first.turns if t.action and t.action.get("kind") == "call_tool"]
            words = f"against the ground-truth trajectory; the tools it called: {', '.join(calls) or 'none'}"
        examples.append(FailureExample(mode, len(runs), first.episode.id, first.episode.family, first.run, words))
    return sorted(examples, key=lambda e: (-e.runs, e.mode))
