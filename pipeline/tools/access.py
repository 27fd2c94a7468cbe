"""Read-only access to one tool store: stream metadata in memory, stream arrays cached for binary search."""

from __future__ import annotations

import copy
import threading
from collections import Counter, OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from pipeline.core.canonical import canonical_json
from pipeline.core.workspace import Workspace
from pipeline.store.reader import STORE_FILE, open_store

DEFAULT_CACHE_BYTES = 512 * 1024 * 1024
REMEMBERED_BYTES = (
    64 << 20
)  # tool results a store that remembers keeps, by their JSON size (least recently used go first)


@dataclass(frozen=True)
class StreamArrays:
    """One stream's observations in time order (the store's (stream_id, ts) layout)."""

    ts: np.ndarray  # int64 microseconds UTC, strictly increasing
    value: np.ndarray  # float64
    step: np.ndarray  # float64 local step of each observation (NaN where the stream has no gap)

    @property
    def nbytes(self) -> int:
        return self.ts.nbytes + self.value.nbytes + self.step.nbytes


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
    out, word = [], []
    for ch in (text or "").lower():
        if ch.isalnum():
            word.append(ch)
        elif word:
            out.append("".join(word))
            word = []
    if word:
        out.append("".join(word))
    return out


class ToolStore:
    """A read-only store opened once; every query binds its parameters. Safe to share across threads."""

    def __init__(self, path: Path, cache_bytes: int = DEFAULT_CACHE_BYTES, remember_results: bool = False) -> None:
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
        self._windows: OrderedDict[str, dict] = OrderedDict()
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
        return cls(ws.stage_dir(corpus, "store") / STORE_FILE)

    def close(self) -> None:
        self._con.close()

    def _rows(self, sql: str, params: list | None = None) -> list[dict]:
        with self._lock:
            cursor = self._con.cursor()
            try:
                result = cursor.execute(sql, params or [])
                names = [d[0] for d in result.description]
                return [dict(zip(names, row, strict=True)) for row in result.fetchall()]
            finally:
                cursor.close()

    @property
    def remembers(self) -> bool:
        return self._results is not None

    def remembered(self, key: tuple[str, str]) -> dict | None:
        """A copy of the result kept for this call, or None (the caller may change what it gets)."""
        with self._lock:
            found = self._results.get(key) if self._results is not None else None
            if found is not None:
                self._results.move_to_end(key)
        return copy.deepcopy(found[0]) if found is not None else None

    def remember(self, key: tuple[str, str], result: dict) -> None:
        """Keep a copy of a call's result, within REMEMBERED_BYTES (a result that is not canonical JSON is not kept)."""
        if self._results is None:
            return
        try:
            size = len(key[1]) + len(canonical_json(result))
        except (TypeError, ValueError):
            return
        kept = copy.deepcopy(result)
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

    def arrays(self, stream_id: str) -> StreamArrays:
        """The stream's sorted arrays, loaded once by a bound-parameter query and kept in an LRU cache."""
        with self._lock:
            if stream_id in self._cache:
                self._cache.move_to_end(stream_id)
                return self._cache[stream_id]
            cursor = self._con.cursor()
            try:
                data = cursor.execute(
                    "SELECT ts, value, coalesce(CAST(step_us AS DOUBLE), 'NaN'::DOUBLE) AS step_us "
                    "FROM observations WHERE stream_id = ? ORDER BY ts",
                    [stream_id],
                ).fetchnumpy()
            finally:
                cursor.close()
            arrays = StreamArrays(
                ts=np.asarray(data["ts"], dtype=np.int64),
                value=np.asarray(data["value"], dtype=np.float64),
                step=np.asarray(data["step_us"], dtype=np.float64),
            )
            self._cache[stream_id] = arrays
            self._cached += arrays.nbytes
            while self._cached > self._cache_bytes and len(self._cache) > 1:
                _, old = self._cache.popitem(last=False)
                self._cached -= old.nbytes
            return arrays

    def aggregate(self, stream_id: str, period: str, window_start: int) -> dict | None:
        """One `aggregates` row; a stream's rows are loaded once (one bound query) and kept (LRU, 256 streams)."""
        with self._lock:
            cached = self._windows.get(stream_id)
            if cached is not None:
                self._windows.move_to_end(stream_id)
                return cached.get((period, window_start))
        rows = self._rows("SELECT * FROM aggregates WHERE stream_id = ?", [stream_id])
        table = {(row["period"], row["window_start"]): row for row in rows}
        with self._lock:
            self._windows[stream_id] = table
            while len(self._windows) > 256:
                self._windows.popitem(last=False)
        return table.get((period, window_start))

    def reject_counts(self, stream_id: str, start: int, end: int) -> dict[str, int]:
        rows = self._rows(
            "SELECT reason, count(*) AS n FROM rejects WHERE stream_id = ? AND ts >= ? AND ts < ? GROUP BY reason "
            "ORDER BY reason",
            [stream_id, start, end],
        )
        return {row["reason"]: row["n"] for row in rows}
