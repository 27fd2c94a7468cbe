"""Guessers: cheap strategies that commit without looking quality up (design/VALIDITY.md section 4).

A guesser remembers the commitment outcomes of the rows of the other splits (leave one split out: never the row's
own) and commits by the majority outcome of what it remembers alike: rows with the same surface (surface_guess),
or about the same calendar week (week_memory). They are gated statistically, not row by row: excluding every row a
guesser wins by chance would anti-correlate the release with it.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from contracts.episodes import Episode, EpisodesConfig, Guessers
from contracts.tasks import SPLITS
from pipeline.audit.probe import surface
from pipeline.episodes.lift import commitment_instant, week_index

# From the finest surface to none: a surface seen fewer than min_support times backs off to the next.
SURFACE_LEVELS = (
    ("family", "commit_template", "format", "precision", "hour"),
    ("family", "commit_template", "format", "precision"),
    ("family", "commit_template"),
    ("family",),
    (),
)


def _majority(counts: Counter) -> str:
    """The most frequent key; ties go to the first in sorted order (deterministic)."""
    return max(sorted(counts), key=lambda k: counts[k])


class Memory:
    """What a guesser remembers of some rows: outcomes by surface and by week, and reasons by family and outcome."""

    def __init__(self, rows: list[Episode], lifts: EpisodesConfig) -> None:
        self.surfaces: dict[tuple, Counter] = defaultdict(Counter)
        self.weeks: dict[int, Counter] = defaultdict(Counter)
        self.reasons: dict[tuple[str, str], Counter] = defaultdict(Counter)
        self.overall, self.any_reason = Counter(), defaultdict(Counter)
        for row in rows:
            if row.phases[-1].type != "commitment":
                continue
            outcome, reason = row.commitment_outcome, row.phases[-1].gold["reason"]
            features = surface(row, lifts)
            for level, names in enumerate(SURFACE_LEVELS):
                self.surfaces[(level, *(features.get(n) for n in names))][outcome] += 1
            at = commitment_instant([c.model_dump() for c in row.phases[-1].canonical_calls])
            if at is not None:
                self.weeks[int(week_index(at))][outcome] += 1
            self.reasons[(row.family, outcome)][reason] += 1
            self.any_reason[outcome][reason] += 1
            self.overall[outcome] += 1

    def reason(self, family: str | None, outcome: str) -> str:
        counts = self.reasons.get((family or "", outcome)) or self.any_reason.get(outcome)
        return _majority(counts) if counts else "healthy_quality"

    def by_surface(self, features: dict[str, str], min_support: int) -> str | None:
        for level, names in enumerate(SURFACE_LEVELS):
            counts = self.surfaces.get((level, *(features.get(n) for n in names)))
            if counts and sum(counts.values()) >= min_support:
                return _majority(counts)
        return _majority(self.overall) if self.overall else None

    def by_week(self, at: int | None, reach_weeks: int) -> str | None:
        if at is not None:
            week = int(week_index(at))
            near = sorted((abs(w - week), w) for w in self.weeks if abs(w - week) <= reach_weeks)
            if near:
                return _majority(self.weeks[near[0][1]])
        return _majority(self.overall) if self.overall else None


# Guessers that commit the train split's majority outcome, whatever the row (what a user sees of the train release).
TRAIN_MAJORITY = ("quality_blind", "majority_commitment")
GUESSER_KINDS = ("surface_guess", "week_memory", *TRAIN_MAJORITY)


class Guesser:
    """One guesser (surface_guess, week_memory, or a train-majority kind), with a memory per split learned from the
    other splits' rows (the train split's rows for a train-majority kind)."""

    def __init__(self, kind: str, rows: list[Episode], lifts: EpisodesConfig, cfg: Guessers) -> None:
        self.kind, self.cfg = kind, cfg
        if kind in TRAIN_MAJORITY:
            train = Memory([r for r in rows if r.split == "train"], lifts)
            self.memory = {split: train for split in SPLITS}
        else:
            self.memory = {split: Memory([r for r in rows if r.split != split], lifts) for split in SPLITS}

    def guess(self, split: str, family: str | None, features: dict[str, str], at: int | None) -> tuple[str, str]:
        """(decision, reason) for a commitment of a row of `split`, from what is remembered of the other splits."""
        memory = self.memory[split]
        if self.kind == "week_memory":
            decision = memory.by_week(at, self.cfg.reach_weeks)
        elif self.kind in TRAIN_MAJORITY:
            decision = _majority(memory.overall) if memory.overall else None
        else:
            decision = memory.by_surface(features, self.cfg.min_support)
        decision = decision or "answer"
        return decision, memory.reason(family, decision)
