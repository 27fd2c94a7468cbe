"""Rolling medians over runs of rows equal polars' median per run."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core import runs
from pipeline.ingest.cleaning import _steps_at


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


@settings(max_examples=200, deadline=None)
@given(
    streams=st.dictionaries(
        st.integers(0, 6), st.sets(st.integers(0, 40), max_size=15).map(sorted), min_size=0, max_size=4
    ),
    asked=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 41)), max_size=30),
)
def test_counter_steps_are_found_as_a_join_finds_them(streams, asked):
    """Steps come as one run per counter stream, runs in rule order (not sorted by stream); readings sorted by
    (sid, ts). Each reading gets its stream's step at its time, null where there is none: what a left join gives."""
    steps = pl.DataFrame(
        {
            "sid": [sid for sid, times in streams.items() for _ in times],
            "ts": [t for times in streams.values() for t in times],
            "_step": [float(sid * 100 + t) for sid, times in streams.items() for t in times],
        },
        schema={"sid": pl.Int32, "ts": pl.Int64, "_step": pl.Float64},
    )
    readings = pl.DataFrame(sorted(asked), schema={"sid": pl.Int32, "ts": pl.Int64}, orient="row")
    expected = readings.join(steps, on=["sid", "ts"], how="left", maintain_order="left")["_step"]
    assert _steps_at(readings, steps).to_list() == expected.to_list()
