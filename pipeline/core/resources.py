"""How a build may use the machine (threads, partitions, workers, memory budget, executor, parts location), apart
from the executors that use it: the local pool (pipeline/core/executor.py) and Ray (pipeline/core/ray_executor.py)
both read it. Changes nothing in the outputs."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from pipeline.core.errors import ConfigError

EXECUTORS = ("local", "ray")
DEFAULT_BUDGET = 4 << 30
MIN_BUDGET = 64 << 20  # below this no build runs
MEMORY_ENV = "TELEMETRY_BENCH_MEMORY"  # the budget a build reads when --memory-budget is not given
MAIN_RESERVE = 768 << 20
WORKER_BASE = 256 << 20  # a worker's resident size after importing polars, pyarrow, duckdb and numpy
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_bytes(text: str) -> int:
    """'4GB', '512 MiB', '2g', '1000000' -> bytes (binary units)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", text.lower())
    if not match:
        raise ConfigError(f"memory budget {text!r} is not a size; write it like 4GB, 512MB or 2g")
    value = float(match.group(1)) * _UNITS[match.group(2)]
    if value < MIN_BUDGET:
        raise ConfigError(f"memory budget {text!r} is below 64 MB; the build cannot run in that")
    return int(value)


@dataclass(frozen=True)
class Resources:
    """How a build may use the machine. Changes nothing in the outputs."""

    threads: int | None = None  # DuckDB threads per process (None: DuckDB's default)
    partitions: int | None = None  # hash partitions of the streams (None: one per worker; one for a small corpus)
    workers: int | None = None  # processes (None: the CPUs this process may use)
    memory_budget: int = DEFAULT_BUDGET  # bytes for the whole build, shared by the workers
    executor: str = "local"  # where batches and units run: "local" (spawned processes) or "ray" (Ray tasks)
    ray_address: str | None = None  # a Ray cluster to connect to (None: a local Ray instance of `workers` CPUs)
    parts: str | None = None  # where workers leave intermediate parts (pipeline.core.parts; None: each stage's folder)

    def __post_init__(self) -> None:
        if self.executor not in EXECUTORS:
            raise ConfigError(f"executor {self.executor!r} is not one of {', '.join(EXECUTORS)}")
        if self.parts is not None:  # checked (and made absolute) wherever a build is given one, nothing created
            from pipeline.core.parts import check_location

            object.__setattr__(self, "parts", check_location(self.parts))

    @property
    def worker_count(self) -> int:
        if self.workers:
            return self.workers
        return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)

    @property
    def main_reserve(self) -> int:
        """What the main process keeps for itself (libraries, the merge, DuckDB's cache)."""
        return min(MAIN_RESERVE, self.memory_budget // 4)

    def per_worker(self, tasks: int) -> int:
        """Bytes of data one worker may hold when `tasks` tasks share the pool: the main process's share
        and each worker's own libraries set aside."""
        share = (self.memory_budget - self.main_reserve) // max(1, min(self.worker_count, tasks))
        return share - WORKER_BASE if share > 2 * WORKER_BASE else share // 2  # tiny budgets (tests): half


def polars_threads(busy: int) -> str:
    """Each worker's polars (and DuckDB) gets its share of the CPUs, so workers do not fight over cores. Set in each
    worker before it imports polars, never in this process's environment: corpora building at once share it."""
    return str(max(1, Resources(workers=None).worker_count // max(1, busy)))
