"""What a corpus's span and sites allow: the families that fit, the split rule's buffer, and the split plan.

A family fits when the corpus's span holds `min_windows_in_span` of its windows (the one asked about and one on each
side to revise to). The buffer between time blocks is `buffer_days` less what the longest window that fits falls
short of the longest declared window, so a corpus without month families gets shorter buffers. The plan:
- time: needs 3 one-week blocks and 2 buffers of whole weeks within the corpus's calendar weeks; a shorter span of
  at least `short_min_days` gets a short time plan: blocks and buffers in days, each buffer `short_buffer_share` of
  the span (at least a day), reach_days shrunk by the same factor as the buffer (a row's reach must still fit inside
  its block, and the lift keeps its revisions and commitment there);
- site: needs `min_sites` sites;
- group: needs `min_sites` zones, rooms or stream groups (one building's: pipeline/tasks/splits.py says which);
- auto: time when the span allows whole-week buffers, else site when there are enough sites, else group when there
  are enough groups, else a short time plan when the span has the days, else one line naming the span, the sites, the
  groups, the minimum of each plan and the change that fits.
One home for these rules: the tasks stage applies them, `corpus draft` states them before any build.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import ValidationError

from contracts.tasks import PERIOD_DAYS, FamiliesConfig, SplitKind, SplitOverrides, SplitRule
from pipeline.core.errors import ConfigError, StageError, validation_problems
from pipeline.store.compute import DAY, MONDAY

WEEK = 7 * DAY
LONGEST = max(PERIOD_DAYS.values())


def whole_weeks(first: int, last: int) -> int:
    """Calendar weeks (Monday to Sunday, UTC) wholly inside [first, last] (epoch us)."""
    start = first + (-(first - MONDAY)) % WEEK  # the first Monday at or after the first reading
    return max(0, (last + 1 - start) // WEEK)


@dataclass(frozen=True)
class Span:
    """A corpus's extent: its first and last reading (epoch us) and its number of sites; `stream_whole_weeks`, when
    known, is the most whole calendar weeks inside any one stream's own span (streams of sites whose data do not
    overlap in time can have none although the corpus's span has several); `groups` is how many zones, rooms or
    stream groups a group plan would split (pipeline/tasks/splits.py: groups)."""

    first: int
    last: int
    sites: int
    stream_whole_weeks: int | None = None
    groups: int = 0

    @property
    def days(self) -> float:
        return (self.last - self.first) / DAY

    @property
    def whole_weeks(self) -> int:
        """Calendar weeks (Monday to Sunday, UTC) wholly inside the span."""
        return whole_weeks(self.first, self.last)

    @property
    def weeks(self) -> int:
        """Calendar weeks (Monday to Sunday, UTC) from the first reading's to the last's, both included."""
        return int((self.last - MONDAY) // WEEK - (self.first - MONDAY) // WEEK + 1)

    def describe(self, groups: bool = False) -> str:
        """The span in words; with `groups`, the zones, rooms or stream groups too (when known)."""
        sites = f"{self.sites} site" + ("" if self.sites == 1 else "s")
        grouped = f" with {_groups(self.groups)}" if groups and self.groups else ""
        return f"{_days(self.days)} ({self.weeks} calendar weeks) at {sites}{grouped}"


def corpus_rule(families: FamiliesConfig, overrides: SplitOverrides | None, corpus: str) -> SplitRule:
    """configs/families.toml's split rule with the corpus mapping's [splits] in place of its defaults; one line naming
    the mapping, the field, the rule it breaks and the fix when the two together break a rule (a traceback else)."""
    try:
        return families.splits.with_overrides(overrides)
    except ValidationError as exc:
        mapping = f"configs/corpora/{corpus}.toml"
        merged = {**families.splits.model_dump(), **(overrides.model_dump(exclude_none=True) if overrides else {})}
        buffer, reach = merged["buffer_days"], merged["reach_days"]
        need = LONGEST + 2 * reach
        if buffer < need:
            field = "buffer_days" if overrides and overrides.buffer_days is not None else "reach_days"
            raise ConfigError(
                f"{mapping}: [splits] {field}: buffer_days = {buffer} with reach_days = {reach} breaks the buffer rule "
                f"(buffer_days at least the longest window, {LONGEST} days, + 2 x reach_days = {need}); set "
                f"buffer_days = {need} or more, or reach_days = {max(0, (buffer - LONGEST) // 2)} or less, in [splits] "
                "there (or remove the key to take configs/families.toml's)"
            ) from exc
        raise ConfigError(
            f"{mapping}: [splits]: {validation_problems(exc)}; fix the key in [splits] there (or remove it to take "
            "configs/families.toml's)"
        ) from exc


@dataclass(frozen=True)
class Fit:
    """The families a span keeps, those it leaves out with the reason, the rule in force and the plan chosen."""

    kept: list[str]
    left_out: dict[str, str]
    rule: SplitRule
    plan: str  # "time", "site" or "group"
    step_days: int = 7  # a time plan's unit: whole weeks, or days in a short time plan (its rule scaled to the span)

    def notes(self) -> list[str]:
        return [f"family {name} left out: {why}" for name, why in self.left_out.items()]


def _groups(n: int) -> str:
    return f"{n} zone, room or stream group" if n == 1 else f"{n} zones, rooms or stream groups"


def _days(days: float) -> str:
    return f"{days:.1f} days" if days < 10 else f"{round(days)} days"


def fitting(
    families: FamiliesConfig, rule: SplitRule, span: Span, weekly_commitments: frozenset[str]
) -> tuple[list[str], dict[str, str]]:
    """The families whose windows fit the span, and why each other one does not. A family whose commitment asks about
    a calendar week (`weekly_commitments`) also needs `min_windows_in_span` - 1 whole weeks: on partial weeks alone
    every commitment would be an abstention, and the family would predict the outcome. The whole weeks are those of
    one stream's span where the span knows them: a week no stream holds whole is partial for every stream."""
    kept, left_out = [], {}
    weeks_needed = rule.min_windows_in_span - 1
    weeks_had, where = span.whole_weeks, "the corpus has"
    if span.stream_whole_weeks is not None and span.stream_whole_weeks < weeks_had:
        weeks_had, where = span.stream_whole_weeks, "its longest stream has"
    for name, family in sorted(families.families.items()):
        needed = rule.min_windows_in_span * PERIOD_DAYS[family.period]
        if span.days + 1e-9 < needed:
            left_out[name] = (
                f"its {family.period} window ({PERIOD_DAYS[family.period]} days) needs a span of {needed} days "
                f"({rule.min_windows_in_span} windows), the corpus spans {_days(span.days)}"
            )
        elif name in weekly_commitments and weeks_had < weeks_needed:
            left_out[name] = (
                f"its commitment asks about a calendar week and needs {weeks_needed} whole weeks (Monday to Sunday) "
                f"in the span, {where} {weeks_had}"
            )
        else:
            kept.append(name)
    return kept, left_out


def buffer_days(families: FamiliesConfig, rule: SplitRule, kept: list[str]) -> int:
    """The buffer between time blocks for the families kept: shorter by what their longest window lacks of 31 days."""
    longest = max((PERIOD_DAYS[families.families[n].period] for n in kept), default=0)
    return max(1, rule.buffer_days - (LONGEST - longest))


def time_weeks(buffer: int) -> int:
    """Calendar weeks a time plan needs at least: three one-week blocks and two buffers of whole weeks."""
    return 3 + 2 * math.ceil(buffer / 7)


def fit(
    families: FamiliesConfig,
    kind: SplitKind,
    overrides: SplitOverrides | None,
    span: Span,
    corpus: str,
    weekly_commitments: frozenset[str] = frozenset(),
) -> Fit:
    """The families that fit, the rule with its buffer, and the plan; one line when no plan or family fits."""
    rule = corpus_rule(families, overrides, corpus)
    kept, left_out = fitting(families, rule, span, weekly_commitments)
    if not kept:
        raise StageError(
            f"corpus {corpus}: its data spans {span.describe()}: no task family fits (the shortest window needs "
            f"{rule.min_windows_in_span} of its windows in the span); add data"
        )
    buffer = buffer_days(families, rule, kept)
    rule = rule.model_copy(update={"buffer_days": buffer})
    allowed = {p: _fits(p, rule, span, time_weeks(buffer)) for p in PLANS}
    plan = next((p for p in PLANS if allowed[p]), None) if kind == "auto" else kind if allowed[kind] else None
    if plan is None and kind in ("auto", "time") and span.days + 1e-9 >= rule.short_min_days:
        return Fit(kept=kept, left_out=left_out, rule=short_rule(rule, span), plan="time", step_days=1)
    if plan is None:
        raise StageError(f"corpus {corpus}: {why_no_plan(kind, rule, span, corpus)}")
    return Fit(kept=kept, left_out=left_out, rule=rule, plan=plan)


PLANS = ("time", "site", "group")  # the order `auto` tries them in (then a short time plan)


def short_rule(rule: SplitRule, span: Span) -> SplitRule:
    """The rule of a short time plan: buffers of `short_buffer_share` of the span's days (at least one), reach_days
    shrunk by the buffer's factor. Not validated again: the buffer rule (at least the longest window + 2 x reach_days)
    is the whole-week plan's; here every row's reach still lies inside its block, so rows of two splits are a buffer
    apart at least."""
    buffer = max(1, math.floor(span.days * rule.short_buffer_share))
    reach = math.floor(rule.reach_days * min(1.0, buffer / rule.buffer_days))
    return rule.model_copy(update={"buffer_days": buffer, "reach_days": reach})


def why_no_plan(kind: SplitKind, rule: SplitRule, span: Span, corpus: str) -> str:
    """The one line saying why no split plan fits a span: what it has, each plan's minimum, and the change that
    would make one fit (the data, sites or groups missing, or the mapping's split when another plan fits)."""
    weeks = time_weeks(rule.buffer_days)
    needs = {
        "time": f"a time split needs {rule.short_min_days} days (3 blocks and 2 buffers scaled to the span; "
        f"{weeks} calendar weeks for buffers of {rule.buffer_days} days)",
        "site": f"a site split needs {rule.min_sites} sites",
        "group": f"a group split needs {rule.min_sites} zones, rooms or stream groups (equipment or location in "
        "the points table, or streams)",
    }
    tried = PLANS if kind == "auto" else (kind,)
    fits = [p for p in PLANS if p not in tried and _fits(p, rule, span, weeks)]
    if "time" not in tried and "time" not in fits and span.days + 1e-9 >= rule.short_min_days:
        fits.append("time")  # a short time plan
    days = math.ceil(rule.short_min_days - span.days - 1e-9)
    more = {
        "time": f"{days} more day{'s' * (days != 1)} of data",
        "site": f"{rule.min_sites - span.sites} more sites",
        "group": f"{rule.min_sites - span.groups} more zones, rooms or streams (equipment per room in the points "
        "table names the rooms)",
    }
    change = (
        f"set split = {fits[0]!r}" if fits else "add " + " or ".join(more[p] for p in tried)
    ) + f" in configs/corpora/{corpus}.toml" * bool(fits)
    return (
        f"its data spans {span.describe(groups=True)}: no split plan fits (split = {kind!r}; "
        f"{', '.join(needs[p] for p in tried)}); {change}"
        + ("" if fits else f", or set split and [splits] in configs/corpora/{corpus}.toml")
    )


def _fits(plan: str, rule: SplitRule, span: Span, weeks: int) -> bool:
    return {"time": span.weeks >= weeks, "site": span.sites >= rule.min_sites, "group": span.groups >= rule.min_sites}[
        plan
    ]


def summary(
    families: FamiliesConfig,
    kind: SplitKind,
    overrides: SplitOverrides | None,
    span: Span,
    weekly_commitments: frozenset[str] = frozenset(),
    corpus: str = "(draft)",
) -> list[str]:
    """What a build would do with a span, in lines for `corpus draft`: the span, the plan, the families that fit and
    those left out (one line per reason), or the one reason no plan fits and the families the span would keep."""
    lines = [f"span: {span.describe()}"]
    try:
        found = fit(families, kind, overrides, span, corpus, weekly_commitments)
    except StageError as exc:
        lines.append("split plan: none; " + str(exc).split(": ", 1)[1])
        kept, _ = fitting(families, corpus_rule(families, overrides, corpus), span, weekly_commitments)
        return lines + ([f"families the span would keep under a plan: {', '.join(kept)}"] if kept else [])
    short = " in days, scaled to the short span" if found.step_days == 1 else ""
    how = {
        "time": f"time blocks with {found.rule.buffer_days}-day buffers{short}",
        "site": f"whole sites per split, {span.sites} sites",
        "group": f"whole zones, rooms or stream groups per split, {span.groups} groups at {span.sites} site"
        + "s" * (span.sites != 1),
    }[found.plan]
    lines.append(f"split plan: {found.plan} ({how})")
    lines.append(f"families that fit: {', '.join(found.kept)}")
    by_reason: dict[str, list[str]] = {}
    for name, why in found.left_out.items():
        by_reason.setdefault(why, []).append(name)
    lines += [f"  left out: {', '.join(names)}: {why}" for why, names in by_reason.items()]
    return lines
