"""CLI command `build`: every stage, in order, for every corpus."""

from __future__ import annotations

import functools
import json
import time
from collections import Counter
from pathlib import Path

import click

from pipeline.cli import common as cli


@click.command()
@click.option(
    "--corpus", "corpora", multiple=True, help="Corpus to build (repeatable; default: every configs/corpora/*.toml)."
)
@click.option("--until", help="Stop after this stage (e.g. ingest).")
@click.option(
    "--threads",
    type=int,
    envvar="TELEMETRY_BENCH_THREADS",
    help="DuckDB threads (runtime only; outputs do not change).",
)
@click.option(
    "--partitions",
    type=click.IntRange(1, 4096),
    envvar="TELEMETRY_BENCH_PARTITIONS",
    help="Hash partitions of the streams for ingest (default: one per worker, one for a small corpus). Outputs do not "
    "change.",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 256),
    envvar="TELEMETRY_BENCH_WORKERS",
    help="Worker processes for ingest, store and task families (default: the CPUs available). Outputs do not change.",
)
@click.option(
    "--memory-budget",
    default="4GB",
    show_default=True,
    envvar="TELEMETRY_BENCH_MEMORY",
    help="Memory the build may use, shared by the workers (e.g. 4GB, 1500MB); batches are sized to fit it.",
)
@click.option(
    "--executor",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    envvar="TELEMETRY_BENCH_EXECUTOR",
    help="Where ingest batches, store units and task families run: spawned local processes, or Ray tasks (pip install "
    "'telemetry-bench[ray]'). Outputs do not change.",
)
@click.option(
    "--ray-address",
    envvar="TELEMETRY_BENCH_RAY_ADDRESS",
    help="Ray cluster to run on with --executor ray (e.g. ray://head:10001 or auto; default: a local Ray instance of "
    "--workers CPUs).",
)
@click.option(
    "--parts",
    envvar="TELEMETRY_BENCH_PARTS",
    help="Where workers leave intermediate parts: an existing folder, or a URL every worker reaches (file://, s3://, "
    "gs://, gcs://, abfs://, az://; e.g. s3://bucket/prefix, file:///shared/parts; a multi-node Ray cluster needs "
    "one). Default: each stage's own folder. Outputs do not change.",
)
@click.option("--force", is_flag=True, help="Rebuild every stage even when its identity is unchanged.")
@click.option(
    "--raw",
    type=click.Path(file_okay=False, exists=True),
    help="Raw folder for corpora kept outside the project (e.g. bts).",
)
@click.option("--json", "as_json", is_flag=True, help="Print [{corpus, stage, status, seconds}] as JSON.")
@click.option(
    "--verbose", is_flag=True, help="Print each stage's notes in full (by default, one short line of information)."
)
@click.pass_context
@cli.handle_errors
def build(
    ctx: click.Context,
    corpora: tuple[str, ...],
    until: str | None,
    threads: int | None,
    partitions: int | None,
    workers: int | None,
    memory_budget: str,
    executor: str,
    ray_address: str | None,
    parts: str | None,
    force: bool,
    raw: str | None,
    as_json: bool,
    verbose: bool,
) -> None:
    """Run every stage in order for every corpus; a stage whose identity is unchanged is "cached".

    \b
    Example:
      telemetry-bench build --corpus xai4heat --json
      telemetry-bench build --corpus xai4heat --partitions 4 --workers 2 --memory-budget 2GB
      telemetry-bench build --corpus xai4heat --executor ray --partitions 4
      telemetry-bench build --corpus xai4heat --executor ray --parts .
    """
    ws = cli.workspace(ctx)

    def show(outcome) -> None:
        if not as_json:
            click.echo(f"{outcome.corpus:<12} {outcome.stage:<10} {outcome.status:<7} {outcome.seconds:7.2f}s")
        if outcome.note:  # a stage built again for a damaged output
            click.echo(f"{outcome.corpus:<12} {outcome.stage:<10} info: {outcome.note}", err=True)
        notes = outcome.manifest.details.get("notes", [])  # e.g. a gate without enough rows to decide
        for line in [f"note: {n}" for n in notes] if verbose else [short_notes(notes, outcome)] if notes else []:
            click.echo(f"{outcome.corpus:<12} {outcome.stage:<10} {line}", err=True)

    start = time.perf_counter()
    outcomes = None if force else _unchanged(ws, corpora, until, raw, show)
    if outcomes is None:
        runtime = {"threads": threads, "partitions": partitions, "workers": workers, "memory_budget": memory_budget}
        runtime.update(executor=executor, ray_address=ray_address, parts=parts)
        outcomes = _build(ws, corpora, until, raw, force, show, runtime)
    if not as_json:
        click.echo("\n".join(summary(outcomes, time.perf_counter() - start)))
    if as_json:
        cli.echo_json(
            [
                {"corpus": o.corpus, "stage": o.stage, "status": o.status, "seconds": round(o.seconds, 3)}
                for o in outcomes
            ]
        )


def _unchanged(ws, corpora: tuple[str, ...], until: str | None, raw: str | None, show) -> list | None:
    """Every stage reported cached from the recorded build state when no file it lists changed, without importing
    the stages (pipeline/core/build_state.py); None when the full identity check must decide."""
    from pipeline.core import build_state

    selected = list(dict.fromkeys(corpora)) if corpora else ws.corpus_names()  # as select_corpora orders them
    found = build_state.unchanged(
        ws.artifacts_dir, build_state.state_key(ws.root, raw, ws.artifacts_dir), selected, until
    )
    if found is None:
        return None
    for note in found.skipped:
        click.echo(f"info: {note}", err=True)
    for outcome in found.outcomes:
        show(outcome)
    return found.outcomes


def _build(ws, corpora, until: str | None, raw: str | None, force: bool, show, runtime: dict) -> list:
    """The full build: every stage's identity computed and compared, what changed built; the state recorded."""
    from pipeline.core import build_state
    from pipeline.core.resources import Resources, parse_bytes
    from pipeline.harness import state
    from pipeline.harness.build import build as run_build

    resources = Resources(**{**runtime, "memory_budget": parse_bytes(runtime["memory_budget"])})
    key = build_state.state_key(ws.root, raw, ws.artifacts_dir)
    taken = state.snapshot(ws, corpora, raw)
    outcomes = run_build(
        ws,
        corpora,
        until=until,
        resources=resources,
        force=force,
        on_done=show,
        raw=raw,
        on_skip=lambda note: click.echo(f"info: {note}", err=True),
    )
    state.record(ws, taken, outcomes, key, until)
    return outcomes


INSPECTED = ("ingest", "store", "tasks", "episodes")  # stages `inspect` shows; the audit has a command of its own


def short_notes(notes: list[str], outcome) -> str:
    """A stage's notes as one line of information: what each is about (the words before its first colon), and where
    the detail is."""
    heads = list(dict.fromkeys(note.split(":", 1)[0] for note in notes))
    shown = f"inspect {outcome.stage}" if outcome.stage in INSPECTED else outcome.stage
    where = f"{command_name()} {shown} --corpus {outcome.corpus}, or build --verbose"
    return f"info: {len(notes)} note{'s' * (len(notes) > 1)} ({'; '.join(heads)}): {where}"


@functools.cache
def command_name() -> str:
    """How to call this program again from here: `telemetry-bench` when that is on PATH, else the path it ran by
    (`.venv/bin/telemetry-bench` after `make build`)."""
    import os
    import shutil
    import sys

    found, ran = shutil.which("telemetry-bench"), sys.argv[0]
    if found and os.path.exists(ran) and os.path.samefile(found, ran):
        return "telemetry-bench"
    if os.path.basename(ran) == "telemetry-bench" and os.path.exists(ran):
        relative = os.path.relpath(ran)
        return relative if relative.startswith(".") or os.sep not in relative else f"./{relative}"
    return "telemetry-bench"


def guesser_scores(audit: dict) -> str | None:
    """The accuracy-gated guessers' scores beside the majority share they are gated against (+ the margin), in one
    line: `guessers vs majority 0.4174 + 0.0531: surface_guesser 0.3768, week_memory 0.3855, ...`."""
    gated = {name: p["gate"] for name, p in audit.get("policies", {}).items() if "accuracy" in p["gate"]}
    if not gated:
        return None
    first = next(iter(gated.values()))
    scores = ", ".join(f"{name} {gate['accuracy']}" for name, gate in gated.items())
    return f"guessers vs majority {first['majority']} + {first['margin']}: {scores}"


def summary(outcomes: list, wall: float) -> list[str]:
    """The build's last lines: what each corpus released (rows per split, its gates), then the next commands. `wall`
    is the build's time; the stages' own times add up to more when corpora built at once."""
    by_corpus: dict[str, dict] = {}
    for o in outcomes:
        by_corpus.setdefault(o.corpus, {})[o.stage] = o
    if not by_corpus:
        return ["nothing built: no corpus selected"]
    seconds = sum(o.seconds for o in outcomes)
    built = sum(o.status == "built" for o in outcomes)
    done = f"done: {len(by_corpus)} corpora, {built} stages built, {len(outcomes) - built} cached, {wall:.1f}s"
    if seconds > 1.05 * wall:
        done += f" (the stages' own times add up to {seconds:.1f}s: corpora built at once)"
    lines = [done]
    released = []
    for corpus, stages in by_corpus.items():
        release = stages.get("release")
        if release is None:
            lines.append(f"  {corpus:<12} built up to {list(stages)[-1]} (no release: --until)")
            continue
        rows = release.manifest.row_counts
        statuses = list(stages["audit"].manifest.details.get("gates", {}).values()) if "audit" in stages else []
        why = {"insufficient_rows": "too few rows", "unproven": "without a positive control"}
        ungated = Counter(why[s] for s in statuses if s in why)
        reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(ungated.items()))
        total = sum(ungated.values())
        gates = f"gates pass ({total} of {len(statuses)} not gated: {reasons})" if total else "gates pass"
        split = " / ".join(f"{rows.get(s, 0)} {s}" for s in ("train", "dev", "test"))
        digest = release.manifest.details.get("release_digest")
        lines.append(
            f"  {corpus:<12} released {sum(rows.values()):>4} rows: {split}; {gates}"
            + (f"; digest sha256:{digest}" if digest else "")
        )
        said = guesser_scores(stages["audit"].manifest.details) if "audit" in stages else None
        lines += [f"  {'':<12} {said}"] if said else []
        released.append((corpus, rows.get("test", 0)))
    tested = [c for c, n in released if n] or [c for c, _ in released]
    if tested:
        tb = command_name()
        lines += [
            "next:",
            f"  {tb} run --corpus {tested[0]} --split test --agent oracle --out /tmp/oracle.jsonl",
            f"  {tb} score /tmp/oracle.jsonl          (your model: --agent openai --model M, docs/runtime.md)",
            "  make report                  (artifacts/report.html)   make verify   (replay: byte-identical rebuilds)",
        ]
    return lines


@click.command()
@click.option("--corpus", "corpora", multiple=True, help="Corpus to verify (repeatable; default: all).")
@click.option(
    "--release",
    "release",
    type=click.Path(file_okay=False),
    help="Only check this release folder against its release.json.",
)
@click.option(
    "--expect",
    metavar="DIGEST",
    help="With --release: the release digest you trust (sha256:..., as `build` printed it or the publisher's dataset "
    "card states it); the folder's content must have it.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the match table as JSON.")
@click.pass_context
@cli.handle_errors
def verify(
    ctx: click.Context, corpora: tuple[str, ...], release: str | None, expect: str | None, as_json: bool
) -> None:
    """Rebuild raw -> release twice in fresh folders under different environments and compare every stage's
    outputs with each other and with the committed release; or check one release folder (--release), against the
    digest you trust with --expect.

    \b
    Example:
      telemetry-bench verify --release artifacts/xai4heat/release
    """
    from pipeline.core.config import select_corpora
    from pipeline.core.errors import StageError
    from pipeline.release.verify import replay

    if expect and not release:
        raise click.UsageError("--expect checks a release folder: give --release DIR too")
    if release:
        _verify_folder(Path(release), expect, as_json)
        return
    ws = cli.workspace(ctx)
    report = replay(ws, select_corpora(ws, corpora))
    if as_json:
        cli.echo_json(report)
    else:
        click.echo(f"run 1 on the {report['executors'][0]} executor, run 2 on the {report['executors'][1]} executor")
        click.echo(f"{'corpus':<12}{'stage':<10}{'run 1':<8}{'run 2':<8}matched")
        for row in report["stages"]:
            click.echo(
                f"{row['corpus']:<12}{row['stage']:<10}{row['status'][0]:<8}{row['status'][1]:<8}{row['matched']}"
            )
            for difference in row["differences"][:5]:
                click.echo(f"    {difference}")
        for corpus, result in report["committed_release"].items():
            click.echo(f"{corpus:<12}committed release matches the rebuild: {result['matched']}")
            for difference in result["differences"][:5]:
                click.echo(f"    {difference}")
    if not report["ok"]:
        stale = [c for c, r in report["committed_release"].items() if not r["matched"]]
        hint = (
            f"; the committed release of {', '.join(stale)} is stale: run `make build` and commit artifacts/*/release"
            if stale
            else ""
        )
        raise StageError("verify found differences" + hint)


def _verify_folder(release: Path, expect: str | None, as_json: bool) -> None:
    """verify --release: the problems of the folder, one a line, or that it is intact and its release digest."""
    from pipeline.core.errors import StageError
    from pipeline.release.verify import verify_release

    problems = verify_release(release, expect)
    digest = None if problems else json.loads((release / "release.json").read_bytes())["release_digest"]
    if as_json:
        cli.echo_json({"ok": not problems, "problems": problems, "release_digest": digest})
    if len(problems) == 1:  # the error line says it whole
        raise StageError(problems[0])
    for problem in problems if not as_json else []:
        click.echo(problem)
    if problems:
        raise StageError(f"{release}: {len(problems)} problem(s); first: {problems[0]}")
    if not as_json:
        trusted = (
            "the digest you expect"
            if expect
            else "a folder cannot vouch for itself: check it against the digest its publisher printed, --expect"
        )
        click.echo(
            f"{release}: intact (files, rows, schema, store values, ground truth, counts, thresholds, stage manifest, "
            f"versions, own digest; no unknown file); release digest sha256:{digest} ({trusted})"
        )


@click.group()
def synth() -> None:
    """Generate synthetic raw data in a real corpus's exact format."""


FAULTS = {  # flag -> FaultRates field; defaults from configs/synth.toml
    "--dropout": "isolated missing readings",
    "--long-gaps": "share of time lost in gaps of 1 to 14 days",
    "--stuck": "readings frozen in runs of 6 hours to 3 days",
    "--spikes": "one-reading spikes of 6 to 20 standard deviations",
    "--out-of-range": "impossible readings of temperature streams",
    "--clock-jumps": "readings after which the clock steps an hour forward or back",
    "--duplicates": "readings written twice with one timestamp",
    "--counter-resets": "readings at which an energy counter restarts from 0",
}


class _Rate(click.ParamType):
    """A fault rate: a number in [0, 1) (click's FloatRange lets nan through)."""

    name = "rate"

    def convert(self, value, param, ctx):
        try:
            rate = float(value)
        except (TypeError, ValueError):
            rate = float("nan")
        if not 0.0 <= rate < 1.0:  # false for nan too
            self.fail(f"{value!r} is not a rate in [0, 1); give a share such as 0.02", param, ctx)
        return rate


def _fault_options(command):
    for flag, what in reversed(FAULTS.items()):
        command = click.option(
            flag,
            type=_Rate(),
            default=None,
            help=f"Rate in [0, 1): {what} (default: configs/synth.toml).",
        )(command)
    return command


@synth.command("bts")
@click.option("--streams", type=click.IntRange(1), default=20, show_default=True, help="How many Site B streams.")
@click.option("--days", type=click.IntRange(1), default=3, show_default=True, help="Days of data from 2021-01-01.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed: the same seed writes the same bytes.")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Output folder.")
@_fault_options
@click.pass_context
@cli.handle_errors
def synth_bts_command(ctx: click.Context, streams: int, days: int, seed: int, out: str, **rates: float | None) -> None:
    """Write Site_Baa.zip (pickles), Site_B_metadata.csv, Site_B.ttl and SYNTHETIC.md, from the real Site B metadata,
    with the faults real telemetry has at the measured rates (docs/bts.md), or at the rates given.

    \b
    Example:
      telemetry-bench synth bts --streams 20 --days 200 --seed 11 --out /tmp/bts-synth
    """
    from pipeline.core.config import load_synth_config
    from pipeline.ingest.synth import synth_bts

    ws = cli.workspace(ctx)
    defaults = load_synth_config(ws).faults
    faults = defaults.model_copy(update={k: v for k, v in rates.items() if v is not None})
    result = synth_bts(ws.root / "data" / "raw" / "bts-site-b" / "Site_B.ttl", streams, days, seed, Path(out), faults)
    click.echo(f"{out}: {result['streams']} streams x {result['days']} days (seed {result['seed']}), synthetic")


COMMANDS = (build, verify, synth)
