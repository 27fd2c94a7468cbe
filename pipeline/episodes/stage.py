"""The episodes stage: every static task lifted, written per split with a provenance side file."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

from contracts.answers import AnswersConfig
from contracts.episodes import Episode, EpisodesConfig
from contracts.tasks import SPLITS, FamiliesConfig, Task
from pipeline.core.canonical import write_jsonl
from pipeline.core.errors import LiftError
from pipeline.core.manifest import StageResult, write_splits
from pipeline.episodes.lift import Lifter, commitment_instant, week_index
from pipeline.store.reader import STORE_FILE
from pipeline.tasks import gold, render
from pipeline.tools.access import ToolStore


def build_episodes(store_dir: Path, tasks_dir: Path, families: FamiliesConfig, cfg: EpisodesConfig, answers: AnswersConfig,
                   out: Path, zone: str = "UTC") -> StageResult:
    """Lift the tasks; `zone` is the corpus's time zone, in which some episodes say their instants."""
    store = ToolStore(store_dir / STORE_FILE, remember_results=True)
    lifter = Lifter(store, cfg, families, answers, zone)
    episodes, provenance, dropped = [], [], Counter()
    tasks: dict[tuple[str, str], list[Task]] = {}
    for split in SPLITS:
        for line in (tasks_dir / f"{split}.jsonl").read_text(encoding="utf-8").splitlines():  # in selection order
            task = Task.model_validate_json(line)
            tasks.setdefault((task.family, split), []).append(task)
    try:
        targets = {key: families.families[key[0]].target(families.targets, key[1]) for key in tasks}
        for fields, origin in _keep(lifter, tasks, targets, cfg, dropped):
            episodes.append(Episode.model_validate(fields))
            provenance.append(origin)
    finally:
        store.close()
    counts = write_splits(out, episodes)
    write_jsonl(out / "provenance.jsonl", sorted(provenance, key=lambda p: p["id"]))
    outcomes = Counter(e.commitment_outcome for e in episodes)
    shares = {o: round(outcomes.get(o, 0) / max(1, len(episodes)), 4) for o in ("answer", "abstain", "re_clarify")}
    details = {
        "per_family": {f: dict(sorted(Counter(e.split for e in episodes if e.family == f).items()))
                       for f in sorted({e.family for e in episodes})},
        "per_interaction_mode": dict(sorted(Counter(e.interaction_mode for e in episodes).items())),
        "commitment_outcomes": dict(sorted(outcomes.items())),
        "commitment_shares": shares,
        "commitment_reasons": dict(sorted(Counter(e.phases[-1].gold["reason"] for e in episodes).items())),
        "outcome_by_family": {f: dict(sorted(Counter(e.commitment_outcome for e in episodes if e.family == f).items()))
                              for f in sorted({e.family for e in episodes})},
        "balance_ok": all(v >= cfg.min_outcome_share for v in shares.values()),
        "dropped": dict(sorted(dropped.items())),
    }
    return StageResult(outputs=[*(f"{s}.jsonl" for s in SPLITS), "provenance.jsonl"], row_counts=counts, details=details)


def _keep(lifter: Lifter, tasks: dict[tuple[str, str], list[Task]], targets: dict[tuple[str, str], int], cfg: EpisodesConfig,
          dropped: Counter) -> list[tuple[dict, dict]]:
    """Per family and split, the first `target` tasks (selection order) that lift, with at most ceil(target x share)
    of each commitment outcome while others are still to be had: the released mix follows the declared shares, not
    what is most common near the conversations. Tasks over their outcome's quota fill places left at the end while
    every other outcome stays at min_outcome_share of the corpus.

    No more than `commit_week_cap` commitments of the corpus share a week and an outcome: the lifter is told which
    are full and looks elsewhere near the conversation. The families and splits take turns, one task each, so that
    none is served last from the weeks the others left."""
    groups = sorted(tasks)
    quota = {key: {o: math.ceil(targets[key] * share) for o, share in cfg.outcome_shares.items()} for key in groups}
    kept: dict = {key: [] for key in groups}
    reserve: dict = {key: [] for key in groups}
    counts = {key: Counter() for key in groups}
    weeks: Counter = Counter()  # kept commitments per (week, outcome), corpus-wide

    def room(key: tuple[str, str], fields: dict) -> tuple[int, str] | None:
        """The row's (week, outcome) when that week has room for it, else None (counted as dropped)."""
        at = commitment_instant([c.model_dump() for c in fields["phases"][-1].canonical_calls])
        week = (int(week_index(at)) if at is not None else -1, fields["commitment_outcome"])
        if weeks[week] >= cfg.commit_week_cap:
            dropped[f"{key[0]}: its commitment week is full"] += 1
            return None
        return week

    def take(key: tuple[str, str], fields: dict, origin: dict, week: tuple[int, str]) -> None:
        kept[key].append((fields, origin))
        weeks[week] += 1
        if weeks[week] >= cfg.commit_week_cap:
            lifter.full_weeks.add(week)

    def offer(key: tuple[str, str], task: Task) -> None:
        try:
            fields, origin = lifter.lift(task)
        except (LiftError, gold.GoldError, render.RenderError) as exc:
            dropped[f"{task.family}: {type(exc).__name__}: {str(exc).split(': ', 1)[-1]}"] += 1
            return
        outcome = fields["commitment_outcome"]
        if counts[key][outcome] >= quota[key][outcome]:
            reserve[key].append((fields, origin))
            return
        week = room(key, fields)
        if week is not None:
            counts[key][outcome] += 1
            take(key, fields, origin, week)

    def balanced(outcome: str) -> bool:
        """Whether one more row of this outcome keeps every other outcome at min_outcome_share of the corpus."""
        total = Counter(fields["commitment_outcome"] for rows in kept.values() for fields, _ in rows)
        size = sum(total.values()) + 1
        return all(total[o] / size >= cfg.min_outcome_share for o in cfg.outcome_shares if o != outcome)

    for turn in range(max((len(t) for t in tasks.values()), default=0)):
        for key in groups:
            if turn < len(tasks[key]) and len(kept[key]) < targets[key]:
                offer(key, tasks[key][turn])
    for turn in range(max((len(r) for r in reserve.values()), default=0)):
        for key in groups:
            if turn >= len(reserve[key]):
                continue
            if len(kept[key]) >= targets[key]:
                dropped[f"{key[0]}: over its outcome quota"] += 1
                continue
            fields, origin = reserve[key][turn]
            if not balanced(fields["commitment_outcome"]):
                dropped[f"{key[0]}: would push another outcome under min_outcome_share"] += 1
                continue
            week = room(key, fields)
            if week is not None:
                take(key, fields, origin, week)
    return [row for key in groups for row in kept[key]]


def read_episodes(folder: Path) -> list[Episode]:
    return [Episode.model_validate(json.loads(line)) for split in SPLITS
            for line in (folder / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()]
