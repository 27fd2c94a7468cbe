"""The tasks stage's scaled paths give what the straightforward ones gave: range reads of large streams (tools),
whole-column identities and placement (selection), and the timestamp families' per-stream-week SQL."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pipeline.core.canonical import canonical_json, digest
from pipeline.store.reader import open_store
from pipeline.tasks import candidates
from pipeline.tools import registry
from pipeline.tools.access import ToolStore
from pipeline.tools.timeutil import format_us

MINUTE = 60_000_000
T0 = 1_700_000_000_000_000 - 1_700_000_000_000_000 % (7 * 86_400_000_000)  # a Thursday 00:00 UTC, weeks before


def _store(path: Path, streams: dict[str, list[tuple[int, float, int | None]]]) -> Path:
    """A minimal tool store: the tables ToolStore and the timestamp families read, observations in the store's order
    (by stream, then time; rows at one time in the order given)."""
    ids = sorted(streams)
    con = duckdb.connect(str(path))
    con.execute("CREATE TYPE stream_key AS ENUM (SELECT unnest(?::VARCHAR[]))", [ids])
    con.execute("CREATE TABLE observations (stream_id stream_key, ts BIGINT, value DOUBLE, step_us BIGINT)")
    rows = [(s, ts, v, step) for s in ids for ts, v, step in sorted(streams[s], key=lambda r: r[0])]
    if rows:
        con.executemany("INSERT INTO observations VALUES (?, ?, ?, ?)", rows)
    con.execute(  # a stream without observations is not tool-ready (the store's rule)
        "CREATE TABLE streams AS SELECT id AS stream_id, 'site' AS site_id, 'temp' AS point_class, "
        "NULL::VARCHAR AS equipment, 'sensor' AS equipment_type, NULL::VARCHAR AS location, "
        "id IN (SELECT stream_id::VARCHAR FROM observations) AS tool_ready, 1 AS ambiguity_count "
        "FROM (SELECT unnest(?::VARCHAR[]) AS id)",
        [ids],
    )
    con.execute("CREATE TABLE sites AS SELECT 'site' AS site_id, 'Site' AS label")
    con.execute(
        "CREATE TABLE quality AS SELECT stream_id::VARCHAR AS stream_id, count(*) AS n, min(ts) AS first_ts, "
        "max(ts) AS last_ts, median(step_us)::BIGINT AS step_us, 0.0 AS duplicate_fraction FROM observations GROUP BY 1"
    )
    con.execute("CREATE TABLE thresholds (name VARCHAR, value DOUBLE)")
    con.execute("CREATE TABLE settings AS SELECT 'std_ddof' AS name, 0 AS value")
    con.close()
    return path


# Observation times: mostly a regular step, with repeats (rows at one time), gaps of hours and cadence changes.
STEPS = st.sampled_from([MINUTE, MINUTE, MINUTE, 0, 7 * MINUTE, 180 * MINUTE, 3 * 86_400_000_000])
STREAM = st.lists(st.tuples(STEPS, st.floats(-50, 50, allow_nan=False), st.sampled_from([MINUTE, None])), max_size=60)


def _rows(draws: list[tuple[int, float, int | None]], start: int) -> list[tuple[int, float, int | None]]:
    out, ts = [], start
    for step, value, local in draws:
        ts += step
        out.append((ts, value, local))
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    a=STREAM,
    b=STREAM,
    probes=st.lists(st.integers(-600, 6 * 86_400 // 60), min_size=1, max_size=6),
    lengths=st.lists(st.sampled_from([1, 7, 60, 1440, 4 * 1440]), min_size=1, max_size=3),
)
def test_range_reads_give_what_whole_streams_give(tmp_path_factory, a, b, probes, lengths):
    """A store too small to keep a stream whole reads it by time range (window, windows, around); every custom-window
    and lookup result equals the one computed from the whole stream, rows at one time and gaps included."""
    path = _store(tmp_path_factory.mktemp("store") / "store.duckdb", {"s1": _rows(a, T0), "s2": _rows(b, T0 + 90_000)})
    whole, ranged = ToolStore(path), ToolStore(path, cache_bytes=0)
    try:
        for probe in probes:
            at = T0 + probe * MINUTE
            for mode in ("exact", "nearest"):
                for sid in ("s1", "s2"):
                    args = {"stream_id": sid, "timestamp": format_us(at), "mode": mode}
                    assert registry.call(ranged, "lookup_observation", args) == registry.call(
                        whole, "lookup_observation", args
                    )
            for minutes in lengths:
                window = {"window_start": format_us(at), "window_end": format_us(at + minutes * MINUTE)}
                for sid in ("s1", "s2"):
                    args = {"stream_id": sid, **window, "period": "custom", "metric": "mean"}
                    assert registry.call(ranged, "aggregate_window", args) == registry.call(
                        whole, "aggregate_window", args
                    )
                rank = {"stream_ids": ["s2", "s1"], **window, "period": "custom", "metric": "mean", "order": "desc"}
                assert registry.call(ranged, "rank_window", rank) == registry.call(whole, "rank_window", rank)
        assert not any(len(arrays.ts) for arrays in ranged._cache.values())  # it never loaded a stream whole
    finally:
        whole.close()
        ranged.close()


class _Pool:
    """What identities() reads of a pool: its eligible rows' key columns (and each column's Python values)."""

    def __init__(self, frame: pl.DataFrame, values: dict[str, list]) -> None:
        self._frame, self._values, self.eligible = frame, values, frame.height

    def frame(self, columns: list[str]) -> pl.DataFrame:
        return self._frame.select(columns)

    def values(self, column: str) -> list:
        return self._values[column]


TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8)


@settings(max_examples=100, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            TEXT,
            st.integers(-(2**62), 2**62) | st.none(),
            st.booleans(),
            st.floats(allow_nan=False, allow_infinity=False),
        ),
        max_size=30,
    )
)
def test_identities_are_the_canonical_json_of_the_key(rows):
    """Whole-column identities equal canonical_json of each row's key values: strings JSON must escape (quotes,
    backslashes, control characters), non-ASCII text, nulls, booleans, and floats (through the Python values)."""
    key = ["name", "number", "flag", "x"]
    frame = pl.DataFrame(
        rows, schema={"name": pl.String, "number": pl.Int64, "flag": pl.Boolean, "x": pl.Float64}, orient="row"
    )
    pool = _Pool(frame, {c: [r[i] for r in rows] for i, c in enumerate(key)})
    assert candidates.identities(pool, key) == [canonical_json(list(r)) for r in rows]


def test_the_selection_order_is_the_declared_key_then_the_identity():
    idents = [canonical_json(["s", i % 7]) for i in range(50)] + [canonical_json(["s", 3])]  # a repeated identity
    pool = _Pool(pl.DataFrame({"a": list(range(51))}), {})
    pool.rows = lambda numbers: [{"n": n} for n in numbers]  # the tie is broken by the rows' values
    order = candidates.ordered("seed", "family", pool, idents)
    rank = lambda i: (candidates.selection_key("seed", "family", idents[i]), idents[i], repr([("n", i)]))  # noqa: E731
    expected = sorted(range(51), key=rank)
    assert order.get_column("number").to_list() == expected
    assert order.get_column("key").to_list() == [
        candidates.selection_key("seed", "family", idents[i]) for i in expected
    ]


def _reference_pool(con: duckdb.DuckDBPyConnection, name: str) -> str:
    """The timestamp families as first written (a timestamp conversion and an md5 per row, lead over each stream,
    decimal step comparisons), with the rule for two readings as near written out: the earlier one."""
    week = "epoch_us(date_trunc('week', make_timestamp(ts)))"
    near = "2 * abs(ts - target) + (ts > target)::BIGINT"
    if name == "timestamp_value_lookup":
        return f"""
        WITH weeks AS (SELECT stream_id, ts, {week} AS week FROM observations),
        aimed AS (
            SELECT stream_id, week, arg_min(ts, {near}) AS timestamp FROM (
                SELECT *, week + (('0x' || substr(md5(stream_id || '|probe|' || week::VARCHAR), 1, 8))::BIGINT % 10080)
                       * 60000000 AS target FROM weeks) GROUP BY ALL)
        SELECT m.stream_id, m.timestamp, m.week FROM aimed m"""
    return f"""
    WITH pairs AS (
        SELECT stream_id, ts, step_us, lead(ts) OVER (PARTITION BY stream_id ORDER BY ts, rowid) AS next_ts,
               {week} AS week FROM observations),
    aimed AS (
        SELECT *, CASE WHEN next_ts - ts <= 1.5 * step_us THEN 'regular' ELSE 'gap' END AS kind,
               week + (('0x' || substr(md5(stream_id || '|nearest|' || week::VARCHAR), 1, 8))::BIGINT % 10080)
               * 60000000 AS target
        FROM pairs WHERE next_ts IS NOT NULL AND next_ts - ts BETWEEN 0.5 * step_us AND 6 * step_us)
    SELECT stream_id, week, kind, arg_min(ts, {near}) AS left_ts, arg_min(next_ts, {near}) AS right_ts
    FROM aimed GROUP BY stream_id, week, kind"""


@pytest.mark.parametrize("name", ["timestamp_value_lookup", "timestamp_nearest_lookup"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=STREAM, b=STREAM, offset=st.integers(0, 14 * 86_400))
def test_timestamp_families_pick_what_the_row_by_row_query_picks(tmp_path_factory, name, a, b, offset):
    """The shipped formulation (an instant per stream-week, its nearest row found by pipeline/tasks/nearest.py;
    whole-number step comparisons) picks the same readings and pairs as the row-by-row query, across weeks, repeats
    and gaps."""
    from pipeline.core.config import load_families
    from pipeline.core.workspace import Workspace

    family = load_families(Workspace.from_root(Path(__file__).parents[1])).families[name]
    start = T0 - 86_400_000_000 * 6 + offset * 1_000_000
    streams = {"s1": _rows(a, start), "s2": _rows(b, start + 7 * MINUTE)}
    streams = {
        s: [(ts, v, step if step is not None else MINUTE) for ts, v, step in rows] for s, rows in streams.items()
    }
    streams = {s: rows for s, rows in streams.items() if rows} or {"s1": [(start, 1.0, MINUTE)]}
    path = _store(tmp_path_factory.mktemp("store") / "store.duckdb", streams)
    con = duckdb.connect(str(path), read_only=True)
    try:
        values = {"grid_us": "[180000000, 900000000, 3600000000]::BIGINT[]", "held_out": "[]::VARCHAR[]"}
        candidates.prepare(con, name, family, values)  # the macros and the family's `nearest` table
        shipped = con.execute(candidates.fill(family.candidates, values)).fetchall()
        columns = (
            ["stream_id", "timestamp", "week"]
            if name == "timestamp_value_lookup"
            else ["stream_id", "week", "kind", "left_ts", "right_ts"]
        )
        names = [d[0] for d in con.execute(candidates.fill(family.candidates, values)).description]
        picked = sorted(tuple(row[names.index(c)] for c in columns) for row in shipped)
        reference = sorted(con.execute(_reference_pool(con, name)).fetchall())
        assert picked == reference
    finally:
        con.close()


def test_monday_us_is_the_stores_week_start():
    from pipeline.store.compute import window_bounds

    con = duckdb.connect()
    con.execute("CREATE TABLE observations (stream_id VARCHAR, ts BIGINT, value DOUBLE, step_us BIGINT)")  # macros bind
    for macro in candidates.MACROS:
        con.execute(macro)
    ts = np.array([-(10**15), -1, 0, 1, 345_600_000_000, T0, T0 + 123_456_789, 4_102_444_800_000_000 - 1], np.int64)
    got = [con.execute("SELECT monday_us(?)", [int(t)]).fetchone()[0] for t in ts]
    assert got == window_bounds(ts, "week")[0].tolist()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=STREAM, b=STREAM, c=STREAM)
# A stream running past 30 days (found by a random seed: the test's span ended there, not its rows).
@example(a=[], b=[], c=[(MINUTE, 0.0, MINUTE)] * 5 + [(3 * 86_400_000_000, 0.0, MINUTE)] * 11)
def test_reads_in_the_stores_order_are_what_sorting_gives(tmp_path_factory, a, b, c):
    """observation_pairs() (one pass in the table's order) gives each row its stream's next reading as a lead over
    the stream in (ts, rowid) order does, and the tools' reads (no ORDER BY) give the rows that order gives: rows at
    one time, gaps, a stream's last row, streams of one row."""
    streams = {"s1": _rows(a, T0), "s2": _rows(b, T0 + 90_000), "s3": _rows(c, T0 - 5 * MINUTE)}
    path = _store(tmp_path_factory.mktemp("store") / "store.duckdb", streams)
    con = open_store(path)  # the readers' one configuration, shared with the ToolStore
    store = ToolStore(path, cache_bytes=0)
    try:
        for macro in candidates.MACROS:
            con.execute(macro)
        got = con.execute(
            "SELECT stream_id::VARCHAR, ts, value, step_us, next_ts, next_value FROM observation_pairs()"
        ).fetchall()
        sorted_rows = con.execute(
            "SELECT stream_id::VARCHAR, ts, value, step_us, lead(ts) OVER w, lead(value) OVER w FROM observations "
            "WINDOW w AS (PARTITION BY stream_id ORDER BY ts, rowid) ORDER BY stream_id, ts, rowid"
        ).fetchall()
        assert got == sorted_rows
        # Every row of every stream (a stream of 60 three-day steps runs for 180 days).
        times = [ts for rows in streams.values() for ts, _, _ in rows]
        span = (min(times, default=T0) - 10 * MINUTE, max(times, default=T0) + 1)
        members = store.windows(list(streams), *span)
        for sid in streams:
            want = [(ts, v, step) for (i, ts, v, step, _, _) in sorted_rows if i == sid]
            for arrays in (store.arrays(sid), store.window(sid, *span), members[sid]):
                read = list(zip(arrays.ts.tolist(), arrays.value.tolist(), arrays.step.tolist(), strict=True))
                assert _same_with_nan(read, want)
    finally:
        store.close()
        con.close()


def _same_with_nan(read: list[tuple], want: list[tuple]) -> bool:
    """Rows equal, in order, a null step read as NaN."""
    return len(read) == len(want) and all(
        (r[0], r[1]) == (w[0], w[1]) and (np.isnan(r[2]) if w[2] is None else r[2] == w[2])
        for r, w in zip(read, want, strict=True)
    )


def test_observations_out_of_the_stores_order_are_an_error_not_wrong_rows(tmp_path):
    from pipeline.core.errors import StageError
    from pipeline.store.reader import OBSERVATIONS_OUT_OF_ORDER

    path = _store(tmp_path / "store.duckdb", {"s1": _rows([(MINUTE, 1.0, None)] * 5, T0), "s2": [(T0, 2.0, None)]})
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE shuffled AS SELECT * FROM observations ORDER BY ts DESC, stream_id")
    con.execute("DROP TABLE observations")
    con.execute("ALTER TABLE shuffled RENAME TO observations")
    con.close()
    con = duckdb.connect(str(path), read_only=True)
    for macro in candidates.MACROS:
        con.execute(macro)
    with pytest.raises(duckdb.Error, match=r"not in \(stream_id, ts\) order"):
        con.execute("SELECT count(next_ts) FROM observation_pairs()").fetchall()
    con.close()
    # the whole-table check, whatever rows a family's query keeps
    with open_store(path) as con, pytest.raises(StageError, match=r"not in \(stream_id, ts\) order.*followed by"):
        candidates.check_store_order(con, path)
    store = ToolStore(path, cache_bytes=0)
    try:
        with pytest.raises(StageError, match="rebuild the store") as caught:
            store.arrays("s1")
        assert OBSERVATIONS_OUT_OF_ORDER in str(caught.value) and str(path) in str(caught.value)
    finally:
        store.close()


def test_interleaved_streams_are_found_by_the_whole_table_check(tmp_path):
    """Stream a stored in two runs around b: a query that keeps only a's rows never meets the row that breaks the
    order, so the macro alone would pair a's last row of the first run with nothing; the stage's check stops it."""
    from pipeline.core.errors import StageError

    path = _store(tmp_path / "store.duckdb", {"a": _rows([(MINUTE, 1.0, None)] * 4, T0), "b": [(T0, 2.0, None)]})
    con = duckdb.connect(str(path))
    con.execute(
        "CREATE TABLE split AS SELECT * FROM (SELECT * FROM observations WHERE stream_id = 'a' ORDER BY ts LIMIT 2) "
        "UNION ALL SELECT * FROM observations WHERE stream_id = 'b' "
        "UNION ALL SELECT * FROM (SELECT * FROM observations WHERE stream_id = 'a' ORDER BY ts OFFSET 2)"
    )
    con.execute("DROP TABLE observations")
    con.execute("ALTER TABLE split RENAME TO observations")
    con.close()
    with open_store(path) as con:
        assert [r[0] for r in con.execute("SELECT stream_id::VARCHAR FROM observations").fetchall()] == list("aabaa")
        with pytest.raises(StageError, match="rebuild the store"):
            candidates.check_store_order(con, path)


def test_selection_key_is_unchanged():
    """The declared order's hash: xxh3-128 of canonical [seed, family], '|', the identity."""
    assert candidates.selection_key("s", "f", '["a",1]') == digest(
        json.dumps(["s", "f"], separators=(",", ":")) + '|["a",1]'
    )


def _placed_one_by_one(plan, row: dict, family, ident: str, seed: str, name: str) -> str:
    """The placement rule row by row (as first written): the reference for SplitPlan.place."""
    from contracts.tasks import PERIOD_DAYS
    from pipeline.tasks.splits import DAY

    touches = bool(plan.held_out & set(row[family.sites_column]))
    if not family.time_columns:
        if touches:
            return "test"
        x = int(digest(f"{seed}|split|{name}|{ident}")[:12], 16) / float(16**12)
        total = 0.0
        for split in plan.rule.order:
            total += plan.rule.shares[split]
            if x < total:
                return split
        return plan.rule.order[-1]
    times = [int(row[c]) for c in family.time_columns]
    margin = (PERIOD_DAYS[family.period] + plan.rule.reach_days) * DAY
    lo, hi = min(times) - margin, max(times) + margin
    found = next((b for b in plan.blocks.values() if b.holds(lo, hi)), None)
    if found is None:
        return "straddles_split_buffer"
    return "held_out_site_outside_test_block" if touches and found.split != "test" else found.split


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.integers(0, 400), st.integers(0, 40), st.lists(st.sampled_from(["a", "b", "held"]), max_size=3)),
        max_size=40,
    ),
    timeless=st.booleans(),
)
def test_placement_over_columns_is_the_row_by_row_rule(rows, timeless):
    from pipeline.core.config import load_families
    from pipeline.core.workspace import Workspace
    from pipeline.tasks.splits import DAY, Block, SplitPlan

    cfg = load_families(Workspace.from_root(Path(__file__).parents[1]))
    family = cfg.families["point_disambiguation" if timeless else "window_mean_lookup"]
    week = 7 * DAY
    plan = SplitPlan(
        rule=cfg.splits,
        blocks={
            "train": Block("train", 0, 150 * DAY),
            "dev": Block("dev", 234 * DAY, 290 * DAY),
            "test": Block("test", 374 * DAY, 600 * DAY),
        },
        held_out=frozenset({"held"}),
        by="time and site",
    )
    frame = pl.DataFrame(
        {
            "window_start": [d * DAY for d, _, _ in rows],
            "window_end": [d * DAY + w * DAY // 7 + week for d, w, _ in rows],
            "sites": [s for _, _, s in rows],
        },
        schema={"window_start": pl.Int64, "window_end": pl.Int64, "sites": pl.List(pl.String)},
    )
    idents = [canonical_json([i]) for i in range(len(rows))]
    placed = plan.place(frame, family, idents, cfg.seed, "f").to_list()
    assert placed == [
        _placed_one_by_one(plan, row, family, ident, cfg.seed, "f")
        for row, ident in zip(frame.to_dicts(), idents, strict=True)
    ]


def test_store_connections_draw_no_progress_bar(tmp_path):
    """DuckDB draws a progress bar on stdout for a query of more than 2 s; a large family's candidate query would write
    one into `build --json`."""
    from pipeline.store.reader import open_store

    path = _store(tmp_path / "store.duckdb", {"s1": [(T0, 1.0, MINUTE)]})
    con = open_store(path)
    try:
        assert con.execute("SELECT current_setting('enable_progress_bar')").fetchone()[0] is False
    finally:
        con.close()


def test_store_connections_spill_outside_the_store_folder(tmp_path):
    """A reader's spills (a large candidate pool) never land next to the store, in a finished stage's folder."""
    from pipeline.store.reader import open_store

    path = _store(tmp_path / "store.duckdb", {"s1": [(T0, 1.0, MINUTE)]})
    con = open_store(path)
    try:
        folder = Path(con.execute("SELECT current_setting('temp_directory')").fetchone()[0])
        assert tmp_path not in folder.parents and folder != tmp_path
    finally:
        con.close()
