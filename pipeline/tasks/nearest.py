"""The `nearest` table a family's candidate query may read: for each instant, the row nearest to it.

A family that asks about one instant per stream and week (a reading at, or nearest to, a time drawn by hash) needs,
for each instant, the stream's row nearest to it inside the instant's bounds. In SQL that is a join of every
observation to its week's instant and an arg_min per instant: a hash join and a hash aggregate over the whole table
(at 1e8 points, 3.4 s for timestamp_value_lookup's pool and 6.9 s for timestamp_nearest_lookup's, one thread). The
rows come in the store's (stream_id, ts) order, so one streamed pass and a binary search per instant give the same
rows: this module. What the rows and the instants are stays in the family's SQL (configs/families.toml, `[nearest]`);
only the rule "nearest" lives here.

The rule, for each instant (its match columns, `target`, and bounds [lo, hi)): among the rows with the instant's
match values and lo <= ts < hi, the one with the smallest 2 * |ts - target| + (ts > target), i.e. the closest, the
earlier of two as close; of rows at one time, the first in the rows' order. An instant with no such row has no row in
`nearest`.
"""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.core import arrow
from pipeline.core.errors import StageError

TABLE = "nearest"
BATCH_ROWS = 1 << 20  # rows read at once from the rows query (bounded memory whatever the store's size)
BOUNDS = ("target", "lo", "hi")  # the instant and its bounds [lo, hi), epoch microseconds
NONE = np.iinfo(np.int64).max  # the distance of an instant that no row has reached yet


class NearestError(StageError):
    pass


class _Instants:
    """The instants of one match key, in the instants query's order, with the best row found so far for each."""

    def __init__(self, numbers: np.ndarray, at: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
        self.numbers, self.at, self.lo, self.hi = numbers, at, lo, hi
        self.best = np.full(len(at), NONE, dtype=np.uint64)  # 2 * |ts - target| + (ts > target) of the row kept


def _integers(frame: pl.DataFrame, column: str, what: str, family: str) -> np.ndarray:
    series = frame.get_column(column)
    if not series.dtype.is_integer():
        raise NearestError(
            f"configs/families.toml: family {family}: nearest.{what} column {column} is {series.dtype}; "
            "give it as epoch microseconds (BIGINT)"
        )
    if series.null_count():
        raise NearestError(
            f"configs/families.toml: family {family}: nearest.{what} gives {series.null_count()} rows without "
            f"{column}; every row needs one"
        )
    return series.cast(pl.Int64).to_numpy()


def build(con: duckdb.DuckDBPyConnection, family: str, rows_sql: str, instants_sql: str, match: list[str]) -> int:
    """Create the temporary table `nearest` (the instants' columns and the nearest row's other columns) on `con`;
    return its row count."""
    instants = pl.from_arrow(con.sql(instants_sql).to_arrow_table())
    missing = [c for c in [*match, *BOUNDS] if c not in instants.columns]
    if missing:
        raise NearestError(
            f"configs/families.toml: family {family}: nearest.instants has no column {', '.join(missing)}; it "
            f"must give {', '.join([*match, *BOUNDS])}"
        )
    groups = _groups(instants, match, family)
    reader = con.sql(rows_sql).to_arrow_reader(BATCH_ROWS)
    rows = _scan(reader, groups, match, _carried(reader.schema, instants, match, family), family)
    table = (
        instants.with_columns(pl.col(pl.Categorical).cast(pl.String))  # stream ids as text, as the store's tables
        .with_row_index("__instant")
        .with_columns(pl.col("__instant").cast(pl.Int64))
        .join(rows, on="__instant", how="inner")
        .sort("__instant")
        .drop("__instant", "__batch")
    )
    con.register("__nearest_rows", table.to_arrow())
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE {TABLE} AS SELECT * FROM __nearest_rows")
    finally:
        con.unregister("__nearest_rows")
    return table.height


def _groups(instants: pl.DataFrame, match: list[str], family: str) -> dict[tuple, _Instants]:
    """The instants by their match values."""
    target, lo, hi = (_integers(instants, c, "instants", family) for c in BOUNDS)
    groups = {}
    for key, part in instants.select(match).with_row_index("__number").group_by(match, maintain_order=True):
        numbers = part.get_column("__number").cast(pl.Int64).to_numpy()
        groups[key] = _Instants(numbers, target[numbers], lo[numbers], hi[numbers])
    return groups


def _kind(dtype: pa.DataType) -> str:
    """What a match column holds, as far as its values compare equal in Python: text, whole numbers, or its type."""
    if pa.types.is_dictionary(dtype):
        dtype = dtype.value_type
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or pa.types.is_string_view(dtype):
        return "text"
    return "whole numbers" if pa.types.is_integer(dtype) else str(dtype)


def _carried(schema: pa.Schema, instants: pl.DataFrame, match: list[str], family: str) -> list[str]:
    """The rows' columns that `nearest` carries (all but the match columns), after checking both queries' columns."""
    where = f"configs/families.toml: family {family}:"
    absent = [c for c in dict.fromkeys(["stream_id", *match, "ts"]) if c not in schema.names]
    if absent:
        raise NearestError(f"{where} nearest.rows has no column {', '.join(absent)}")
    given = instants.select(match).to_arrow().schema
    for column in match:
        kinds = _kind(schema.field(column).type), _kind(given.field(column).type)
        if kinds[0] != kinds[1]:
            raise NearestError(
                f"{where} nearest.rows gives {column} as {kinds[0]} and nearest.instants as {kinds[1]}; give both "
                "the same type, or no instant finds its rows"
            )
    carried = [c for c in schema.names if c not in match]
    clash = sorted(set(carried) & set(instants.columns))
    if clash:
        raise NearestError(
            f"{where} nearest.rows and nearest.instants both give {', '.join(clash)} (a column of both must be a "
            "match column); rename one"
        )
    return carried


def _scan(
    reader: pa.RecordBatchReader, groups: dict[tuple, _Instants], match: list[str], carried: list[str], family: str
) -> pl.DataFrame:
    """Each instant's nearest row (the carried columns, __instant and __batch), in one pass over the rows."""
    extra = [c for c in match if c != "stream_id"]
    pieces: list[pa.Table] = []  # rows that became an instant's nearest, with the instant and the batch (later wins)
    order = _Order(family)
    for number, batch in enumerate(reader):
        if batch.num_rows == 0:
            continue
        streams, codes = _coded(batch.column("stream_id"), family, "stream_id")
        runs = _runs(streams, codes)
        ts = order.check(batch, runs)
        keys = [_coded(batch.column(c), family, c) for c in extra]
        instants_won, rows_won = [], []
        for stream, start, stop in runs:
            for values, rows in _parts(keys, start, stop):
                found = groups.get((stream, *values))
                if found is None:
                    continue
                instant, row = _nearest(found, ts[rows])
                if len(instant):
                    instants_won.append(found.numbers[instant])
                    rows_won.append(rows[row] if isinstance(rows, np.ndarray) else start + row)
        if instants_won:
            won = batch.select(carried).take(arrow.numbers(np.concatenate(rows_won)))
            won = pa.Table.from_batches([won]).append_column("__instant", arrow.numbers(np.concatenate(instants_won)))
            pieces.append(won.append_column("__batch", arrow.numbers(np.full(won.num_rows, number, np.int64))))
    fields = [reader.schema.field(c) for c in carried]
    schema = pa.schema([*fields, pa.field("__instant", pa.int64()), pa.field("__batch", pa.int64())])
    empty = pa.table([pa.nulls(0, field.type) for field in schema], schema=schema)  # (empty_table imports pandas)
    rows = pl.from_arrow(pa.concat_tables([empty, *pieces]))
    return rows.sort(["__instant", "__batch"]).unique("__instant", keep="last", maintain_order=True)


def _coded(column: pa.Array, family: str, name: str) -> tuple[list, np.ndarray]:
    """A column of a batch as its distinct values (Python objects, as a key of the instants) and each row's code."""
    if column.null_count:
        raise NearestError(f"configs/families.toml: family {family}: nearest.rows gives a row without {name}")
    if pa.types.is_boolean(column.type):
        return [False, True], arrow.to_numpy(column).view(np.uint8)
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    values = column.dictionary
    if pa.types.is_dictionary(values.type):
        values = values.dictionary.take(values.indices)
    return values.to_pylist(), arrow.to_numpy(column.indices)


def _runs(streams: list, codes: np.ndarray) -> list[tuple[str, int, int]]:
    """The batch's runs of one stream: (stream, first row, end)."""
    bounds = [0, *(np.flatnonzero(codes[1:] != codes[:-1]) + 1).tolist(), len(codes)]
    return [(streams[codes[a]], a, b) for a, b in zip(bounds, bounds[1:], strict=False)]


def _parts(keys: list[tuple[list, np.ndarray]], start: int, stop: int) -> list[tuple[tuple, slice | np.ndarray]]:
    """The rows of one run by the values of the other match columns: (values, rows of the batch)."""
    if not keys:
        return [((), slice(start, stop))]
    sizes = [len(values) for values, _ in keys]
    combined = keys[0][1][start:stop].astype(np.int64)
    for size, (_, codes) in zip(sizes[1:], keys[1:], strict=True):
        combined = combined * size + codes[start:stop]
    parts = []
    for code in np.flatnonzero(np.bincount(combined, minlength=1)).tolist():
        values, rest = [], code
        for size, (names, _) in zip(reversed(sizes), reversed(keys), strict=True):
            values.append(names[rest % size])
            rest //= size
        parts.append((tuple(reversed(values)), start + np.flatnonzero(combined == code)))
    return parts


def _nearest(found: _Instants, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The instants (positions in `found`) whose nearest row so far is now one of `ts` (rows of one match key, in
    time order), and those rows' positions; `found.best` is updated."""
    first, last = (np.searchsorted(ts, bound, "left") for bound in (found.lo, found.hi))  # rows in [lo, hi)
    after = np.searchsorted(ts, found.at, "right")  # the first row after `at`
    below = np.minimum(after, last) - 1  # the last row at or before `at` inside the bounds
    above = np.maximum(after, first)  # the first row after `at` inside the bounds
    has_below, has_above = below >= first, above < last
    size = len(ts)
    ts_below = ts[np.clip(below, 0, size - 1)]
    ts_above = ts[np.clip(above, 0, size - 1)]
    # Distances as unsigned 2 * |ts - at| (+ 1 after): whole numbers, no overflow for any int64 times
    far_below = np.where(has_below, 2 * (found.at.astype(np.uint64) - ts_below.astype(np.uint64)), NONE)
    far_above = np.where(has_above, 2 * (ts_above.astype(np.uint64) - found.at.astype(np.uint64)) + 1, NONE)
    take_below = far_below <= far_above
    distance = np.where(take_below, far_below, far_above).astype(np.uint64)
    row = np.where(take_below, below, above)
    # of rows at one time, the first: the row at or before `at` moves back to the first row at its time
    row = np.where(take_below & has_below, np.searchsorted(ts, ts_below, "left"), row)
    better = distance < found.best  # a row as near as one kept before comes later in the rows' order: not taken
    found.best = np.where(better, distance, found.best)
    instant = np.flatnonzero(better)
    return instant, row[instant]


class _Order:
    """The rows query must give each stream's rows together, in time order (the store's order, in which its rows
    arrive): checked batch by batch and across batches, on whole columns."""

    def __init__(self, family: str) -> None:
        self.family = family
        self.done: set[str] = set()  # streams whose rows have ended
        self.last: tuple[str, int] | None = None  # the previous batch's last stream and time

    def check(self, batch: pa.RecordBatch, runs: list[tuple[str, int, int]]) -> np.ndarray:
        """The batch's times (epoch us), after checking the order of its runs of one stream."""
        column = batch.column("ts")
        if column.null_count or not pa.types.is_integer(column.type):
            raise self._error("a time (ts) that is not a whole number of microseconds")
        ts = arrow.to_numpy(column).astype(np.int64, copy=False)
        back = ts[1:] < ts[:-1]  # rows earlier than the row before them: only where a stream starts
        back[[a - 1 for _, a, _ in runs[1:]]] = False
        if back.any():
            raise self._error("rows of a stream out of time order")
        names = [s for s, _, _ in runs]
        continuing = self.last is not None and names[0] == self.last[0]
        if continuing and int(ts[0]) < self.last[1]:
            raise self._error("rows of a stream out of time order")
        fresh = names[1:] if continuing else names
        if len(set(fresh)) != len(fresh) or self.done.intersection(fresh):
            raise self._error("a stream's rows in two places")
        if self.last is not None and not continuing:
            self.done.add(self.last[0])
        self.done.update(names[:-1])
        self.last = (names[-1], int(ts[-1]))
        return ts

    def _error(self, what: str) -> NearestError:
        return NearestError(
            f"configs/families.toml: family {self.family}: nearest.rows gives {what}; it must give each stream's "
            "rows together and in time order (the store's order: read observations or observation_pairs() unsorted)"
        )
