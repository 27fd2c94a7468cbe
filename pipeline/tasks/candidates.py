"""Candidate pools in SQL, eligibility predicates counted one by one, and the selection order.

A family's candidate query runs once, into the temporary table `pool` of a read-only connection (predicates may read
it as `pool`); the counts, the stream counts and the eligible rows all come from that table. The selection order is
computed over whole columns (identities, keys, then a sort); full rows are fetched only for the candidates that the
selection reaches, in that order.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl
import xxhash

from contracts.tasks import Family
from pipeline.core.canonical import canonical_json, digest
from pipeline.core.errors import StageError
from pipeline.store.compute import DAY, MONDAY
from pipeline.store.reader import OBSERVATIONS_OUT_OF_ORDER
from pipeline.tasks import nearest

PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
ROW = "__candidate_row"  # the eligible table's row number (never a column of a candidate)
FIRST_FETCH, LAST_FETCH = 64, 8192  # rows fetched at once as the selection walks the order (doubling)


def _sql_list(values: list[str]) -> str:
    return "[" + ", ".join("'" + v.replace("'", "''") + "'" for v in values) + "]::VARCHAR[]"


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def fill(sql: str, values: dict[str, str]) -> str:
    """Replace {name} for the names given (thresholds, held_out, previous); other braces stay."""
    return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), sql)


# Helpers the candidate SQL may call (configs/families.toml says so):
# - monday_us(us): the Monday 00:00 UTC starting an epoch-us instant's week, the store's own week rule
#   (pipeline.store.compute.window_bounds), in whole numbers;
# - observation_pairs(): every observation with the time and value of its stream's next one (NULL after a stream's
#   last), rows at one time in store order. In the store's order (pipeline.store.reader) the table's next row is the
#   stream's next reading: one streamed pass (a window with an empty OVER clause), where
#   `lead(ts) OVER (PARTITION BY stream_id ORDER BY ts)` sorts every row (at 1e8 points: half the CPU time of the
#   timestamp_nearest family's pool). Rows out of that order stop the query with OBSERVATIONS_OUT_OF_ORDER.
WEEK = 7 * DAY
_NEXT = "lead(stream_id) OVER () AS after, lead(ts) OVER () AS next_ts"  # the table's next row, in its order
_DISORDER = "after < stream_id OR (after = stream_id AND next_ts < ts)"  # that row comes before this one
MACROS = [
    f"CREATE OR REPLACE TEMP MACRO monday_us(us) AS us - (((us - {MONDAY}) % {WEEK}) + {WEEK}) % {WEEK}",
    "CREATE OR REPLACE TEMP MACRO observation_pairs() AS TABLE "
    "SELECT stream_id, ts, value, step_us, "
    + ", ".join(
        f"CASE WHEN {_DISORDER} THEN error('{OBSERVATIONS_OUT_OF_ORDER}') WHEN after = stream_id THEN {column} END "
        f"AS {column}"
        for column in ("next_ts", "next_value")
    )
    + f" FROM (SELECT stream_id, ts, value, step_us, {_NEXT}, lead(value) OVER () AS next_value FROM observations)",
]

PAIRS = re.compile(r"\bobservation_pairs\s*\(")
# The order of the observations is checked whole once per store file and process before a family reads pairs: the
# macro's own check sees only the rows a query keeps (a filter on the stream, or a query of next_value alone, would
# skip the rows that break the order).
_ORDER_CHECKED: set[tuple] = set()
ORDER_CHECK = f"SELECT count(*) FROM (SELECT stream_id, ts, {_NEXT} FROM observations) WHERE {_DISORDER}"


def check_store_order(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Stop with a one-line error when the store's observations are not in (stream_id, ts) order (one streamed pass,
    about 1 s at 1e8 rows; once per store file and process)."""
    stat = path.stat()
    identity = (str(path), stat.st_ino, stat.st_mtime_ns, stat.st_size)
    if identity in _ORDER_CHECKED:
        return
    disordered = con.execute(ORDER_CHECK).fetchone()[0]
    if disordered:
        raise StageError(f"{path}: {OBSERVATIONS_OUT_OF_ORDER} ({disordered} rows are followed by an earlier one)")
    _ORDER_CHECKED.add(identity)


POOL_QUERY = "candidate query"  # what leaves a stream out before any predicate: the family's query never yields it


@dataclass
class Pool:
    """A family's evaluated pool. Its eligible rows stay in the connection's temporary table until `close`."""

    con: duckdb.DuckDBPyConnection
    size: int
    passed: list[tuple[str, int]]  # (predicate, rows passing it and every predicate before it)
    eligible: int  # rows that pass every predicate
    columns: list[str]  # the candidate query's columns, in its order
    left_out: dict[str, int]  # streams left out, by the first step that drops their last row (POOL_QUERY, predicates)
    eligible_streams: set[str]  # streams with at least one row that passes every predicate

    @property
    def emptied_by(self) -> str | None:
        """The first predicate that left no candidate (None when candidates remain)."""
        if self.size == 0:
            return "candidate query (no rows)"
        return next((name for name, n in self.passed if n == 0), None)

    def frame(self, columns: list[str]) -> pl.DataFrame:
        """These columns of every eligible row, by row number (position i holds row i)."""
        chosen = ", ".join(_quoted(c) for c in dict.fromkeys(columns))
        return pl.from_arrow(self.con.sql(f"SELECT {chosen} FROM eligible ORDER BY {ROW}").to_arrow_table())

    def values(self, column: str) -> list:
        """One column of every eligible row as DuckDB gives it to Python, by row number."""
        return [v for (v,) in self.con.execute(f"SELECT {_quoted(column)} FROM eligible ORDER BY {ROW}").fetchall()]

    def rows(self, numbers: list[int]) -> list[dict]:
        """Full rows (the candidate query's columns, as DuckDB gives them to Python) in the order of `numbers`."""
        if not numbers:
            return []
        result = self.con.execute(
            f"SELECT * FROM eligible WHERE {ROW} IN (SELECT unnest(?::BIGINT[]))", [list(numbers)]
        ).fetchall()
        at = len(self.columns)
        by_number = {row[at]: dict(zip(self.columns, row[:at], strict=True)) for row in result}
        return [by_number[n] for n in numbers]

    def walk(self, numbers: list[int]) -> Iterator[dict]:
        """The rows of these numbers in the order given, fetched in growing chunks as the caller goes on."""
        start, size = 0, FIRST_FETCH
        while start < len(numbers):
            yield from self.rows(numbers[start : start + size])
            start, size = start + size, min(LAST_FETCH, size * 2)

    def close(self) -> None:
        self.con.execute("DROP TABLE IF EXISTS eligible")
        self.con.execute("DROP TABLE IF EXISTS pool")
        self.con.execute(f"DROP TABLE IF EXISTS {nearest.TABLE}")


def prepare(con: duckdb.DuckDBPyConnection, name: str, family: Family, values: dict[str, str]) -> None:
    """What a family's candidate query reads besides the store: the helper macros, and its `nearest` table."""
    for macro in MACROS:
        con.execute(macro)
    if family.nearest is not None:
        rule = family.nearest
        nearest.build(con, name, fill(rule.rows, values), fill(rule.instants, values), rule.match)


def sql_texts(family: Family) -> list[str]:
    """Every SQL text a family's pool runs (the candidate query, and its `nearest` rows and instants)."""
    extra = [family.nearest.rows, family.nearest.instants] if family.nearest is not None else []
    return [family.candidates, *extra]


def evaluate(
    con: duckdb.DuckDBPyConnection,
    name: str,
    family: Family,
    thresholds: dict[str, float],
    held_out: list[str],
    grid_minutes: list[int],
) -> Pool:
    values = {k: repr(float(v)) for k, v in thresholds.items()} | {"held_out": _sql_list(held_out)}
    values["grid_us"] = "[" + ", ".join(str(m * 60_000_000) for m in grid_minutes) + "]::BIGINT[]"
    conditions: list[str] = []
    for predicate in family.predicates:
        previous = " AND ".join(f"({c})" for c in conditions) or "TRUE"
        conditions.append(fill(predicate.sql, values | {"previous": previous}))
    upto = [" AND ".join(f"({c})" for c in conditions[: i + 1]) for i in range(len(conditions))]
    counts = "".join(f", count(*) FILTER (WHERE {w})" for w in upto)
    stream_counts = "".join(f", count(DISTINCT _stream) FILTER (WHERE {w})" for w in upto)
    where = upto[-1] if upto else "TRUE"
    streams = _quoted(family.streams_column)
    try:
        prepare(con, name, family, values)
        con.execute(f"CREATE OR REPLACE TEMP TABLE pool AS {fill(family.candidates, values)}")
        columns = [d[0] for d in con.execute("SELECT * FROM pool LIMIT 0").description]
        if ROW in columns:
            raise StageError(f"configs/families.toml: family {name}: a candidate column is named {ROW}; rename it")
        size, *passed = con.execute(f"SELECT count(*){counts} FROM pool").fetchone()
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE eligible AS SELECT *, (row_number() OVER ()) - 1 AS {ROW} "
            f"FROM pool WHERE {where}"
        )
        eligible = con.execute("SELECT count(*) FROM eligible").fetchone()[0]
        total = con.execute("SELECT count(*) FROM streams").fetchone()[0]
        alive = con.execute(
            f"WITH exploded AS (SELECT *, unnest({streams}) AS _stream FROM pool) "
            f"SELECT count(DISTINCT _stream){stream_counts} FROM exploded"
        ).fetchone()
        eligible_streams = {s for (s,) in con.execute(f"SELECT DISTINCT unnest({streams}) FROM eligible").fetchall()}
    except duckdb.Error as exc:
        raise StageError(f"configs/families.toml: family {name}: candidate SQL failed: {exc}") from exc
    steps = [POOL_QUERY, *(p.name for p in family.predicates)]
    before = [total, *alive]
    return Pool(
        con=con,
        size=size,
        passed=list(zip([p.name for p in family.predicates], passed, strict=True)),
        eligible=eligible,
        columns=columns,
        left_out={step: before[i] - before[i + 1] for i, step in enumerate(steps)},
        eligible_streams=eligible_streams,
    )


_JSON_ESCAPED = r'["\\\x00-\x1f]'  # what json.dumps(ensure_ascii=False) escapes in a string


def _json_texts(frame: pl.DataFrame, column: str, pool: Pool) -> pl.Series:
    """Each value of a key column as canonical JSON text: whole columns for strings, integers and booleans, and
    canonical_json of the value DuckDB gives Python for any other type (and for strings JSON must escape)."""
    series = frame.get_column(column)
    dtype = series.dtype
    if dtype in (pl.Categorical, pl.String) or isinstance(dtype, pl.Enum):
        text = series.cast(pl.String)
        if not text.str.contains(_JSON_ESCAPED).any():
            return ('"' + text + '"').fill_null("null")
    elif dtype.is_integer():
        return series.cast(pl.String).fill_null("null")
    elif dtype == pl.Boolean:
        return series.replace_strict({True: "true", False: "false"}, return_dtype=pl.String).fill_null("null")
    return pl.Series(column, [canonical_json(v) for v in pool.values(column)], dtype=pl.String)


def identities(pool: Pool, key: list[str]) -> list[str]:
    """Every eligible row's identity (canonical JSON of its key columns, as a list), by row number."""
    if pool.eligible == 0:
        return []
    frame = pool.frame(key)
    if not key:
        return ["[]"] * pool.eligible
    pieces = pl.DataFrame([_json_texts(frame, column, pool).alias(str(i)) for i, column in enumerate(key)])
    return ("[" + pieces.select(pl.concat_str(pl.all(), separator=",")).to_series() + "]").to_list()


def selection_key(seed: str, family: str, ident: str) -> str:
    """xxh3-128 of the seed, the family and the candidate's identity: the declared total order."""
    return digest(_key_prefix(seed, family) + ident)


def _key_prefix(seed: str, family: str) -> str:
    """What every selection key of a family hashes before the candidate's identity."""
    return f"{canonical_json([seed, family])}|"


def ordered(seed: str, family: str, pool: Pool, idents: list[str]) -> pl.DataFrame:
    """Columns key (the selection key) and number (the row number) of every eligible row, by selection key, then
    identity; rows with the same identity (a key that is not unique) by their values, so the order never depends on
    how DuckDB returned them."""
    prefix = _key_prefix(seed, family).encode()
    hashed = xxhash.xxh3_128_hexdigest  # selection_key over whole columns: its prefix encoded once
    frame = pl.DataFrame(
        {
            "key": [hashed(prefix + ident.encode("utf-8")) for ident in idents],
            "ident": idents,
            "number": pl.int_range(len(idents), eager=True, dtype=pl.Int64),
        },
        schema={"key": pl.String, "ident": pl.String, "number": pl.Int64},
    ).sort(["key", "ident"], maintain_order=True)
    if frame.height and frame.get_column("ident").is_duplicated().any():
        numbers = _untie(pool, frame.get_column("number").to_list(), idents)
        frame = frame.select(pl.Series("key", frame.get_column("key").to_list()), pl.Series("number", numbers))
    return frame.select("key", "number")


def _untie(pool: Pool, order: list[int], idents: list[str]) -> list[int]:
    """The order with each run of equal identities sorted by the rows' values (their repr: any column type)."""
    result, start = [], 0
    while start < len(order):
        stop = start + 1
        while stop < len(order) and idents[order[stop]] == idents[order[start]]:
            stop += 1
        run = order[start:stop]
        if len(run) > 1:
            texts = {n: repr(sorted(row.items())) for n, row in zip(run, pool.rows(run), strict=True)}
            run = sorted(run, key=lambda n: texts[n])
        result += run
        start = stop
    return result
