"""pipeline/tasks/nearest.py: each instant's nearest row, by one streamed pass and a binary search, is what an
arg_min over every row in the instant's bounds gives (the earlier of two as near, the first of rows at one time)."""

from __future__ import annotations

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.tasks import nearest
from pipeline.tasks.nearest import NearestError

STREAMS = ["a", "b", "c"]
ROWS = st.lists(
    st.tuples(st.sampled_from(STREAMS), st.integers(-20, 20), st.booleans(), st.integers(0, 9)), max_size=40
)
INSTANTS = st.lists(
    st.tuples(
        st.sampled_from([*STREAMS, "z"]), st.booleans(), st.integers(-25, 25), st.integers(-25, 25), st.integers(0, 30)
    ),
    max_size=12,
)


def _connection(rows: list[tuple], instants: list[tuple]) -> duckdb.DuckDBPyConnection:
    """rows (stream, ts, kind, value) sorted by stream and time, stably (ties keep their drawn order)."""
    con = duckdb.connect(config={"threads": 1})
    con.execute("CREATE TABLE r (stream_id VARCHAR, ts BIGINT, kind BOOLEAN, v DOUBLE, n BIGINT)")
    ordered = sorted(rows, key=lambda row: (row[0], row[1]))
    if ordered:
        con.executemany("INSERT INTO r VALUES (?, ?, ?, ?, ?)", [(*row, i) for i, row in enumerate(ordered)])
    con.execute("CREATE TABLE i (stream_id VARCHAR, kind BOOLEAN, target BIGINT, lo BIGINT, hi BIGINT, label VARCHAR)")
    if instants:
        con.executemany(
            "INSERT INTO i VALUES (?, ?, ?, ?, ?, ?)",
            [(s, k, target, lo, lo + width, f"i{j}") for j, (s, k, target, lo, width) in enumerate(instants)],
        )
    return con


NEAR = "(2 * abs(r.ts - i.target) + (r.ts > i.target)::BIGINT, r.n)"  # the nearest, then the first in order


def _reference(match: list[str]) -> str:
    """Each instant's nearest row by an arg_min over every row in its bounds."""
    kind = "kind" in match
    carried = ["ts", *([] if kind else ["kind"]), "v", "n"]
    picks = ", ".join(f"arg_min(r.{c}, {NEAR}) AS {c}" for c in carried)
    instants = "i.*" if kind else "i.* EXCLUDE (kind)"
    on = "r.stream_id = i.stream_id" + (" AND r.kind = i.kind" if kind else "")
    return f"SELECT {instants}, {picks} FROM i JOIN r ON {on} AND r.ts >= i.lo AND r.ts < i.hi GROUP BY ALL"


@pytest.mark.parametrize("match", [["stream_id"], ["stream_id", "kind"]])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=ROWS, instants=INSTANTS, batch=st.integers(1, 7))
def test_each_instant_gets_the_row_an_arg_min_gives(monkeypatch, match, rows, instants, batch):
    """Across batch boundaries (a stream's rows in several batches), rows at one time, instants outside their bounds
    or with empty bounds, instants of a stream without rows, and a second match column."""
    monkeypatch.setattr(nearest, "BATCH_ROWS", batch)
    con = _connection(rows, instants)
    instants_sql = "SELECT * FROM i" if "kind" in match else "SELECT * EXCLUDE (kind) FROM i"
    count = nearest.build(con, "f", "SELECT * FROM r", instants_sql, match)
    got = con.execute("SELECT * FROM nearest ORDER BY label").fetchall()
    columns = [d[0] for d in con.execute("SELECT * FROM nearest LIMIT 0").description]
    expected = con.execute(f"SELECT {', '.join(columns)} FROM ({_reference(match)}) ORDER BY label").fetchall()
    assert got == expected
    assert count == len(expected)
    if "kind" in match:
        assert columns == ["stream_id", "kind", "target", "lo", "hi", "label", "ts", "v", "n"]
    else:
        assert columns == ["stream_id", "target", "lo", "hi", "label", "ts", "kind", "v", "n"]


def test_no_row_leaves_an_empty_table_with_every_column():
    con = _connection([], [("a", True, 0, -5, 10)])
    assert nearest.build(con, "f", "SELECT * FROM r", "SELECT * EXCLUDE (kind) FROM i", ["stream_id"]) == 0
    columns = [d[0] for d in con.execute("SELECT * FROM nearest").description]
    assert columns == ["stream_id", "target", "lo", "hi", "label", "ts", "kind", "v", "n"]


@pytest.mark.parametrize(
    ("rows_sql", "instants_sql", "match", "says"),
    [
        ("SELECT * FROM r ORDER BY ts DESC", "SELECT * EXCLUDE (kind) FROM i", ["stream_id"], "out of time order"),
        ("SELECT * FROM r ORDER BY ts, stream_id", "SELECT * EXCLUDE (kind) FROM i", ["stream_id"], "two places"),
        ("SELECT * FROM r", "SELECT stream_id, lo, hi FROM i", ["stream_id"], "no column target"),
        ("SELECT * EXCLUDE (ts) FROM r", "SELECT * EXCLUDE (kind) FROM i", ["stream_id"], "no column ts"),
        ("SELECT * FROM r", "SELECT *, 1 AS v FROM i", ["stream_id"], "both give kind, v"),
        ("SELECT * FROM r", "SELECT * EXCLUDE (target), 0.5 AS target FROM i", ["stream_id"], "epoch microseconds"),
        ("SELECT * FROM r", "SELECT * EXCLUDE (lo), NULL::BIGINT AS lo FROM i", ["stream_id"], "without lo"),
        ("SELECT * EXCLUDE (ts), ts / 2 AS ts FROM r", "SELECT * FROM i", ["stream_id", "kind"], "whole number"),
        (
            "SELECT * EXCLUDE (kind), NULL::BOOLEAN AS kind FROM r",
            "SELECT * FROM i",
            ["stream_id", "kind"],
            "without kind",
        ),
        ("SELECT * FROM r", "SELECT * EXCLUDE (kind), 'x' AS kind FROM i", ["stream_id", "kind"], "kind as bool and"),
    ],
)
def test_a_query_that_breaks_the_contract_is_named_in_one_line(rows_sql, instants_sql, match, says):
    rows = [("a", 1, True, 0), ("a", 5, False, 1), ("b", 2, True, 2), ("b", 3, True, 3), ("a", 7, True, 4)]
    con = _connection(rows, [("a", True, 4, 0, 10)])
    with pytest.raises(NearestError) as caught:
        nearest.build(con, "fam", rows_sql, instants_sql, match)
    message = str(caught.value)
    assert says in message and "family fam" in message and "\n" not in message
