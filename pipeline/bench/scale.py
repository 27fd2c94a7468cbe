"""`make bench-scale` (not in CI): synthetic BTS at growing sizes through the whole build, release included.

For each size and executor (local processes, and Ray when it is installed, side by side on the same raw data), each
stage runs in a process of its own (`build --until STAGE`, the stages before it cached), so that its peak RSS is its
own: per stage, seconds and peak RSS of the build's processes (Ray's among them); then per build: points written,
ingest and store points/s, the wall time of the six processes (Ray's start and the cache checks included), DuckDB's
own copy of the same points (Parquet -> Parquet) and the ratio, and a linear projection to full BTS (2.86e9 points)
of ingest + store and of the whole build through the release. Sizes are approximate (up to 200 streams of at least
two years, ~131 points a day each); the synthetic data carry the default faults (configs/synth.toml).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import click
import duckdb

FULL_BTS_POINTS = 2_863_795_583
STREAMS = 200
MIN_DAYS = 730
POINTS_PER_STREAM_DAY = 24 * 60 / 11
STAGES = ("ingest", "store", "tasks", "episodes", "audit", "release")


def _tree_rss(root: int) -> int:
    """Resident bytes of a process and all its descendants (Linux /proc)."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            parents[int(entry.name)] = int(fields[1])
            rss[int(entry.name)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            continue
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack += [child for child, parent in parents.items() if parent == pid]
    return total


def _run(command: list[str]) -> tuple[str, int]:
    """stdout and peak resident bytes of one child process and its workers together (sampled every 0.2 s)."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss(process.pid))
            done.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = process.communicate()
    done.set()
    sampler.join()
    if process.returncode:
        raise click.ClickException(f"{' '.join(command)} failed:\n{err[-2000:]}")
    return out, peak


@click.command()
@click.option("--sizes", default="1e6,1e7,1e8", show_default=True, help="Approximate point counts, comma separated.")
@click.option(
    "--keep",
    type=click.Path(file_okay=False),
    help="Keep (and reuse) the synthetic raw data here, one folder per size.",
)
@click.option("--memory-budget", default="4GB", show_default=True, help="Passed to build.")
@click.option("--workers", type=int, help="Passed to build (default: the CPUs available).")
@click.option(
    "--executors",
    default=None,
    help="Executors to compare, comma separated (default: local, and ray when Ray is installed).",
)
def main(sizes: str, keep: str | None, memory_budget: str, workers: int | None, executors: str | None) -> None:
    cli = [sys.executable, "-m", "pipeline.cli"]
    options = ["--memory-budget", memory_budget, *(["--workers", str(workers)] if workers else [])]
    chosen = executors.split(",") if executors else ["local", *(["ray"] if importlib.util.find_spec("ray") else [])]
    click.echo(
        "| points | executor | "
        + " | ".join(f"{stage} s (peak RSS MB)" for stage in STAGES)
        + " | build wall s | ingest pts/s | store pts/s | DuckDB copy s | throughput ours/DuckDB (ingest+store) "
        "| projected full BTS h: ingest+store | through release |"
    )
    click.echo("|---" * (len(STAGES) + 9) + "|")
    for size in (float(s) for s in sizes.split(",")):
        # at least two years, as time-blocked splits need; fewer streams for the small sizes
        streams = max(1, min(STREAMS, round(size / MIN_DAYS / POINTS_PER_STREAM_DAY)))
        days = max(MIN_DAYS, round(size / streams / POINTS_PER_STREAM_DAY))
        with tempfile.TemporaryDirectory(prefix="tb-scale-") as tmp:
            raw = Path(keep) / f"bts-{size:.0e}" if keep else Path(tmp) / "raw"
            if not (raw / "SYNTHETIC.md").is_file():
                shutil.rmtree(raw, ignore_errors=True)
                subprocess.run(
                    [
                        *cli,
                        "synth",
                        "bts",
                        "--streams",
                        str(streams),
                        "--days",
                        str(days),
                        "--seed",
                        "1",
                        "--out",
                        str(raw),
                    ],
                    check=True,
                    capture_output=True,
                )
            for executor in chosen:
                _one(cli, raw, Path(tmp) / f"art-{executor}", [*options, "--executor", executor], executor)


def _one(cli: list[str], raw: Path, art: Path, options: list[str], executor: str) -> None:
    """One build of the synthetic raw data into `art`, a process per stage, and its row of the table."""
    seconds, rss, wall = {}, {}, 0.0
    for stage in STAGES:
        start = time.perf_counter()
        command = [*cli, "--artifacts", str(art), "build", "--corpus", "bts", "--raw", str(raw), "--json"]
        out, rss[stage] = _run([*command, "--until", stage, *options])
        wall += time.perf_counter() - start
        rows = [row for row in json.loads(out) if row["stage"] == stage]
        if not rows or rows[0]["status"] != "built":
            raise click.ClickException(f"{stage} was not built at {art}: {rows}")
        seconds[stage] = rows[0]["seconds"]
    points = json.loads((art / "bts" / "ingest" / "report.json").read_text())["raw_value_cells"]
    con = duckdb.connect()
    start = time.perf_counter()
    con.execute(
        f"COPY (SELECT * FROM read_parquet('{art}/bts/ingest/observations.parquet')) TO '{art}/copy.parquet' "
        "(FORMAT parquet, COMPRESSION zstd)"
    )
    copy = time.perf_counter() - start
    con.close()
    ours = seconds["ingest"] + seconds["store"]
    scale = FULL_BTS_POINTS / points / 3600
    click.echo(
        f"| {points:,} | {executor} | "
        + " | ".join(f"{seconds[stage]:.2f} ({rss[stage] / 2**20:,.0f})" for stage in STAGES)
        + f" | {wall:.1f} | {points / seconds['ingest']:,.0f} | {points / seconds['store']:,.0f} | {copy:.2f} | "
        f"{copy / ours:.3f} | {ours * scale:.2f} | {sum(seconds.values()) * scale:.2f} |"
    )
    shutil.rmtree(art, ignore_errors=True)


if __name__ == "__main__":
    main()
