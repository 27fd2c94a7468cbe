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


from contracts.agent_view import AgentObservation
from contracts.episodes import Episode
from contracts.runtime import TurnRecord
from pipeline.core.canonical import canonical_bytes, digest_file
from pipeline.core.code_identity import PACKAGE_ROOT
from pipeline.core.config import corpus_names
from pipeline.core.errors import RunError, TelemetryBenchError
from pipeline.core.workspace import Workspace
from pipeline.harness.binding import played_digest, require
from pipeline.harness.inspect_log import AGENT, RECORDS, write_trace  # noqa: F401 (write_trace: its documented home)
from pipeline.harness.inspect_oracle import PLAYING
from pipeline.harness.play import episode_source
from pipeline.harness.traces import load_episodes, usage_totals
from pipeline.runtime.openai_agent import SYSTEM, call_action, function_specs, replies, reply_output, unique_call_id
from pipeline.runtime.runner import EpisodeSession
from pipeline.runtime.scoring import score_episode
from pipeline.runtime.simulator import Lexicon, UserSimulator
from pipeline.tools.access import ToolStore


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
    release_digest: str | None = None  # the release played (pipeline.harness.binding), recorded in the trace
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
    releases: str | Path | None = None,
    expect: str | None = None,
) -> EpisodeSource:
    """A split of a release folder (`release`, played on its own; or the corpus's own under `releases`, a folder with
    one release per corpus, so that one `-T releases=...` serves every task of an eval-set) or of a build (the
    project at `root`, default TELEMETRY_BENCH_ROOT or the current folder); with `expect` (the release digests the
    user trusts, comma-separated: -T applies to every task of an eval-set, one digest per corpus), refused unless
    what is played is one of those releases. Bad input is one line of inspect's PrerequisiteError."""
    try:
        if releases is not None:
            if release is not None:
                raise RunError("give -T release=PATH (one release) or -T releases=FOLDER (one per corpus), not both")
            release = release_in(Path(releases), corpus)
        source = _source(corpus, split, release, root, artifacts, cache_dir)
        trusted(expect, source, release)
        return source
    except TelemetryBenchError as exc:
        raise PrerequisiteError(f"telemetry_bench: {exc}") from None


def release_in(folder: Path, corpus: str | None) -> Path:
    """The release of `corpus` in a folder of releases: <corpus>/release/ (as under artifacts/) or <corpus>/."""
    if corpus is None:
        raise RunError(
            "-T releases=FOLDER picks the release by the task's corpus: give telemetry_bench/release -T release=PATH"
        )
    for candidate in (folder / corpus / "release", folder / corpus):
        if (candidate / "release.json").is_file():
            return candidate
    raise RunError(
        f"{folder}: no {corpus}/release/release.json nor {corpus}/release.json; -T releases names a folder holding one "
        "release folder per corpus, as artifacts/ does"
    )


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


def trusted(expect: str | None, source: EpisodeSource, release: str | Path | None) -> None:
    """Refuse a source bound to none of the release digests in `expect` (comma-separated; None: nothing to check)."""
    if expect is not None:
        subject = (
            f"{release} is" if release is not None else f"the project's build of {source.corpus} {source.split} is"
        )
        fix = "rebuild the project (`telemetry-bench build`), or play the release you trust (-T release=PATH)"
        require(expect.split(","), subject, source.release_digest, fix)


def _source(corpus, split, release, root, artifacts, cache_dir) -> EpisodeSource:
    ws = project(root, artifacts)
    played = None
    if release is not None:
        from pipeline.release.playable import Release

        played = Release(Path(release), Path(cache_dir) if cache_dir else None)
        if corpus is not None and corpus != played.corpus:  # -T applies to every task of an eval-set
            raise RunError(
                f"task telemetry_bench/{corpus} was given -T release={release}, a release of {played.corpus}: -T "
                "applies to every task of the run, so give -T releases=FOLDER (one <corpus>/release per corpus, as "
                "artifacts/) or run each task with its own -T release"
            )
    elif corpus is None or not ws.corpora_config_dir.is_dir():
        raise RunError(
            f"{ws.root} is not a telemetry-bench project (no configs/corpora): give -T release=PATH (a release "
            "folder) or -T root=PATH (a project checkout)"
            if corpus
            else "give -T release=PATH: the folder of a release (artifacts/<corpus>/release/ or its copy)"
        )
    corpus, stage, path, keywords = episode_source(ws, corpus, split, AGENT, played)
    opener = played.store if played is not None else (lambda: ToolStore.for_corpus(ws, corpus))
    episodes = {e.id: e for e in load_episodes(path)}
    bound = played_digest(ws, corpus, played, path, split)
    return EpisodeSource(corpus, split, stage, path, keywords, episodes, opener, bound)


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
            "release_digest": source.release_digest,
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
        PLAYING[state.uuid] = episode  # for telemetry_bench/oracle alone (pipeline/harness/inspect_oracle.py)
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
            PLAYING.pop(state.uuid, None)
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
