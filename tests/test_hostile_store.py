"""A release whose store tables hold the right columns with absurd contents, its digests recomputed so that every file
matches release.json (issue 44): every case ends in one `error:` line when the store is loaded into the cache (and from
`verify --release`), naming the file, table and column (pipeline.store.invariants), or in a correct, JSON-safe tool
result; never a traceback."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from click.testing import CliRunner, Result

from pipeline.cli import main
from pipeline.release.playable import Release
from pipeline.tools import registry
from tests.helpers import (
    REPO,
    SHIPPED,
    SMALLEST,
    every_tool_call,
    one_error_line,
    rewrite_table,
    set_cell,
    store_table,
    tool_results,
)

FIX = "download the release again"
RELEASE_CORPUS = SMALLEST  # each case loads the store, most twice (verify, then a tool): the smallest release


def first_site(release: Path) -> str:
    return store_table(release, "sites").column("site_id")[0].as_py()


def cli(*args: object) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def call(release: Path, cache: Path, name: str, arguments: dict) -> Result:
    return cli("tool", name, "--release", release, "--cache-dir", cache, "--args", json.dumps(arguments))


def first_stream(release: Path) -> str:
    return store_table(release, "streams").column("stream_id")[0].as_py()


@pytest.mark.parametrize(
    ("table", "column", "value", "says"),
    [
        ("observations", "value", math.nan, "NaN, an infinity or a value outside"),
        ("aggregates", "mean", math.inf, "NaN, an infinity or a value outside"),
        ("aggregates", "max", -math.inf, "NaN, an infinity or a value outside"),
        ("observations", "value", 1e308, "NaN, an infinity or a value outside [-1e+15, 1e+15]"),
        ("quality", "coverage", 1.5, "outside [0, 1]"),
        ("thresholds", "value", math.nan, "NaN"),
        ("quality", "n", None, "are null"),
        ("aggregates", "count", None, "are null"),
        ("streams", "tool_ready", None, "are null"),
        ("quality", "quality_band", "excellent", "not one of low_coverage, long_gap, healthy, marginal"),
        ("aggregates", "period", "year", "not one of day, week, month"),
        ("sites", "label", "x" * (1 << 20), "a text over 1,024 bytes"),
        ("observations", "ts", 2**62, "a time outside 1900-01-01..2200-01-01"),
        ("aggregates", "window_start", -(2**62), "a time outside 1900-01-01..2200-01-01"),
        ("quality", "step_us", 0, "a duration not > 0"),
        ("aggregates", "count", -3, "a count outside"),
        ("profiles", "hour", 24, "outside 0..23"),
        ("settings", "value", 5, "std_ddof outside 0..1"),
        ("streams", "site_id", "nowhere", "name no sites row"),
        ("aggregates", "stream_id", "nowhere", "name no streams row"),
        ("quality", "n", 7, "disagree with the stream's observations"),
        ("quality", "first_ts", 1_500_000_000_000_000, "disagree with the stream's observations"),
        ("thresholds", "name", "renamed", "the tools need are missing"),
    ],
)
def test_an_absurd_value_is_one_line_at_load(release, tmp_path, table, column, value, says):
    set_cell(release, table, column, value)
    verified = cli("verify", "--release", release)  # the digests agree: only the values tell
    if table == "thresholds":  # release.json states the thresholds: verify compares them first
        one_error_line(verified, "thresholds")
    else:
        one_error_line(verified, f"store/{table}.parquet: table {table}, column ", says)
    cache = tmp_path / "cache"
    line = one_error_line(
        call(release, cache, "inspect_quality", {"stream_id": first_stream(release)}),
        f"store/{table}.parquet: table {table}, column ",
        says,
        FIX,
    )
    assert column in line.split(" row(s) ")[0] and "first: " in line
    assert not list(cache.rglob("*.duckdb")), "a store that breaks an invariant was left in the cache"


def test_a_duplicated_row_is_one_line(release, tmp_path):
    data = store_table(release, "observations")
    rewrite_table(release, "observations", pa.concat_tables([data, data.slice(10, 1)]))
    one_error_line(
        call(release, tmp_path / "cache", "list_points", {"site": first_site(release)}),
        "store/observations.parquet: table observations, column stream_id, ts",
        "hold a key another row holds too",
    )


def test_a_stream_without_observations_is_one_line(release, tmp_path):
    stream = first_stream(release)
    data = store_table(release, "observations")
    keep = pc.not_equal(data.column("stream_id"), stream)
    rewrite_table(release, "observations", data.filter(keep))
    one_error_line(
        call(
            release, tmp_path / "cache", "lookup_observation", {"stream_id": stream, "timestamp": "2023-01-01T00:00Z"}
        ),
        "store/quality.parquet: table quality",
        "disagree with the stream's observations",
        repr(stream),
    )


def test_a_lone_surrogate_in_a_text_column_is_one_line(release, tmp_path):
    data = store_table(release, "streams")
    labels = [text.encode("utf-8", "surrogatepass") for text in data.column("label").to_pylist()]
    labels[0] = "\ud800 label".encode("utf-8", "surrogatepass")  # not UTF-8: no writer of text writes it
    raw = pa.array(labels, type=pa.binary())
    column = pa.Array.from_buffers(pa.string(), len(raw), raw.buffers())
    rewrite_table(release, "streams", data.set_column(data.schema.get_field_index("label"), "label", column))
    one_error_line(
        call(release, tmp_path / "cache", "list_points", {"site": first_site(release)}),
        "store/streams.parquet: not a readable Parquet table",
        "not valid UTF8",
    )


@pytest.mark.parametrize(
    "change",
    [
        lambda t: t.set_column(t.schema.get_field_index("value"), "value", pc.cast(t.column("value"), pa.string())),
        lambda t: t.set_column(t.schema.get_field_index("ts"), "ts", pc.cast(t.column("ts"), pa.timestamp("us"))),
        lambda t: t.set_column(t.schema.get_field_index("value"), "value", pc.cast(t.column("value"), pa.float32())),
        lambda t: t.append_column("extra", pa.array([1] * len(t))),
        lambda t: t.drop_columns(["step_us"]),
    ],
    ids=["value as text", "ts as timestamp", "value as float32", "an extra column", "a column missing"],
)
def test_wrong_parquet_types_or_columns_are_one_line(release, tmp_path, change):
    rewrite_table(release, "observations", change(store_table(release, "observations")))
    one_error_line(
        call(release, tmp_path / "cache", "list_points", {"site": first_site(release)}),
        "store/observations.parquet: not the store's observations table",
    )


def test_unsorted_rows_play_as_the_sorted_ones(release, tmp_path):
    """The load sorts every table by its key: rows in another order are the same store."""
    run = ["run", "--split", "test", "--agent", "oracle", "--limit", "4"]
    assert cli(*run, "--release", release, "--cache-dir", tmp_path / "a", "--out", tmp_path / "a.jsonl").exit_code == 0
    for table in ("observations", "aggregates", "streams", "quality"):
        data = store_table(release, table)
        rewrite_table(release, table, data.take(list(range(len(data) - 1, -1, -1))))
    result = cli(*run, "--release", release, "--cache-dir", tmp_path / "b", "--out", tmp_path / "b.jsonl")
    assert result.exit_code == 0, result.output
    assert tool_results(tmp_path / "b.jsonl") == tool_results(tmp_path / "a.jsonl")


def test_extreme_values_within_bounds_give_json_results(release, tmp_path):
    """Values at the bounds the invariants allow (±1e15) are answered: every tool's result is JSON (no NaN, no
    infinity), whatever the call."""
    for table, column in (("observations", "value"), ("aggregates", "mean"), ("aggregates", "max")):
        data = store_table(release, table)
        values = pa.array([1e15 if i % 2 else -1e15 for i in range(len(data))])
        rewrite_table(release, table, data.set_column(data.schema.get_field_index(column), column, values))
    store = Release(release, tmp_path / "cache").store()
    try:
        calls = [each for stream in list(store.streams)[:3] for each in every_tool_call(store, stream)]
        for name, arguments in calls:
            result = registry.call(store, name, arguments)
            json.dumps(result, allow_nan=False)  # raises on NaN or an infinity
            assert not result.get("error") or result["code"] == "empty_window", (name, result)
    finally:
        store.close()


@pytest.mark.parametrize("corpus", SHIPPED)
def test_every_shipped_store_keeps_the_invariants(corpus, tmp_path):
    """What the store stage writes passes the checks a release's store is loaded under."""
    path = Release(REPO / "artifacts" / corpus / "release", tmp_path / "cache").store_path()
    assert path.is_file()
