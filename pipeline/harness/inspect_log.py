"""Eval logs of the telemetry_bench inspect tasks as traces of `telemetry-bench run`'s format (docs/inspect.md), so
that `telemetry-bench score` and `leaderboard` read them: `write_trace(log, out)`.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import Any

from inspect_ai._util.error import PrerequisiteError
from pydantic import ValidationError

from contracts.runtime import EpisodeEnd, TraceHeader, TurnRecord
from pipeline.core.canonical import atomic_write_bytes, canonical_bytes, not_unicode
from pipeline.core.errors import RunError, shown, validation_problems
from pipeline.harness.traces import RECORDS as TRACE_RECORDS
from pipeline.harness.traces import record_key

AGENT = "inspect"  # the agent kind of a trace written from an eval log; its model is inspect's model name
RECORDS = "telemetry_bench:records"  # the sample store key holding the episode's trace records
# Generation settings that say how inspect reaches the model, not what the model does: a trace's runtime settings,
# never its identity (pipeline/runtime/identity.py).
RUNTIME_CONFIG = (
    "adaptive_connections",
    "attempt_timeout",
    "batch",
    "cache",
    "extra_headers",
    "max_connections",
    "max_retries",
    "stream_idle_timeout",
    "timeout",
)


def _settings(log: Any, played: int) -> dict:
    """A trace's settings from an eval log: the model, its generation settings that change what it does, the
    limit (how many episodes were played when inspect's `limit` was given) and the runtime ones apart."""
    config = log.eval.model_generate_config.model_dump(mode="json", exclude_none=True)
    generate = {k: v for k, v in sorted(config.items()) if k not in RUNTIME_CONFIG}
    return {
        "model": log.eval.model,
        **({"generate": generate} if generate else {}),
        "limit": played if log.eval.config.limit else None,
        "runtime": {k: v for k, v in sorted(config.items()) if k in RUNTIME_CONFIG},
    }


def write_trace(log: Any, out: str | Path) -> Path:
    """A trace of `telemetry-bench run`'s format from an inspect eval log (an EvalLog, its path, or a log folder
    holding one eval log; paths as str or Path) into `out`: the header, then every sample's records in episode
    order, epoch by epoch (run = epoch - 1). A log whose eval did not finish is refused in one line: inspect exits 0
    when a task is interrupted (a model that cannot be reached, a tokenizer it cannot download), so this is where a
    recipe learns of it."""
    from inspect_ai.log import read_eval_log

    out = Path(out)
    log = read_eval_log(str(_one_log(Path(log)))) if isinstance(log, str | Path) else log
    task = log.eval.metadata or {}
    if "episode_set_hash" not in task:
        raise PrerequisiteError(f"telemetry_bench: {log.location}: not an eval log of a telemetry_bench task")
    if log.status != "success":
        why = (log.error.message.strip().splitlines() or [""])[-1] if log.error else "no error recorded"
        raise RunError(
            f"telemetry_bench: {log.location}: the eval did not finish (status {log.status}: {why}); fix that and run "
            "it again (`inspect eval-set` retries it in its log folder)"
        )
    samples = sorted(log.samples or [], key=lambda s: (s.epoch, str(s.id)))
    played = {str(s.id) for s in samples}
    if problem := not_unicode(task):
        raise RunError(f"telemetry_bench: {log.location}: the task's metadata: {problem}; play the task again")
    try:  # the task's metadata as the task wrote it: a key missing or of another type is one line (make fuzz)
        header = TraceHeader(
            corpus=task.get("corpus"),
            split=task.get("split"),
            episode_set=task.get("episode_set"),
            episode_set_hash=task["episode_set_hash"],
            release_digest=task.get("release_digest"),  # an eval log of a task made before traces recorded it: none
            agent=AGENT,
            repeat=log.eval.config.epochs or 1,
            settings=_settings(log, len(played)),
            versions={
                "telemetry-bench": metadata.version("telemetry-bench"),
                "inspect_ai": metadata.version("inspect_ai"),
            },
        )
    except ValidationError as exc:
        raise RunError(
            f"telemetry_bench: {log.location}: the task's metadata is not what the task writes "
            f"({validation_problems(exc)}); play the task again"
        ) from exc
    try:
        lines = [canonical_bytes(header.model_dump(mode="json"))]
    except ValueError as exc:  # NaN or infinity in the task's metadata
        raise RunError(f"telemetry_bench: {log.location}: the task's metadata: {exc}; play the task again") from exc
    seen: dict[tuple, str] = {}
    for sample in samples:
        where = f"{log.location}: sample {shown(str(sample.id))} epoch {sample.epoch}"
        records = _sample_records(sample, where)
        if sample.error is not None:  # inspect gave up on the sample (the model failed): not scored, as infra_error
            records = [r for r in records if isinstance(r, TurnRecord)]
            end = EpisodeEnd(
                episode_id=str(sample.id),
                run=sample.epoch - 1,
                turns=len(records),
                stopped=False,
                infra_error=sample.error.message,
            )
            records.append(end)
        for number, record in enumerate(records):
            # a sample the log holds twice would be scored twice, its turns counted twice
            key = record_key(record)
            if key in seen:
                raise RunError(
                    f"telemetry_bench: {where}: record {number} repeats {seen[key]}; a record is scored once"
                )
            seen[key] = f"{where} record {number}"
            lines.append(canonical_bytes(record.model_dump(mode="json")))
    atomic_write_bytes(out, b"".join(line + b"\n" for line in lines))
    return out


def _one_log(path: Path) -> Path:
    """An eval log's path, or the one eval log of a log folder."""
    if not path.is_dir():
        return path
    logs = sorted(p for p in path.iterdir() if p.suffix in (".eval", ".json") and p.name != "logs.json")
    if len(logs) != 1:
        found = ", ".join(p.name for p in logs) or "none"
        raise RunError(
            f"telemetry_bench: {path}: a log folder with one eval log is read whole; it holds {found}: give one"
        )
    return logs[0]


def _sample_records(sample: Any, where: str) -> list[TurnRecord | EpisodeEnd]:
    """A sample's trace records validated, or one RunError line naming the sample, the record and what is wrong."""
    records = (sample.store or {}).get(RECORDS, [])
    if not isinstance(records, list):
        raise RunError(f"telemetry_bench: {where}: {RECORDS} is a {type(records).__name__}, not a list of records")
    out = []
    for number, record in enumerate(records):
        kind = record.get("type") if isinstance(record, dict) else None
        model = TRACE_RECORDS.get(kind) if isinstance(kind, str) else None
        if model is None:
            got = f"type: {shown(kind)}" if isinstance(record, dict) else f"a {type(record).__name__}"
            raise RunError(f"telemetry_bench: {where}: record {number}: not a trace record ({got}, not turn or end)")
        if problem := not_unicode(record):  # a lone surrogate no trace can hold (found by make fuzz)
            raise RunError(f"telemetry_bench: {where}: record {number}: {problem}")
        try:
            out.append(model.model_validate(record))
            canonical_bytes(out[-1].model_dump(mode="json"))  # NaN or infinity, which no trace holds (make fuzz)
        except ValidationError as exc:
            raise RunError(f"telemetry_bench: {where}: record {number}: {validation_problems(exc)}") from exc
        except ValueError as exc:
            raise RunError(f"telemetry_bench: {where}: record {number}: {exc}") from exc
    return out
