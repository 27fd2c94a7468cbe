"""The stage registry and `build`: every stage, in order, for every corpus, cached by identity."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from contracts.build import BuildConfig, StoreConfig
from contracts.corpus import CorpusMapping
from contracts.episodes import AuditConfig, Episode, EpisodesConfig
from contracts.ingest import IngestReport
from contracts.manifest import StageManifest
from contracts.tasks import FamiliesConfig, Task
from pipeline.core.config import (
    load_answers,
    load_audit_config,
    load_build_config,
    load_episodes_config,
    load_families,
    load_hub_licenses,
    load_ingest_config,
    load_mapping,
    select_corpora,
    weekly_commitments,
)
from pipeline.core.errors import ConfigError
from pipeline.core.manifest import (
    StageIdentity,
    StageOutcome,
    StageResult,
    cached_outcome,
    code_version,
    config_digest,
    contract_hash,
    corpus_lock,
    data_identity,
    library_versions,
    raw_inputs,
    require_manifest,
    run_stage,
)
from pipeline.core.resources import Resources
from pipeline.core.workspace import Workspace
from pipeline.harness import at_once
from pipeline.harness.written import check_written


@dataclass(frozen=True)
class Context:
    ws: Workspace
    mapping: CorpusMapping
    config: BuildConfig
    resources: Resources  # runtime only (threads, partitions, workers, memory): never part of any identity
    raw: Path  # the raw folder (data/raw/<corpus>, raw_dir, or --raw / the corpus's raw_env)

    @property
    def synthetic(self) -> bool:
        return (self.raw / "SYNTHETIC.md").is_file()

    def synthetic_origin(self) -> dict | None:
        """How generated raw data was made (SYNTHETIC.json, written by `synth`): generator, seed and the rest; None
        for real data. A SYNTHETIC.md without it still marks the data synthetic, by an unnamed generator."""
        if not self.synthetic:
            return None
        found = self.raw / "SYNTHETIC.json"
        try:
            origin = json.loads(found.read_text(encoding="utf-8")) if found.is_file() else {}
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"{found}: not readable JSON ({exc}); write it again with `telemetry-bench synth`"
            ) from exc
        if not isinstance(origin, dict):
            raise ConfigError(f"{found}: not a JSON object; write it again with `telemetry-bench synth`")
        return {"generator": "not named (SYNTHETIC.md without SYNTHETIC.json)", "seed": "not recorded", **origin}

    @property
    def corpus(self) -> str:
        return self.mapping.name

    def stage_dir(self, stage: str) -> Path:
        return self.ws.stage_dir(self.corpus, stage)


def _metadata_folder(ctx: Context) -> Path | None:
    """configs/corpora/<corpus>/ when the mapping keeps its metadata there, else None (metadata is upstream)."""
    location = getattr(ctx.mapping.metadata, "location", "raw")
    return ctx.ws.corpus_metadata_dir(ctx.corpus) if location == "config" else None


def _ingest_identity(ctx: Context) -> tuple[dict, dict[str, str]]:
    folder = _metadata_folder(ctx)
    beside = {f"config/{rel}": xxh for rel, xxh in raw_inputs(folder).items()} if folder and folder.is_dir() else {}
    return ctx.mapping.model_dump(mode="json"), {**raw_inputs(ctx.raw), **beside}


def _ingest_run(ctx: Context, out: Path) -> StageResult:
    from pipeline.ingest.stage import run_ingest
    from pipeline.ingest.tables import TABLES

    limits = load_ingest_config(ctx.ws).reject_limits
    report = run_ingest(ctx.mapping, ctx.raw, out, ctx.resources, _metadata_folder(ctx), limits)
    counts = {
        "observations": report.observations,
        "rejects": report.rejects,
        "streams": report.streams,
        "sites": report.sites,
    }
    return StageResult(
        outputs=[f"{t}.parquet" for t in TABLES] + ["report.json"],
        row_counts=counts,
        details={"raw_value_cells": report.raw_value_cells},
    )


def _upstream_outputs(ctx: Context, stage: str) -> dict[str, str]:
    manifest = require_manifest(ctx.stage_dir(stage), stage)
    return {f"{stage}/{name}": out.xxh3 for name, out in manifest.outputs.items()}


def _store_identity(ctx: Context) -> tuple[dict, dict[str, str]]:
    config = ctx.config.store.model_dump(mode="json")
    if ctx.mapping.silence:  # only then: a corpus without declarations keeps its store identity
        config["silence"] = {
            "declared": [rule.model_dump(mode="json") for rule in ctx.mapping.silence],
            "timezone": ctx.mapping.time.timezone,
        }
    return config, _upstream_outputs(ctx, "ingest")


def _store_run(ctx: Context, out: Path) -> StageResult:
    from pipeline.store.build import build_store
    from pipeline.store.expected import Declared

    mapping = ctx.mapping
    silence = Declared(tuple(mapping.silence), mapping.time.timezone, mapping.name) if mapping.silence else None
    return build_store(ctx.stage_dir("ingest"), out, ctx.config.store, ctx.resources, silence)


def _tasks_identity(ctx: Context) -> tuple[dict, dict[str, str]]:
    config = {
        "families": load_families(ctx.ws).model_dump(mode="json"),
        "answers": load_answers(ctx.ws).model_dump(mode="json"),
        "held_out_sites": ctx.mapping.held_out_sites,
        "split": ctx.mapping.split,
        "splits": ctx.mapping.splits.model_dump(mode="json") if ctx.mapping.splits else None,
        "weekly_commitments": sorted(weekly_commitments(ctx.ws)),
    }
    return config, {**_upstream_outputs(ctx, "store"), **_upstream_outputs(ctx, "ingest")}


def _tasks_run(ctx: Context, out: Path) -> StageResult:
    from pipeline.tasks.compile import compile_tasks

    return compile_tasks(
        ctx.stage_dir("store"),
        ctx.stage_dir("ingest"),
        load_families(ctx.ws),
        load_answers(ctx.ws),
        ctx.corpus,
        ctx.mapping.held_out_sites,
        out,
        ctx.resources,
        ctx.mapping.split,
        ctx.mapping.splits,
        weekly_commitments(ctx.ws),
    )


def _episodes_identity(ctx: Context) -> tuple[dict, dict[str, str]]:
    config = {
        "episodes": load_episodes_config(ctx.ws).model_dump(mode="json"),
        "families": load_families(ctx.ws).model_dump(mode="json"),
        "answers": load_answers(ctx.ws).model_dump(mode="json"),
        "timezone": ctx.mapping.time.timezone,
    }
    return config, {**_upstream_outputs(ctx, "tasks"), **_upstream_outputs(ctx, "store")}


def _episodes_run(ctx: Context, out: Path) -> StageResult:
    from pipeline.episodes.stage import build_episodes

    return build_episodes(
        ctx.stage_dir("store"),
        ctx.stage_dir("tasks"),
        load_families(ctx.ws),
        load_episodes_config(ctx.ws),
        load_answers(ctx.ws),
        out,
        ctx.mapping.time.timezone,
    )


def _audit_identity(ctx: Context) -> tuple[dict, dict[str, str]]:
    config = {  # the answers, the time zone and the tasks: the preflight lifts each released row's other variant
        "audit": load_audit_config(ctx.ws).model_dump(mode="json"),
        "episodes": load_episodes_config(ctx.ws).model_dump(mode="json"),
        "families": load_families(ctx.ws).model_dump(mode="json"),
        "answers": load_answers(ctx.ws).model_dump(mode="json"),
        "timezone": ctx.mapping.time.timezone,
    }
    return config, {
        **_upstream_outputs(ctx, "episodes"),
        **_upstream_outputs(ctx, "tasks"),
        **_upstream_outputs(ctx, "store"),
    }


def _audit_run(ctx: Context, out: Path) -> StageResult:
    from pipeline.audit.stage import run_audit

    return run_audit(
        ctx.stage_dir("store"),
        ctx.stage_dir("episodes"),
        load_audit_config(ctx.ws),
        load_families(ctx.ws),
        load_episodes_config(ctx.ws),
        out,
        ctx.stage_dir("tasks"),
        load_answers(ctx.ws),
        ctx.mapping.time.timezone,
        label=f"{ctx.mapping.name} audit",
    )


RELEASE_UPSTREAM = ("ingest", "store", "tasks", "episodes", "audit")


def _release_identity(ctx: Context) -> tuple[dict, dict[str, str]]:
    # release.json records every upstream stage's data identity (config hash, outputs digest), so those are inputs too;
    # code versions are not: an upstream code change that leaves its outputs alone leaves the release alone.
    identities = {
        stage: data_identity(require_manifest(ctx.stage_dir(stage), stage).model_dump(mode="json"))
        for stage in RELEASE_UPSTREAM
    }
    config = {"mapping": ctx.mapping.model_dump(mode="json"), "categories": _categories(ctx)}
    config["card_license"] = _card_license(ctx)  # what the Hub's list decides for this corpus, not the whole list
    if origin := ctx.synthetic_origin():
        config["synthetic"] = origin  # only for generated data: real corpora keep their release identity
    return config, {
        **_upstream_outputs(ctx, "audit"),
        **_upstream_outputs(ctx, "episodes"),
        **_upstream_outputs(ctx, "store"),
        **_upstream_outputs(ctx, "ingest"),
        **{f"{stage}/{key}": value for stage, identity in identities.items() for key, value in identity.items()},
    }


def _categories(ctx: Context) -> dict[str, str]:
    """Family -> ground-truth category (configs/families.toml): the release's trajectories carry it."""
    return {name: family.category for name, family in sorted(load_families(ctx.ws).families.items())}


def _card_license(ctx: Context) -> dict[str, str]:
    from pipeline.release.card import card_license

    return card_license(ctx.mapping, load_hub_licenses(ctx.ws))


def _release_run(ctx: Context, out: Path) -> StageResult:
    import json

    from pipeline.release.stage import build_release
    from pipeline.tools.registry import registry_version

    upstream = {
        stage: require_manifest(ctx.stage_dir(stage), stage).model_dump(mode="json") for stage in RELEASE_UPSTREAM
    }
    report = json.loads((ctx.stage_dir("ingest") / "report.json").read_text(encoding="utf-8"))
    slots = {slot: spec.phrases for slot, spec in load_episodes_config(ctx.ws).slots.items()}
    return build_release(
        ctx.mapping,
        ctx.stage_dir("audit"),
        ctx.stage_dir("episodes"),
        upstream,
        out,
        registry_version(),
        library_versions(),
        report["raw_sha256"],
        ctx.stage_dir("store"),
        slots,
        report.get("metadata_sha256", {}),
        categories=_categories(ctx),
        card_license=_card_license(ctx),
        synthetic=ctx.synthetic_origin(),
    )


@dataclass(frozen=True)
class Stage:
    name: str
    entries: tuple[str, ...]  # the modules the stage runs: their import closure is its code identity
    contracts: tuple[type, ...]
    identity: Callable[[Context], tuple[dict, dict[str, str]]]  # (config slice, inputs)
    run: Callable[[Context, Path], StageResult]
    uses_tools: bool = False  # stages that call the tools (tasks onwards) carry the registry version
    # Its work runs in native code (Arrow, polars, DuckDB) that releases the GIL: corpora run it at once, on threads.
    # The later stages are Python: corpora run them at once in spawned processes (threads would contend for the GIL).
    native: bool = False


STAGES: tuple[Stage, ...] = (
    Stage(
        "ingest",
        ("pipeline.ingest.stage", "pipeline.ingest.tables"),
        (CorpusMapping, IngestReport),
        _ingest_identity,
        _ingest_run,
        native=True,
    ),
    Stage("store", ("pipeline.store.build",), (StoreConfig, StageManifest), _store_identity, _store_run, native=True),
    Stage("tasks", ("pipeline.tasks.compile",), (FamiliesConfig, Task), _tasks_identity, _tasks_run, uses_tools=True),
    Stage(
        "episodes",
        ("pipeline.episodes.stage",),
        (EpisodesConfig, Episode),
        _episodes_identity,
        _episodes_run,
        uses_tools=True,
    ),
    Stage("audit", ("pipeline.audit.stage",), (AuditConfig, Episode), _audit_identity, _audit_run, uses_tools=True),
    Stage(
        "release",
        ("pipeline.release.stage", "pipeline.release.croissant", "pipeline.tools.registry"),
        (CorpusMapping, Episode),
        _release_identity,
        _release_run,
        uses_tools=True,
    ),
)


def stage_names() -> list[str]:
    return [stage.name for stage in STAGES]


def import_stages() -> None:
    """Import every stage's entry modules, and so what they import at load: `make` runs it once after an install so
    that the bytecode of what a build loads is written before the build's processes all compile it at once."""
    import importlib

    for stage in STAGES:
        for module in stage.entries:
            importlib.import_module(module)


def identity_of(stage: Stage, ctx: Context) -> StageIdentity:
    config, inputs = stage.identity(ctx)
    if stage.uses_tools:
        from pipeline.tools.registry import registry_version

        inputs = {**inputs, "tool_registry": registry_version()}
    return StageIdentity(
        corpus=ctx.corpus,
        stage=stage.name,
        code_version=code_version(stage.entries),
        contract_hash=contract_hash(stage.contracts),
        config_hash=config_digest(config),
        libraries=library_versions(),
        inputs=inputs,
    )


def raw_folder(ws: Workspace, mapping: CorpusMapping, raw: str | None = None) -> Path | None:
    """Where a corpus's raw data is; None when it lives outside the project and was not given."""
    if mapping.raw_env:
        given = raw or os.environ.get(mapping.raw_env)
        folder = Path(given) if given else ws.raw_dir(mapping.name, mapping.raw_dir)
        return folder.resolve() if folder.is_dir() else None
    return ws.raw_dir(mapping.name, mapping.raw_dir)


def skip_note(mapping: CorpusMapping) -> str:
    """What a build says of a corpus whose raw data lives outside the project and was not given."""
    return f"{mapping.name}: skipped, no raw data (give --raw DIR or set {mapping.raw_env})"


def _marked(stage: Stage, ctx: Context, out: Path) -> StageResult:
    result = stage.run(ctx, out)
    if ctx.synthetic:
        result.details = {**result.details, "synthetic": True}
    return result


def build(
    ws: Workspace,
    corpora: tuple[str, ...] | list[str] = (),
    *,
    until: str | None = None,
    threads: int | None = None,
    resources: Resources | None = None,
    force: bool = False,
    on_done: Callable[[StageOutcome], None] | None = None,
    raw: str | None = None,
    on_skip: Callable[[str], None] | None = None,
) -> list[StageOutcome]:
    """Run every stage (up to `until`) for every selected corpus; unchanged stages are reported cached.

    Several corpora build at once, up to one per worker, each on its share of the workers and of the memory budget:
    the native stages (ingest, store) on threads, stage by stage, then the later stages of large corpora in spawned
    processes (pipeline/harness/at_once.py). `on_done` hears of each stage as it ends; the outcomes come back in
    corpus, then stage order. A corpus whose raw data lives outside the project (raw_env) and was not given is skipped
    with a note."""
    if until is not None and until not in stage_names():
        raise ConfigError(f"unknown stage {until!r}: stages are {', '.join(stage_names())}")
    from pipeline.tasks.fit import corpus_rule

    config = load_build_config(ws)
    runtime = resources or Resources(threads=threads)
    contexts = []
    for corpus in select_corpora(ws, corpora):
        mapping = load_mapping(ws.corpus_config(corpus))
        check_written(ws, mapping)
        corpus_rule(load_families(ws), mapping.splits, corpus)  # a [splits] that breaks a rule: one line, before ingest
        folder = raw_folder(ws, mapping, raw)
        if folder is None:
            if on_skip:
                on_skip(skip_note(mapping))
            continue
        contexts.append(Context(ws=ws, mapping=mapping, config=config, resources=runtime, raw=folder))
    wanted = STAGES[: stage_names().index(until) + 1] if until else STAGES
    native = tuple(stage for stage in wanted if stage.native)
    later = tuple(stage for stage in wanted if not stage.native)
    outcomes: dict[str, list[StageOutcome]] = {ctx.corpus: [] for ctx in contexts}
    with contextlib.ExitStack() as locks:
        # every corpus's lock, in name order whatever order the corpora were given in: two builds never wait on each
        # other in a cycle (builds given [a, b] and [b, a] would each hold one lock and wait for the other)
        for ctx in sorted(contexts, key=lambda c: c.corpus):
            locks.enter_context(corpus_lock(ws.artifacts_dir / ctx.corpus, on_wait=on_skip))
        if runtime.executor == "ray" and contexts and native:
            from pipeline.core.ray_executor import session

            session(runtime)  # on the main thread, before the corpora's threads (Ray's signal handlers need it)
        if native:
            jobs = [(ctx, native, force) for ctx in contexts]
            built = at_once.steps_on_threads(_native_stage, jobs, len(native), runtime, on_done, _native_size)
            for ctx, done in zip(contexts, built, strict=True):
                outcomes[ctx.corpus] += done
        if later:
            for ctx, done in zip(contexts, _later(contexts, later, runtime, force, on_done), strict=True):
                outcomes[ctx.corpus] += done
    return [outcome for ctx in contexts for outcome in outcomes[ctx.corpus]]


def _run_stages(
    ctx: Context,
    stages: tuple[Stage, ...],
    force: bool,
    on_done: Callable[[StageOutcome], None] | None,
    stop=None,
) -> list[StageOutcome]:
    """Some of one corpus's stages, in order; stops before a stage once `stop` (an Event) is set."""
    outcomes = []
    for stage in stages:
        if stop is not None and stop.is_set():
            break
        outcome = run_stage(
            identity_of(stage, ctx), ctx.stage_dir(stage.name), functools.partial(_marked, stage, ctx), force
        )
        outcomes.append(outcome)
        if on_done:
            on_done(outcome)
    return outcomes


def _native_stage(job: tuple[Context, tuple[Stage, ...], bool], number: int, mine: Resources) -> StageOutcome:
    """One native stage of one corpus on its share of the machine, as a step of pipeline.harness.at_once."""
    ctx, stages, force = job
    return _run_stages(dataclasses.replace(ctx, resources=mine), stages[number : number + 1], force, None)[0]


def _native_size(job: tuple[Context, tuple[Stage, ...], bool], number: int, before: list[StageOutcome]) -> float:
    """How large a corpus's native stage is, to start the largest first: the first, its raw files' bytes; a later one,
    the rows the stage before it wrote."""
    if before:
        return float(sum(before[-1].manifest.row_counts.values()))
    total = 0
    for folder, _, names in os.walk(job[0].raw):  # a folder or file gone while counted only changes the order
        for name in names:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(folder, name)).st_size
    return float(total)


def _corpus_stages(job: tuple[Context, tuple[Stage, ...], bool], mine: Resources, report, stop):
    """One corpus's stages on its share of the machine, as a job of pipeline.harness.at_once (module-level, and its
    stages picklable: their functions are module-level too, so a spawned worker finds them by name)."""
    ctx, stages, force = job
    return _run_stages(dataclasses.replace(ctx, resources=mine), stages, force, report, stop)


# A corpus whose store holds fewer observations builds its later stages in this process: spawning a process and
# importing the stages there (about 1.5 s of CPU) would cost more than it saves (docs/scale.md).
SPAWN_OBSERVATIONS = 200_000


def _later(
    contexts: list[Context],
    stages: tuple[Stage, ...],
    runtime: Resources,
    force: bool,
    on_done: Callable[[StageOutcome], None] | None,
) -> list[list[StageOutcome]]:
    """The Python stages of every corpus: of large corpora, the stages after their cached ones in spawned processes,
    one corpus each and up to one per worker, when two or more have work on the local executor; the rest in this
    process."""
    if runtime.executor != "local" or runtime.worker_count < 2:
        return [_run_stages(ctx, stages, force, on_done) for ctx in contexts]
    done: dict[str, list[StageOutcome]] = {}
    work = []  # (streams, ctx, the stages left to build) of the large corpora
    for ctx in contexts:
        counts = require_manifest(ctx.stage_dir("store"), "store").row_counts
        if counts.get("observations", 0) >= SPAWN_OBSERVATIONS:
            done[ctx.corpus], left = _cached_first(ctx, stages, force, on_done)
            if left:
                work.append((counts.get("streams", 0), ctx, left))
    if len(work) >= 2:
        work.sort(key=lambda item: -item[0])  # the most streams (tasks) first, so that none ends last on its own
        jobs = [(ctx, left, force) for _, ctx, left in work]
        names = [ctx.corpus for _, ctx, _ in work]
        spawned = at_once.in_processes(_corpus_stages, jobs, names, runtime, on_done)
        for (_, ctx, _), built in zip(work, spawned, strict=True):
            done[ctx.corpus] += built
    else:
        for _, ctx, left in work:
            done[ctx.corpus] += _run_stages(ctx, left, force, on_done)
    return [done[ctx.corpus] if ctx.corpus in done else _run_stages(ctx, stages, force, on_done) for ctx in contexts]


def _cached_first(
    ctx: Context, stages: tuple[Stage, ...], force: bool, on_done: Callable[[StageOutcome], None] | None
) -> tuple[list[StageOutcome], tuple[Stage, ...]]:
    """The outcomes of the stages a build finds cached before the first it must build (reported), and the stages
    from that one on."""
    outcomes: list[StageOutcome] = []
    for index, stage in enumerate(stages):
        found = None if force else cached_outcome(identity_of(stage, ctx), ctx.stage_dir(stage.name))
        if found is None:
            return outcomes, stages[index:]
        outcomes.append(found)
        if on_done:
            on_done(found)
    return outcomes, ()
