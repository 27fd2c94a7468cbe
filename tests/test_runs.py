"""Rolling medians over runs of rows equal polars' median per run."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core import runs


@settings(max_examples=200, deadline=None)
@given(
    groups=st.lists(st.lists(st.none() | st.integers(-5, 5), min_size=1, max_size=70), min_size=0, max_size=5),
    half=st.integers(0, 12),
)
def test_rolling_median_equals_a_median_per_run(groups, half):
    frame = pl.DataFrame(
        {"run": [i for i, g in enumerate(groups) for _ in g], "v": [v for g in groups for v in g]},
        schema={"run": pl.Int32, "v": pl.Int64},
    )
    expected = frame.select(
        pl.col("v").cast(pl.Float64).rolling_median(2 * half + 1, center=True, min_samples=1).over("run")
    ).to_series()
    got = runs.rolling_median(frame["v"], runs.run_starts(frame["run"]), half)
    assert got.to_list() == expected.to_list()


def test_gaps_are_null_on_each_runs_first_row():
    keys = pl.Series([1, 1, 1, 2, 2, 3])
    ts = pl.Series([10, 13, 20, 5, 9, 1]).to_numpy()
    assert runs.gaps(ts, runs.run_starts(keys), "g").to_list() == [None, 3, 7, None, 4, None]
