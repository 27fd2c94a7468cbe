"""The episodes stage: every static task lifted, written per split with a provenance side file."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

from contracts.answers import AnswersConfig
from contracts.episodes import Episode, EpisodesConfig
from contracts.tasks import SPLITS, FamiliesConfig, Task
from pipeline.canonical import write_jsonl
from pipeline.episodes.lift import Lifter, LiftError
from pipeline.manifest import StageResult, write_splits
from pipeline.store.build import STORE_FILE
from pipeline.tasks import gold, render
from pipeline.tools.access import ToolStore

MIN_OUTCOME_SHARE = 0.15


def build_episodes(store_dir: Path, tasks_dir: Path, families: FamiliesConfig, cfg: EpisodesConfig, answers: AnswersConfig,
                   out: Path, zone: str = "UTC") -> StageResult:
    """Lift the tasks; `zone` is the corpus's time zone, in which some episodes say their instants."""
    store = ToolStore(store_dir / STORE_FILE)
    lifter = Lifter(store, cfg, families, answers, zone)
    episodes, provenance, dropped = [], [], Counter()
    tasks: dict[tuple[str, str], list[Task]] = {}
    for split in SPLITS:
        for line in (tasks_dir / f"{split}.jsonl").read_text(encoding="utf-8").splitlines():  # in selection order
            task = Task.model_validate_json(line)
            tasks.setdefault((task.family, split), []).append(task)
    try:
        for (name, split), group in sorted(tasks.items()):
            lifted = _keep(lifter, group, families.families[name].target(families.targets, split), cfg, dropped)
            episodes += [Episode.model_validate(fields) for fields, _ in lifted]
            provenance += [origin for _, origin in lifted]
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
        "balance_ok": all(v >= MIN_OUTCOME_SHARE for v in shares.values()),
        "dropped": dict(sorted(dropped.items())),
    }
    return StageResult(outputs=[*(f"{s}.jsonl" for s in SPLITS), "provenance.jsonl"], row_counts=counts, details=details)


def _keep(lifter: Lifter, group: list[Task], target: int, cfg: EpisodesConfig, dropped: Counter) -> list[tuple[dict, dict]]:
    """The first `target` tasks of a family and split (selection order) that lift, with at most ceil(target x share)
    of each commitment outcome while others are still to be had: the released mix follows the declared shares, not
    what is most common near the conversations. Tasks over their outcome's quota fill any places left at the end."""
    quota = {o: math.ceil(target * share) for o, share in cfg.outcome_shares.items()}
    kept, reserve, counts = [], [], Counter()
    for task in group:
        if len(kept) >= target:
            break
        try:
            fields, origin = lifter.lift(task)
        except (LiftError, gold.GoldError, render.RenderError) as exc:
            dropped[f"{task.family}: {type(exc).__name__}: {str(exc).split(': ', 1)[-1]}"] += 1
            continue
        outcome = fields["commitment_outcome"]
        if counts[outcome] >= quota[outcome]:
            reserve.append((fields, origin))
            continue
        counts[outcome] += 1
        kept.append((fields, origin))
    used = min(len(reserve), target - len(kept))
    kept += reserve[:used]
    if len(reserve) > used:
        dropped[f"{group[0].family}: over its outcome quota"] += len(reserve) - used
    return kept


def read_episodes(folder: Path) -> list[Episode]:
    return [Episode.model_validate(json.loads(line)) for split in SPLITS
            for line in (folder / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()]
