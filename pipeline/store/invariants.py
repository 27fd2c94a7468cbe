"""The tool store's invariants: what its tables hold beyond their columns and types (pipeline.store.reader.COLUMNS), as
the store stage writes them, and what the tools rely on to answer every call with JSON.

Checked where a store comes from outside the build: a release's Parquet tables, loaded into the cache
(pipeline.release.playable), so that a release rewritten with absurd values (its digests recomputed) is refused in
one line instead of making a tool raise or answer NaN. Every number is finite and within MAX_MAGNITUDE, every time an
instant between 1900 and 2200, every text short, every count exact in JSON; no key is there twice, no id points
nowhere, and each stream's quality row agrees with its observations.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import duckdb

from contracts.tools import QUALITY_BANDS, Thresholds
from pipeline.ingest.csvread import MAX_CELL_BYTES
from pipeline.ingest.pickles import EARLIEST_US, LATEST_US  # the instants ingest keeps: 1900-01-01 to 2200-01-01
from pipeline.store.reader import COLUMNS, KEYS

MAX_MAGNITUDE = 1e15  # beyond any reading of a building (a meter's total in Wh included); squares stay finite
MAX_TEXT_BYTES = 1024  # an id, a label or a name (the longest shipped one is 152)
TEXT_BYTES = {("rejects", "raw"): MAX_CELL_BYTES}  # a rejected raw cell: as long as ingest takes one
MAX_COUNT = 2**53  # integers JSON carries exactly
TIMES = ("ts", "first_ts", "last_ts", "window_start", "window_end")
DURATIONS = {"step_us": "> 0", "longest_gap_us": ">= 0"}  # microseconds, at most the span of TIMES
FRACTIONS = ("coverage", "duplicate_fraction", "nan_fraction", "reject_fraction", "zero_fraction", "constant_fraction")
RANGES = {("profiles", "dow"): (0, 6), ("profiles", "hour"): (0, 23)}
CHOICES = {
    ("quality", "quality_band"): QUALITY_BANDS,
    ("aggregates", "quality_band"): QUALITY_BANDS,
    ("aggregates", "period"): ("day", "week", "month"),
}
# The columns the tools read that the store stage always fills (keys included); the others may be null.
REQUIRED = {
    "sites": ("site_id", "label"),
    "entities": ("entity_id",),
    "relations": ("subject", "predicate", "object"),
    "streams": ("stream_id", "site_id", "point_class", "label", "tool_ready"),
    "observations": ("stream_id", "ts", "value"),
    "quality": ("stream_id", "n", "coverage", "duplicate_fraction", "nan_fraction", "zero_fraction")
    + ("constant_fraction", "quality_band"),
    "aggregates": ("stream_id", "period", "window_start", "window_end", "count", "mean", "min", "max", "total")
    + ("rejected",)
    + ("duplicates", "non_finite", "longest_gap_us", "coverage", "quality_band"),
    "profiles": ("stream_id", "dow", "hour"),
    "previews": ("stream_id", "idx", "ts"),
    "thresholds": ("name", "value"),
    "settings": ("name", "value"),
    "rejects": ("reason",),
}
UNIQUE = ("sites", "entities", "streams", "observations", "quality", "aggregates", "profiles", "previews")
UNIQUE += ("thresholds", "settings")  # relations and rejects may repeat a row
# (table, column) -> (table, column) it names; a null names nothing.
REFERENCES = {
    ("streams", "site_id"): ("sites", "site_id"),
    ("streams", "stream_id"): ("quality", "stream_id"),  # every stream has its quality row
    ("quality", "stream_id"): ("streams", "stream_id"),
    ("observations", "stream_id"): ("streams", "stream_id"),
    ("aggregates", "stream_id"): ("streams", "stream_id"),
    ("profiles", "stream_id"): ("streams", "stream_id"),
    ("previews", "stream_id"): ("streams", "stream_id"),
    ("rejects", "stream_id"): ("streams", "stream_id"),
}
NAMED = {"thresholds": tuple(Thresholds.model_fields), "settings": ("std_ddof",)}  # rows the tools look up by name
SETTINGS = {"std_ddof": (0, 1)}


@dataclass(frozen=True)
class Breach:
    """The first rule a store's table breaks: which table and column, how many rows, what they hold, the first one."""

    table: str
    column: str
    rows: int
    says: str
    first: str

    def message(self) -> str:
        return f"table {self.table}, column {self.column}: {self.rows} row(s) {self.says} (first: {self.first})"


def _columns(table: str) -> list[tuple[str, str]]:
    return [tuple(part.strip().split(" ", 1)) for part in COLUMNS[table].split(",")]  # type: ignore[misc]


def _value_rule(table: str, name: str, kind: str) -> tuple[str, str] | None:
    """The condition every non-null value of a column meets, and what a breaking row holds."""
    column = f'"{name}"'  # count, min, max: column names that are SQL words
    if (table, name) in CHOICES:
        choices = CHOICES[table, name]
        return f"{column} IN ({', '.join(repr(c) for c in choices)})", f"hold a value not one of {', '.join(choices)}"
    if (table, name) in RANGES:
        low, high = RANGES[table, name]
        return f"{column} BETWEEN {low} AND {high}", f"hold a value outside {low}..{high}"
    if kind == "DOUBLE":
        low, high = (0.0, 1.0) if name in FRACTIONS else (-MAX_MAGNITUDE, MAX_MAGNITUDE)
        says = f"hold NaN, an infinity or a value outside [{low:g}, {high:g}]"
        return f"isfinite({column}) AND {column} BETWEEN {low} AND {high}", says
    if kind == "VARCHAR":
        limit = TEXT_BYTES.get((table, name), MAX_TEXT_BYTES)
        return f"strlen({column}) <= {limit}", f"hold a text over {limit:,} bytes"
    if name in TIMES:
        return f"{column} BETWEEN {EARLIEST_US} AND {LATEST_US}", "hold a time outside 1900-01-01..2200-01-01 (UTC)"
    if name in DURATIONS:
        span = LATEST_US - EARLIEST_US
        return (
            f"{column} {DURATIONS[name]} AND {column} <= {span}",
            f"hold a duration not {DURATIONS[name]} µs or over 300 years",
        )
    if kind in ("BIGINT", "INTEGER"):
        return f"{column} BETWEEN 0 AND {MAX_COUNT}", "hold a count outside 0..2**53"
    return None


def _row_rules(table: str) -> Iterator[tuple[str, str, str]]:
    """(column, condition every row meets, what a breaking row holds) of one table."""
    for column, kind in _columns(table):
        if column in REQUIRED[table]:
            yield column, f'"{column}" IS NOT NULL', "are null"
        rule = _value_rule(table, column, kind)
        if rule is not None:
            yield column, f'"{column}" IS NULL OR ({rule[0]})', rule[1]
    if table == "aggregates":
        yield "window_end", "window_end > window_start", "end at or before their window_start"
        yield "count", '"count" >= 1', "count no observation"
    if table == "settings":
        for name, (low, high) in SETTINGS.items():
            yield "value", f"name <> '{name}' OR value BETWEEN {low} AND {high}", f"set {name} outside {low}..{high}"


def _first(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[int, str]:
    """How many rows a query of (first, ...) rows gives, and its first row, shown short."""
    rows = con.execute(f"SELECT count(*) OVER (), * FROM ({sql}) LIMIT 1").fetchall()
    if not rows:
        return 0, ""
    return rows[0][0], ", ".join(repr(value)[:80] for value in rows[0][1:])


def _key(table: str) -> str:
    return ", ".join(KEYS[table])


def breaches(con: duckdb.DuckDBPyConnection) -> Iterator[Breach]:
    """Every rule the store's tables break, in the order they are checked (rows first, then keys, references,
    names, and each stream's quality against its observations); lazily, so that the first costs only its own."""
    for table in KEYS:
        rules = list(_row_rules(table))
        counts = con.execute(
            f"SELECT {', '.join(f'count(*) FILTER (WHERE NOT coalesce({c}, false))' for _, c, _ in rules)} FROM {table}"
        ).fetchone()
        for (column, condition, says), count in zip(rules, counts, strict=True):
            if count:
                _, first = _first(con, f"SELECT {_key(table)} FROM {table} WHERE NOT coalesce({condition}, false)")
                yield Breach(table, column, count, says, first)
    for table in UNIQUE:
        count, first = _first(con, f"SELECT {_key(table)} FROM {table} GROUP BY ALL HAVING count(*) > 1")
        if count:
            yield Breach(table, _key(table), count, "hold a key another row holds too", first)
    for (table, column), (parent, key) in REFERENCES.items():
        sql = (
            f"SELECT DISTINCT {column} FROM {table} WHERE {column} IS NOT NULL "
            f"AND {column} NOT IN (SELECT {key} FROM {parent} WHERE {key} IS NOT NULL)"
        )
        count, first = _first(con, sql)
        if count:
            yield Breach(table, column, count, f"name no {parent} row ({parent}.{key})", first)
    for table, names in NAMED.items():
        present = {row[0] for row in con.execute(f"SELECT name FROM {table}").fetchall()}
        missing = [name for name in names if name not in present]
        if missing:
            yield Breach(table, "name", len(missing), "the tools need are missing", ", ".join(missing))
    agree = (
        "SELECT q.stream_id FROM quality q LEFT JOIN (SELECT stream_id, count(*) AS n, min(ts) AS first_ts, max(ts) AS "
        "last_ts FROM observations GROUP BY stream_id) o USING (stream_id) WHERE q.n IS DISTINCT FROM coalesce(o.n, 0) "
        "OR q.first_ts IS DISTINCT FROM o.first_ts OR q.last_ts IS DISTINCT FROM o.last_ts"
    )
    count, first = _first(con, agree)
    if count:
        yield Breach("quality", "n, first_ts, last_ts", count, "disagree with the stream's observations", first)
    ready = "SELECT stream_id FROM streams JOIN quality USING (stream_id) WHERE tool_ready AND n = 0"
    count, first = _first(con, ready)
    if count:
        yield Breach("streams", "tool_ready", count, "are tool_ready without an observation", first)


def first_breach(con: duckdb.DuckDBPyConnection) -> Breach | None:
    """The first rule the store's tables break, or None when they keep every invariant."""
    return next(breaches(con), None)
