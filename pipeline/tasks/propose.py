"""The split plan `corpus draft` proposes: the one the build will take, checked against the data the draft read.

The build's `auto` takes the first plan whose minimum the corpus meets (pipeline/tasks/fit.py). A time plan can meet
its minimum and still leave a block without data (two series that do not overlap in time: the default shares put
the whole test block in a gap). The draft cuts the blocks as the build does (pipeline/tasks/splits.py: time_blocks)
from the weeks it read data in (the days, in a short time plan), and proposes the shares nearest the defaults under
which every block holds a week (a day) of data a row's reach fits around; when no shares do, the next plan that fits
(site, then group), written as `split` in the mapping. The draft writes what it proposes, so that filling its TODOs
builds on the first try.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from contracts.tasks import PERIOD_DAYS, SPLITS, FamiliesConfig, SplitOverrides, SplitRule
from pipeline.core.errors import StageError
from pipeline.store.compute import DAY
from pipeline.tasks.fit import PLANS, WEEK, Span, fit, summary, whole_weeks
from pipeline.tasks.splits import blocks_without_data, time_blocks

SLACK = WEEK  # the draft reads some rows of each file, the build every reading: one more week inside each edge
SHORT_SLACK = DAY  # in a short time plan (blocks of days): one more day
STEP = 0.01  # shares are tried in hundredths


@dataclass(frozen=True)
class Proposal:
    """The lines `corpus draft` prints, and the split settings it writes into the mapping (none: the defaults)."""

    lines: list[str]
    split: str | None = None  # a plan the mapping names (`split = ...`), when `auto` would take another
    shares: dict[str, float] | None = None  # [splits] shares, when the defaults leave a block without data
    why: list[str] = field(default_factory=list)  # one comment line per setting, saying why


def propose(
    families: FamiliesConfig,
    span: Span,
    counted: dict[int, int],
    weekly_commitments: frozenset[str],
    corpus: str,
    stream_spans: list[tuple[int, int]] | None = None,
) -> Proposal:
    """The plan a build will take on this span and these stream-weeks (Monday -> streams with data; a short time plan
    counts the days the `stream_spans` cover), with the settings that make it hold data in every split."""
    try:
        found = fit(families, "auto", None, span, corpus, weekly_commitments)
    except StageError:
        return Proposal(summary(families, "auto", None, span, weekly_commitments, corpus))
    short = found.step_days == 1
    counted = per_day(stream_spans or []) if short else counted
    if found.plan != "time" or not counted:
        return Proposal(summary(families, "auto", None, span, weekly_commitments, corpus))
    step = DAY if short else WEEK
    margin = _margin(families, found.rule, found.kept) + (SHORT_SLACK if short else SLACK)
    shares = _shares(found.rule, counted, margin, corpus, step)
    if shares == found.rule.shares:
        return Proposal(summary(families, "auto", None, span, weekly_commitments, corpus))
    if shares is not None:
        overrides = SplitOverrides(shares=shares)
        lines = summary(families, "auto", overrides, span, weekly_commitments, corpus)
        unit = "day" if short else "week"
        why = (
            f"the default shares leave a time block without a {unit} of data inside it; these are the nearest that "
            f"give every block one (from the {unit}s the draft read data in)"
        )
        return Proposal([*lines, f"  shares: {_words(shares)} ({why})"], shares=shares, why=[why])
    for other in PLANS[1:]:
        try:
            fit(families, other, None, span, corpus, weekly_commitments)
        except StageError:
            continue
        lines = summary(families, other, None, span, weekly_commitments, corpus)
        why = f"no shares give every time block a week of data (the series leave gaps); {other} plan instead"
        return Proposal([*lines, f"  {why}"], split=other, why=[why])
    why = "no shares give every time block a week of data, and no other plan fits"
    lines = summary(families, "auto", None, span, weekly_commitments, corpus)
    return Proposal([lines[0], f"split plan: none; {why}; add data, sites or streams", *lines[2:]])


def _margin(families: FamiliesConfig, rule: SplitRule, kept: list[str]) -> int:
    """How far inside a block's edges data must lie for the shortest reach of a kept family with times."""
    timed = [PERIOD_DAYS[families.families[n].period] for n in kept if families.families[n].time_columns]
    return (min(timed, default=0) + rule.reach_days) * DAY


def _shares(rule: SplitRule, counted: dict[int, int], margin: int, corpus: str, step: int) -> dict[str, float] | None:
    """The rule's shares when every block holds data, else the nearest (in hundredths) that do, else None."""
    for shares in _candidates(rule.shares):
        try:
            blocks = time_blocks(rule.model_copy(update={"shares": shares}), counted, corpus, step)
        except StageError:  # a block without a week (a day)
            continue
        if not blocks_without_data(blocks, counted, margin, step):
            return shares
    return None


def per_day(stream_spans: list[tuple[int, int]]) -> dict[int, int]:
    """Per day (00:00 UTC, epoch us) the streams whose span (first to last reading the draft read) covers it whole:
    the short time plan's stream-days, as the store would count them where the data has no gap."""
    found: dict[int, int] = {}
    for first, last in stream_spans:
        for day in range(first - first % DAY, last + 1, DAY):
            if first <= day and day + DAY <= last + 1:
                found[day] = found.get(day, 0) + 1
    return dict(sorted(found.items()))


def _candidates(default: dict[str, float]) -> list[dict[str, float]]:
    """The default shares, then shares in hundredths (each split at least 0.1) by their distance from the default."""
    found = []
    hundredths = round(1 / STEP)
    for train in range(10, hundredths - 19):
        for dev in range(10, hundredths - train - 9):
            shares = {"train": train / 100, "dev": dev / 100, "test": (hundredths - train - dev) / 100}
            distance = sum(abs(shares[s] - default[s]) for s in SPLITS)
            found.append((round(distance, 6), -train, -dev, shares))
    return [dict(default)] + [s for *_, s in sorted(found, key=lambda f: f[:3])]


def _words(shares: dict[str, float]) -> str:
    return ", ".join(f"{s} {shares[s]:g}" for s in SPLITS)


def draft_plan(families: FamiliesConfig, read, weekly_commitments: frozenset[str], corpus: str):
    """`corpus draft`'s plan: the lines it prints and the settings it writes (pipeline/ingest/draft_plan.py's
    SpanRead in, its Settings out)."""
    weeks = max((whole_weeks(a, b) for a, b in read.stream_spans), default=0)
    span = Span(read.first, read.last, read.sites, weeks, read.streams)
    found = propose(families, span, read.weeks, weekly_commitments, corpus, read.stream_spans)
    settings = {}
    if found.split is not None:
        settings["split"] = (found.split, found.why[0])
    if found.shares is not None:
        settings["shares"] = (found.shares, found.why[0])
    return found.lines, settings
