"""The fair anchor of `make bench`: DuckDB's fastest plan per corpus for the same CSV files to zstd Parquet, timed
in this process (stage against stage) and as whole processes (interpreter start and imports included), beside ours.

Plans (each corpus keeps the fastest, median of the runs): `union`, one read_csv of every file with union_by_name;
`plain`, one read_csv of every file (files of one header only; a plan DuckDB refuses is left out); `per_file`, one
COPY per file."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PLANS = ("union", "plain", "per_file")


def _quoted(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def plan_statements(plan: str, files: list[Path], prefix: str = "") -> list[str]:
    """The COPY statements of one plan, writing {tmp}/<prefix>... ({tmp}: the folder the runner gives)."""
    target = "(FORMAT parquet, COMPRESSION zstd)"
    listed = ", ".join(_quoted(p) for p in files)
    if plan == "union":
        return [
            f"COPY (SELECT * FROM read_csv([{listed}], union_by_name = true)) TO '{{tmp}}/{prefix}all.parquet' {target}"
        ]
    if plan == "plain":
        return [f"COPY (SELECT * FROM read_csv([{listed}])) TO '{{tmp}}/{prefix}all.parquet' {target}"]
    return [
        f"COPY (SELECT * FROM read_csv({_quoted(p)})) TO '{{tmp}}/{prefix}{index}.parquet' {target}"
        for index, p in enumerate(files)
    ]


def _run(statements: list[str]) -> float:
    import duckdb

    with tempfile.TemporaryDirectory() as tmp:
        con = duckdb.connect()
        start = time.perf_counter()
        for statement in statements:
            con.execute(statement.replace("{tmp}", tmp))
        elapsed = time.perf_counter() - start
        con.close()
    return elapsed


def best_plans(files_by_corpus: dict[str, list[Path]], repeat: int) -> dict[str, dict]:
    """Per corpus: every plan's median seconds in this process (None when DuckDB refuses it), and the winner."""
    import duckdb

    found = {}
    for corpus, files in files_by_corpus.items():
        seconds: dict[str, float | None] = {}
        for plan in PLANS:
            statements = plan_statements(plan, files)
            try:
                _run(statements)  # untimed: the files in the page cache, as for ours
                seconds[plan] = statistics.median(_run(statements) for _ in range(repeat))
            except duckdb.Error:
                seconds[plan] = None
        timed = {plan: s for plan, s in seconds.items() if s is not None}
        winner = min(timed, key=timed.get)
        found[corpus] = {"plans": seconds, "winner": winner, "seconds": timed[winner]}
    return found


# A whole DuckDB process: interpreter start, `import duckdb`, the winning plans of every corpus.
_PROCESS = """
import json, sys, tempfile, duckdb
statements = json.loads(sys.argv[1])
with tempfile.TemporaryDirectory() as tmp:
    con = duckdb.connect()
    for statement in statements:
        con.execute(statement.replace("{tmp}", tmp))
"""


def duckdb_process(files_by_corpus: dict[str, list[Path]], winners: dict[str, str]) -> float:
    """Wall seconds of one process running every corpus's winning plan."""
    statements = [
        s for corpus, files in files_by_corpus.items() for s in plan_statements(winners[corpus], files, f"{corpus}-")
    ]
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", _PROCESS, json.dumps(statements)], check=True, capture_output=True)
    return time.perf_counter() - start


def process_environment(pycache: Path) -> dict[str, str]:
    """The environment of our timed processes: quiet, and with Python's bytecode cache on, as a user's Python has it
    (DuckDB's modules were compiled when pip installed them; ours would otherwise be compiled again by every process
    where the environment says PYTHONDONTWRITEBYTECODE). A cache folder already chosen (PYTHONPYCACHEPREFIX, as
    `make bench` sets) is kept, else `pycache` is used."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.setdefault("PYTHONPYCACHEPREFIX", str(pycache))
    return {**env, "TELEMETRY_BENCH_QUIET": "1"}


def our_process(root: Path, artifacts: Path, corpora: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one `telemetry-bench build --until store --force` process over the corpora."""
    command = [sys.executable, "-m", "pipeline.cli", "--root", str(root), "--artifacts", str(artifacts), "build"]
    command += [*[a for c in corpora for a in ("--corpus", c)], "--until", "store", "--force", "--json"]
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env=env)
    return time.perf_counter() - start


def our_processes(root: Path, tmp: Path, corpora: list[str], repeat: int) -> list[float]:
    """Wall seconds of `repeat` of our processes, each into a fresh folder under `tmp`, after an untimed one (the
    bytecode written, as DuckDB's was at its install, and the files in the page cache)."""
    env = process_environment(tmp / "pycache")
    our_process(root, tmp / "process-warmup", corpora, env)
    return [our_process(root, tmp / f"process{i}", corpora, env) for i in range(repeat)]


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())
