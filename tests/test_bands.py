"""The quality band rule is one definition: the store's polars expression and the tools' Python agree on every row."""

from __future__ import annotations

import itertools

import polars as pl

from pipeline.store.bands import band
from pipeline.store.build import quality_band

LIMITS = {"coverage_abstain": 0.5, "coverage_answer": 0.95, "gap_ratio_answer": 3.0, "gap_ratio_abstain_window": 12.0}


def test_store_and_tools_decide_the_same_band_on_edges():
    coverages = [0.0, 0.4999, 0.5, 0.9, 0.95, 1.0]  # as shown (4 dp): the store rounds, the tools get rounded values
    ratios = [None, 1.0, 3.0, 3.0001, 12.0, 12.5]
    rows = list(itertools.product(coverages, ratios, [True, False]))
    frame = pl.DataFrame(
        rows, schema={"coverage": pl.Float64, "gap_ratio": pl.Float64, "clean": pl.Boolean}, orient="row"
    )
    stored = frame.select(quality_band(LIMITS, "gap_ratio_abstain_window", pl.col("clean"))).to_series().to_list()
    computed = [band(c, r, clean, LIMITS, "gap_ratio_abstain_window") for c, r, clean in rows]
    assert stored == computed
    assert set(computed) == {"low_coverage", "long_gap", "healthy", "marginal"}
