"""Rounding of every number a tool returns (the decimals are declared in contracts/tools.py)."""

from contracts.tools import OFFSET_DP, VALUE_DP


def value(x: float | None) -> float | None:
    return None if x is None else round(float(x), VALUE_DP) + 0.0


def seconds(us: float | None) -> float | None:
    return None if us is None else round(float(us) / 1_000_000, OFFSET_DP) + 0.0
