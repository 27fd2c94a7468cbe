"""The decision rules episode golds follow, each defined once: the lift writes golds by them, the preflight
re-derives golds by them and the shortcut policies answer by them."""

from __future__ import annotations

from collections import Counter

# What a nearest-reading phase asks for: the reading, its time, its offset and why it is not an exact match.
NEAREST_FIELDS = ("value", "observed_timestamp", "offset_seconds", "fallback_reason")

# A week's commitment follows its quality band (marginal weeks need the user to say what they accept).
BAND_OUTCOME = {
    "healthy": ("answer", "healthy_quality"),
    "low_coverage": ("abstain", "low_coverage"),
    "long_gap": ("abstain", "long_gap"),
    "marginal": ("re_clarify", "marginal_quality"),
}


def timestamp_commitment(
    offset_seconds: float, step_seconds: float | None, acceptable: float, abstain_ratio: float
) -> tuple[str, str]:
    """The declared rule for reporting a reading: exact, near enough, too imprecise, or inside a long gap."""
    if offset_seconds == 0:
        return "answer", "exact_timestamp"
    if abs(offset_seconds) <= acceptable:
        return "answer", "nearest_but_acceptable"
    if abs(offset_seconds) <= (step_seconds or 0) * abstain_ratio:
        return "re_clarify", "timestamp_too_imprecise"
    return "abstain", "long_gap"


def preferred_window(first: list[dict], second: list[dict]) -> str | None:
    """Which of two compared windows has data to trust more, from the inspect_quality_window results of the streams
    compared in each: the higher worst coverage, then the lower worst gap ratio (none counts as the worst). None when
    they tie: neither is to be preferred, and no preference is asked (a tie once went to the first, and "first" was
    then the gold of 14 of 15 test rows: an agent that never looked scored 0.98). A missing result (a failed call)
    counts as no coverage."""

    def score(sides: list[dict]) -> tuple[float, float]:
        return min(q.get("coverage", 0) for q in sides), -max(q.get("gap_ratio") or 1e9 for q in sides)

    if score(first) == score(second):
        return None
    return "first" if score(first) > score(second) else "second"


def quality_decision_answer(last_output: dict) -> dict:
    """A quality-decision phase asks for the band that its family's gold decides on: the last call's quality_band."""
    return {"quality_band": last_output.get("quality_band")}


def mix_slack(rows: int, tolerance: float) -> float:
    """How many rows an outcome may be off its declared share of `rows`: the tolerance's share of them, or one row
    where one row is more than that (a split of a few rows cannot follow a share closer than one row)."""
    return max(tolerance * rows, 1.0)


def mix_excess(counts: dict[str, int], shares: dict[str, float]) -> dict[str, float]:
    """Each outcome's rows over (positive) or under (negative) its declared share of all the rows counted."""
    rows = sum(counts.values())
    return {outcome: counts.get(outcome, 0) - share * rows for outcome, share in shares.items()}


def off_mix(counts: dict[str, int], shares: dict[str, float], tolerance: float) -> list[str]:
    """The outcomes further from their declared share than the tolerance allows (mix_slack), in declared order."""
    slack = mix_slack(sum(counts.values()), tolerance)
    return [o for o, excess in mix_excess(counts, shares).items() if abs(excess) > slack + 1e-9]


def key_gain(by_key: dict[str, dict[str, int]]) -> int:
    """How many more rows a guesser wins that commits the most common outcome of each row's key (what it can see, such
    as the commitment's kind) than one that always commits the most common outcome of all: 0 when every key's most
    common outcome is the overall one."""
    overall: Counter = Counter()
    for counts in by_key.values():
        overall.update(counts)
    if not overall:
        return 0
    return sum(max(counts.values(), default=0) for counts in by_key.values()) - max(overall.values())


def over_share(counts: dict[str, int], max_share: float, min_rows: int) -> str | None:
    """The value given by more than `max_share` of the verdicts counted, or None; within one row where fewer than
    `min_rows` are counted (one row there moves a share by more than the bound, as mix_slack allows a small split's
    mix; without it a few rows of one value, all healthy quality bands of one family, were free to tell the outcome).
    Always giving one value then earns at most `max_share` of a verdict in any split of `min_rows` rows of it."""
    rows = sum(counts.values())
    if not rows:
        return None
    top = max(sorted(counts), key=lambda c: counts[c])
    return top if counts[top] > max_share * rows + (0 if rows >= min_rows else 1) + 1e-9 else None
