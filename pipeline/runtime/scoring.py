"""The scorer: a pure function of (episode, trace turns). No LLM judge, no keyword lists."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable

from contracts.episodes import Episode
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
    issues: list[str] = []
    released = {w.slot: False for w in episode.withheld}
    answers: list[dict] = []
    calls: list[tuple[str, dict]] = []
    stopped = False
    for turn in turns:
        issues.extend(turn.issues)
        action = turn.action or {}
        kind = action.get("kind")
        if turn.event == "stop":
            stopped = True
        if kind == "call_tool":
            if any(not done for done in released.values()):
                issues.append("premature_tool")
            calls.append((action.get("name", ""), action.get("arguments") or {}))
            if turn.tool_result and turn.tool_result.get("error"):
                issues.append("tool_error")
        elif kind == "ask_user":
            text = action.get("text", "")
            if not text.strip():
                issues.append("empty_turn")
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
        elif kind == "answer":
            if not answers and any(not done for done in released.values()):
                issues.append("missing_clarification")
            fields = action.get("fields") or {}
            if not fields and not action.get("text", "").strip():
                issues.append("empty_turn")
            answers.append(fields)
    n_phases = len(episode.phases)
    steps = [*episode.phases, *episode.follow_ups]
    rejections = [r for i, step in enumerate(steps) if i < len(answers) for r in grade(step.form, step.gold, answers[i], step=i)]
    failed = {r.step for r in rejections}
    passed = [i < len(answers) and i not in failed for i in range(len(steps))]
    phase_results = passed[:n_phases]
    if len(answers) < n_phases:
        issues.append("missing_phase_answer")
    follow_ok = {"evidence": True, "rationale": True}
    for offset, spec in enumerate(episode.follow_ups):
        follow_ok[spec.kind] = passed[n_phases + offset]
        if n_phases + offset >= len(answers):
            issues.append(f"missing_{spec.kind}")
    evidence, rationale_ok = follow_ok["evidence"], follow_ok["rationale"]
    if not stopped:
        issues.append("not_terminated")
    final = phase_results[-1]
    phase_ok = all(phase_results) and rationale_ok
    temporal = _temporal(episode, calls)
    task = final and evidence and phase_ok and temporal
    protocol = not issues
    return EpisodeScore(
        episode_id=episode.id, run=run, family=episode.family, split=episode.split, interaction_mode=episode.interaction_mode,
        final=final, evidence=evidence, phase=phase_ok, temporal=temporal, task=task, protocol=protocol,
        accomplished=task and protocol, phase_results=phase_results, issues=sorted(set(issues)), rejections=rejections,
    )


def _rate(scores: list[EpisodeScore], part: str) -> float:
    return round(sum(getattr(s, part) for s in scores) / len(scores), 4) if scores else 0.0


PARTS = ("final", "evidence", "phase", "temporal", "task", "protocol", "accomplished")


def summarize(scores: Iterable[EpisodeScore]) -> dict:
    """Rates overall and per family, split and interaction mode; pass^k and flip rate across repeated runs."""
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
    summary["issues"] = dict(sorted(Counter(i for s in scores for i in s.issues).items()))
    summary["rejections"] = dict(sorted(Counter(r.reason for s in scores for r in s.rejections).items()))
    return summary
