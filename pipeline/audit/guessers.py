"""Guessers: cheap strategies that commit without looking quality up (design/VALIDITY.md section 4).

A guesser remembers the commitment outcomes of the rows of the other splits (leave one split out: never the row's
own) and commits by the majority outcome of what it remembers alike: rows with the same surface (surface_guess),
about the same calendar week (week_memory), or probed at the same local hour and weekday (clock: fit on train, as a
user of the release would; train rows are judged by dev and test). week_complement commits the outcome with the
fewest remembered rows of the row's calendar week: the exploit of a cap on rows per week and outcome, which makes a
week's rows negatively dependent. They are gated statistically, not row by row: excluding every row a guesser wins
by chance would anti-correlate the release with it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from zoneinfo import ZoneInfo

from contracts.episodes import Episode, EpisodesConfig, Guessers
from contracts.tasks import SPLITS
from pipeline.audit.probe import surface
from pipeline.episodes.lift import commitment_instant, commitment_kind, week_index

# From the finest surface to none: a surface seen fewer than min_support times backs off to the next.
SURFACE_LEVELS = (
    ("family", "commit_template", "format", "precision", "hour"),
    ("family", "commit_template", "format", "precision"),
    ("family", "commit_template"),
    ("family",),
    (),
)


# From the probe's local hour and weekday to the hour alone to the commitment's kind (a week's commitment has no hour).
CLOCK_LEVELS = (3, 2, 1)


def _majority(counts: Counter) -> str:
    """The most frequent key; ties go to the first in sorted order (deterministic)."""
    return max(sorted(counts), key=lambda k: counts[k])


@lru_cache(maxsize=64)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def clock(at: int | None, zone: str, instant: bool) -> tuple:
    """What the clock guesser reads of a commitment: the local hour and weekday of the instant it asks about, in the
    zone of the stream's site; a week's commitment asks about a whole week and has no hour, only its kind."""
    if at is None or not instant:
        return ("week",)
    moment = datetime.fromtimestamp(at / 1e6, UTC).astimezone(_zone(zone))
    return ("instant", moment.hour, moment.weekday())


def commitment_clock(row: Episode, zone_of: Callable[[str], str]) -> tuple:
    """The clock of a row's commitment (its probe in its stream's local time)."""
    commit = row.phases[-1]
    calls = [c.model_dump() for c in commit.canonical_calls]
    stream = commit.evidence_stream_ids[0] if commit.evidence_stream_ids else ""
    return clock(commitment_instant(calls), zone_of(stream), commitment_kind(calls) == "instant")


class Memory:
    """What a guesser remembers of some rows: outcomes by surface, by week and by clock, and reasons by family and
    outcome. `zone_of` names the IANA zone of a stream's site (UTC where none is known)."""

    def __init__(
        self, rows: list[Episode], lifts: EpisodesConfig, zone_of: Callable[[str], str] = lambda _: "UTC"
    ) -> None:
        self.surfaces: dict[tuple, Counter] = defaultdict(Counter)
        self.weeks: dict[int, Counter] = defaultdict(Counter)
        self.clocks: dict[tuple, Counter] = defaultdict(Counter)
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
            key = commitment_clock(row, zone_of)
            for level in dict.fromkeys(key[:size] for size in CLOCK_LEVELS):  # a week's key is one level
                self.clocks[level][outcome] += 1
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

    def by_clock(self, key: tuple, min_support: int) -> str | None:
        """The majority outcome of the remembered rows with the same clock, backing off to the hour alone and then to
        the commitment's kind below `min_support` rows; else the majority."""
        for size in CLOCK_LEVELS:
            counts = self.clocks.get(key[:size])
            if counts and sum(counts.values()) >= min_support:
                return _majority(counts)
        return _majority(self.overall) if self.overall else None

    def by_complement(self, at: int | None) -> str | None:
        """The outcome with the fewest remembered rows of the same calendar week; ties go to the outcome more common
        among all the remembered rows (then by name), so that a week not remembered at all gets the majority."""
        if not self.overall:
            return None
        week = self.weeks.get(int(week_index(at)), Counter()) if at is not None else Counter()
        order = sorted(self.overall, key=lambda o: (-self.overall[o], o))
        return min(order, key=lambda o: (week[o], order.index(o)))

    def by_week(self, at: int | None, reach_weeks: int) -> str | None:
        if at is not None:
            week = int(week_index(at))
            near = sorted((abs(w - week), w) for w in self.weeks if abs(w - week) <= reach_weeks)
            if near:
                return _majority(self.weeks[near[0][1]])
        return _majority(self.overall) if self.overall else None


# Guessers that commit the train split's majority outcome, whatever the row (what a user sees of the train release).
TRAIN_MAJORITY = ("quality_blind", "majority_commitment")
GUESSER_KINDS = ("surface_guess", "week_memory", "clock", "week_complement", *TRAIN_MAJORITY)


class Guesser:
    """One guesser (surface_guess, week_memory, clock, week_complement, or a train-majority kind), with a memory per
    split learned from the other splits' rows (the train split's rows for a train-majority kind; for the clock, the
    train split's for dev and test, and dev's and test's for train). `zone_of` names the zone of a stream's site."""

    def __init__(
        self,
        kind: str,
        rows: list[Episode],
        lifts: EpisodesConfig,
        cfg: Guessers,
        zone_of: Callable[[str], str] = lambda _: "UTC",
    ) -> None:
        self.kind, self.cfg, self.zone_of = kind, cfg, zone_of
        if kind in TRAIN_MAJORITY:
            train = Memory([r for r in rows if r.split == "train"], lifts, zone_of)
            self.memory = {split: train for split in SPLITS}
        elif kind == "clock":  # fit on train; train itself is judged by what dev and test say (never its own rows)
            train = Memory([r for r in rows if r.split == "train"], lifts, zone_of)
            rest = Memory([r for r in rows if r.split != "train"], lifts, zone_of)
            self.memory = {split: rest if split == "train" else train for split in SPLITS}
        else:
            self.memory = {split: Memory([r for r in rows if r.split != split], lifts, zone_of) for split in SPLITS}

    def guess(
        self, split: str, family: str | None, features: dict[str, str], at: int | None, when: tuple = ("week",)
    ) -> tuple[str, str]:
        """(decision, reason) for a commitment of a row of `split`, from what is remembered of the other splits;
        `when` is the commitment's clock (`clock`)."""
        memory = self.memory[split]
        if self.kind == "week_memory":
            decision = memory.by_week(at, self.cfg.reach_weeks)
        elif self.kind == "week_complement":
            decision = memory.by_complement(at)
        elif self.kind == "clock":
            decision = memory.by_clock(when, self.cfg.min_support)
        elif self.kind in TRAIN_MAJORITY:
            decision = _majority(memory.overall) if memory.overall else None
        else:
            decision = memory.by_surface(features, self.cfg.min_support)
        decision = decision or "answer"
        return decision, memory.reason(family, decision)
