"""`make bench`: throughput of ingest+store against DuckDB's own CSV -> Parquet copy of the same files.

Run as `python -m pipeline.bench.throughput [--repeat N]`. Prints a Markdown table for docs/benchmarks.md.
Both sides run in this process after imports, on the same files, medians over N runs.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click
import duckdb

from contracts.corpus import BtsPickle
from pipeline.core.config import load_mapping, select_corpora
from pipeline.core.workspace import Workspace
from pipeline.harness.build import build, raw_folder


def _csv_value_files(ws: Workspace, corpus: str) -> tuple[list[Path], str | None]:
    """A corpus's CSV value files, or none and why it cannot be timed against DuckDB's CSV copy."""
    mapping = load_mapping(ws.corpus_config(corpus))
    if isinstance(mapping.values, BtsPickle):
        return [], f"its values are {mapping.values.kind} archives, not CSV, so DuckDB's CSV copy is no reference"
    if mapping.values.archive_member is not None:
        return (
            [],
            "its CSV values are members of zip archives (values.archive_member), so DuckDB's CSV copy is no reference",
        )
    folder = raw_folder(ws, mapping)
    if folder is None:
        return [], f"no raw data (set {mapping.raw_env})"
    files = sorted(p for p in folder.glob(mapping.values.files) if p.is_file())
    if not files:
        return [], f"no value files match {mapping.values.files!r} under {folder}"
    return files, None


def _records(files: list[Path]) -> int:
    return sum(max(0, path.read_bytes().count(b"\n") - 1) for path in files)


def _ingest_store(ws: Workspace, corpora: list[str], artifacts: Path) -> dict[str, float]:
    """Wall seconds of ingest + store over all corpora, built from raw into `artifacts` as `build` runs them (corpora
    at once, one per core), and the seconds of each of the two stages summed over the corpora."""
    start = time.perf_counter()
    outcomes = build(Workspace.from_root(ws.root, artifacts), corpora, until="store", force=True)
    seconds = {"wall": time.perf_counter() - start, "ingest": 0.0, "store": 0.0}
    for outcome in outcomes:
        seconds[outcome.stage] += outcome.seconds
    return seconds


def _later_stages(ws: Workspace, corpora: list[str], artifacts: Path) -> dict[str, float]:
    """The stages after store, built on the ingest and store in `artifacts`: the tasks stage's seconds, its
    candidate pools and the tasks written."""
    figures = {"tasks": 0.0, "candidates": 0.0, "tasks_written": 0.0}
    for outcome in build(Workspace.from_root(ws.root, artifacts), corpora):
        if outcome.stage == "tasks":
            figures["tasks"] += outcome.seconds
            figures["candidates"] += sum(f["pool"] for f in outcome.manifest.details["families"].values())
            figures["tasks_written"] += sum(outcome.manifest.row_counts.values())
    return figures


def _duckdb_copy(files_by_corpus: dict[str, list[Path]]) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        con = duckdb.connect()
        start = time.perf_counter()
        for corpus, files in files_by_corpus.items():
            paths = ", ".join(f"'{p}'" for p in files)
            con.execute(
                f"COPY (SELECT * FROM read_csv([{paths}], union_by_name = true)) TO '{tmp}/{corpus}.parquet' "
                "(FORMAT parquet, COMPRESSION zstd)"
            )
        elapsed = time.perf_counter() - start
        con.close()
    return elapsed


def _cached_cli(ws: Workspace, corpora: list[str]) -> float:
    """Wall time of a whole `telemetry-bench build --json` process with nothing to rebuild (after one untimed)."""
    exe = Path(sys.executable).with_name("telemetry-bench")
    env = dict(os.environ, TELEMETRY_BENCH_QUIET="1")
    command = [
        str(exe),
        "--root",
        str(ws.root),
        "--artifacts",
        str(ws.artifacts_dir),
        "build",
        *[a for c in corpora for a in ("--corpus", c)],
    ]
    subprocess.run(command, check=True, capture_output=True, env=env)
    start = time.perf_counter()
    out = subprocess.run([*command, "--json"], check=True, capture_output=True, env=env)
    elapsed = time.perf_counter() - start
    assert {row["status"] for row in json.loads(out.stdout)} == {"cached"}
    return elapsed


def _tool_table(ws: Workspace, names: list[str], calls: int) -> None:
    """p50/p99 per tool over `calls` calls on each corpus's built store."""
    from pipeline.bench.tools import latencies
    from pipeline.tools.access import ToolStore

    click.echo(f"\n| tool | {' | '.join(f'{n} p50 ms | {n} p99 ms' for n in names)} |")
    click.echo("|---|" + "---|---|" * len(names))
    results = {}
    for name in names:
        store = ToolStore.for_corpus(ws, name)
        results[name] = latencies(store, calls)
        store.close()
    for tool in results[names[0]]:
        cells = " | ".join(f"{results[n][tool][0]:.3f} | {results[n][tool][1]:.3f}" for n in names)
        click.echo(f"| {tool} | {cells} |")


@click.command()
@click.option(
    "--repeat",
    default=3,
    show_default=True,
    type=click.IntRange(min=1),
    help="Runs of each side; medians are reported.",
)
@click.option("--corpus", "corpora", multiple=True, help="Corpora to time (default: all with CSV value files).")
@click.option(
    "--tool-calls",
    default=1000,
    show_default=True,
    type=click.IntRange(min=0),
    help="Calls per tool for the latency table (0: skip).",
)
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Project root (default: the current folder).",
)
def main(repeat: int, corpora: tuple[str, ...], tool_calls: int, root: Path | None) -> None:
    ws = Workspace.from_root(root)
    files: dict[str, list[Path]] = {}
    for name in select_corpora(ws, corpora):
        found, why = _csv_value_files(ws, name)
        if why:
            click.echo(f"skipped {name}: {why}")
        else:
            files[name] = found
    names = list(files)
    if not names:
        click.echo("nothing to time: no corpus has CSV value files")
        return
    with tempfile.TemporaryDirectory(prefix="tb-bench-") as tmp:  # the project's own artifacts are never touched
        _figures(ws, Path(tmp), names, files, repeat, tool_calls)


def _figures(
    ws: Workspace, tmp: Path, names: list[str], files: dict[str, list[Path]], repeat: int, tool_calls: int
) -> None:
    """Every table, from `repeat` builds from raw, each into a fresh folder under `tmp` (ingest and store timed
    against DuckDB's copy in turn, the later stages after them); the last one is timed cached, and its stores serve
    the tool and runtime tables."""
    records = sum(_records(f) for f in files.values())
    megabytes = sum(p.stat().st_size for f in files.values() for p in f) / 1e6
    # Side by side: one untimed run of each, then ours and DuckDB's copy in turn, so both see the same machine.
    _ingest_store(ws, names, tmp / "warmup")
    _duckdb_copy(files)
    pairs = [(_ingest_store(ws, names, tmp / f"run{i}"), _duckdb_copy(files)) for i in range(repeat)]
    ingest = statistics.median(ours["ingest"] for ours, _ in pairs)
    store = statistics.median(ours["store"] for ours, _ in pairs)
    total = statistics.median(ours["wall"] for ours, _ in pairs)
    copy = statistics.median(theirs for _, theirs in pairs)
    later = [_later_stages(ws, names, tmp / f"run{i}") for i in range(repeat)]
    built = Workspace.from_root(ws.root, tmp / f"run{repeat - 1}")
    cached = statistics.median(_cached_cli(built, names) for _ in range(repeat))
    click.echo(
        f"machine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}, duckdb "
        f"{duckdb.__version__}"
    )
    click.echo(f"input: {', '.join(names)}: {records:,} CSV records, {megabytes:.1f} MB; median of {repeat} runs\n")
    click.echo("| measure | seconds | records/s |")
    click.echo("|---|---|---|")
    click.echo(f"| ingest (stage seconds summed over the corpora) | {ingest:.3f} | {records / ingest:,.0f} |")
    click.echo(f"| store (stage seconds summed over the corpora) | {store:.3f} | {records / store:,.0f} |")
    click.echo(
        f"| ingest + store, wall (corpora at once, as `build` runs them) | {total:.3f} | {records / total:,.0f} |"
    )
    click.echo(f"| DuckDB read_csv -> Parquet, same files | {copy:.3f} | {records / copy:,.0f} |")
    click.echo(f"| **ratio ours / DuckDB (target >= 0.5)** | | **{copy / total:.2f}** |")
    click.echo(f"| `telemetry-bench build --json`, nothing changed (whole process; target < 2 s) | {cached:.3f} | |")
    tasks = statistics.median(r["tasks"] for r in later)
    pools, written = later[0]["candidates"], later[0]["tasks_written"]
    click.echo("\n| tasks stage (all corpora) | seconds | per second |\n|---|---|---|")
    click.echo(
        f"| {pools:,.0f} candidates enumerated (SQL pools, predicates, selection order) | {tasks:.3f} | "
        f"{pools / tasks:,.0f} candidates/s |"
    )
    click.echo(
        f"| {written:,.0f} tasks written (gold and alternatives run through the tools) | {tasks:.3f} | "
        f"{written / tasks:,.1f} tasks/s |"
    )
    if tool_calls:
        _tool_table(built, names, tool_calls)
    from pipeline.bench.runtime import runtime_figures

    click.echo(
        "\n| corpus (test split) | episodes | oracle ms per episode | scorer traces/s (target >= 5,000) "
        "|\n|---|---|---|---|"
    )
    for name in names:
        figures = runtime_figures(built, name)
        if not figures["episodes"]:
            click.echo(f"| {name} | 0 (no test episodes: nothing to time) | | |")
            continue
        click.echo(
            f"| {name} | {figures['episodes']} | {figures['oracle_ms_per_episode']:.2f} | "
            f"{figures['scored_traces_per_s']:,.0f} |"
        )


if __name__ == "__main__":
    main()
