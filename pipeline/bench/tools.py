"""Per-tool latency over a real store: p50 and p99 of N calls with arguments drawn from the store itself."""

from __future__ import annotations

import time

import numpy as np

from pipeline.tools import registry
from pipeline.tools.access import ToolStore
from pipeline.tools.timeutil import format_us


def _arguments(store: ToolStore, name: str, rng: np.random.Generator) -> dict:
    streams = [s for s in store.streams.values() if s["tool_ready"]]
    stream = streams[int(rng.integers(len(streams)))]
    sid = stream["stream_id"]
    if name == "resolve_point":
        return {"site": stream["site_id"], "point_class": stream["point_class"], "equipment": stream["equipment"]}
    if name == "list_points":
        return {"site": stream["site_id"]}
    if name == "inspect_quality":
        return {"stream_id": sid}
    if name == "lookup_observation":
        at = int(rng.integers(stream["first_ts"], stream["last_ts"] + 1))
        return {"stream_id": sid, "timestamp": format_us(at), "mode": "nearest"}
    period = {
        "aggregate_window": "day",
        "inspect_quality_window": "day",
        "compare_window": "week",
        "rank_window": "month",
    }[name]
    at = int(rng.integers(stream["first_ts"], stream["last_ts"] + 1))
    row = store._rows(
        "SELECT window_start, window_end FROM aggregates WHERE stream_id = ? AND period = ? AND window_start <= ? "
        "ORDER BY window_start DESC LIMIT 1",
        [sid, period, at],
    )[0]
    window = {
        "window_start": format_us(row["window_start"]),
        "window_end": format_us(row["window_end"]),
        "period": period,
    }
    if name == "compare_window":
        other = streams[int(rng.integers(len(streams)))]["stream_id"]
        return {"left_stream_id": sid, "right_stream_id": other, **window}
    if name == "rank_window":
        chosen = [
            streams[int(i)]["stream_id"] for i in rng.choice(len(streams), size=min(4, len(streams)), replace=False)
        ]
        return {"stream_ids": chosen, **window}
    return {"stream_id": sid, **window}


def latencies(store: ToolStore, calls: int, seed: int = 0) -> dict[str, tuple[float, float]]:
    """Tool name -> (p50 ms, p99 ms); arguments are drawn before timing, each call timed alone."""
    out = {}
    for tool in registry.TOOLS:
        rng = np.random.default_rng(seed)
        argument_sets = [_arguments(store, tool.name, rng) for _ in range(calls)]
        samples = []
        for arguments in argument_sets:
            start = time.perf_counter()
            registry.call(store, tool.name, arguments)
            samples.append(time.perf_counter() - start)
        out[tool.name] = (float(np.median(samples)) * 1e3, float(np.quantile(samples, 0.99)) * 1e3)
    return out
