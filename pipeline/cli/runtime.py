"""CLI commands of the runtime: run, score, leaderboard, preflight, audit."""

from __future__ import annotations

import json
import re
from pathlib import Path

import click

from contracts.splits import SPLITS
from pipeline.cli import common as cli

TRACES = click.argument("traces", nargs=-1, required=True, type=click.Path(dir_okay=False))
SCORED_RELEASE = click.option(
    "--release",
    "release",
    type=click.Path(file_okay=False, exists=True),
    help="Score traces played with --release on that release folder.",
)

EXPECT = click.option(
    "--expect",
    metavar="DIGEST",
    help="The release digest you trust (sha256:<hex>, as `build` printed it or the release's card states it): a "
    "release folder, project build or trace of any other content is refused (docs/runtime.md).",
)


def _rates(summary: dict) -> None:
    who = summary["identity"]["label"]
    covered = f"a run covers {summary['least_covered']} of {summary['episodes_in_split']} episodes"
    partial = f", PARTIAL: {covered}" if summary["partial"] else ""
    click.echo(f"{who} on {summary['corpus']} {summary['split']}{partial}")
    click.echo(
        f"  accomplished {summary['accomplished_rate']:.4f} over {summary['runs']} runs of {summary['episodes']} "
        "episodes"
    )
    click.echo("  " + _commitment_line(summary))
    if summary.get("infra_errors") or summary.get("unfinished"):
        click.echo(
            f"  not scored: {summary.get('infra_errors', 0)} infra_error runs; unfinished (no end record): "
            f"{summary.get('unfinished', 0)}: resume the run with --resume"
        )
    click.echo(
        "  "
        + ", ".join(f"{p} {summary[p]:.4f}" for p in ("final", "evidence", "phase", "temporal", "task", "protocol"))
    )
    for family, rate in summary["per_family"].items():
        click.echo(f"  {family:<28}{rate:.4f}")
    if summary["issues"]:
        click.echo("  protocol issues: " + ", ".join(f"{k} {v}" for k, v in summary["issues"].items()))
    if summary.get("rejections"):
        click.echo("  rejected answer fields: " + ", ".join(f"{k} {v}" for k, v in summary["rejections"].items()))
    usage, per = summary["usage"], summary["per_episode"]
    cost = f", ${usage['cost_usd']:.4f}" if "cost_usd" in usage else ""
    click.echo(
        f"  per episode: {per['turns']} turns, {per['tool_calls']} tool calls; tokens in {usage['tokens_in']}, "
        f"out {usage['tokens_out']}{cost}"
    )
    click.echo("  " + release_line(summary.get("release_digest")))


def release_line(digest: str | None) -> str:
    """The release a result was scored on, as `score` and `evaluate` print it."""
    return f"played on release sha256:{digest}" if digest else "played on no release (its trace records none)"


def _commitment_line(summary: dict) -> str:
    """The commitment figures of a score summary in words: balanced accuracy, then per gold outcome."""
    balanced = summary.get("balanced_commitment_accuracy")
    if balanced is None:
        return "balanced commitment accuracy: none (no scored episode has a commitment phase)"
    runs = summary["commitment_runs"]
    per = ", ".join(f"{o} {v:.4f} of {runs[o]} runs" for o, v in summary["commitment_accuracy"].items())
    return f"balanced commitment accuracy {balanced:.4f} (per gold outcome: {per})"


def _option_value(text: str) -> object:
    """An --agent-option value: JSON when it parses (numbers, true, lists), else the text itself."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _release(release: str | None, cache_dir: str | None, expect: str | None = None):
    """A release folder played on its own (episodes, simulator phrases, tool store loaded into the cache), refused
    unless its content digest is `expect` when given; what it does to the cache (a store loaded, entries pruned) is
    said on stderr, never in an output."""
    if release is None:
        return None
    from pipeline.release.playable import Release

    return Release(
        Path(release),
        Path(cache_dir) if cache_dir else None,
        lambda note: click.echo(f"info: {note}", err=True),
        expect,
    )


def _warn(warnings: list[str]) -> None:
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)


RELEASE_OPTIONS = [
    click.option(
        "--release",
        "release",
        type=click.Path(file_okay=False, exists=True),
        help="Play a release folder on its own (artifacts/<corpus>/release/ or a copy, e.g. from a dataset hub); "
        "no project, configs or build needed. The folder is only read.",
    ),
    click.option(
        "--cache-dir",
        type=click.Path(file_okay=False),
        help="--release: where the tool store is loaded from the release's Parquet tables (default: the user cache "
        "folder).",
    ),
]


def release_options(command):
    for option in reversed(RELEASE_OPTIONS):
        command = option(command)
    return command


@click.command()
@click.option("--corpus", help="Corpus name (with --release: the release's own).")
@click.option("--split", required=True, type=click.Choice(SPLITS), help="Which split to play.")
@click.option(
    "--agent",
    "agent_name",
    help="oracle, noop, human, controller (the audit's shortcut policies), openai, or a "
    "Python agent of your own as module:factory (imported from the current folder; docs/agents.md).",
)
@click.option(
    "--agent-option",
    "agent_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="module:factory agent: a keyword argument for the factory (repeatable; VALUE is JSON or text).",
)
@click.option(
    "--agent-cmd",
    help="An agent in its own process, in any language: the command that starts it. It reads JSON "
    "lines on stdin (episode_start, observation, episode_end; contracts/schemas/agent_input.schema.json) and "
    "writes one action per observation as a JSON line (agent_output.schema.json).",
)
@click.option(
    "--turn-timeout",
    type=click.FloatRange(min=0.1),
    default=60.0,
    show_default=True,
    help="--agent-cmd: seconds a turn may take before the process counts as silent (agent_error).",
)
@click.option(
    "--base-url", help="openai agent: the endpoint, e.g. http://127.0.0.1:8000/v1 (default: $OPENAI_BASE_URL)."
)
@click.option(
    "--model",
    "models",
    multiple=True,
    help="openai agent: model name (default: $OPENAI_MODEL); repeat it to play several models in turn, one trace each "
    "(then --out names {model}).",
)
@click.option(
    "--models",
    "models_file",
    type=click.Path(dir_okay=False, exists=True),
    help="openai agent: a file of model names, one a line (# comments), played in turn like repeated --model.",
)
@click.option(
    "--api-key-env",
    default="OPENAI_API_KEY",
    show_default=True,
    help="openai agent: the variable holding the API key; optional (keyless local servers need none).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    help="openai agent: seconds per request [default: 120, or 600 for a server on this machine (localhost, "
    "127.0.0.1): a model on a CPU].",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=512,
    show_default=True,
    help="openai agent: the reply cap, tokens per reply (sent as max_tokens); a reply cut at it is the model's "
    "parse_error.",
)
@click.option(
    "--episode-tokens",
    type=click.IntRange(min=1),
    default=8192,
    show_default=True,
    help="openai agent: tokens the model may generate in one episode; once spent, no further request is sent and "
    "the episode ends not_terminated at its turn budget.",
)
@click.option(
    "--stream",
    is_flag=True,
    help="openai agent: read replies as streams and cut them at --max-tokens here, for servers that may not honour "
    "it (not for llama-cpp-python's chatml-function-calling, which streams no tool calls).",
)
@click.option(
    "--progress",
    is_flag=True,
    help="openai agent: one line a request on stderr (tokens in and out, seconds, tokens a second).",
)
@click.option(
    "--max-retries",
    type=click.IntRange(0, 20),
    default=4,
    show_default=True,
    help="openai agent: retries of a failed request (backoff) before the episode is infra_error.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 256),
    default=1,
    show_default=True,
    help="Episodes played at once (one agent each); the trace stays in episode order.",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Keep the finished episodes of the --out trace (same settings) and play the rest; "
    "infra_error episodes are played again.",
)
@click.option("--temperature", type=float, default=0.0, show_default=True, help="openai agent: sampling temperature.")
@click.option("--seed", type=int, help="openai agent: sampling seed, passed through.")
@click.option("--repeat", default=1, show_default=True, type=click.IntRange(1, 100), help="Runs per episode (pass^k).")
@click.option("--limit", type=click.IntRange(1), help="Play only the first N episodes.")
@click.option(
    "--out", type=click.Path(dir_okay=False), default="trace.jsonl", show_default=True, help="Trace file (JSONL)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the score summary as JSON.")
@EXPECT
@release_options
@click.pass_context
@cli.handle_errors
def run(
    ctx: click.Context,
    release: str | None,
    cache_dir: str | None,
    expect: str | None,
    corpus: str | None,
    split: str,
    agent_name: str | None,
    agent_options: tuple[str, ...],
    agent_cmd: str | None,
    turn_timeout: float,
    base_url: str | None,
    models: tuple[str, ...],
    models_file: str | None,
    api_key_env: str,
    timeout: float | None,
    max_tokens: int,
    episode_tokens: int,
    stream: bool,
    progress: bool,
    max_retries: int,
    concurrency: int,
    resume: bool,
    temperature: float,
    seed: int | None,
    repeat: int,
    limit: int | None,
    out: str,
    as_json: bool,
) -> None:
    """Play an agent on a split; write the trace, episode by episode; exit 0 whenever the run completed, whatever the
    score, and 1 when episodes hit infrastructure errors (infra_error: a model endpoint failing after retries; they
    are left out of the scores, and --resume plays them again).

    \b
    Example:
      telemetry-bench run --corpus xai4heat --split test --agent oracle --out /tmp/t.jsonl
      telemetry-bench run --release artifacts/xai4heat/release --cache-dir /tmp/cache --split test --agent oracle --out /tmp/r.jsonl
      telemetry-bench run --corpus xai4heat --split test --agent examples.agents.replay:ReplayAgent --agent-option trace=/tmp/t.jsonl --out /tmp/py.jsonl
      telemetry-bench run --corpus xai4heat --split test --agent-cmd "python3 examples/agents/replay_cmd.py /tmp/t.jsonl" --out /tmp/cmd.jsonl
    """  # noqa: E501 - the examples are runnable commands, one per line
    from pipeline.core.errors import RunError

    if bool(agent_name) == bool(agent_cmd):
        raise RunError("give exactly one of --agent NAME and --agent-cmd CMD")
    if not corpus and not release:
        raise RunError("give --corpus NAME (a built project) or --release DIR (a release folder on its own)")
    options: dict | None = None
    if agent_options and (not agent_name or ":" not in agent_name):
        raise RunError("--agent-option is for a Python agent given as --agent module:factory")
    if agent_cmd:
        agent_name, options = "cmd", {"command": agent_cmd, "turn_timeout": turn_timeout}
    elif ":" in agent_name:
        options = {}
        for item in agent_options:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise RunError(f"--agent-option {item!r}: write it as KEY=VALUE")
            options[key.strip()] = _option_value(value)
    elif agent_name == "openai":
        given = {
            "release": release,
            "cache_dir": cache_dir,
            "expect": expect,
            "corpus": corpus,
            "split": split,
            "base_url": base_url,
            "api_key_env": api_key_env,
            "temperature": temperature,
            "seed": seed,
            "timeout": timeout,
            "max_retries": max_retries,
            "max_tokens": max_tokens,
            "episode_tokens": episode_tokens,
            "stream": stream,
            "progress": progress,
            "repeat": repeat,
            "out": out,
            "limit": limit,
            "concurrency": concurrency,
            "resume": resume,
            "as_json": as_json,
        }
        _sweep(ctx, given, _model_list(models, models_file))
        return
    elif models or models_file:
        raise RunError("--model and --models are for --agent openai")
    _play_and_report(
        ctx,
        (release, cache_dir, expect),
        corpus,
        split,
        agent_name,
        repeat,
        out,
        limit,
        options,
        concurrency,
        resume,
        as_json,
    )


def _model_list(models: tuple[str, ...], models_file: str | None) -> list[str | None]:
    """The models to play in turn: --model values, then the --models file's lines; none: the environment's."""
    listed = list(models)
    if models_file:
        text = Path(models_file).read_text(encoding="utf-8")
        listed += [line.split("#", 1)[0].strip() for line in text.splitlines() if line.split("#", 1)[0].strip()]
    if len(set(listed)) != len(listed):
        raise click.UsageError(f"a model is named twice: {sorted({m for m in listed if listed.count(m) > 1})}")
    return listed or [None]


def _sweep(ctx: click.Context, given: dict, models: list[str | None]) -> None:
    """Play the openai agent once per model, into one trace each ({model} in --out names it); infrastructure errors
    are reported after every model has played."""
    from pipeline.core.errors import RunError
    from pipeline.runtime.openai_agent import OpenAISettings

    out = given["out"]
    if len(models) > 1 and "{model}" not in out:
        raise click.UsageError(f"--out {out}: name {{model}} in it to play {len(models)} models, one trace each")
    failed = []
    settings = [
        OpenAISettings.resolve(base_url=given["base_url"], model=m, api_key_env=given["api_key_env"]) for m in models
    ]
    paths = [out.replace("{model}", re.sub(r"[^A-Za-z0-9._-]+", "-", s.model)) for s in settings]
    # Two models whose names differ only in punctuation map to one file; the second trace would overwrite the first.
    seen: dict[str, str] = {}
    for resolved, path in zip(settings, paths, strict=True):
        if path in seen:
            raise click.UsageError(
                f"--out {out}: models {seen[path]!r} and {resolved.model!r} both write {path}; "
                "rename one in --models or play them in separate runs"
            )
        seen[path] = resolved.model
    for resolved, path in zip(settings, paths, strict=True):
        options = {
            "base_url": resolved.base_url,
            "model": resolved.model,
            "api_key_env": given["api_key_env"],
            "temperature": given["temperature"],
            "seed": given["seed"],
            **{k: given[k] for k in ("timeout", "max_retries", "max_tokens", "episode_tokens", "stream", "progress")},
        }
        try:
            _play_and_report(
                ctx,
                (given["release"], given["cache_dir"], given["expect"]),
                given["corpus"],
                given["split"],
                "openai",
                given["repeat"],
                path,
                given["limit"],
                options,
                given["concurrency"],
                given["resume"],
                given["as_json"],
            )
        except RunError as exc:
            if len(models) == 1:
                raise
            failed.append(f"{resolved.model}: {exc}")
    if failed:
        raise RunError("; ".join(failed))


def _play_and_report(
    ctx: click.Context,
    played: tuple[str | None, str | None, str | None],  # --release, --cache-dir, --expect
    corpus: str | None,
    split: str,
    agent_name: str,
    repeat: int,
    out: str,
    limit: int | None,
    options: dict | None,
    concurrency: int,
    resume: bool,
    as_json: bool,
) -> None:
    from pipeline.core.errors import RunError
    from pipeline.harness.play import run_agent

    release, cache_dir, expect = played
    summary = run_agent(
        cli.workspace(ctx),
        corpus,
        split,
        agent_name,
        repeat,
        Path(out),
        limit,
        options,
        concurrency,
        resume,
        _release(release, cache_dir, expect),
        expect,
    )
    if as_json:
        cli.echo_json(summary)
    else:
        click.echo(f"trace written to {out}")
        _rates(summary)
    if summary["infra_errors"]:
        raise RunError(
            f"{summary['infra_errors']} episode runs hit infrastructure errors (infra_error in {out}; left out of "
            f"the scores): fix the endpoint, then rerun the same command with --resume"
        )


@click.command()
@TRACES
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print JSON: {summaries: [...], warnings: [...]}, a summary per agent identity, corpus, split and release "
    "(rates, commitment accuracy per gold outcome and balanced, part scores, per-family rates, usage, latency, rows).",
)
@SCORED_RELEASE
@click.option(
    "--prices",
    type=click.Path(dir_okay=False, exists=True),
    help='A TOML price table, [models."<model>"] input = ... output = ... (US dollars per million tokens): adds cost.',
)
@EXPECT
@click.pass_context
@cli.handle_errors
def score(
    ctx: click.Context,
    traces: tuple[str, ...],
    as_json: bool,
    release: str | None,
    prices: str | None,
    expect: str | None,
) -> None:
    """Score saved traces against their episodes; the same trace always gives the same scores.

    One summary per agent identity (agent kind, model and the settings that change behaviour, shown as a short
    digest), corpus and split: traces of one identity pool their runs, two identities are never merged. A summary
    covering fewer episodes than its split is marked partial. Runs played on two releases are never pooled either:
    each trace records the release digest it was played on; --expect refuses any other, and a warning names traces
    bound to no release, played side by side on different releases, or on another than the project's build made.

    \b
    Example:
      telemetry-bench score /tmp/t.jsonl /tmp/oracle.jsonl --json
    """
    from pipeline.core.config import load_price_table
    from pipeline.harness.binding import digest_warnings
    from pipeline.harness.traces import score_traces

    table = load_price_table(Path(prices)) if prices else None
    ws, paths = cli.workspace(ctx), [Path(t) for t in traces]
    summaries = score_traces(ws, paths, _release(release, None, expect), table, expect=expect)
    warnings = digest_warnings(ws, summaries)
    if as_json:  # the warnings in the JSON, which a program reads whole
        cli.echo_json({"summaries": summaries, "warnings": warnings})
        return
    _warn(warnings)
    for summary in summaries:
        _rates(summary)


@click.command()
@TRACES
@click.option(
    "--out",
    "outs",
    multiple=True,
    required=True,
    type=click.Path(dir_okay=False),
    help="Write the board here: .json (contracts/schemas/leaderboard.schema.json), .csv or .md; repeat for several.",
)
@SCORED_RELEASE
@click.option("--prices", type=click.Path(dir_okay=False, exists=True), help="A TOML price table (see `score`).")
@click.option("--resamples", default=1000, show_default=True, type=click.IntRange(100), help="Bootstrap draws.")
@click.option("--seed", default=0, show_default=True, help="Seed of the bootstrap: the same seed, the same intervals.")
@EXPECT
@click.pass_context
@cli.handle_errors
def leaderboard(
    ctx: click.Context,
    traces: tuple[str, ...],
    outs: tuple[str, ...],
    release: str | None,
    prices: str | None,
    resamples: int,
    seed: int,
    expect: str | None,
) -> None:
    """Rank scored traces: one row per agent identity, corpus and split, with a 95% bootstrap interval.

    Rows are ranked only among complete rows scored on the same episode set (corpus, split and episode-file digest);
    a partial trace is listed unranked, and a trace that cannot be scored (played on another episode set) is listed
    under "refused" with its reason, as is, with --expect, a trace played on another release. Each row records the
    release its traces were played on; the board's warnings (printed too) name traces bound to no release, played side
    by side on different releases, or on another than the project's build made.

    \b
    Example:
      telemetry-bench leaderboard /tmp/t.jsonl /tmp/oracle.jsonl --out /tmp/results.json --out /tmp/results.md
    """
    from pipeline.core.config import load_price_table
    from pipeline.harness.leaderboard import FORMATS, build_leaderboard, write_leaderboard

    bad = [o for o in outs if Path(o).suffix.lower() not in FORMATS]
    if bad:
        raise click.UsageError(f"--out {bad[0]}: name a .json, .csv or .md file")
    table = load_price_table(Path(prices)) if prices else None
    board = build_leaderboard(
        cli.workspace(ctx), [Path(t) for t in traces], _release(release, None, expect), table, resamples, seed, expect
    )
    _warn(board.warnings)
    for out in outs:
        write_leaderboard(board, Path(out))
    ranked = sum(r.rank is not None for r in board.rows)
    click.echo(
        f"{len(board.rows)} rows ({ranked} ranked, {len(board.rows) - ranked} partial), {len(board.refused)} traces "
        f"refused: wrote {', '.join(outs)}"
    )
    for refused in board.refused:
        click.echo(f"  refused {refused.trace}: {refused.reason}")


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
    from pipeline.harness.play import preflight_corpus

    report = preflight_corpus(cli.workspace(ctx), corpus)
    if as_json:
        cli.echo_json(report)
        return
    click.echo(f"{corpus}: {report['episodes']} episodes, {report['issue_count']} issues")
    for check, n in report["by_check"].items():
        click.echo(f"  {check:<40}{'not checked (no tasks stage output)' if check in report['unchecked'] else n}")


@click.command()
@click.option("--corpus", required=True, help="Corpus name.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print JSON (candidates, released, excluded_by_policy, completions_on_candidates, "
    "commitment_mix, artifact_probe, policies with their gates, gates, notes).",
)
@click.pass_context
@cli.handle_errors
def audit(ctx: click.Context, corpus: str, as_json: bool) -> None:
    """The construction audit of a corpus: what each shortcut policy and cheap strategy won, what was dropped, and
    the release gates (artifact probe, guessers, grid rules; docs/audit.md).

    \b
    Example:
      telemetry-bench audit --corpus xai4heat --json
    """
    from pipeline.harness.play import audit_summary

    report = audit_summary(cli.workspace(ctx), corpus)
    if as_json:
        cli.echo_json(report)
        return
    from pipeline.audit.gates import figures, gate_of

    click.echo(f"{corpus}: {report['candidates']} candidate episodes, {report['released']} released")
    for name, info in report["policies"].items():
        click.echo(
            f"  {name:<21} lacks {info['lacks']:<18} wins: candidates {info.get('won_candidates', 0):>4}, "
            f"released {info.get('won_released', 0):>4}   excluded {report['excluded_by_policy'][name]:>4}"
        )
    click.echo("  commitment mix: " + ", ".join(f"{k} {v}" for k, v in report["commitment_mix"].items()))
    click.echo("  controls: " + ", ".join(f"{k} {v}" for k, v in report["controls"].items()))
    for name, status in report.get("gates", {}).items():
        click.echo(f"  gate {name:<21} {status:<17} {figures(gate_of(name, report))}")
    for note in report.get("notes", []):
        click.echo(f"  note: {note}")


COMMANDS = (run, score, leaderboard, preflight, audit)
