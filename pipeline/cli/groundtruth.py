"""CLI commands for ground-truth trajectories: export ground-truth, validate-gt, evaluate."""

from __future__ import annotations

from pathlib import Path

import click

from contracts.splits import SPLITS
from pipeline.cli import common as cli
from pipeline.cli.runtime import EXPECT, release_options
from pipeline.core.errors import EvaluationError


@click.group()
def export() -> None:
    """Export built artifacts in other formats."""


@export.command("ground-truth")
@click.option("--corpus", required=True, help="Corpus name.")
@click.option("--split", required=True, type=click.Choice(SPLITS), help="Split to export.")
@click.option(
    "--out", type=click.Path(dir_okay=False), help="Output JSONL (default: ground_truth_<corpus>_<split>.jsonl)."
)
@click.pass_context
@cli.handle_errors
def export_ground_truth(ctx: click.Context, corpus: str, split: str, out: str | None) -> None:
    """Write a split's episodes as ground-truth trajectories (the same rows the release's ground_truth/ holds).

    \b
    Example:
      telemetry-bench export ground-truth --corpus xai4heat --split test --out /tmp/gt.jsonl
    """
    from pipeline.harness.evaluation import export_ground_truth as run_export

    path = Path(out or f"ground_truth_{corpus}_{split}.jsonl")
    click.echo(f"{path}: {run_export(cli.workspace(ctx), corpus, split, path)} trajectories")


@click.command("validate-gt")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@cli.handle_errors
def validate_gt(files: tuple[str, ...]) -> None:
    """Validate ground-truth trajectory files (.json: one object or a list; .jsonl): schema, DAG, Finish, references,
    type.

    Prints one line per finding and exits 1 if anything was found.

    \b
    Example:
      telemetry-bench validate-gt artifacts/xai4heat/release/ground_truth/test.jsonl
    """
    from pipeline.release.gt_validate import validate_files

    findings = validate_files([Path(f) for f in files])
    for line in findings:
        click.echo(line)
    if findings:
        raise EvaluationError(
            f"{len(findings)} finding(s) in {len(files)} file(s), listed above; fix the trajectories and validate again"
        )
    click.echo(f"{len(files)} file(s): no findings")


@click.command()
@click.option(
    "--ground-truth",
    "ground_truth",
    type=click.Path(exists=True, dir_okay=False),
    help="Trajectories (JSONL); with --release, the release's ground_truth/<split>.jsonl by default.",
)
@click.option(
    "--trace", required=True, type=click.Path(exists=True, dir_okay=False), help="A trace from `telemetry-bench run`."
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print every row's three levels, failure modes and the summary as JSON."
)
@release_options
@EXPECT
@click.pass_context
@cli.handle_errors
def evaluate(
    ctx: click.Context,
    release: str | None,
    cache_dir: str | None,
    ground_truth: str | None,
    trace: str,
    as_json: bool,
    expect: str | None,
) -> None:
    """Three-level evaluation of a trace against ground-truth trajectories (outcome 50%, process 30%, planning 20%).

    The report names the release the trace was played on (its header's digest); --expect refuses a trace, release
    folder or project build of any other release.

    \b
    Example:
      telemetry-bench evaluate --ground-truth artifacts/xai4heat/release/ground_truth/test.jsonl --trace /tmp/t.jsonl
      telemetry-bench evaluate --release artifacts/xai4heat/release --cache-dir /tmp/cache --trace /tmp/r.jsonl
    """
    from pipeline.cli.runtime import _release, release_line
    from pipeline.harness.evaluation import evaluate as run_evaluation

    report = run_evaluation(
        cli.workspace(ctx),
        Path(ground_truth) if ground_truth else None,
        Path(trace),
        _release(release, cache_dir, expect),
        expect,
    )
    if as_json:
        cli.echo_json(report)
        return
    width = max((len(row["episode_id"]) for row in report["rows"]), default=7)
    click.echo(f"{'final':<8}{'outcome':<9}{'process':<9}{'planning':<10}{'episode':<{width}}  failure modes")
    for row in report["rows"]:
        click.echo(
            f"{row['final']:<8.4f}{row['outcome']['score']:<9.4f}{row['process']['score']:<9.4f}"
            f"{row['planning']['score']:<10.4f}{row['episode_id']:<{width}}  {','.join(row['failure_modes']) or '-'}"
        )
    click.echo(
        f"mean final {report['mean_final']:.4f}; per family: "
        + ", ".join(f"{k} {v}" for k, v in report["per_family"].items())
    )
    if report["rejections"]:
        click.echo("rejected answer fields: " + ", ".join(f"{k} {v}" for k, v in report["rejections"].items()))
    click.echo(release_line(report["release_digest"]))


COMMANDS = (export, validate_gt, evaluate)
