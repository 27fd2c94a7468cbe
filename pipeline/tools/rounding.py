"""Rounding of every number a tool returns, declared once."""

VALUE_DP = 4  # values, means, stds, coverage, ratios, fractions
OFFSET_DP = 3  # offsets and durations in seconds


def value(x: float | None) -> float | None:
    return None if x is None else round(float(x), VALUE_DP) + 0.0


def seconds(us: float | None) -> float | None:
    return None if us is None else round(float(us) / 1_000_000, OFFSET_DP) + 0.0
