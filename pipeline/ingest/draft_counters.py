"""`corpus draft`'s reading of meters: a value column that never falls over a meter's rows spread through its file (a
water or energy register), for which the points table proposes `counter = CHECK yes` (read as a level, a register's
every window answers 'higher than the last', which a probe reads off the rows without the data); and an interval
meter reading exactly 0 now and then amid positive readings, whose zeros are dropouts (zero_dropout_classes)."""

from __future__ import annotations

from collections.abc import Iterable

MIN_STEPS = 20  # readings per meter before a column is judged
MAX_FALLS = 0.01  # a register may fall at a meter exchange or reset: at most this share of steps
MAX_DROPOUT_ZEROS = 0.1  # zeros past this share are the meter's own readings (idle plant, night), not dropouts


def rises_only(series: Iterable[list[tuple[int, float]]]) -> bool:
    """Whether every meter's (time, value) readings, in time order, rise or stay (but for MAX_FALLS of the steps),
    rise overall, and are never negative; False when no meter has MIN_STEPS readings."""
    steps = falls = 0
    for readings in series:
        ordered = [v for _, v in sorted(readings)]
        if len(ordered) < MIN_STEPS:
            continue
        if min(ordered) < 0 or ordered[-1] <= ordered[0]:
            return False
        pairs = list(zip(ordered, ordered[1:], strict=False))
        steps += len(pairs)
        falls += sum(b < a for a, b in pairs)
    return steps > 0 and falls <= MAX_FALLS * steps


def dropout_zeros(series: Iterable[list[tuple[int, float]]]) -> bool:
    """Whether readings that are never negative hold exactly 0 in some, but at most MAX_DROPOUT_ZEROS, of them."""
    values = [v for readings in series for _, v in readings]
    zeros = sum(v == 0 for v in values)
    return bool(values) and min(values) >= 0 and 0 < zeros <= MAX_DROPOUT_ZEROS * len(values)
