"""The quality band rule, defined once: the store decides every stream's and calendar window's band with it (polars
expressions over whole tables), the tools a custom window's (Python values), both on the values as shown (rounded)."""

from __future__ import annotations

from typing import Any

from contracts.tools import QUALITY_BANDS


def conditions(
    coverage: Any, gap_ratio: Any, gap_unknown: Any, clean: Any, limits: dict[str, float], gap_limit: str
) -> tuple:
    """The condition of each band of QUALITY_BANDS but the last (which holds otherwise), in that order. Written with
    comparison and bitwise operators only, it takes Python numbers and bools or polars expressions alike."""
    return (
        coverage < limits["coverage_abstain"],
        gap_unknown | (gap_ratio > limits[gap_limit]),
        (coverage >= limits["coverage_answer"]) & (gap_ratio <= limits["gap_ratio_answer"]) & clean,
    )


def band(coverage: float, gap_ratio: float | None, clean: bool, limits: dict[str, float], gap_limit: str) -> str:
    """The band of one stream or window from its shown values; `gap_limit` names the long-gap threshold that applies."""
    ratio = float("nan") if gap_ratio is None else gap_ratio  # compares false: only gap_unknown decides then
    held = conditions(coverage, ratio, gap_ratio is None, clean, limits, gap_limit)
    return next((name for name, holds in zip(QUALITY_BANDS, held, strict=False) if holds), QUALITY_BANDS[-1])
