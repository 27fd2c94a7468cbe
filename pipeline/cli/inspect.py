"""`telemetry-bench inspect <stage>`: what a stage produced, as text or JSON."""

from __future__ import annotations

from collections.abc import Callable

import click

from pipeline.cli import common as cli
from pipeline.cli.runtime import release_options


@click.group()
def inspect() -> None:
    """Show what a stage produced."""


def _counts(summary: dict) -> None:
    click.echo(f"corpus            {summary['corpus']}")
    for key in ("sites", "streams", "observations", "rejects", "raw_value_cells"):
        click.echo(f"{key:<18}{summary[key]:,}")
    click.echo("rejects by reason")
    for reason, n in summary["rejects_by_reason"].items():
        click.echo(f"  {reason:<26}{n:>10,}")


def _ingest_text(summary: dict) -> None:
    _counts(summary)
    for missing in summary["missing_columns"]:
        click.echo(f"column absent from file: {missing}")
    for group in summary["duplicate_streams"]:
        click.echo(f"identical streams (copies of one sensor; never each other's distractors): {', '.join(group)}")


def _store_text(summary: dict) -> None:
    _counts(summary)
    click.echo("tables: " + ", ".join(f"{k} {v:,}" for k, v in summary["tables"].items()))
    if left_out := summary["rejects_not_in_store"]:
        click.echo(
            f"rejects table {summary['tables']['rejects']:,} = rejects {summary['rejects']:,} - "
            f"{sum(left_out.values()):,} without a stream or a time ("
            + ", ".join(f"{k} {v:,}" for k, v in left_out.items())
            + "; kept in ingest/rejects.parquet)"
        )
    for level, bands in summary["quality"].items():
        click.echo(f"quality of {level}: " + ", ".join(f"{k} {v:,}" for k, v in bands.items()))
    click.echo("thresholds: " + ", ".join(f"{k} {v}" for k, v in summary["thresholds"].items()))


def _tasks_text(summary: dict) -> None:
    click.echo(f"corpus {summary['corpus']}: " + ", ".join(f"{s} {n}" for s, n in summary["splits"].items()))
    click.echo(f"{'family':<28}{'train':>7}{'dev':>7}{'test':>7}{'eligible':>10}{'pool':>10}")
    for family, counts in summary["counts"].items():
        click.echo(
            f"{family:<28}{counts['train']:>7}{counts['dev']:>7}{counts['test']:>7}"
            f"{summary['eligible'][family]:>10,}{summary['pools'][family]:>10,}"
        )
    for family, reason in summary["missing_families"].items():
        click.echo(f"missing {family}: emptied by {reason}")
    for family, steps in summary["streams_left_out"].items():
        if any(steps.values()):
            click.echo(f"{family}: streams left out by " + ", ".join(f"{step} {n:,}" for step, n in steps.items() if n))
    if summary["streams_in_no_family"]:
        click.echo(
            f"streams in no family ({len(summary['streams_in_no_family'])}): "
            f"{', '.join(summary['streams_in_no_family'])}"
        )
    for family, empty in summary["empty_splits"].items():
        if empty and family not in summary["missing_families"]:
            click.echo(f"{family}: no task in {', '.join(empty)} (no candidate placed there survived selection)")
    rule = summary["split_rule"]
    unit = "sites" if "sites" in rule else "groups" if "groups" in rule else None
    if unit:
        block = rule["blocks"][0]
        by = "site" if unit == "sites" else f"group ({rule['grouped_by']})"
        click.echo(
            f"splits by {by} over {block['start'][:10]}..{block['end'][:10]}: "
            + "; ".join(f"{split} {len(found)} {unit} ({', '.join(found)})" for split, found in rule[unit].items())
        )
    else:
        click.echo(
            f"splits by {rule['by']}: "
            + ", ".join(f"{b['split']} {b['start'][:10]}..{b['end'][:10]}" for b in rule["blocks"])
            + f" ({rule['buffer_days']}-day buffers)"
        )
    for family, why in rule.get("families_left_out", {}).items():
        click.echo(f"{family}: left out, {why}")
    for family, drops in summary["dropped_by_split_rule"].items():
        if drops:
            click.echo(f"{family}: dropped by the split rule: " + ", ".join(f"{k} {v:,}" for k, v in drops.items()))


def _episodes_text(summary: dict) -> None:
    click.echo(f"corpus {summary['corpus']}: " + ", ".join(f"{s} {n}" for s, n in summary["splits"].items()))
    click.echo("commitment outcomes: " + ", ".join(f"{k} {v}" for k, v in summary["commitment_shares"].items()))
    for mode, n in summary["interaction_modes"].items():
        click.echo(f"  {n:>5}  {mode}")
    click.echo("examples: " + ", ".join(summary["examples"]))
    released = summary.get("released")
    if released is None:
        click.echo("released: not audited yet (telemetry-bench build)")
        return
    click.echo(
        "released after the audit: "
        + ", ".join(f"{s} {n}" for s, n in released["splits"].items())
        + "; mix "
        + ", ".join(f"{k} {v}" for k, v in released["commitment_mix"].items())
        + f" (gate {released['mix_gate']})"
    )
    for split, left in released["trimmed_for_mix"].items():
        click.echo(
            f"  {split}: left out {sum(left.values())} rows to keep the declared mix ("
            + ", ".join(f"{k} {v}" for k, v in left.items())
            + "): the other outcomes have too few rows for more"
        )
    for obligation, codes in released["balanced_answers"].items():
        left = released["trimmed_for_balance"].get(obligation, {})
        said = f"; left out {', '.join(f'{k} {v}' for k, v in left.items())} to balance them" if left else ""
        click.echo(f"  {obligation} golds: " + (", ".join(f"{k} {v}" for k, v in codes.items()) or "none") + said)


def _summary(stage: str) -> Callable:
    if stage == "ingest":
        from pipeline.ingest.api import ingest_summary

        return ingest_summary
    if stage == "tasks":
        from pipeline.tasks.inspect import tasks_summary

        return tasks_summary
    if stage == "episodes":
        from pipeline.harness.episodes import episodes_summary

        return episodes_summary
    from pipeline.store.inspect import store_summary

    return store_summary


def _command(stage: str, render: Callable[[dict], None], doc: str) -> click.Command:
    @click.option("--corpus", required=True, help="Corpus name.")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
    @click.pass_context
    @cli.handle_errors
    def command(ctx: click.Context, corpus: str, as_json: bool) -> None:
        summary = _summary(stage)(cli.workspace(ctx), corpus)
        if as_json:
            cli.echo_json(summary)
        else:
            render(summary)

    command.__doc__ = doc
    return inspect.command(stage)(command)


_command(
    "ingest",
    _ingest_text,
    """Sites, streams, observations, rejects by reason and raw value cells of an ingested corpus.

    \b
    Example:
      telemetry-bench inspect ingest --corpus hhw --json
    """,
)
_command(
    "store",
    _store_text,
    """Counts of the tool store, its quality distribution and thresholds.

    \b
    Example:
      telemetry-bench inspect store --corpus xai4heat --json
    """,
)
_command(
    "tasks",
    _tasks_text,
    """Static tasks per family and split, candidate pools, and any family that is missing and why.

    \b
    Example:
      telemetry-bench inspect tasks --corpus xai4heat --json
    """,
)
_command(
    "episodes",
    _episodes_text,
    """Episodes per split, interaction mode and commitment outcome, with example ids.

    \b
    Example:
      telemetry-bench inspect episodes --corpus xai4heat
    """,
)


@inspect.command("episode")
@click.argument("episode_id")
@click.option("--corpus", help="Corpus name (not needed with --release).")
@click.option(
    "--trace", type=click.Path(dir_okay=False), help="Also show how this trace's agent played the episode (run 0)."
)
@click.option("--width", type=click.IntRange(60), help="Line width (default: the terminal's).")
@click.option(
    "--agent-view",
    is_flag=True,
    help="Show exactly what the agent receives before each turn: messages, tool results, answer forms.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="With --agent-view: print the views as JSON (contracts/agent_view.py)."
)
@release_options
@click.pass_context
@cli.handle_errors
def inspect_episode(
    ctx: click.Context,
    episode_id: str,
    corpus: str | None,
    trace: str | None,
    width: int | None,
    agent_view: bool,
    as_json: bool,
    release: str | None,
    cache_dir: str | None,
) -> None:
    """Play one episode along its gold path and print the conversation, tool results included; with --trace, also the
    agent's run, marking the first turn where it left the gold path; with --agent-view, what the agent receives.

    \b
    Example:
      telemetry-bench inspect episode xai4heat.window_pairwise_compare.004e64a32c58fc62.ep --corpus xai4heat
      telemetry-bench inspect episode xai4heat.window_pairwise_compare.004e64a32c58fc62.ep --corpus xai4heat --agent-view --json
      telemetry-bench inspect episode xai4heat.window_pairwise_compare.004e64a32c58fc62.ep --release artifacts/xai4heat/release --cache-dir /tmp/cache --agent-view
    """  # noqa: E501 - the examples are runnable commands, one per line
    from pathlib import Path

    from rich.console import Console

    from pipeline.report.terminal import episode_conversations, print_agent_views, print_episode

    if as_json and not agent_view:
        raise click.UsageError("--json goes with --agent-view (the conversation itself is printed for people)")
    if agent_view:
        if trace:
            raise click.UsageError("--agent-view shows the gold path; leave out --trace")
        from pipeline.cli.runtime import _release
        from pipeline.report.terminal import episode_agent_views, release_agent_views

        chosen = _release(release, cache_dir)
        if chosen is not None:
            corpus = chosen.corpus
            views = release_agent_views(chosen, episode_id)
        elif corpus:
            views = episode_agent_views(cli.workspace(ctx), corpus, episode_id)
        else:
            raise click.UsageError("give --corpus NAME or --release DIR")
        if as_json:
            cli.echo_json(
                {"episode_id": episode_id, "corpus": corpus, "turns": [v.model_dump(mode="json") for v in views]}
            )
        else:
            print_agent_views(Console(width=width, highlight=False, markup=False, soft_wrap=False), views)
        return
    if release or not corpus:
        raise click.UsageError("--release goes with --agent-view; the gold conversation needs --corpus (a build)")
    episode, conversations = episode_conversations(
        cli.workspace(ctx), corpus, episode_id, Path(trace) if trace else None
    )
    print_episode(Console(width=width, highlight=False, markup=False, soft_wrap=False), episode, conversations)
