"""CLI command `build`: every stage, in order, for every corpus."""

from __future__ import annotations

import click

from pipeline.cli import common as cli


@click.command()
@click.option("--corpus", "corpora", multiple=True, help="Corpus to build (repeatable; default: every configs/corpora/*.toml).")
@click.option("--until", help="Stop after this stage (e.g. ingest).")
@click.option("--threads", type=int, envvar="TELEMETRY_BENCH_THREADS", help="DuckDB threads (runtime only; outputs do not change).")
@click.option("--force", is_flag=True, help="Rebuild every stage even when its identity is unchanged.")
@click.option("--json", "as_json", is_flag=True, help="Print [{corpus, stage, status, seconds}] as JSON.")
@click.pass_context
@cli.handle_errors
def build(ctx: click.Context, corpora: tuple[str, ...], until: str | None, threads: int | None, force: bool, as_json: bool) -> None:
    """Run every stage in order for every corpus; a stage whose identity is unchanged is "cached".

    \b
    Example:
      telemetry-bench build --corpus xai4heat --json
    """
    from pipeline.build import build as run_build

    def show(outcome) -> None:
        if not as_json:
            click.echo(f"{outcome.corpus:<12} {outcome.stage:<10} {outcome.status:<7} {outcome.seconds:7.2f}s")

    outcomes = run_build(cli.workspace(ctx), corpora, until=until, threads=threads, force=force, on_done=show)
    if as_json:
        cli.echo_json([
            {"corpus": o.corpus, "stage": o.stage, "status": o.status, "seconds": round(o.seconds, 3)} for o in outcomes
        ])


COMMANDS = (build,)
