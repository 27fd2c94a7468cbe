"""Tolerant reading of answer fields: numbers as numbers or text, timestamps as instants, lists as sets."""

from __future__ import annotations

import math
import re
from typing import Any

from contracts.episodes import Checks
from pipeline.tools.timeutil import TimestampError, parse_us

ISO = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")
VOCABULARY = re.compile(r"^[a-z][a-z_]*$")
NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def number(value: Any) -> float | None:
    """12.3, "12.3", " 12.30 ", "1.2e1" -> 12.3; anything else (bools included) -> None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        text = value.strip().replace(",", "") if value.count(",") and value.count(".") else value.strip()
        return float(text) if NUMBER.match(text) else None
    return None


def instant(value: Any) -> int | None:
    """An ISO timestamp with Z or any offset -> microseconds UTC; a naive or malformed one -> None."""
    if not isinstance(value, str) or not ISO.match(value.strip()):
        return None
    try:
        return parse_us(value.strip())
    except TimestampError:
        return None


def _text(value: Any) -> str:
    return str(value).strip()


def same(gold: Any, answer: Any, tolerance: float | None) -> bool:
    """One field: within tolerance for numbers, same instant for timestamps, same set for lists, else equal text."""
    if answer is None:
        return False
    if tolerance is not None:
        got = number(answer)
        return got is not None and abs(got - float(gold)) <= tolerance + 1e-9
    if isinstance(gold, list):
        return isinstance(answer, list) and sorted(map(_text, gold)) == sorted(map(_text, answer))
    if isinstance(gold, str) and instant(gold) is not None:
        return instant(answer) == instant(gold)
    if isinstance(gold, int | float) and not isinstance(gold, bool):
        got = number(answer)
        return got is not None and got == float(gold)
    # Vocabulary words (answer, long_gap, first, ...) match in any case; ids and other text match exactly.
    return _text(answer) == _text(gold) or (bool(VOCABULARY.match(_text(gold))) and _text(answer).lower() == _text(gold))


def failed_fields(checks: Checks, gold: dict, answer: dict | None) -> list[str]:
    """Required fields that are missing or wrong (empty list: the answer passes)."""
    answer = answer or {}
    return [f for f in checks.answer_fields if not same(gold.get(f), answer.get(f), checks.tolerances.get(f))]
