"""`telemetry-bench report`: the HTML report over built corpora and agent traces."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.cli import common as cli


@click.command()
@click.option("--corpus", "corpora", multiple=True, help="Corpus to report (repeatable; default: every built corpus).")
@click.option(
    "--trace",
    "traces",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="A trace written by `telemetry-bench run` (repeatable; several agents are shown side by side).",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default="artifacts/report.html",
    show_default=True,
    help="HTML file to write.",
)
@click.option("--json", "as_json", is_flag=True, help="Print what the report holds as JSON.")
@click.pass_context
@cli.handle_errors
def report(ctx: click.Context, corpora: tuple[str, ...], traces: tuple[str, ...], out: str, as_json: bool) -> None:
    """Write one self-contained HTML report: corpus and benchmark overviews, results per trace, and an episode browser.

    The file needs no network: plots are inline SVG, the episode search is inline script.

    \b
    Example:
      telemetry-bench run --corpus xai4heat --split test --agent oracle --out /tmp/oracle.jsonl
      telemetry-bench report --corpus xai4heat --trace /tmp/oracle.jsonl --out /tmp/report.html
    """
    from pipeline.report.page import build_report

    summary = build_report(cli.workspace(ctx), list(corpora), [Path(t) for t in traces], Path(out))
    if as_json:
        cli.echo_json(summary)
        return
    click.echo(
        f"report written to {summary['out']} ({summary['bytes']:,} bytes): corpora "
        f"{', '.join(summary['corpora']) or 'none'}, "
        f"{len(summary['traces'])} traces, {summary['plots']} plots, {summary['episodes']} test episodes"
    )
    if summary["not_built"]:
        click.echo(f"not built, left out: {', '.join(summary['not_built'])}")


COMMANDS = [report]
