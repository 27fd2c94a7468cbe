"""The scorer: a pure function of (episode, trace turns). No LLM judge, no keyword lists."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from contracts.answers import Rejection
from contracts.episodes import OUTCOMES, Episode, Outcome
from contracts.runtime import EpisodeScore, TurnRecord
from pipeline.runtime.simulator import Lexicon, asked_slots
from pipeline.tasks.grading import grade, instant

TIME_ARGUMENTS = ("window_start", "window_end", "timestamp")


def _time_signature(tool: str, arguments: dict) -> tuple | None:
    instants = tuple((k, instant(arguments.get(k))) for k in TIME_ARGUMENTS if k in arguments)
    return (tool, instants) if instants else None


def _temporal(episode: Episode, calls: list[tuple[str, dict]]) -> bool:
    """Every phase with time arguments: some agent call used the same instants as an acceptable call of it."""
    played = {_time_signature(tool, args) for tool, args in calls} - {None}
    for phase in episode.phases:
        variants = [phase.canonical_calls, *phase.acceptable_calls]
        wanted = [{_time_signature(c.tool, c.arguments) for c in v} - {None} for v in variants]
        if not all(wanted):
            continue  # some acceptable way of answering this phase needs no time argument
        if not any(w <= played for w in wanted):
            return False
    return True


def score_episode(episode: Episode, turns: list[TurnRecord], keywords: Lexicon, run: int = 0) -> EpisodeScore:
    """Replay the turns against the episode's structure and check every answer, call and protocol rule."""
    played = _replay(episode, turns, keywords)
    issues = played.issues + _missing_answers(episode, played.answers) + ([] if played.stopped else ["not_terminated"])
    rejections, passed = _graded(episode, played.answers)
    phase_results = passed[: len(episode.phases)]
    follow_ok = _follow_up_results(episode, passed)
    final, evidence = phase_results[-1], follow_ok["evidence"]
    phase_ok = all(phase_results) and follow_ok["rationale"]
    temporal = _temporal(episode, played.calls)
    task = final and evidence and phase_ok and temporal
    protocol = not issues
    outcome, decided = _commitment(episode, rejections, len(played.answers))
    return EpisodeScore(
        episode_id=episode.id,
        run=run,
        family=episode.family,
        split=episode.split,
        interaction_mode=episode.interaction_mode,
        final=final,
        evidence=evidence,
        phase=phase_ok,
        temporal=temporal,
        task=task,
        protocol=protocol,
        accomplished=task and protocol,
        phase_results=phase_results,
        issues=sorted(set(issues)),
        rejections=rejections,
        commitment_outcome=outcome,
        commitment_correct=decided,
    )


@dataclass
class _Played:
    """What the turns did: the protocol issues seen along the way, the answers, the tool calls, and whether it
    stopped."""

    issues: list[str] = field(default_factory=list)
    answers: list[dict] = field(default_factory=list)
    calls: list[tuple[str, dict]] = field(default_factory=list)
    stopped: bool = False


def _replay(episode: Episode, turns: list[TurnRecord], keywords: Lexicon) -> _Played:
    """The turns read in order, with the issues of each call, question and answer at the moment it was made."""
    played = _Played()
    released = {w.slot: False for w in episode.withheld}
    for turn in turns:
        played.issues.extend(turn.issues)
        action = turn.action or {}
        kind = action.get("kind")
        played.stopped = played.stopped or turn.event == "stop"
        if kind == "call_tool":
            if not all(released.values()):
                played.issues.append("premature_tool")
            played.calls.append((action.get("name", ""), action.get("arguments") or {}))
            if turn.tool_result and turn.tool_result.get("error"):
                played.issues.append("tool_error")
        elif kind == "ask_user":
            played.issues += _clarification_issues(action.get("text", ""), episode, released, keywords)
        elif kind == "answer":
            if not played.answers and not all(released.values()):
                played.issues.append("missing_clarification")
            fields = action.get("fields") or {}
            if not fields and not action.get("text", "").strip():
                played.issues.append("empty_turn")
            played.answers.append(fields)
    return played


def _clarification_issues(text: str, episode: Episode, released: dict[str, bool], keywords: Lexicon) -> list[str]:
    """The issues of one question to the user; the withheld slots it asks for are marked released."""
    issues = [] if text.strip() else ["empty_turn"]
    asked = asked_slots(text, keywords)
    if not episode.withheld:
        issues.append("unnecessary_clarification")
    else:
        if any(released.get(s) for s in asked) or (not asked and all(released.values())):
            issues.append("redundant_clarification")
        if asked - set(released):
            issues.append("off_target_clarification")
    for slot in asked & set(released):
        released[slot] = True
    return issues


def _missing_answers(episode: Episode, answers: list[dict]) -> list[str]:
    """An issue for the phases left unanswered, and one per follow-up left unanswered."""
    n_phases = len(episode.phases)
    issues = ["missing_phase_answer"] if len(answers) < n_phases else []
    return issues + [
        f"missing_{spec.kind}" for offset, spec in enumerate(episode.follow_ups) if n_phases + offset >= len(answers)
    ]


def _graded(episode: Episode, answers: list[dict]) -> tuple[list, list[bool]]:
    """The rejections of every answer against its step's gold, and per step (phases, then follow-ups) whether it
    passed."""
    steps = [*episode.phases, *episode.follow_ups]
    rejections = [
        r for i, step in enumerate(steps) if i < len(answers) for r in grade(step.form, step.gold, answers[i], step=i)
    ]
    failed = {r.step for r in rejections}
    return rejections, [i < len(answers) and i not in failed for i in range(len(steps))]


def _commitment(episode: Episode, rejections: list[Rejection], answered: int) -> tuple[Outcome | None, bool | None]:
    """The gold commitment decision and whether the agent's commitment answer has its `decision` field right (an
    unanswered commitment is wrong); (None, None) for an episode without a commitment phase."""
    step = next((i for i, phase in enumerate(episode.phases) if phase.type == "commitment"), None)
    if step is None:
        return None, None
    wrong = any(r.step == step and r.field == "decision" for r in rejections)
    return episode.commitment_outcome, step < answered and not wrong


def _follow_up_results(episode: Episode, passed: list[bool]) -> dict[str, bool]:
    """Whether the evidence and rationale follow-ups passed (True for one the episode does not ask)."""
    follow_ok = {"evidence": True, "rationale": True}
    for offset, spec in enumerate(episode.follow_ups):
        follow_ok[spec.kind] = passed[len(episode.phases) + offset]
    return follow_ok


def _rate(scores: list[EpisodeScore], part: str) -> float:
    return round(sum(getattr(s, part) for s in scores) / len(scores), 4) if scores else 0.0


PARTS = ("final", "evidence", "phase", "temporal", "task", "protocol", "accomplished")


def summarize(scores: Iterable[EpisodeScore]) -> dict:
    """Rates overall and per family, split and interaction mode; commitment accuracy per gold outcome and balanced;
    pass^k and flip rate across repeated runs."""
    scores = list(scores)
    summary = {part: _rate(scores, part) for part in PARTS}
    summary["accomplished_rate"] = summary.pop("accomplished")
    summary["episodes"] = len({s.episode_id for s in scores})
    summary["runs"] = len(scores)
    for key in ("family", "split", "interaction_mode"):
        groups: dict[str, list[EpisodeScore]] = defaultdict(list)
        for s in scores:
            groups[getattr(s, key)].append(s)
        summary[f"per_{key}"] = {k: _rate(v, "accomplished") for k, v in sorted(groups.items())}
    by_episode: dict[str, list[bool]] = defaultdict(list)
    for s in scores:
        by_episode[s.episode_id].append(s.accomplished)
    k = max((len(v) for v in by_episode.values()), default=0)
    if by_episode:
        summary[f"pass^{k}"] = round(sum(all(v) for v in by_episode.values()) / len(by_episode), 4)
        summary["flip_rate"] = round(sum(len(set(v)) > 1 for v in by_episode.values()) / len(by_episode), 4)
    summary.update(_commitment_figures(scores))
    summary["issues"] = dict(sorted(Counter(i for s in scores for i in s.issues).items()))
    summary["rejections"] = dict(sorted(Counter(r.reason for s in scores for r in s.rejections).items()))
    return summary


def _commitment_figures(scores: list[EpisodeScore]) -> dict:
    """The commitment figures of scored runs: per gold outcome (in OUTCOMES order, only those present) the runs
    (`commitment_runs`) and the share whose commitment decision graded right (`commitment_accuracy`), and their mean,
    `balanced_commitment_accuracy` (None when no run has a commitment). An agent that always answers gets 1.0 for
    answer and 0.0 for the others, whatever the mix: the balanced figure does not reward the majority outcome. Runs
    of episodes without a commitment phase are left out."""
    right: dict[str, list[bool]] = defaultdict(list)
    for s in scores:
        if s.commitment_outcome is not None:
            right[s.commitment_outcome].append(bool(s.commitment_correct))
    shares = {o: sum(right[o]) / len(right[o]) for o in OUTCOMES if right[o]}
    return {
        "commitment_accuracy": {o: round(v, 4) for o, v in shares.items()},
        "commitment_runs": {o: len(right[o]) for o in shares},
        "balanced_commitment_accuracy": round(sum(shares.values()) / len(shares), 4) if shares else None,
    }
