"""CLI commands of the ingest stage: ingest, checksum."""

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


COMMANDS = (ingest, checksum)
