"""CLI commands of the ingest stage: ingest, checksum, corpus draft."""

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
    from pipeline.harness.build import build
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


@click.group()
def corpus() -> None:
    """Onboard a new corpus: draft its mapping from a raw folder."""


@corpus.command()
@click.argument("folder", type=click.Path(file_okay=False, path_type=str))
@click.option("--name", required=True, help="Corpus name: the mapping is configs/corpora/NAME.toml.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=str),
    default=None,
    help="Write NAME.toml (and NAME/points.csv) into this folder instead of configs/corpora/.",
)
@click.option("--force", is_flag=True, help="Overwrite an existing mapping and points table.")
@click.option("--json", "as_json", is_flag=True, help="Print the guesses as JSON.")
@click.pass_context
@cli.handle_errors
def draft(ctx: click.Context, folder: str, name: str, out: str | None, force: bool, as_json: bool) -> None:
    """Inspect a raw folder and write a draft mapping, each guess explained in a comment.

    The draft guesses the layout, delimiter, header, decimal mark, time column, format and zone, and the keys in the
    file names (shards such as data_1.csv or 2019.csv are merged, not sites). It prints the corpus's span (from each
    file's first and last rows) and what a build would do with it: the split plan and the task families that fit,
    or why none does. Without Brick graphs it also writes configs/corpora/NAME/points.csv, one row per stream with
    the class configs/lexicon.toml proposes as `CHECK <Class>`, or TODO: confirm or fill those in, then build. The
    raw folder is only read.

    \b
    Example:
      telemetry-bench corpus draft examples/corpora/plant --name plant --out /tmp/draft
    """
    import json

    from pipeline.core.config import load_families, weekly_commitments
    from pipeline.ingest.api import draft_corpus
    from pipeline.tasks.propose import draft_plan

    ws = cli.workspace(ctx)
    families, weekly = load_families(ws), weekly_commitments(ws)

    def plan(read):  # the tasks stage's rule on what the draft read
        return draft_plan(families, read, weekly, name)

    guesses, written, lines = draft_corpus(ws, folder, name, force, out, plan)
    if as_json:
        click.echo(json.dumps({"guesses": guesses, "written": written, "plan": lines}, indent=2, sort_keys=True))
        return
    for key, value in guesses.items():
        click.echo(f"{key:<12} {value!r}")
    for line in lines:
        click.echo(line)
    then = "move them to configs/corpora/, fill every TODO, then build" if out else "fill every TODO, then build"
    then = then.replace("fill every TODO", 'fill every TODO, confirm every CHECK (delete "CHECK ")')
    click.echo("wrote " + ", ".join(written) + f"; {then}: `telemetry-bench build --corpus {name}`")


COMMANDS = (ingest, checksum, corpus)
