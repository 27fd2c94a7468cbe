"""`make bench`: throughput of ingest+store against DuckDB's fastest plan for the same CSV files -> zstd Parquet
(pipeline/bench/anchor.py), stage against stage in this process and as whole processes; the cached build over the
timed corpora and over 20 (pipeline/bench/cached.py); the tasks stage, tool latency and the runtime.

Run as `python -m pipeline.bench.throughput [--repeat N]`. Prints Markdown tables for docs/benchmarks.md; medians over
N runs, ours and DuckDB's in turn so both see the same machine, the load average beside them.
"""

from __future__ import annotations

import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import click
import duckdb

from contracts.corpus import BtsPickle
from pipeline.bench.anchor import PLANS, best_plans, duckdb_process, load_average, our_processes
from pipeline.bench.cached import cached_figures
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


def _tasks_stage(ws: Workspace, corpora: list[str], artifacts: Path) -> dict[str, float]:
    """The tasks stage, built on the ingest and store in `artifacts` (and nothing after it: the later stages are no
    figure of this table): its seconds, its candidate pools and the tasks written."""
    figures = {"tasks": 0.0, "candidates": 0.0, "tasks_written": 0.0}
    for outcome in build(Workspace.from_root(ws.root, artifacts), corpora, until="tasks"):
        if outcome.stage == "tasks":
            figures["tasks"] += outcome.seconds
            figures["candidates"] += sum(f["pool"] for f in outcome.manifest.details["families"].values())
            figures["tasks_written"] += sum(outcome.manifest.row_counts.values())
    return figures


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
    "--cached-corpora",
    default=20,
    show_default=True,
    type=click.IntRange(min=0),
    help="Also time the cached build over this many corpora (copies of the smallest timed one); 0: skip.",
)
@click.option(
    "--fleet-sites",
    default=100_000,
    show_default=True,
    type=click.IntRange(min=0),
    help="Also time ingest of one generated long CSV holding this many sites (target: 100,000 in under 60 s); 0: skip.",
)
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Project root (default: the current folder).",
)
def main(
    repeat: int,
    corpora: tuple[str, ...],
    tool_calls: int,
    cached_corpora: int,
    fleet_sites: int,
    root: Path | None,
) -> None:
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
        _figures(ws, Path(tmp), names, files, repeat, tool_calls, cached_corpora)
        if fleet_sites:
            _fleet_table(ws, Path(tmp), fleet_sites, repeat)


def _fleet_table(ws: Workspace, tmp: Path, sites: int, repeat: int) -> None:
    """Ingest of one long CSV of `sites` sites (pipeline/bench/fleet.py): median wall seconds of `repeat` runs."""
    from pipeline.bench.fleet import fleet_seconds

    runs = [fleet_seconds(ws.root, tmp / f"fleet{i}", sites) for i in range(repeat)]
    seconds = statistics.median(s for s, _ in runs)
    click.echo("\n| fleet file (one long CSV, `site_column`) | sites | observations | ingest s (target < 60) |")
    click.echo("|---|---|---|---|")
    click.echo(f"| generated, 2 hours x 2 points per site | {sites:,} | {runs[0][1]:,} | {seconds:.2f} |")


def _figures(
    ws: Workspace,
    tmp: Path,
    names: list[str],
    files: dict[str, list[Path]],
    repeat: int,
    tool_calls: int,
    cached_corpora: int,
) -> None:
    """Every table, from `repeat` builds from raw, each into a fresh folder under `tmp` (ingest and store timed
    against DuckDB's plans in turn, the tasks stage after them); the last one is built to its release (untimed), then
    timed cached, and its stores and audited episodes serve the tool and runtime tables."""
    records = sum(_records(f) for f in files.values())
    megabytes = sum(p.stat().st_size for f in files.values() for p in f) / 1e6
    load_before = load_average()
    _ingest_store(ws, names, tmp / "warmup")  # untimed: imports done, files in the page cache
    plans = best_plans(files, repeat)
    winners = {corpus: found["winner"] for corpus, found in plans.items()}
    pairs = [(_ingest_store(ws, names, tmp / f"run{i}"), duckdb_process(files, winners)) for i in range(repeat)]
    processes = our_processes(ws.root, tmp, names, repeat)
    ingest = statistics.median(ours["ingest"] for ours, _ in pairs)
    store = statistics.median(ours["store"] for ours, _ in pairs)
    total = statistics.median(ours["wall"] for ours, _ in pairs)
    best = sum(found["seconds"] for found in plans.values())
    theirs_process = statistics.median(theirs for _, theirs in pairs)
    ours_process = statistics.median(processes)
    later = [_tasks_stage(ws, names, tmp / f"run{i}") for i in range(repeat)]
    built = Workspace.from_root(ws.root, tmp / f"run{repeat - 1}")
    build(built, names)  # untimed: the last run's later stages, whose audited episodes the runtime table plays
    cached = cached_figures(ws, built.artifacts_dir, names, cached_corpora, repeat, tmp / "grown")
    click.echo(
        f"machine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}, duckdb "
        f"{duckdb.__version__}; load average {load_before} before, {load_average()} after"
    )
    click.echo(f"input: {', '.join(names)}: {records:,} CSV records, {megabytes:.1f} MB; median of {repeat} runs\n")
    click.echo(f"| corpus | {' | '.join(f'DuckDB {plan} s' for plan in PLANS)} | DuckDB's plan |")
    click.echo("|---|" + "---|" * (len(PLANS) + 1))
    for corpus, found in plans.items():
        cells = " | ".join("refused" if s is None else f"{s:.3f}" for s in found["plans"].values())
        click.echo(f"| {corpus} | {cells} | {found['winner']} |")
    click.echo("\n| measure | seconds | records/s |")
    click.echo("|---|---|---|")
    click.echo(f"| ingest (stage seconds summed over the corpora) | {ingest:.3f} | {records / ingest:,.0f} |")
    click.echo(f"| store (stage seconds summed over the corpora) | {store:.3f} | {records / store:,.0f} |")
    click.echo(
        f"| ingest + store, wall (corpora at once, as `build` runs them) | {total:.3f} | {records / total:,.0f} |"
    )
    click.echo(f"| DuckDB's best plan per corpus, summed (in this process) | {best:.3f} | {records / best:,.0f} |")
    click.echo(f"| **ratio ours / DuckDB, stage against stage** | | **{best / total:.2f}** |")
    click.echo(f"| whole process: `build --until store --force` | {ours_process:.3f} | {records / ours_process:,.0f} |")
    click.echo(
        f"| whole process: python + duckdb, the best plans | {theirs_process:.3f} | {records / theirs_process:,.0f} |"
    )
    click.echo(
        f"| **ratio ours / DuckDB, whole processes (floor 0.55, goal 0.75)** | | "
        f"**{theirs_process / ours_process:.2f}** |"
    )
    for count, seconds in cached.items():
        click.echo(
            f"| `build --json`, nothing changed, {count} corpora (whole process; target < 1 s) | {seconds:.3f} | |"
        )
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
