"""`make bench-scale` (not in CI): synthetic BTS at growing sizes through the whole build.

For each size: points written, seconds per stage, ingest and store points/s, peak RSS of the build
process, DuckDB's own copy of the same points (Parquet -> Parquet) and the ratio, and a linear
projection to full BTS (2.86e9 points). Sizes are approximate (200 streams, ~131 points a day each).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click
import duckdb

FULL_BTS_POINTS = 2_863_795_583
STREAMS = 200
POINTS_PER_STREAM_DAY = 24 * 60 / 11


def _run(command: list[str]) -> tuple[str, int]:
    """stdout and peak RSS (kB) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return done.stdout, max(after, before)


@click.command()
@click.option("--sizes", default="1e6,1e7", show_default=True, help="Approximate point counts, comma separated (1e8 needs issue 12's batching).")
def main(sizes: str) -> None:
    cli = [sys.executable, "-m", "pipeline.cli"]
    click.echo("| points | ingest s | store s | ingest pts/s | store pts/s | tasks s | episodes s | peak RSS MB | DuckDB copy s | ratio ours/DuckDB (ingest+store) | projected full BTS h |")
    click.echo("|---|---|---|---|---|---|---|---|---|---|---|")
    for size in (float(s) for s in sizes.split(",")):
        days = max(1, round(size / STREAMS / POINTS_PER_STREAM_DAY))
        with tempfile.TemporaryDirectory(prefix="tb-scale-") as tmp:
            raw, art = Path(tmp) / "raw", Path(tmp) / "art"
            subprocess.run([*cli, "synth", "bts", "--streams", str(STREAMS), "--days", str(days), "--seed", "1", "--out", str(raw)],
                           check=True, capture_output=True)
            out, rss = _run([*cli, "--artifacts", str(art), "build", "--corpus", "bts", "--raw", str(raw), "--json"])
            seconds = {row["stage"]: row["seconds"] for row in json.loads(out)}
            report = json.loads((art / "bts" / "ingest" / "report.json").read_text())
            points = report["raw_value_cells"]
            con = duckdb.connect()
            start = time.perf_counter()
            con.execute(f"COPY (SELECT * FROM read_parquet('{art}/bts/ingest/observations.parquet')) TO '{tmp}/copy.parquet' "
                        "(FORMAT parquet, COMPRESSION zstd)")
            copy = time.perf_counter() - start
            ours = seconds["ingest"] + seconds["store"]
            projection = ours / points * FULL_BTS_POINTS / 3600
            click.echo(f"| {points:,} | {seconds['ingest']:.2f} | {seconds['store']:.2f} | {points / seconds['ingest']:,.0f} | "
                       f"{points / seconds['store']:,.0f} | {seconds['tasks']:.2f} | {seconds['episodes']:.2f} | {rss / 1024:,.0f} | "
                       f"{copy:.2f} | {copy / ours:.3f} | {projection:.2f} |")


if __name__ == "__main__":
    main()
