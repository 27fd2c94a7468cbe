"""The product's daylight (pipeline/store/expected.py: NOAA's equations, each day's sunrise and sunset solved at that
day's solar-noon declination) against a second source of the sun (NREL's SPA via pvlib, each crossing bisected at the
instant, tests/second_route/daylight.py).

docs/ingest.md says the product's crossings are right "to about a minute". Measured over a year (2019): pvdaq's two
sites (32-33 N, threshold 3 degrees) -22 to +23 s; thresholds of 0 to 3 degrees elsewhere: the equator 9 s, 45 N
32 s, 52 N 37 s, 64 N 65 s. NOAA's own
instantaneous elevation at SPA's crossings is within 0.012 degrees (3.4 s) of the threshold at pvdaq's sites, so the
difference is the product's one declination per day (it moves up to 0.4 degrees a day near an equinox), not the
equations. A reading whose slot edge is that close to a crossing is counted by one and not the other: 32 of pvdaq's
readings, changing 14 of its 66 stream-weeks' coverage by at most 0.0019, no band and no gold."""

from __future__ import annotations

import numpy as np
import pytest

from contracts.corpus_metadata import NightSilence
from pipeline.store import expected
from tests.helpers import REPO
from tests.second_route import daylight, raw

DAY = daylight.DAY_US
YEAR_2019 = 1_546_300_800 * 1_000_000


def _offsets(rule: dict, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Seconds by which the product's sunrise and sunset of each day in [lo, hi) differ from SPA's crossings."""
    spa = daylight.Hours.night_rule(rule, lo, hi)
    product = expected.Expected.over(NightSilence(**rule), lo - DAY, hi + DAY)
    whole = (spa.starts > lo) & (spa.ends < hi)
    starts, ends = spa.starts[whole], spa.ends[whole]
    k = np.searchsorted(product.starts, starts - 3 * 3_600_000_000)  # the product's interval of the same day
    assert np.all(np.abs(product.starts[k] - starts) < 3_600_000_000), "a day without the product's daylight"
    return (product.starts[k] - starts) / 1e6, (product.ends[k] - ends) / 1e6


@pytest.mark.parametrize("index", [0, 1])
def test_pvdaqs_declared_daylight_is_within_25_seconds_of_spa(index):
    spec, _ = raw.collect(REPO, "pvdaq")
    rule = spec["silence"][index]
    rise, sets = _offsets(rule, YEAR_2019, YEAR_2019 + 365 * DAY)
    assert len(rise) >= 360
    assert np.max(np.abs(rise)) <= 25 and np.max(np.abs(sets)) <= 25, (rise.min(), rise.max(), sets.min(), sets.max())


@pytest.mark.parametrize(("latitude", "bound_s"), [(0.0, 15), (52.0, 45), (64.0, 75)])
def test_the_products_daylight_is_right_to_about_a_minute(latitude, bound_s):
    """The docs' claim, where declination per day costs most: the further from the equator, the more a day's sunrise
    moves with the declination; at 64 N the product is just over a minute off on some days."""
    rule = {"kind": "night", "streams": "x", "latitude": latitude, "longitude": 10.0, "sun_above_deg": 3.0}
    rule["reason"] = "a test site"
    rise, sets = _offsets(rule, YEAR_2019, YEAR_2019 + 365 * DAY)
    worst = max(np.max(np.abs(rise)), np.max(np.abs(sets)))
    assert worst <= bound_s, worst
