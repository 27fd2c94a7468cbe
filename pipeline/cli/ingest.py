"""CLI commands of the ingest stage: ingest, inspect ingest, checksum."""

from __future__ import annotations

import click

from pipeline.cli import common as cli


@click.command()
@click.option("--corpus", "corpora", multiple=True, help="Corpus to ingest (repeatable; default: all).")
@click.option("--force", is_flag=True, help="Rebuild even when the stage's identity is unchanged.")
@click.pass_context
@cli.handle_errors
def ingest(ctx: click.Context, corpora: tuple[str, ...], force: bool) -> None:
    """Read raw corpora into normalized Parquet tables with full accounting (the first build stage).

    \b
    Example:
      telemetry-bench ingest --corpus xai4heat
    """
    from pipeline.build import build
    from pipeline.ingest.stage import read_report

    ws = cli.workspace(ctx)
    for outcome in build(ws, corpora, until="ingest", force=force):
        report = read_report(ws.stage_dir(outcome.corpus, "ingest"))
        click.echo(
            f"{report.corpus}: {report.sites} sites, {report.streams} streams, {report.observations} observations, "
            f"{report.rejects} rejects of {report.raw_value_cells} raw value cells ({outcome.status})"
        )


@click.group()
def inspect() -> None:
    """Show what a stage produced."""


@inspect.command("ingest")
@click.option("--corpus", required=True, help="Corpus name.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
@cli.handle_errors
def inspect_ingest(ctx: click.Context, corpus: str, as_json: bool) -> None:
    """Sites, streams, observations, rejects by reason and raw value cells of an ingested corpus.

    \b
    Example:
      telemetry-bench inspect ingest --corpus hhw --json
    """
    from pipeline.ingest.api import ingest_summary

    summary = ingest_summary(cli.workspace(ctx), corpus)
    if as_json:
        cli.echo_json(summary)
        return
    click.echo(f"corpus            {corpus}")
    for key in ("sites", "streams", "observations", "rejects", "raw_value_cells"):
        click.echo(f"{key:<18}{summary[key]:,}")
    click.echo("rejects by reason")
    for reason, n in summary["rejects_by_reason"].items():
        click.echo(f"  {reason:<26}{n:>10,}")
    for missing in summary["missing_columns"]:
        click.echo(f"column absent from file: {missing}")


@click.command()
@click.option("--corpus", required=True, help="Corpus name (its folder under data/raw, or raw_dir of its mapping).")
@click.option("--write", is_flag=True, help="Write SHA256SUMS for every file in the folder instead of checking it.")
@click.pass_context
@cli.handle_errors
def checksum(ctx: click.Context, corpus: str, write: bool) -> None:
    """Check a raw corpus against its SHA256SUMS, or write one.

    \b
    Example:
      telemetry-bench checksum --corpus xai4heat
    """
    from pipeline.ingest.api import checksum_corpus

    click.echo(checksum_corpus(cli.workspace(ctx), corpus, write))


COMMANDS = (ingest, inspect, checksum)
