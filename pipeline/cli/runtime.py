"""CLI commands of the runtime: run, score, preflight."""

from __future__ import annotations

from pathlib import Path

import click

from contracts.tasks import SPLITS
from pipeline.cli import common as cli


def _rates(summary: dict) -> None:
    click.echo(f"accomplished {summary['accomplished_rate']:.4f} over {summary['runs']} runs of {summary['episodes']} episodes")
    click.echo("  " + ", ".join(f"{p} {summary[p]:.4f}" for p in ("final", "evidence", "phase", "temporal", "task", "protocol")))
    for family, rate in summary["per_family"].items():
        click.echo(f"  {family:<28}{rate:.4f}")
    if summary["issues"]:
        click.echo("  protocol issues: " + ", ".join(f"{k} {v}" for k, v in summary["issues"].items()))
    if summary.get("rejections"):
        click.echo("  rejected answer fields: " + ", ".join(f"{k} {v}" for k, v in summary["rejections"].items()))


@click.command()
@click.option("--corpus", required=True, help="Corpus name.")
@click.option("--split", required=True, type=click.Choice(SPLITS), help="Which split to play.")
@click.option("--agent", "agent_name", required=True, help="oracle, noop, human, controller (the audit's shortcut policies) or openai.")
@click.option("--base-url", help="openai agent: the endpoint, e.g. http://127.0.0.1:8000/v1.")
@click.option("--model", help="openai agent: model name.")
@click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True, help="openai agent: variable holding the API key.")
@click.option("--temperature", type=float, default=0.0, show_default=True, help="openai agent: sampling temperature.")
@click.option("--seed", type=int, help="openai agent: sampling seed, passed through.")
@click.option("--repeat", default=1, show_default=True, type=click.IntRange(1, 100), help="Runs per episode (pass^k).")
@click.option("--limit", type=click.IntRange(1), help="Play only the first N episodes.")
@click.option("--out", type=click.Path(dir_okay=False), default="trace.jsonl", show_default=True, help="Trace file (JSONL).")
@click.option("--json", "as_json", is_flag=True, help="Print the score summary as JSON.")
@click.pass_context
@cli.handle_errors
def run(ctx: click.Context, corpus: str, split: str, agent_name: str, base_url: str | None, model: str | None, api_key_env: str,
        temperature: float, seed: int | None, repeat: int, limit: int | None, out: str, as_json: bool) -> None:
    """Play an agent on a split; write the trace; exit 0 whenever the run completed, whatever the score.

    \b
    Example:
      telemetry-bench run --corpus xai4heat --split test --agent oracle --out /tmp/t.jsonl
    """
    from pipeline.play import run_agent

    options = None
    if agent_name == "openai":
        options = {"base_url": base_url, "model": model, "api_key_env": api_key_env, "temperature": temperature, "seed": seed}
    summary = run_agent(cli.workspace(ctx), corpus, split, agent_name, repeat, Path(out), limit, options)
    if as_json:
        cli.echo_json(summary)
    else:
        click.echo(f"trace written to {out}")
        _rates(summary)


@click.command()
@click.argument("traces", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON (accomplished_rate, part scores, per-family rates, rows).")
@click.pass_context
@cli.handle_errors
def score(ctx: click.Context, traces: tuple[str, ...], as_json: bool) -> None:
    """Score saved traces against their episodes; the same trace always gives the same scores.

    \b
    Example:
      telemetry-bench score /tmp/t.jsonl --json
    """
    from pipeline.play import score_traces

    summary = score_traces(cli.workspace(ctx), [Path(t) for t in traces])
    if as_json:
        cli.echo_json(summary)
    else:
        _rates(summary)


@click.command()
@click.option("--corpus", required=True, help="Corpus name.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (issue_count, counts by check, family, split).")
@click.pass_context
@cli.handle_errors
def preflight(ctx: click.Context, corpus: str, as_json: bool) -> None:
    """Check every episode's contract (phases, golds re-derived through the tools, evidence); a release needs 0 issues.

    \b
    Example:
      telemetry-bench preflight --corpus xai4heat --json
    """
    from pipeline.play import preflight_corpus

    report = preflight_corpus(cli.workspace(ctx), corpus)
    if as_json:
        cli.echo_json(report)
        return
    click.echo(f"{corpus}: {report['episodes']} episodes, {report['issue_count']} issues")
    for check, n in report["by_check"].items():
        click.echo(f"  {check:<40}{n}")


@click.command()
@click.option("--corpus", required=True, help="Corpus name.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (candidates, released, excluded_by_policy, completions_on_candidates, "
              "commitment_mix, artifact_probe, policies with their gates, gates, notes).")
@click.pass_context
@cli.handle_errors
def audit(ctx: click.Context, corpus: str, as_json: bool) -> None:
    """The construction audit of a corpus: what each shortcut policy and cheap strategy won, what was dropped, and
    the release gates (artifact probe, guessers, grid rules; docs/audit.md).

    \b
    Example:
      telemetry-bench audit --corpus xai4heat --json
    """
    from pipeline.play import audit_summary

    report = audit_summary(cli.workspace(ctx), corpus)
    if as_json:
        cli.echo_json(report)
        return
    from pipeline.audit.gates import figures, gate_of

    click.echo(f"{corpus}: {report['candidates']} candidate episodes, {report['released']} released")
    for name, info in report["policies"].items():
        click.echo(f"  {name:<21} lacks {info['lacks']:<18} wins: candidates {info.get('won_candidates', 0):>4}, "
                   f"released {info.get('won_released', 0):>4}   excluded {report['excluded_by_policy'][name]:>4}")
    click.echo("  commitment mix: " + ", ".join(f"{k} {v}" for k, v in report["commitment_mix"].items()))
    click.echo("  controls: " + ", ".join(f"{k} {v}" for k, v in report["controls"].items()))
    for name, status in report.get("gates", {}).items():
        click.echo(f"  gate {name:<21} {status:<17} {figures(gate_of(name, report))}")
    for note in report.get("notes", []):
        click.echo(f"  note: {note}")


COMMANDS = (run, score, preflight, audit)
