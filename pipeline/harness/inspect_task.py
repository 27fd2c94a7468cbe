"""The benchmark as inspect_ai tasks (docs/inspect.md): one sample per episode, a solver that plays the episode loop
(the runner's EpisodeSession: the user simulator, the read-only tools) with inspect's model, and a scorer that is the
project's own (score_episode, as `telemetry-bench score`), its part scores and failure modes in the score's metadata.

The model is offered the telemetry tools with their registry schemas, and ask_user, answer (the open question's
answer form) and plan, exactly as the `openai` agent offers them; its tool calls become the protocol's actions the
same way. The tools run in the session, not in inspect, so that references (`$c1.stream_id`) and the turn budget hold.
A model that fails after inspect's retries fails the sample (inspect's error, which `eval-set` retries), never the
episode's score. `write_trace` turns an eval log into a trace that `telemetry-bench score` and `leaderboard` read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

try:
    from inspect_ai import Task
    from inspect_ai._util.error import PrerequisiteError
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import (
        ChatMessage,
        ChatMessageSystem,
        ChatMessageTool,
        ChatMessageUser,
        ModelOutput,
        get_model,
    )
    from inspect_ai.scorer import Score, Target, mean, scorer, stderr
    from inspect_ai.solver import Generate, TaskState, solver
    from inspect_ai.tool import ToolInfo, ToolParams
except ImportError:  # without the extra: one line naming it, not inspect's module path
    from pipeline.core.extras import optional

    optional("inspect_ai", "pipeline.harness.inspect_task (inspect eval telemetry_bench/...)")
    raise

from pydantic import ValidationError

from contracts.agent_view import AgentObservation
from contracts.episodes import Episode
from contracts.runtime import EpisodeEnd, TraceHeader, TurnRecord
from pipeline.core.canonical import atomic_write_bytes, canonical_bytes, digest_file, not_unicode
from pipeline.core.code_identity import PACKAGE_ROOT
from pipeline.core.config import corpus_names
from pipeline.core.errors import RunError, TelemetryBenchError, shown, validation_problems
from pipeline.core.workspace import Workspace
from pipeline.harness.play import episode_source
from pipeline.harness.traces import RECORDS as TRACE_RECORDS
from pipeline.harness.traces import load_episodes, record_key, usage_totals
from pipeline.runtime.openai_agent import SYSTEM, call_action, function_specs, replies, reply_output, unique_call_id
from pipeline.runtime.runner import EpisodeSession
from pipeline.runtime.scoring import score_episode
from pipeline.runtime.simulator import Lexicon, UserSimulator
from pipeline.tools.access import ToolStore

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


@dataclass
class EpisodeSource:
    """The episodes of one corpus and split, with what playing them needs: the simulator's phrases and the store."""

    corpus: str
    split: str
    stage: str  # the episode set: "release", "audit" or "episodes"
    path: Path
    keywords: Lexicon
    episodes: dict[str, Episode]
    open_store: Any  # () -> ToolStore
    _store: ToolStore | None = None

    def store(self) -> ToolStore:
        """The read-only tool store, opened on first use and shared by the task's samples."""
        if self._store is None:
            self._store = self.open_store()
        return self._store


def episode_source_for(
    corpus: str | None,
    split: str = "test",
    release: str | Path | None = None,
    root: str | Path | None = None,
    artifacts: str | Path | None = None,
    cache_dir: str | Path | None = None,
) -> EpisodeSource:
    """A split of a release folder (`release`, played on its own) or of a build (the project at `root`, default
    TELEMETRY_BENCH_ROOT or the current folder); bad input is one line of inspect's PrerequisiteError."""
    try:
        return _source(corpus, split, release, root, artifacts, cache_dir)
    except TelemetryBenchError as exc:
        raise PrerequisiteError(f"telemetry_bench: {exc}") from None


def project(root: str | Path | None = None, artifacts: str | Path | None = None) -> Workspace:
    """The project whose builds the tasks play: `root`, else TELEMETRY_BENCH_ROOT or the current folder when it is a
    project, else the checkout this package runs from (an editable install)."""
    ws = Workspace.from_root(root, artifacts)
    if root is None and not ws.corpora_config_dir.is_dir():
        return Workspace.from_root(PACKAGE_ROOT, artifacts)
    return ws


def corpora() -> list[str]:
    """The corpora that get a task of their own: those mapped in the project (none when the package is installed
    without one: `telemetry_bench/release` plays any release folder)."""
    ws = project()
    return corpus_names(ws) if ws.corpora_config_dir.is_dir() else []


def _source(corpus, split, release, root, artifacts, cache_dir) -> EpisodeSource:
    ws = project(root, artifacts)
    played = None
    if release is not None:
        from pipeline.release.playable import Release

        played = Release(Path(release), Path(cache_dir) if cache_dir else None)
    elif corpus is None or not ws.corpora_config_dir.is_dir():
        raise RunError(
            f"{ws.root} is not a telemetry-bench project (no configs/corpora): give -T release=PATH (a release "
            "folder) or -T root=PATH (a project checkout)"
            if corpus
            else "give -T release=PATH: the folder of a release (artifacts/<corpus>/release/ or its copy)"
        )
    corpus, stage, path, keywords = episode_source(ws, corpus, split, AGENT, played)
    opener = played.store if played is not None else (lambda: ToolStore.for_corpus(ws, corpus))
    return EpisodeSource(corpus, split, stage, path, keywords, {e.id: e for e in load_episodes(path)}, opener)


def episodes_task(source: EpisodeSource) -> Task:
    """The inspect task of a split: one sample per episode, in episode order."""
    samples = [
        Sample(
            id=episode.id,
            input=UserSimulator(episode, source.keywords).opening(),
            metadata={"corpus": episode.corpus, "split": episode.split, "family": episode.family},
        )
        for episode in source.episodes.values()
    ]
    return Task(
        dataset=MemoryDataset(samples, name=f"{source.corpus}-{source.split}"),
        solver=play_episode(source),
        scorer=episode_score(source),
        metadata={
            "corpus": source.corpus,
            "split": source.split,
            "episode_set": source.stage,
            "episode_set_hash": digest_file(source.path),
        },
    )


def tool_infos(form: Any) -> list[ToolInfo]:
    """The functions offered to the model (the `openai` agent's: telemetry tools, ask_user, answer, plan) as inspect
    tool definitions."""
    return [
        ToolInfo(
            name=spec["function"]["name"],
            description=spec["function"]["description"],
            parameters=ToolParams.model_validate(spec["function"]["parameters"]),
        )
        for spec in function_specs(form)
    ]


def _usage(output: ModelOutput) -> dict | None:
    usage = output.usage
    if usage is None:
        return None
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
    }


class _Conversation:
    """The model's side of one episode: the agent view's new turns become chat messages, its tool calls actions."""

    def __init__(self, messages: list[ChatMessage]) -> None:
        self.messages = [ChatMessageSystem(content=SYSTEM), *messages]
        self.seen = 1  # the opening message is the sample's input
        self.pending: list[str] = []
        self.ids: set[str] = (
            set()
        )  # the tool call ids given so far: a repeated one is renamed, as the openai agent does

    def absorb(self, observation: AgentObservation) -> None:
        new = observation.messages[self.seen :]
        self.seen = len(observation.messages)
        for message in replies(new, self.pending):
            if message["role"] == "tool":
                self.messages.append(ChatMessageTool(content=message["content"], tool_call_id=message["tool_call_id"]))
            else:
                self.messages.append(ChatMessageUser(content=message["content"]))
        self.pending = []

    def take(self, output: ModelOutput) -> Any:
        """The reply as the runner takes it (one action, several, or unparsed text), with its token usage."""
        calls = list(output.message.tool_calls or [])
        for index, call in enumerate(calls):
            call.id = unique_call_id(call.id, self.ids, len(self.messages), index)
        self.messages.append(output.message)
        self.pending = [call.id for call in calls]
        actions = [
            {"unparsed": call.parse_error} if call.parse_error else call_action(call.function, call.arguments, call.id)
            for call in calls
        ]
        return reply_output(actions, output.message.text, _usage(output))


@solver
def play_episode(source: EpisodeSource):
    """Play the sample's episode with the task's model, a turn at a time, until the user stops, the turn budget runs
    out or a limit of inspect's ends the sample; the trace records are kept in the sample's store."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        episode = source.episodes[str(state.sample_id)]
        session = EpisodeSession(episode, source.store(), source.keywords, run=state.epoch - 1)
        conversation = _Conversation(state.messages)
        model, records = get_model(), []
        try:
            while not session.done:
                session.observation.turn = session.turn
                view = session.observation.view()
                conversation.absorb(view)
                started = time.perf_counter()
                output = await model.generate(conversation.messages, tools=tool_infos(view.answer_form))
                raw = conversation.take(output)
                records.append(session.step(raw, (time.perf_counter() - started) * 1000))
                state.output = output
        finally:  # a limit of inspect's ends the sample here: what was played is kept and scored
            state.messages = conversation.messages
            ended = [session.end()] if session.done else []
            state.store.set(RECORDS, [r.model_dump(mode="json") for r in [*records, *ended]])
        state.completed = True
        return state

    return solve


@scorer(metrics=[mean(), stderr()])
def episode_score(source: EpisodeSource):
    """The project's scorer: 1.0 when the episode is accomplished, else 0.0; the metadata holds the EpisodeScore
    (part scores, phase results, protocol issues, rejected answer fields, the gold commitment outcome and whether the
    commitment decision was right: `telemetry-bench score` of the written trace gives their per-outcome and balanced
    accuracy) and the token usage."""

    async def score(state: TaskState, target: Target) -> Score:
        episode = source.episodes[str(state.sample_id)]
        turns = [TurnRecord.model_validate(r) for r in state.store.get(RECORDS, []) if r["type"] == "turn"]
        result = score_episode(episode, turns, source.keywords, state.epoch - 1)
        failures = result.issues + [f"{r.field}: {r.reason}" for r in result.rejections]
        return Score(
            value=1.0 if result.accomplished else 0.0,
            answer=_last_answer(turns),
            explanation="accomplished" if result.accomplished else "; ".join(failures) or "task not accomplished",
            metadata={"score": result.model_dump(mode="json"), "usage": usage_totals(turns, None, None)},
        )

    return score


def _last_answer(turns: list[TurnRecord]) -> str | None:
    answers = [t.action for t in turns if t.action and t.action.get("kind") == "answer"]
    return canonical_bytes(answers[-1].get("fields", {})).decode() if answers else None


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


def write_trace(log: Any, out: Path) -> Path:
    """A trace of `telemetry-bench run`'s format from an inspect eval log (an EvalLog, or its path): the header, then
    every sample's records in episode order, epoch by epoch (run = epoch - 1)."""
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(log)) if isinstance(log, str | Path) else log
    task = log.eval.metadata or {}
    if "episode_set_hash" not in task:
        raise PrerequisiteError(f"telemetry_bench: {log.location}: not an eval log of a telemetry_bench task")
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
