"""The one answer checker: tolerant of form, strict on substance, and every rejection says why."""

from __future__ import annotations

import subprocess
import sys

import pytest

from contracts.answers import AnswerForm, Tolerance
from pipeline.core.config import load_answers
from pipeline.core.workspace import Workspace
from pipeline.tasks.forms import form
from pipeline.tasks.grading import grade, number_and_unit, passes
from tests.helpers import REPO

ANSWERS = load_answers(Workspace.from_root(REPO))


def one(name: str, unit: str | None = None, **kw) -> AnswerForm:
    return form([name], ANSWERS, {name: unit} if unit else None, **kw)


def verdict(f: AnswerForm, gold, answer) -> str | None:
    rejected = grade(f, {f.names[0]: gold}, {f.names[0]: answer})
    return rejected[0].reason if rejected else None


MEAN = one("mean", "DEG_C")


@pytest.mark.parametrize(
    ("gold", "answer", "expected"),
    [
        (22220.8754, 22220.88, None),  # 4e-3 off: within 0.1% of a large value
        (22220.8754, 22220.0, None),  # 4 significant digits
        (22220.8754, 22220.8754 * 1.01, "wrong_value"),
        (20.66667, 20.67, None),
        (20.66667, 20.6667, None),
        (20.66667, 20.87, "wrong_value"),
        (0.05, 0.0509, None),  # |gold| <= 1: the absolute 0.001 holds
        (0.05, 0.052, "wrong_value"),
        (0.0, 0.0009, None),
        (0.0, 0.002, "wrong_value"),
        (-3.5, "-3.5", None),
        (-3.5, "\u22123.5", None),
        (12.3, " 12.30 ", None),
        (1234.5, "1,234.5", None),
        (12.3, "n/a", "format_error"),
        (1.0, True, "format_error"),
        (12.3, None, "format_error"),
        (12.3, "", "format_error"),
        (12.3, float("nan"), "format_error"),
        (12.3, [12.3], "format_error"),
    ],
)
def test_numbers(gold, answer, expected):
    assert verdict(MEAN, gold, answer) == expected


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("20.6667 degC", None),
        ("20.6667 °C", None),
        ("20.6667°C", None),
        ("20.6667 DEG_C", None),
        ("20.6667 deg C", None),
        ("69.2 degF", None),  # 20.6667 degC converted
        ("293.8167 K", None),
        ("20.6667 degF", "wrong_value"),  # the right number in the wrong unit is a wrong conversion
        ("20.6667 kW", "wrong_unit"),  # another dimension
        ("20.6667 furlongs of joy", "wrong_unit"),
    ],
)
def test_numbers_with_units(answer, expected):
    assert verdict(MEAN, 20.66667, answer) == expected


HOSTILE_UNITS = [
    "degC/0",  # pint divided by zero (ZeroDivisionError)
    "degF*" * 3000,  # past Python's recursion limit
    "(" * 3000 + "degC" + ")" * 3000,
    "((((degC))))",  # deeper than MAX_DEPTH
    "(km**4)**4",  # power 16 overall
    "degC**2**2",
    "m²²",  # a superscript tower
    "kW/1000",  # a number that is not a power
]


@pytest.mark.parametrize("unit", HOSTILE_UNITS)
def test_a_unit_outside_the_grammar_is_a_wrong_unit_never_an_exception(unit):
    rejected = grade(MEAN, {"mean": 20.0}, {"mean": f"20 {unit}"})
    assert [r.reason for r in rejected] == ["wrong_unit"]
    assert len(rejected[0].detail) < 120  # names the unit and why, without quoting thousands of characters


def test_a_power_tower_is_refused_before_pint_computes_it():
    # 9**9**9 took pint minutes, and grading runs outside --turn-timeout: the grammar refuses it first
    script = (
        "from tests.test_grading import MEAN; from pipeline.tasks.grading import grade; "
        "print(grade(MEAN, {'mean': 20.0}, {'mean': '20 degC**9**9**9'})[0].reason)"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "wrong_unit", done.stderr


@pytest.mark.parametrize(
    ("answer"), ["7.2 m³/h", "7.2 m**3/h", "7.2 m^3 / h", "7.2 (m**3)/(h)", "7.2 1/h*m³", "2 dm**3/s", "2 dm³·s⁻¹"]
)
def test_units_in_the_grammar_still_convert(answer):
    assert verdict(one("mean", "L-PER-SEC"), 2.0, answer) is None


def test_an_integer_beyond_any_float_is_a_format_error():
    assert verdict(MEAN, 20.0, 10**400) == "format_error"


def test_power_and_energy_convert_within_their_dimension():
    assert verdict(one("mean", "KiloW"), 22.2209, "22220.9 W") is None
    assert verdict(one("mean", "KiloW"), 22.2209, "22.2209 kWh") == "wrong_unit"
    assert verdict(one("value", "MegaW-HR"), 1.5, "1500 kWh") is None
    assert verdict(one("mean", "L-PER-SEC"), 2.0, "7.2 m^3/h") is None


def test_a_stream_without_a_declared_unit_takes_plain_numbers_and_its_code():
    odd = one("mean", "FURLONG-PER-FORTNIGHT")
    assert odd.fields[0].unit_symbols == [] and odd.fields[0].pint_unit is None
    assert verdict(odd, 3.0, 3.0) is None and verdict(odd, 3.0, "3 FURLONG-PER-FORTNIGHT") is None
    assert verdict(odd, 3.0, "3 m/s") == "wrong_unit"


def test_a_family_tolerance_overrides_the_catalogue_and_the_default():
    strict = one("mean", "DEG_C", tolerances={"mean": Tolerance(abs=0.0, rel=0.0)})
    assert verdict(strict, 20.5, 20.5) is None and verdict(strict, 20.5, 20.5001) == "wrong_value"
    offset = one("offset_seconds")
    assert offset.fields[0].tolerance == Tolerance(abs=1.0, rel=0.001) and offset.fields[0].unit == "SEC"
    assert verdict(offset, -1440.0, "-1440.9") is None and verdict(offset, -1440.0, -1441.5) == "wrong_value"


@pytest.mark.parametrize(
    ("gold", "answer", "expected"),
    [
        ("2022-02-03T07:03:23.640000Z", "2022-02-03T07:03:23.64Z", None),
        ("2022-02-03T07:03:23Z", "2022-02-03T08:03:23+01:00", None),
        ("2022-02-03T07:03:23Z", "2022-02-03 12:33:23+05:30", None),
        ("2022-02-03T07:03:23Z", "2022-02-03T07:03:24Z", "wrong_value"),
        ("2022-02-03T07:03:23Z", "2022-02-03T07:03:23", "format_error"),  # naive: which offset?
        ("2022-02-03T07:03:23Z", "Feb 3rd", "format_error"),
    ],
)
def test_timestamps_are_instants(gold, answer, expected):
    assert verdict(one("observed_timestamp"), gold, answer) == expected


@pytest.mark.parametrize(
    ("gold", "answer", "expected"),
    [
        ("low_coverage", "low coverage", None),
        ("low_coverage", "LOW-COVERAGE", None),
        ("low_coverage", " Low_Coverage ", None),
        ("low_coverage", "long_gap", "wrong_choice"),
        ("low_coverage", "bad data", "wrong_choice"),
        ("low_coverage", 3, "format_error"),
    ],
)
def test_codes_are_normalized(gold, answer, expected):
    assert verdict(one("reason"), gold, answer) == expected


def test_ids_exactly_and_lists_as_sets():
    assert verdict(one("stream_id"), "L8__t_amb", "L8__t_amb") is None
    assert verdict(one("stream_id"), "L8__t_amb", "l8__t_amb") == "wrong_value"
    ids = one("stream_ids")
    assert verdict(ids, ["a", "b"], ["b", "a"]) is None and verdict(ids, ["a", "b"], "b, a") is None
    assert verdict(ids, ["a", "b"], ["a"]) == "wrong_value" and verdict(ids, ["a", "b"], [1, 2]) == "format_error"


def test_prose_without_fields_is_a_format_error_that_says_so():
    f = form(["decision", "reason"], ANSWERS)
    rejected = grade(f, {"decision": "answer", "reason": "healthy_quality"}, {}, step=3)
    assert [(r.step, r.field, r.reason) for r in rejected] == [
        (3, "decision", "format_error"),
        (3, "reason", "format_error"),
    ]
    assert "prose alone" in rejected[0].detail
    assert passes(
        f,
        {"decision": "answer", "reason": "healthy_quality"},
        {"decision": "ANSWER", "reason": "healthy quality", "note": "x"},
    )


def test_number_parsing():
    assert (
        number_and_unit(" 1.5e1 ") == (15.0, "")
        and number_and_unit("abc") is None
        and number_and_unit(float("inf")) is None
    )
    assert number_and_unit("21 °C") == (21.0, "°C")


def test_every_code_field_lists_every_code_with_its_meaning():
    for name, spec in ANSWERS.fields.items():
        if spec.type == "code":
            f = one(name).fields[0]
            assert f.codes and all(meaning.strip() for meaning in f.codes.values())
            assert "{" not in "".join(
                form([name], ANSWERS, params={"acceptable_offset_seconds": "120"}).fields[0].codes.values()
            )
    assert set(one("decision").fields[0].codes) == {"answer", "abstain", "re_clarify"}
    assert len(one("reason").fields[0].codes) == 7


def test_form_schema_and_sentence():
    f = form(["value", "observed_timestamp", "offset_seconds", "fallback_reason"], ANSWERS, {"value": "DEG_C"})
    schema = f.json_schema()
    assert schema["required"] == f.names
    assert schema["properties"]["fallback_reason"]["enum"] == ["nearest_observation", "no_exact_match"]
    assert "°C" in schema["properties"]["value"]["description"]
    assert f.sentence() == (
        "Reply with `value` in °C, `observed_timestamp` (an ISO 8601 timestamp with Z or an offset), "
        "`offset_seconds` in s and `fallback_reason` (one of nearest_observation, no_exact_match)."
    )
    assert one("mean", "DEG_C").sentence() == "Reply with `mean` in °C."
