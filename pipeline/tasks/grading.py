"""The one answer checker: grades an answer against a gold by the fields of its answer form.

Tolerant of form, strict on substance (docs/runtime.md, "Grading"):
- numbers pass within max(abs, rel * |gold|) in the field's unit; a string with the field's unit (its code or a
  declared symbol), or with another unit of the same dimension correctly converted (pint), passes too;
- timestamps are compared as instants (any offset); stream ids exactly; lists of ids as sets;
- codes ignoring case, spaces, hyphens and underscores.
Every rejected field says why: format_error, wrong_unit, wrong_value or wrong_choice. Grading never raises: an answer
is data from an agent, and a unit is read by a bounded grammar (pipeline/tasks/units.py) before pint sees it.
"""

from __future__ import annotations

import functools
import math
import re
from typing import Any

from contracts.answers import AnswerForm, FormField, Rejection
from pipeline.core.errors import TimestampError, shown
from pipeline.tasks.units import refusal
from pipeline.tools.timeutil import parse_us

ISO = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")
NUMBER = re.compile(r"^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(.*?)\s*$")
THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?:\D|$))")
SEPARATORS = re.compile(r"[\s_\-]+")
SLACK = 1e-9  # float noise on top of a tolerance


def instant(value: Any) -> int | None:
    """An ISO timestamp with Z or any offset -> microseconds UTC; a naive or malformed one -> None."""
    if not isinstance(value, str) or not ISO.match(value.strip()):
        return None
    try:
        return parse_us(value.strip())
    except TimestampError:
        return None


def code(value: str) -> str:
    """A code as compared: lower case, runs of spaces, hyphens and underscores as one underscore."""
    return SEPARATORS.sub("_", value.strip().lower()).strip("_")


def number_and_unit(value: Any) -> tuple[float, str] | None:
    """12.3 -> (12.3, ''); "1,234.5 kW" -> (1234.5, 'kW'); bools, NaN, infinities and text without a number -> None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:  # an int beyond any float (10**400)
            return None
        return (number, "") if math.isfinite(number) else None
    if not isinstance(value, str):
        return None
    found = NUMBER.match(THOUSANDS.sub("", value.replace("\u2212", "-")))
    if not found:
        return None
    number = float(found.group(1))
    return (number, found.group(2)) if math.isfinite(number) else None


@functools.cache
def _registry():
    import pint

    return pint.UnitRegistry(cache_folder=None)


def _in_field_unit(number: float, unit_text: str, field: FormField) -> tuple[float | None, str]:
    """The number in the field's unit, or None and why not (an unknown unit, another dimension, or a unit outside
    the grammar pint is given)."""
    if not unit_text or field.unit is None:
        return (number, "") if not unit_text else (None, f"a plain number is expected, not {shown(unit_text)}")
    spellings = {field.unit.lower(), *(s.lower() for s in field.unit_symbols)}
    if unit_text.lower() in spellings:
        return number, ""
    if field.pint_unit is None:
        return None, f"{shown(unit_text)} is not {field.unit_label}"
    refused = refusal(unit_text)
    if refused is not None:
        return None, refused
    import pint

    registry = _registry()
    try:
        value = float(registry.Quantity(number, unit_text).to(field.pint_unit).magnitude)
    except (pint.errors.PintError, ValueError, TypeError, AttributeError, KeyError, AssertionError, ArithmeticError):
        value = math.nan
    if not math.isfinite(value):  # never compare a NaN: every comparison with it is False, so it would pass
        return None, f"{shown(unit_text)} is not a unit of the same dimension as {field.unit_label}"
    return value, ""


def _number(field: FormField, gold: Any, answer: Any) -> tuple[str, str] | None:
    parsed = number_and_unit(answer)
    if parsed is None:
        return "format_error", f"{shown(answer)} is not a number"
    value, why = _in_field_unit(*parsed, field)
    if value is None:
        return "wrong_unit", why
    allowed = field.tolerance.allows(float(gold)) if field.tolerance else 0.0
    if abs(value - float(gold)) > allowed + SLACK:
        return "wrong_value", f"{value:g} is more than {allowed:g} from the value"
    return None


def _field(field: FormField, gold: Any, answer: Any) -> tuple[str, str] | None:
    """(reason, detail) when the field fails, else None."""
    if answer is None or (isinstance(answer, str) and not answer.strip()):
        return "format_error", "missing"
    if field.type == "number":
        return _number(field, gold, answer)
    if field.type == "timestamp":
        at = instant(answer)
        if at is None:
            return "format_error", f"{shown(answer)} is not an ISO 8601 timestamp with Z or an offset"
        return None if at == instant(gold) else ("wrong_value", "another instant")
    if field.type == "stream_ids":
        items = [s.strip() for s in answer.split(",")] if isinstance(answer, str) else answer
        if not isinstance(items, list) or not all(isinstance(s, str) for s in items):
            return "format_error", "a list of stream ids is expected"
        return None if {s.strip() for s in items} == set(gold) else ("wrong_value", "another set of stream ids")
    if not isinstance(answer, str):
        return "format_error", f"{shown(answer)} is not text"
    if field.type == "code":
        given = code(answer)
        if given not in field.codes:
            return "wrong_choice", f"{shown(answer)} is none of the codes {', '.join(field.codes)}"
        return None if given == code(str(gold)) else ("wrong_choice", "another code")
    return None if answer.strip() == gold else ("wrong_value", "another stream id")


def grade(form: AnswerForm, gold: dict, answer: dict | None, step: int = 0) -> list[Rejection]:
    """Every rejected field of one answer (empty: it passes). No fields at all (prose only) is a format_error."""
    if not isinstance(answer, dict):
        answer = {}
    rejected = []
    for field in form.fields:
        failed = _field(field, gold.get(field.name), answer.get(field.name))
        if failed is not None:
            reason, detail = failed
            if not answer and reason == "format_error":
                detail = "no fields given (prose alone is not graded)"
            rejected.append(Rejection(step=step, field=field.name, reason=reason, detail=detail))
    return rejected


def passes(form: AnswerForm, gold: dict, answer: dict | None) -> bool:
    return not grade(form, gold, answer)
