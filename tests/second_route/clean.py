"""The mapping's declared cleaning rules, written again from docs/ingest.md: each cell is kept or rejected by the first
rule that applies (missing, unparseable, non-finite, sentinel, zero dropout, out of range), then one value per UTC time
(keep_first_row: file order), then a cumulative counter becomes register differences (the amount since the previous
valid reading; the first reading, a decrease and a jump are rejected; a gap is not, /tmp spec of h-meters)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tests.second_route.raw import Cells, Point

HOUR_US = 3_600_000_000  # times are int64 microseconds UTC


@dataclass
class Stream:
    """A stream as the store should hold it: sorted UTC times (us) and values (amounts for a counter), with the times
    of the cells rejected as duplicates or non-finite (a window holding one is never healthy)."""

    point: Point
    ts: np.ndarray
    value: np.ndarray
    duplicate_ts: np.ndarray
    non_finite_ts: np.ndarray

    @property
    def is_counter(self) -> bool:
        return self.point.counter is not None


def _numbers(text: np.ndarray) -> np.ndarray:
    return pd.to_numeric(pd.Series(text, dtype=object), errors="coerce").to_numpy(dtype=np.float64)


def clean(point: Point, cells: Cells, cleaning: dict) -> Stream:
    ts = np.concatenate(cells.ts) if cells.ts else np.zeros(0, np.int64)
    text = np.concatenate(cells.text) if cells.text else np.zeros(0, object)
    dropout = np.concatenate(cells.dropout) if cells.dropout else np.zeros(0, bool)
    value = _numbers(text)
    missing = np.isin(text, list(cleaning.get("missing_tokens", ["", "NA"])))
    words = pd.Series(text, dtype=object).str.lower().str.lstrip("+-")
    non_finite = ~missing & np.isin(words.to_numpy(), ["nan", "inf", "infinity"])
    counter = point.counter
    zero_dropout = point.point_class in cleaning.get("zero_dropout_classes", []) or (
        counter is not None and counter.get("zero_is_dropout", True)
    )
    low, high = cleaning.get("ranges", {}).get(point.point_class, (-np.inf, np.inf))
    if counter is not None:
        low, high = -np.inf, np.inf  # ranges are not applied to a counter's register
    rejected = (
        dropout
        | missing
        | np.isnan(value) & ~non_finite
        | non_finite
        | np.isin(value, cleaning.get("sentinels", []))
        | (zero_dropout & (value == 0))
        | (value < low)
        | (value > high)
    )
    non_finite_ts = ts[non_finite & ~dropout]
    ts, value = ts[~rejected], value[~rejected] + 0.0
    order = np.argsort(ts, kind="stable")  # file order among equal times
    ts, value = ts[order], value[order]
    assert cleaning.get("duplicates", "keep_first_row") == "keep_first_row"
    repeated = np.zeros(len(ts), dtype=bool)
    repeated[1:] = ts[1:] == ts[:-1]
    duplicate_ts, ts, value = ts[repeated], ts[~repeated], value[~repeated]
    if counter is not None:
        ts, value = _differences(ts, value, counter)
    return Stream(point, ts, value, duplicate_ts, non_finite_ts)


def _differences(ts: np.ndarray, register: np.ndarray, rule: dict) -> tuple[np.ndarray, np.ndarray]:
    """Each valid reading but the first -> the register difference since the previous valid reading (across a decrease:
    a rollover or a reset where declared); a decrease left negative, or a rise above max_rate times the hours since
    the previous reading, is rejected."""
    amount = np.diff(register)
    previous = register[:-1]
    down = amount < 0
    across = amount.copy()
    if rule.get("resets"):
        across = register[1:].copy()
    if rule.get("rollover") is not None:
        wrap = previous > rule["rollover"] / 2
        across = np.where(wrap, register[1:] + rule["rollover"] - previous, across)
    amount = np.where(down, across, amount)
    keep = amount >= 0
    if rule.get("max_rate") is not None:
        keep &= amount <= rule["max_rate"] * np.diff(ts) / HOUR_US
    return ts[1:][keep], amount[keep] + 0.0


def corpus_streams(spec: dict, cells: dict[str, Cells]) -> dict[str, Stream]:
    return {sid: clean(c.point, c, spec["cleaning"]) for sid, c in sorted(cells.items())}
