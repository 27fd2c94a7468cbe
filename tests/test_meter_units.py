"""Meters' rates: every amount unit of configs/build.toml names a rate unit of configs/answers.toml of the dimension
amount per time, and an answer given as the rate in another unit of that dimension passes (docs/store.md, "Meters")."""

from __future__ import annotations

import json

import pint
import pytest

from pipeline.core.config import load_answers, load_build_config
from pipeline.core.workspace import Workspace
from pipeline.tasks import forms, grading
from tests.helpers import REPO

WS = Workspace.from_root(REPO)
ANSWERS = load_answers(WS)
AMOUNTS = load_build_config(WS).store.amount_units
UREG = pint.UnitRegistry(cache_folder=None)


@pytest.mark.parametrize("amount", sorted(AMOUNTS))
def test_each_amount_unit_has_a_rate_per_hour(amount):
    rate = AMOUNTS[amount]
    assert amount in ANSWERS.units and rate in ANSWERS.units, (amount, rate)
    per_hour = UREG.Quantity(1.0, ANSWERS.units[amount].pint) / UREG.hour
    assert per_hour.to(ANSWERS.units[rate].pint).magnitude == pytest.approx(1.0)  # same dimension, factor 1


@pytest.mark.parametrize(
    ("rate", "gold", "answer", "passes"),
    [
        ("L-PER-HR", 3.2632, "3.263 L/h", True),  # daiad: a household's mean use, litres per hourly reading
        ("L-PER-HR", 3.2632, "3.263 litres per hour", True),
        ("L-PER-HR", 3.2632, "0.9064 mL/s", True),  # converted by pint
        ("L-PER-HR", 3.2632, "3.263 L", False),  # an amount is not a rate
        ("KiloW", 0.039, "39 W", True),  # ucam: kWh per hour is kW
        ("KiloW", 0.039, "0.039 kWh/h", True),
        ("KiloW", 0.039, "0.039 kWh", False),
        ("MegaW", 0.0391, "39.1 kW", True),  # xai4heat: MWh per hour is MW
        ("MegaW", 0.0391, "0.0391 MWh", False),
    ],
)
def test_a_rate_answer_in_any_unit_of_its_dimension_passes(rate, gold, answer, passes):
    form = forms.form(["mean"], ANSWERS, {"mean": rate})
    assert form.fields[0].unit == rate
    assert grading.passes(form, {"mean": gold}, {"mean": answer}) is passes


LEVEL_FIELDS = ("mean", "left_mean", "right_mean", "top_mean", "baseload")  # statistics of a level: rates for meters


@pytest.mark.parametrize(
    "release", sorted((REPO / "artifacts").glob("*/release/release.json")), ids=lambda p: p.parts[-3]
)
def test_no_released_level_statistic_of_a_meter_has_the_unit_of_an_amount(release):
    """A mean (min) of a meter's amounts is a rate: its form never carries an amount's unit (issue 51)."""
    seen = 0
    for split in ("train", "dev", "test"):
        for line in (release.parent / f"{split}.jsonl").read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            for part in row["phases"] + row["follow_ups"]:
                for field in part["form"]["fields"]:
                    if field["name"] in LEVEL_FIELDS:
                        seen += 1
                        assert field["unit"] not in AMOUNTS, (row["id"], field["name"], field["unit"])
    assert seen or release.parts[-3] == "pvdaq"  # every other shipped corpus asks means
