"""Read-only access to one tool store: stream metadata in memory, stream arrays cached for binary search."""

from __future__ import annotations

import json
import re
import threading
from collections import Counter, OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pyarrow as pa

from pipeline.core.canonical import canonical_json
from pipeline.core.errors import StageError
from pipeline.core.timeunits import DAY_US
from pipeline.core.workspace import Workspace
from pipeline.store import expected
from pipeline.store.reader import OBSERVATIONS_OUT_OF_ORDER, checked_store, open_store

DEFAULT_CACHE_BYTES = 512 * 1024 * 1024
WHOLE_SHARE = 1 / 64  # a stream up to this share of the cache is loaded whole on first use (later calls slice it)
ROW_BYTES = 24  # ts, value and step of one observation
READ_STEPS, WIDEN = 8, 16  # a range read starts this many local steps out, widens x16
AGGREGATE_TABLES = 512  # (stream, period) aggregates a store keeps as columns (least recently used go first)
REMEMBERED_BYTES = (
    64 << 20
)  # tool results a store that remembers keeps, by their JSON size (least recently used go first)


@dataclass(frozen=True)
class StreamArrays:
    """One stream's observations in time order (the store's (stream_id, ts) layout)."""

    ts: np.ndarray  # int64 microseconds UTC, non-decreasing (rows at one time in the store's order)
    value: np.ndarray  # float64
    step: np.ndarray  # float64 local step of each observation (NaN where the stream has no gap)

    @property
    def nbytes(self) -> int:
        return self.ts.nbytes + self.value.nbytes + self.step.nbytes

    def slice(self, start: int, stop: int) -> StreamArrays:
        return StreamArrays(self.ts[start:stop], self.value[start:stop], self.step[start:stop])


def _stream_arrays(data: dict, rows: slice, path: Path) -> StreamArrays:
    """StreamArrays from rows of a fetchnumpy result (ts, value, step_us: an integer column, masked where null),
    checked to be in time order."""
    ts = np.asarray(data["ts"][rows], dtype=np.int64)
    if len(ts) > 1 and bool((np.diff(ts) < 0).any()):
        raise StageError(f"{path}: {OBSERVATIONS_OUT_OF_ORDER}")
    step = np.ma.asarray(data["step_us"][rows]).astype(np.float64)
    return StreamArrays(ts=ts, value=np.asarray(data["value"][rows], dtype=np.float64), step=np.ma.filled(step, np.nan))


def _window_slice(arrays: StreamArrays, start: int, end: int) -> StreamArrays:
    """The rows in [start, end) after the rows at the last time before `start` (all of them, when several)."""
    first, last = np.searchsorted(arrays.ts, [start, end], "left")
    if first:
        first = np.searchsorted(arrays.ts, arrays.ts[first - 1], "left")
    return arrays.slice(int(first), int(last))


class _Aggregates:
    """One stream's `aggregates` rows of one period as Arrow columns (by window start), found by binary search."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self.starts = np.fromiter(table.column("window_start").to_pylist(), dtype=np.int64)  # to_numpy loads pandas
        self.rows: dict[int, dict] = {}  # rows asked before, as dicts (shared, as the stores' rows always were)

    def row(self, window_start: int) -> dict | None:
        i = int(np.searchsorted(self.starts, window_start, "left"))
        if i == len(self.starts) or int(self.starts[i]) != window_start:
            return None
        if i not in self.rows:
            self.rows[i] = self.table.slice(i, 1).to_pylist()[0]
        return self.rows[i]


@lru_cache(maxsize=65536)  # a pure function of the text, asked again for every stream a query is matched with
def _compact(text: str | None) -> str:
    return "".join(ch for ch in (text or "").lower() if ch.isalnum())


def _tails(text: str | None) -> set[str]:
    """Compacted trailing word runs: 'L8.primary_loop' -> {'l8primaryloop', 'primaryloop', 'loop'}."""
    parts = words(text)
    return {"".join(parts[i:]) for i in range(len(parts))}


def compact(text: str | None) -> str:
    return _compact(text)


def words(text: str | None) -> list[str]:
    """Lowercase alphanumeric words: the normalization of the store's text keys."""
    return _WORD.findall((text or "").lower())


_WORD = re.compile(r"[^\W_]+")  # a run of what str.isalnum() takes (\w is exactly that, and "_")


class ToolStore:
    """A read-only store opened once; every query binds its parameters. Safe to share across threads."""

    def __init__(
        self,
        path: Path,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        remember_results: bool = False,
    ) -> None:
        """`remember_results`: keep tool results by call (the store never changes, so a call always has the same
        result). The build stages that play every episode many times (tasks, episodes, audit) ask for it; agents'
        runs and the MCP server do not, so their latencies are the tools' own."""
        self.path = path
        self._results: OrderedDict[tuple[str, str], tuple[dict, int]] | None = (
            OrderedDict() if remember_results else None
        )
        self._remembered_bytes = 0
        self._con = open_store(path)
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, StreamArrays] = OrderedDict()
        self._windows: OrderedDict[tuple[str, str], _Aggregates] = OrderedDict()
        self._cache_bytes = cache_bytes
        self._cached = 0
        self.streams = {row["stream_id"]: row for row in self._rows("SELECT * FROM streams ORDER BY stream_id")}
        self.sites = {row["site_id"]: row for row in self._rows("SELECT * FROM sites ORDER BY site_id")}
        self.quality = {row["stream_id"]: row for row in self._rows("SELECT * FROM quality ORDER BY stream_id")}
        self.thresholds = {
            row["name"]: row["value"] for row in self._rows("SELECT name, value FROM thresholds ORDER BY name")
        }
        self.settings = {
            row["name"]: row["value"] for row in self._rows("SELECT name, value FROM settings ORDER BY name")
        }
        # The rules of streams absent by design (pipeline/store/expected.py): a store has the table only when its
        # corpus declares some.
        declared = self._rows("SELECT table_name FROM duckdb_tables() WHERE table_name = ?", [expected.TABLE])
        self.expected_hours = (
            {row["stream_id"]: expected.decode(row["rule"]) for row in self._rows(f"SELECT * FROM {expected.TABLE}")}
            if declared
            else {}
        )
        for row in self.streams.values():  # compact keys, computed once, for name matching
            row["_keys"] = {k: _compact(row[k]) for k in ("point_class", "equipment_type")}
            row["_tails"] = {k: _tails(row[k]) for k in ("equipment", "location")}
        # tool-ready streams per (site, point class): how many candidates a query naming that class can match
        self.ready_per_class = Counter(
            (r["site_id"], r["point_class"]) for r in self.streams.values() if r["tool_ready"]
        )
        self._site_index = {}
        for site_id, site in self.sites.items():
            for name in (site_id, site["label"]):
                self._site_index.setdefault(_compact(name), site_id)

    @classmethod
    def for_corpus(cls, ws: Workspace, corpus: str) -> ToolStore:
        """The project's store of a corpus, once checked against the build's record of it (`checked_store`)."""
        return cls(checked_store(ws.stage_dir(corpus, "store")))

    def close(self) -> None:
        self._con.close()

    def _rows(self, sql: str, params: list | None = None) -> list[dict]:
        with self._lock:  # one connection, one query at a time (a cursor per query costs as much as the query)
            result = self._con.execute(sql, params or [])
            names = [d[0] for d in result.description]
            return [dict(zip(names, row, strict=True)) for row in result.fetchall()]

    @property
    def remembers(self) -> bool:
        return self._results is not None

    def remembered(self, key: tuple[str, str]) -> dict | None:
        """A copy of the result kept for this call, or None (the caller may change what it gets)."""
        with self._lock:
            found = self._results.get(key) if self._results is not None else None
            if found is not None:
                self._results.move_to_end(key)
        return json.loads(found[0]) if found is not None else None  # a fresh copy, 5x faster than deepcopy

    def remember(self, key: tuple[str, str], result: dict) -> None:
        """Keep a copy of a call's result, within REMEMBERED_BYTES (a result that is not canonical JSON is not kept)."""
        if self._results is None:
            return
        try:
            size = len(key[1]) + len(canonical_json(result))
        except (TypeError, ValueError):
            return
        kept = json.dumps(result, ensure_ascii=False)  # JSON (checked above), read back in the same key order
        with self._lock:
            if key in self._results:
                self._remembered_bytes -= self._results.pop(key)[1]
            self._results[key] = (kept, size)
            self._remembered_bytes += size
            while self._remembered_bytes > REMEMBERED_BYTES and self._results:
                self._remembered_bytes -= self._results.popitem(last=False)[1][1]

    def site_id(self, text: str) -> str | None:
        """Site id from an id or a label, ignoring case, spaces and punctuation."""
        return self._site_index.get(_compact(text))

    # A stream's rows come in the store's order (pipeline.store.reader): by time, rows with the same time as the
    # store holds them; no ORDER BY (a third of a range read's time), each read checked instead.
    _COLUMNS = "ts, value, step_us"

    def _fetch(self, sql: str, params: list) -> StreamArrays:
        """Under the lock."""
        return _stream_arrays(self._con.execute(sql, params).fetchnumpy(), slice(None), self.path)

    def arrays(self, stream_id: str) -> StreamArrays:
        """The stream's sorted arrays, loaded once by a bound-parameter query and kept in an LRU cache."""
        with self._lock:
            if stream_id in self._cache:
                self._cache.move_to_end(stream_id)
                return self._cache[stream_id]
            arrays = self._fetch(f"SELECT {self._COLUMNS} FROM observations WHERE stream_id = ?", [stream_id])
            self._cache[stream_id] = arrays
            self._cached += arrays.nbytes
            while self._cached > self._cache_bytes and len(self._cache) > 1:
                _, old = self._cache.popitem(last=False)
                self._cached -= old.nbytes
            return arrays

    def _cached_or_small(self, stream_id: str) -> StreamArrays | None:
        """The stream's whole arrays when they are cached or small enough to load and keep (at most WHOLE_SHARE of
        the cache); None for a large stream not cached, which is read by time range instead."""
        with self._lock:
            cached = self._cache.get(stream_id)
        if cached is not None:
            return cached
        rows = (self.quality.get(stream_id) or {}).get("n") or 0
        return self.arrays(stream_id) if rows * ROW_BYTES <= self._cache_bytes * WHOLE_SHARE else None

    def _range(self, stream_id: str, lo: int, hi: int) -> StreamArrays:
        """The stream's rows with lo <= ts < hi (zone maps skip the rest of the table)."""
        with self._lock:
            return self._fetch(
                f"SELECT {self._COLUMNS} FROM observations WHERE stream_id = ? AND ts >= ? AND ts < ?",
                [stream_id, lo, hi],
            )

    def _reach(self, stream_id: str) -> tuple[int, int | None, int | None]:
        """How far before (or after) an instant to read first for the rows next to it: a few local steps (a day
        when the stream has no step), and the stream's first and last times, which tell when to stop widening."""
        q = self.quality.get(stream_id) or {}
        step = q.get("step_us")
        return (READ_STEPS * int(step) if step and step > 0 else DAY_US), q.get("first_ts"), q.get("last_ts")

    def window(self, stream_id: str, start: int, end: int) -> StreamArrays:
        """The stream's rows in [start, end) after its rows at the last time before `start`, if any: all that a
        window's statistics read (compute.window_stats). A large stream is read by time range, from a little before
        `start` (widened until the row before is found or none can exist); a cached or small one is sliced."""
        cached = self._cached_or_small(stream_id)
        if cached is None:
            pad, first_ts, _ = self._reach(stream_id)
            while True:
                arrays = self._range(stream_id, start - pad, end)
                before = int(np.searchsorted(arrays.ts, start, "left"))
                if before or first_ts is None or first_ts >= start - pad:
                    break
                pad *= WIDEN
            cached = arrays
        return _window_slice(cached, start, end)

    def windows(self, stream_ids: list[str], start: int, end: int) -> dict[str, StreamArrays]:
        """`window` for several streams over one time range, the large ones read by one query: a UNION ALL of one
        range read per stream, each pruned to its own rows (measured at 1e8 points: half the time of one
        `stream_id IN (...)` scan, which prunes by time only, or of one query per stream)."""
        found, large = {}, []
        for stream_id in dict.fromkeys(stream_ids):
            if self._cached_or_small(stream_id) is not None:
                found[stream_id] = self.window(stream_id, start, end)
            else:
                large.append(stream_id)
        if not large:
            return found
        reads = " UNION ALL ".join(
            f"SELECT {index} AS member, {self._COLUMNS} FROM observations WHERE stream_id = ? AND ts >= ? AND ts < ?"
            for index in range(len(large))
        )
        params = [value for stream_id in large for value in (stream_id, start - self._reach(stream_id)[0], end)]
        with self._lock:
            data = self._con.execute(reads, params).fetchnumpy()  # UNION ALL keeps its parts' order, one after another
        members = np.asarray(data["member"])
        if len(members) > 1 and bool((np.diff(members) < 0).any()):
            raise StageError(f"{self.path}: {OBSERVATIONS_OUT_OF_ORDER}")
        bounds = np.searchsorted(members, np.arange(len(large) + 1), "left")
        for index, stream_id in enumerate(large):
            arrays = _stream_arrays(data, slice(int(bounds[index]), int(bounds[index + 1])), self.path)
            pad, first_ts, _ = self._reach(stream_id)
            if not np.searchsorted(arrays.ts, start, "left") and first_ts is not None and first_ts < start - pad:
                found[stream_id] = self.window(stream_id, start, end)  # the row before lies further back
            else:
                found[stream_id] = _window_slice(arrays, start, end)
        return found

    def around(self, stream_id: str, at: int) -> StreamArrays:
        """The stream's rows at the last time before `at` and at the first time at or after it: all that a lookup at
        one instant reads (exact or nearest). Read like `window`, widening each side on its own."""
        cached = self._cached_or_small(stream_id)
        if cached is None:
            pad, first_ts, last_ts = self._reach(stream_id)
            low = high = pad
            while True:
                arrays = self._range(stream_id, at - low, at + high + 1)
                after = int(np.searchsorted(arrays.ts, at, "left"))
                low_done = after > 0 or first_ts is None or first_ts >= at - low
                high_done = after < len(arrays.ts) or last_ts is None or last_ts <= at + high
                if low_done and high_done:
                    break
                low, high = (low if low_done else low * WIDEN), (high if high_done else high * WIDEN)
            cached = arrays
        after = int(np.searchsorted(cached.ts, at, "left"))
        first = int(np.searchsorted(cached.ts, cached.ts[after - 1], "left")) if after else 0
        last = int(np.searchsorted(cached.ts, cached.ts[after], "right")) if after < len(cached.ts) else after
        return cached.slice(first, last)

    def aggregate(self, stream_id: str, period: str, window_start: int) -> dict | None:
        """One `aggregates` row. A stream's rows of one period are loaded at their first use by one bound query and
        kept as columns (LRU, AGGREGATE_TABLES of them); the row asked becomes a dict, with the values DuckDB gives."""
        key = (stream_id, period)
        with self._lock:
            table = self._windows.get(key)
            if table is not None:
                self._windows.move_to_end(key)
            else:
                table = _Aggregates(
                    self._con.sql(
                        "SELECT * FROM aggregates WHERE stream_id = ? AND period = ? ORDER BY window_start",
                        params=list(key),
                    ).to_arrow_table()
                )
                self._windows[key] = table
                while len(self._windows) > AGGREGATE_TABLES:
                    self._windows.popitem(last=False)
        return table.row(window_start)

    def reject_counts(self, stream_id: str, start: int, end: int) -> dict[str, int]:
        rows = self._rows(
            "SELECT reason, count(*) AS n FROM rejects WHERE stream_id = ? AND ts >= ? AND ts < ? GROUP BY reason "
            "ORDER BY reason",
            [stream_id, start, end],
        )
        return {row["reason"]: row["n"] for row in rows}
