"""Unit strings from an agent through the grader (issue 44): random text and hostile expressions (powers on powers,
deep parentheses, division by zero, long products) after a number are graded pass or rejected with a reason, never
raise, and pint only ever sees what the bounded grammar accepts. Few examples in make test, many in make fuzz."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts.answers import REJECT_REASONS
from pipeline.core.config import load_answers
from pipeline.core.workspace import Workspace
from pipeline.tasks.forms import form
from pipeline.tasks.grading import _registry, grade
from pipeline.tasks.units import MAX_DEPTH, MAX_LENGTH, MAX_POWER, refusal
from tests.helpers import REPO, fuzz_settings

ANSWERS = load_answers(Workspace.from_root(REPO))
FORMS = [form(["mean"], ANSWERS, {"mean": unit}) for unit in ("DEG_C", "KiloW", "L-PER-SEC", "PERCENT", "SEC")]

NAMES = st.sampled_from(["degC", "degF", "K", "kW", "W", "m", "h", "s", "L", "°C", "µs", "%", "kelvin", "x", "e", "pi"])
NUMBERS = st.sampled_from(["0", "1", "2", "3", "9", "-1", "0.5", "1e400", "99999999999", "(-2)", "²", "⁻¹", "⁹⁹"])


def expressions() -> st.SearchStrategy[str]:
    """Unit expressions as a hostile agent writes them: products and quotients, parentheses nested at will, powers
    on powers, numbers where units go, operators without operands; then, at the top only (so that sizes stay bounded),
    one repeated up to 3,000 times or wrapped in up to 3,000 parentheses."""
    power = st.tuples(st.sampled_from(["**", "^", ""]), NUMBERS).map("".join)
    small = st.recursive(
        NAMES | NUMBERS,
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from(["*", "/", " ", "·", "**", "^", ""]), inner).map("".join),
            inner.map(lambda e: f"({e})"),
            st.tuples(inner, power).map("".join),
        ),
        max_leaves=12,
    )
    return st.one_of(
        small,
        st.tuples(small, st.sampled_from(["*", "/", "**", " ", ""]), st.integers(1, 3000)).map(
            lambda t: (t[0] + t[1]) * t[2]
        ),
        st.tuples(st.integers(1, 3000), small).map(lambda t: "(" * t[0] + t[1] + ")" * t[0]),
    )


def depth(text: str) -> int:
    deepest = level = 0
    for char in text:
        level += (char == "(") - (char == ")")
        deepest = max(deepest, level)
    return deepest


def graded(unit: str) -> None:
    """The unit after a number through every form: rejections with known reasons, nothing raised."""
    for answer_form in FORMS:
        for rejection in grade(answer_form, {"mean": 20.0}, {"mean": f"20 {unit}"}):
            assert rejection.reason in REJECT_REASONS
            assert len(rejection.detail) < 200


def within_the_grammar(unit: str) -> None:
    """What the grammar lets through to pint is short, shallow and raised to a small power: each name's power, every
    enclosing exponent applied, is at most MAX_POWER, so no unit in what pint makes of it has a power beyond MAX_POWER
    times the names written (`(degC**0)**9` is degC to the power 0, within the bound, though 9 is written)."""
    if refusal(unit) is None:
        assert len(unit) <= MAX_LENGTH and depth(unit) <= MAX_DEPTH
        try:
            powers = dict(_registry().parse_units_as_container(unit))  # unit name -> its power, as written
        except Exception:  # noqa: BLE001 - pint refused it (an unknown name, a number where a unit goes): nothing built
            return
        names = max(1, len(re.findall(r"[^\W\d_]+|[°µ%]", unit)))
        assert all(abs(power) <= MAX_POWER * names for power in powers.values()), (unit, powers)


@pytest.mark.fuzz
def test_random_text_as_a_unit_is_graded_never_raised():
    @fuzz_settings(200, 5000)
    @given(st.text(max_size=60))
    def check(unit):
        graded(unit)
        within_the_grammar(unit)

    check()


@pytest.mark.fuzz
def test_hostile_unit_expressions_are_graded_never_raised():
    @fuzz_settings(200, 5000)
    @given(expressions())
    def check(unit):
        graded(unit)
        within_the_grammar(unit)

    check()
