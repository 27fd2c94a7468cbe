"""The three-level evaluator of agent traces against ground-truth trajectories (the seed's method).

outcome 50%: (completeness + retrieval accuracy + result verification) / 3, from the scorer's checks;
process 30%: mean of action-sequence similarity (normalized Levenshtein over tool names), DAG node overlap
and edge overlap (calls matched by tool and resolved arguments); planning 20%: mean ROUGE-1/2/L F1 between
the ground truth's planning steps and the agent's plan (its plan actions, else one line per action it took).
"""

from __future__ import annotations

import contextlib
import functools
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from rapidfuzz.distance import Levenshtein

from contracts.ground_truth import Trajectory
from pipeline.core.config import load_episodes_config, load_families
from pipeline.core.errors import EvaluationError, clipped, shown, validation_problems
from pipeline.core.workspace import Workspace
from pipeline.harness.binding import REBUILD, project_digest, require, require_trace
from pipeline.harness.traces import load_episodes, played_on, read_trace
from pipeline.release.ground_truth import render_action
from pipeline.release.gt_validate import load
from pipeline.release.playable import Release
from pipeline.runtime.scoring import score_episode
from pipeline.runtime.simulator import slot_keywords
from pipeline.tasks.grading import instant
from pipeline.tools import refs, registry
from pipeline.tools.access import ToolStore

WEIGHTS = {"outcome": 0.5, "process": 0.3, "planning": 0.2}
ROUGE_KINDS = ("rouge1", "rouge2", "rougeL")


@functools.cache
def _rouge() -> Any:
    """The ROUGE scorer, made when a row's planning is first scored: rouge_score imports nltk, SciPy and scikit-learn
    (1.8 s), which a process that only wants failure modes (the report) never needs."""
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(list(ROUGE_KINDS), use_stemmer=False)


def _normal(value: Any) -> Any:
    """Arguments compared as values: timestamps as instants, numbers as floats, lists element-wise."""
    if isinstance(value, str) and instant(value) is not None:
        return ("instant", instant(value))
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list):
        return tuple(_normal(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _normal(v)) for k, v in value.items()))
    return value


def _signature(tool: str, arguments: dict) -> tuple:
    return (tool, _normal(arguments))


def resolved_signature(tool: str, arguments: dict, outputs: dict[str, Any]) -> tuple:
    """A call compared as values: references replaced by the values they point to (kept as written if they do not
    resolve)."""
    with contextlib.suppress(refs.ReferenceError_):
        arguments = refs.resolve(arguments, outputs)
    return _signature(tool, arguments)


def _resolved(calls: list[tuple[str, str, dict]], outputs: dict[str, Any]) -> list[tuple]:
    """(id, signature) of each call with its references replaced by the values they pointed to."""
    return [(call_id, resolved_signature(tool, arguments, outputs)) for call_id, tool, arguments in calls]


def _gt_calls(trajectory: dict) -> list[tuple[str, str, dict]]:
    def back(value: Any) -> Any:
        if isinstance(value, str) and value.startswith("@"):
            return "$" + value[1:]
        if isinstance(value, list):
            return [back(v) for v in value]
        if isinstance(value, dict):
            return {k: back(v) for k, v in value.items()}
        return value

    return [
        (s["name"], s["action"], back(s.get("arguments") or {}))
        for s in trajectory["execution_steps"]
        if s["action"] != "Finish"
    ]


def _overlap(left: list, right: list) -> float:
    if not left and not right:
        return 1.0
    matched = sum((Counter(left) & Counter(right)).values())
    return matched / max(len(left), len(right))


@dataclass(frozen=True)
class _Compared:
    """A run beside its ground-truth trajectory: both call lists resolved, the agent's actions and plans, its score."""

    gt_calls: list[tuple[str, str, dict]]
    gt: list[tuple]
    agent_calls: list[tuple[str, str, dict]]
    agent: list[tuple]
    actions: list[dict]
    plans: list[str]
    score: Any
    answers: list[dict]
    steps: list

    def failure_modes(self, trajectory: dict) -> list[str]:
        finished = bool(self.answers and self.answers[-1]) and len(self.answers) >= len(self.steps)
        return failure_modes(self.gt_calls, self.gt, self.agent_calls, self.agent, trajectory, self.score, finished)


def _compare(trajectory: dict, episode: Any, turns: list, store: ToolStore, keywords: dict) -> _Compared:
    gt_calls = _gt_calls(trajectory)
    gt_outputs: dict[str, Any] = {}
    for call_id, tool, arguments in gt_calls:
        gt_outputs[call_id] = registry.call(store, tool, arguments, gt_outputs)
    gt = _resolved(gt_calls, gt_outputs)
    agent_calls, agent_outputs, actions, plans = [], {}, [], []
    for turn in turns:
        action = turn.action or {}
        actions.append(action)
        if action.get("kind") == "call_tool":
            agent_calls.append((turn.call_id, action.get("name", ""), action.get("arguments") or {}))
            agent_outputs[turn.call_id] = turn.tool_result or {}
        elif action.get("kind") == "plan":
            plans.append(action.get("text", ""))
    agent = _resolved(agent_calls, agent_outputs)
    score = score_episode(episode, turns, keywords)
    answers = [a.get("fields") or {} for a in actions if a.get("kind") == "answer"]
    steps = [*episode.phases, *episode.follow_ups]
    return _Compared(gt_calls, gt, agent_calls, agent, actions, plans, score, answers, steps)


def row_failure_modes(trajectory: dict, episode: Any, turns: list, store: ToolStore, keywords: dict) -> list[str]:
    """evaluate_row's failure modes alone (none of them needs the planning's ROUGE)."""
    return _compare(trajectory, episode, turns, store, keywords).failure_modes(trajectory)


def evaluate_row(trajectory: dict, episode: Any, turns: list, store: ToolStore, keywords: dict) -> dict:
    c = _compare(trajectory, episode, turns, store, keywords)
    gt_calls, gt, agent_calls, agent = c.gt_calls, c.gt, c.agent_calls, c.agent
    score, answers, steps = c.score, c.answers, c.steps
    completeness = sum(1 for i in range(len(steps)) if i < len(answers) and answers[i]) / len(steps)
    rejected = {r.step for r in score.rejections}
    verification = sum(i < len(answers) and i not in rejected for i in range(len(steps))) / len(steps)
    gt_signatures, agent_signatures = [g for _, g in gt], [a for _, a in agent]
    retrieval = sum((Counter(gt_signatures) & Counter(agent_signatures)).values()) / max(1, len(gt_signatures))
    outcome = (completeness + retrieval + verification) / 3
    sequence = Levenshtein.normalized_similarity([t for _, t, _ in gt_calls], [t for _, t, _ in agent_calls])
    by_id = dict(gt)
    gt_edges = [
        (by_id[link["source"]], by_id[link["target"]])
        for link in trajectory["execution_links"]
        if link["source"] in by_id and link["target"] in by_id
    ]
    agent_by_id = dict(agent)
    agent_args = {i: a for i, _, a in agent_calls}
    agent_edges = [
        (agent_by_id[ref], signature)
        for call_id, signature in agent
        for ref in _called_refs(agent_args[call_id])
        if ref in agent_by_id
    ]
    process = (sequence + _overlap(gt_signatures, agent_signatures) + _overlap(gt_edges, agent_edges)) / 3
    reference = "\n".join(p["instruction"] for p in trajectory["planning_steps"])
    candidate = "\n".join(c.plans) if c.plans else "\n".join(render_action(a) for a in c.actions)
    rouge = _rouge().score(reference, candidate)
    planning = sum(rouge[k].fmeasure for k in ROUGE_KINDS) / 3
    final = WEIGHTS["outcome"] * outcome + WEIGHTS["process"] * process + WEIGHTS["planning"] * planning
    return {
        "episode_id": episode.id,
        "family": episode.family,
        "final": round(final, 4),
        "outcome": {
            "score": round(outcome, 4),
            "completeness": round(completeness, 4),
            "retrieval_accuracy": round(retrieval, 4),
            "result_verification": round(verification, 4),
        },
        "process": {
            "score": round(process, 4),
            "sequence_similarity": round(sequence, 4),
            "node_overlap": round(_overlap(gt_signatures, agent_signatures), 4),
            "edge_overlap": round(_overlap(gt_edges, agent_edges), 4),
        },
        "planning": {
            "score": round(planning, 4),
            **{k: round(rouge[k].fmeasure, 4) for k in ROUGE_KINDS},
        },
        "failure_modes": c.failure_modes(trajectory),
        "rejections": [r.model_dump() for r in score.rejections],
    }


def _called_refs(arguments: Any) -> set[str]:
    found = set()
    if isinstance(arguments, str):
        match = refs.REFERENCE.match(arguments)
        if match:
            found.add(match["call"])
    elif isinstance(arguments, list):
        for value in arguments:
            found |= _called_refs(value)
    elif isinstance(arguments, dict):
        for value in arguments.values():
            found |= _called_refs(value)
    return found


def failure_modes(gt_calls, gt, agent_calls, agent, trajectory, score, finished: bool) -> list[str]:
    """The seed's five failure patterns, each detected from the calls and the score, then why answers were
    rejected (format_error, wrong_unit, wrong_value, wrong_choice: a formatting problem apart from a wrong answer)."""
    modes = []
    gt_tools, agent_tools = {t for _, t, _ in gt_calls}, {t for _, t, _ in agent_calls}
    agent_signatures = {a for _, a in agent}
    if gt_tools - agent_tools and agent_tools - gt_tools:
        modes.append("tool_selection")
    if any(sig[0] in agent_tools and sig not in agent_signatures for _, sig in gt):
        modes.append("parameter")
    if any(t not in agent_tools for t in gt_tools):
        modes.append("missing_step")
    position = {}
    for index, (_, signature) in enumerate(agent):
        position.setdefault(signature, index)
    by_id = dict(gt)
    for link in trajectory["execution_links"]:
        source, target = by_id.get(link["source"]), by_id.get(link["target"])
        if source in position and target in position and position[source] > position[target]:
            modes.append("sequencing")
            break
    if not finished or "not_terminated" in score.issues or "missing_phase_answer" in score.issues:
        modes.append("premature_termination")  # the last step (the final output) was never given
    modes += sorted({r.reason for r in score.rejections})
    return modes


def evaluate(
    ws: Workspace, gt_path: Path | None, trace_path: Path, release: Release | None = None, expect: str | None = None
) -> dict:
    """The three levels of every episode run of a trace. With `release` (a release folder on its own), its episodes,
    simulator phrases and tool store, and by default its ground_truth/<split>.jsonl. With `expect` (the release digest
    the user trusts), the trace must record that release, and the project's store (no `release`) be its store; the
    report names the release the trace was played on."""
    header, turns, runs = read_trace(trace_path)
    require_trace(expect, trace_path, header.release_digest)
    if release is None and expect is not None:
        require(expect, f"the project's build of {header.corpus} is", project_digest(ws, header.corpus), REBUILD)
    if release is not None:
        episodes_path, keywords = release.episodes_path(header.split), release.keywords()
        gt_path = gt_path or release.folder / "ground_truth" / f"{header.split}.jsonl"
    else:
        if gt_path is None:
            raise EvaluationError("give --ground-truth FILE, or --release DIR to use the release's own trajectories")
        episodes_path = ws.stage_dir(header.corpus, header.episode_set) / f"{header.split}.jsonl"
        keywords = slot_keywords(load_episodes_config(ws))
    episodes = {e.id: e for e in played_on(trace_path, header, turns, episodes_path)}
    trajectories = _trajectories(gt_path)  # both files read and checked before the store opens
    store = release.store() if release is not None else ToolStore.for_corpus(ws, header.corpus)
    rows = []
    try:
        for (episode_id, run), played in sorted(turns.items()):
            if episode_id not in trajectories:
                raise EvaluationError(
                    f"{gt_path}: no trajectory for episode {episode_id} of {trace_path}; export the same split"
                )
            for records in played.values():
                rows.append(
                    {
                        **evaluate_row(trajectories[episode_id], episodes[episode_id], records, store, keywords),
                        "run": run,
                    }
                )
    finally:
        store.close()
    summary = defaultdict(list)
    for row in rows:
        summary[row["family"]].append(row["final"])
    modes = Counter(m for r in rows for m in r["failure_modes"])
    rejections = Counter(j["reason"] for r in rows for j in r["rejections"])
    return {
        "release_digest": header.release_digest,
        "rows": rows,
        "mean_final": round(sum(r["final"] for r in rows) / max(1, len(rows)), 4),
        "per_family": {f: round(sum(v) / len(v), 4) for f, v in sorted(summary.items())},
        "failure_modes": dict(sorted(modes.items())),
        "rejections": dict(sorted(rejections.items())),
        "weights": WEIGHTS,
    }


def _trajectories(path: Path) -> dict[str, dict]:
    """The trajectories of a ground-truth file by episode id, each validated against the contract before use (those
    without an episode id are someone else's scenarios: not ours to compare)."""
    try:
        loaded = load(path)
    except (OSError, ValueError) as exc:
        raise EvaluationError(
            f"{path}: not ground-truth trajectories ({clipped(str(exc))}); check it with `telemetry-bench validate-gt`"
        ) from exc
    trajectories = {}
    for where, data in loaded:
        try:
            trajectory = Trajectory.model_validate(data)
        except ValidationError as exc:
            raise EvaluationError(
                f"{path}: {where}: {validation_problems(exc)}; check it with `telemetry-bench validate-gt`"
            ) from exc
        episode_id = (trajectory.model_extra or {}).get("episode_id")
        if episode_id is not None and not isinstance(episode_id, str):
            raise EvaluationError(
                f"{path}: {where}: episode_id: {shown(episode_id)} is not text; export the trajectories again"
            )
        if episode_id is not None:
            trajectories[episode_id] = data
    return trajectories


def export_ground_truth(ws: Workspace, corpus: str, split: str, out: Path) -> int:
    from pipeline.core.canonical import write_jsonl
    from pipeline.harness.traces import episode_file
    from pipeline.release.ground_truth import trajectory

    families = load_families(ws).families
    rows = [trajectory(e, families[e.family].category) for e in load_episodes(episode_file(ws, corpus, split)[1])]
    write_jsonl(out, rows)
    return len(rows)
