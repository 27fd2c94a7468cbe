"""Playing agents on episodes (`run`), and the library entry points behind `preflight` and `audit`."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contracts.episodes import Episode
from contracts.runtime import EpisodeEnd, EpisodeScore, TraceHeader, TurnRecord
from contracts.tasks import SPLITS
from pipeline.core.canonical import atomic_write_bytes, canonical_bytes, digest_file
from pipeline.core.config import load_answers, load_episodes_config, load_families, load_mapping, select_corpora
from pipeline.core.errors import RunError, disk_full, shown
from pipeline.core.workspace import Workspace
from pipeline.runtime.agents import AGENTS, Agent
from pipeline.runtime.identity import behaviour
from pipeline.runtime.preflight import preflight
from pipeline.runtime.runner import run_episode
from pipeline.runtime.scoring import score_episode
from pipeline.runtime.simulator import slot_keywords
from pipeline.tools.access import ToolStore

if TYPE_CHECKING:
    from pipeline.release.playable import Release
from pipeline.harness.binding import REBUILD, played_digest, require
from pipeline.harness.traces import (
    episode_file,
    load_episodes,
    refuse_repeat,
    score_rank,
    score_traces,
    trace_record,
)


def make_agent(name: str, options: dict | None = None) -> Agent:
    """A built-in agent by name, a user's Python agent (`module:factory`, options as keyword arguments) or, with the
    option `command`, an agent process speaking the JSON-lines protocol (docs/agents.md)."""
    if name == "cmd":
        from pipeline.runtime.plugins import CommandAgent

        settings = dict(options or {})
        return CommandAgent(settings["command"], timeout=settings.get("turn_timeout") or 60.0)
    if ":" in name:
        from pipeline.runtime.plugins import load_python_agent

        return load_python_agent(name, options)
    if name == "openai":
        from pipeline.runtime.openai_agent import OpenAIAgent, OpenAISettings

        return _runnable(OpenAIAgent(OpenAISettings.resolve(**(options or {}))), name)
    if name not in AGENTS:
        raise RunError(
            f"unknown agent {name!r}: agents are {', '.join(sorted([*AGENTS, 'controller', 'openai']))}, "
            "a Python agent as module:factory, or a process with --agent-cmd"
        )
    return _runnable(AGENTS[name](), name)


def _runnable(agent: object, name: str) -> Agent:
    """The runner's interface for an agent of the documented protocol (given the agent view only)."""
    from pipeline.runtime.plugins import PythonAgent

    return agent if isinstance(agent, Agent) else PythonAgent(agent, name)


# How a run runs, not what it plays (--stream cuts a reply at the same cap a server honouring max_tokens does).
RUNTIME_SETTINGS = ("concurrency", "timeout", "max_retries", "turn_timeout", "stream", "progress")


def run_agent(
    ws: Workspace,
    corpus: str | None,
    split: str,
    agent_name: str,
    repeat: int,
    out: Path,
    limit: int | None = None,
    agent_options: dict | None = None,
    concurrency: int = 1,
    resume: bool = False,
    release: Release | None = None,
    expect: str | None = None,
) -> dict:
    """Play the agent on every episode of the split `repeat` times; return the score summary of the trace. With
    `expect` (a release digest the user trusts), what is played must be that release (pipeline.harness.binding).

    The trace is appended and flushed episode by episode, in episode order whatever the concurrency (finished
    episodes wait in a buffer for those before them), so an interrupted run leaves every finished episode behind.
    `resume` keeps the finished episodes of an existing trace of the same settings (a half-written last line is
    dropped, infra_error episodes are played again) and plays the rest; the trace ends as an uninterrupted run's."""
    if concurrency > 1 and agent_name == "human":
        raise RunError("--concurrency is for agents that need no person: play the human agent one episode at a time")
    corpus, stage, path, keywords = episode_source(ws, corpus, split, agent_name, release)
    bound = played_digest(ws, corpus, release, path, split)
    subject = f"{release.folder} is" if release is not None else f"the project's build of {corpus} {split} is"
    require(expect, subject, bound, REBUILD)
    episodes = load_episodes(path)[:limit] if limit else load_episodes(path)
    options = dict(agent_options or {})
    header = _trace_header(corpus, split, stage, path, bound, agent_name, repeat, limit, options, concurrency)
    units = [(run, episode) for run in range(repeat) for episode in episodes]
    kept = _resumable(out, header, units) if resume and out.exists() else {}
    store = release.store() if release is not None else ToolStore.for_corpus(ws, corpus)
    try:
        player = _EpisodePlayer(ws, store, agent_name, agent_options, keywords)  # a plugin that cannot start fails here
    except BaseException:
        store.close()
        raise
    try:
        _start_trace(out, header, [line for unit in _ordered(kept, units) for line in kept[unit]])
        todo = [(run, e) for run, e in units if (e.id, run) not in kept]
        with (
            out.open("ab", buffering=0) as trace,  # unbuffered: _append knows what reached the file
            _RunProgress(0 if agent_name == "human" else len(todo), f"{agent_name} on {corpus} {split}") as progress,
        ):

            def record(lines: list[bytes], score: EpisodeScore, infra: bool) -> None:
                _append(trace, lines, out)
                progress.done(score, infra)

            _play_all(player, todo, concurrency, record)
    finally:
        store.close()
        player.close()
    if kept:  # played-again episodes back in their places: the trace of an uninterrupted run
        _reorder(out, units)
    (summary,) = score_traces(ws, [out], release)  # one trace: one identity
    summary.pop("rows")
    return summary


def episode_source(
    ws: Workspace, corpus: str | None, split: str, agent_name: str, release: Release | None
) -> tuple[str, str, Path, dict]:
    """The corpus, episode set (stage), episode file and simulator keywords a run plays: the project's, or a
    release's."""
    if release is None:
        select_corpora(ws, [corpus])
        stage, path = episode_file(ws, corpus, split)
        return corpus, stage, path, slot_keywords(load_episodes_config(ws))
    if (
        corpus and corpus != release.corpus
    ):  # a release folder on its own: its episodes, simulator phrases and tool store
        raise RunError(f"--corpus {corpus} but the release in {release.folder} is of {release.corpus}: drop --corpus")
    if agent_name == "controller":
        raise RunError(
            "the controller plays the audit's policies, which need the project's configs: give --root instead of "
            "--release"
        )
    return release.corpus, "release", release.episodes_path(split), release.keywords()


def _trace_header(
    corpus: str,
    split: str,
    stage: str,
    path: Path,
    release_digest: str | None,
    agent_name: str,
    repeat: int,
    limit: int | None,
    options: dict,
    concurrency: int,
) -> TraceHeader:
    """The trace's header: what was played and with which settings (runtime settings kept apart)."""
    settings = {
        "limit": limit,
        **{k: v for k, v in options.items() if k not in RUNTIME_SETTINGS},
        "runtime": {k: v for k, v in {**options, "concurrency": concurrency}.items() if k in RUNTIME_SETTINGS},
    }
    return TraceHeader(
        corpus=corpus,
        split=split,
        episode_set=stage,
        episode_set_hash=digest_file(path),
        release_digest=release_digest,
        agent=options["command"] if agent_name == "cmd" else agent_name,
        repeat=repeat,
        settings=settings,
        versions={"telemetry-bench": metadata.version("telemetry-bench")},
    )


def _start_trace(out: Path, header: TraceHeader, kept_lines: list[bytes]) -> None:
    """Write the header and the kept episodes of a resumed trace, which the run then appends to."""
    try:
        atomic_write_bytes(
            out, b"".join(line + b"\n" for line in [canonical_bytes(header.model_dump(mode="json")), *kept_lines])
        )
    except OSError as exc:  # a full disk is a DiskFull line already (atomic_write_bytes)
        raise RunError(f"{out}: cannot write the trace ({exc.strerror or exc}); give another --out") from exc


class _EpisodePlayer:
    """Plays one episode run on the calling thread's own players (agents keep a conversation's state)."""

    def __init__(self, ws: Workspace, store: ToolStore, agent_name: str, options: dict | None, keywords: dict) -> None:
        self.ws, self.store, self.agent_name, self.options, self.keywords = ws, store, agent_name, options, keywords
        self.made: list[Agent] = []
        self.local = threading.local()
        self.guard = threading.Lock()
        self.local.players = _players(ws, store, agent_name, options, self.made)

    def play(self, run: int, episode: Episode) -> tuple[list[bytes], EpisodeScore, bool]:
        """The episode's trace lines, its score, and whether an infrastructure error ended it."""
        if not hasattr(self.local, "players"):  # each worker its own agent
            with self.guard:
                self.local.players = _players(self.ws, self.store, self.agent_name, self.options, self.made)
        lines, per_player, infra = [], [], False
        for name, agent in self.local.players(episode):
            turns = []
            for record in run_episode(agent, episode, self.store, self.keywords, run, name):
                lines.append(canonical_bytes(record.model_dump(mode="json")))
                if isinstance(record, TurnRecord):
                    turns.append(record)
                elif record.infra_error:
                    infra = True
            per_player.append(score_episode(episode, turns, self.keywords, run))
        return lines, _any_of(episode, per_player, run), infra

    def close(self) -> None:
        for agent in self.made:
            if hasattr(agent, "close"):
                agent.close()


def _play_all(
    player: _EpisodePlayer,
    todo: list[tuple[int, Episode]],
    concurrency: int,
    record: Callable[[list[bytes], EpisodeScore, bool], None],
) -> None:
    """Play every episode run on `concurrency` threads, recording each result in episode order."""
    if concurrency == 1:
        for run, episode in todo:
            record(*player.play(run, episode))
        return
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = [pool.submit(player.play, run, episode) for run, episode in todo]
        try:
            for future in futures:  # in episode order: a finished episode waits for the ones before it
                record(*future.result())
        except BaseException:  # a fatal error or Ctrl-C: no new episode starts; --resume plays the rest
            for future in futures:
                future.cancel()
            raise


def _append(trace: Any, lines: list[bytes], out: Path) -> None:
    """An episode's records at the end of the trace, whole or not at all: a write that fails (a full disk, Ctrl-C) is
    cut back to where the episode began, so the trace holds whole records only and --resume plays the episode again
    (a full disk left 65,536 bytes, its last line cut)."""
    start = trace.tell()
    try:
        data = memoryview(b"".join(line + b"\n" for line in lines))
        while data:  # an unbuffered write may take part of what it is given
            data = data[trace.write(data) :]
        os.fsync(trace.fileno())
    except BaseException as exc:
        with contextlib.suppress(OSError):  # a device that cannot be cut (/dev/full) holds nothing to cut
            os.ftruncate(trace.fileno(), start)
        if full := disk_full(exc, out):
            raise full from exc
        raise


def _ordered(kept: dict, units: list[tuple[int, Episode]]) -> list[tuple[str, int]]:
    return [(e.id, run) for run, e in units if (e.id, run) in kept]


def _unit_lines(lines: list[bytes]) -> dict[tuple[str, int], list[bytes]]:
    """A trace's records grouped by (episode, run), in file order."""
    grouped: dict[tuple[str, int], list[bytes]] = defaultdict(list)
    for line in lines:
        data = json.loads(line)
        grouped[(data["episode_id"], data["run"])].append(line)
    return grouped


RESUME_FIX = "give another --out, or drop --resume to start over"


def _resumable(out: Path, header: TraceHeader, units: list[tuple[int, Episode]]) -> dict[tuple[str, int], list[bytes]]:
    """The finished episode runs of an existing trace, by (episode, run); refuses one of other settings, and one whose
    records are not valid or name an episode run this run does not play (nothing is dropped in silence)."""
    data = out.read_bytes()
    lines = data.split(b"\n")
    if lines and lines[-1] != b"":  # the last line was being written when the run stopped
        lines = lines[:-1]
    lines = [line for line in lines if line]
    if not lines:
        return {}
    old = _resumed_record(out, 1, lines[0])
    mine, theirs = header.model_dump(exclude={"versions"}), old.model_dump(exclude={"versions"})
    for dumped in (mine, theirs):  # where the model is served and how the run runs may change; what it plays not
        dumped["settings"] = {
            k: v for k, v in dumped["settings"].items() if k == "limit" or k in behaviour(dumped["settings"])
        }
    if mine != theirs:
        differ = sorted(k for k in mine if mine[k] != theirs.get(k))
        if "settings" in differ:
            differ = [
                f"settings.{k}"
                for k in sorted(set(mine["settings"]) | set(theirs["settings"]))
                if mine["settings"].get(k) != theirs["settings"].get(k)
            ] + [d for d in differ if d != "settings"]
        raise RunError(
            f"{out}: cannot resume a trace played with other settings ({', '.join(differ)}); "
            "give the same options, another --out, or drop --resume to start over"
        )
    playing = {(e.id, run) for run, e in units}
    grouped: dict[tuple[str, int], list[bytes]] = defaultdict(list)
    finished = set()
    seen: dict[tuple, int] = {}
    for number, line in enumerate(lines[1:], start=2):
        record = _resumed_record(out, number, line)
        unit = (record.episode_id, record.run)
        if unit not in playing:
            raise RunError(
                f"{out}: line {number}: episode {shown(record.episode_id)} run {record.run} is not one this run "
                f"plays (its split and --repeat); {RESUME_FIX}"
            )
        refuse_repeat(seen, out, number, record, RESUME_FIX)  # before anything is written, as score refuses it
        grouped[unit].append(line)
        if isinstance(record, EpisodeEnd) and not record.infra_error:
            finished.add(unit)
    return {unit: grouped[unit] for unit in grouped if unit in finished}


def _resumed_record(out: Path, number: int, line: bytes) -> TraceHeader | TurnRecord | EpisodeEnd:
    """One line of the trace to resume, validated as its record (one error line naming the file, line and field)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RunError(f"{out}: line {number}: not UTF-8 text ({exc}); {RESUME_FIX}") from exc
    return trace_record(out, number, text, fix=f"it was not written by `telemetry-bench run`: {RESUME_FIX}")


def _reorder(out: Path, units: list[tuple[int, Episode]]) -> None:
    lines = [line for line in out.read_bytes().split(b"\n") if line]
    grouped = _unit_lines(lines[1:])
    order = [(e.id, run) for run, e in units]
    body = [line for unit in order for line in grouped.get(unit, [])]
    atomic_write_bytes(out, b"".join(line + b"\n" for line in [lines[0], *body]))


class _RunProgress:
    """A progress bar on a terminal (episodes done, accomplished so far, infrastructure errors); silent in CI logs."""

    def __init__(self, total: int, description: str) -> None:
        self.total, self.description = total, description
        self.count = self.accomplished = self.errors = 0
        self.bar: Any = None

    def __enter__(self) -> _RunProgress:
        from pipeline.core.progress import interactive

        if interactive() and self.total:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("accomplished {task.fields[accomplished]}, errors {task.fields[errors]}"),
                TimeElapsedColumn(),
                transient=True,
                console=Console(stderr=True),
            )
            self.bar.start()
            self.task = self.bar.add_task(self.description, total=self.total, accomplished=0, errors=0)
        return self

    def done(self, score: EpisodeScore, infra: bool) -> None:
        self.count += 1
        self.accomplished += bool(score.accomplished) and not infra
        self.errors += infra or "agent_error" in score.issues
        if self.bar is not None:
            self.bar.update(self.task, advance=1, accomplished=self.accomplished, errors=self.errors)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


def _players(ws: Workspace, store: ToolStore, agent_name: str, options: dict | None = None, made: list | None = None):
    """(player name, agent) pairs for an episode: one agent, or the controller's applicable shortcut policies."""
    if agent_name != "controller":
        agent = make_agent(agent_name, options)
        if made is not None:
            made.append(agent)
        return lambda episode: [(None, agent)]
    from pipeline.audit.stage import policies, required_capabilities
    from pipeline.core.config import load_audit_config, load_families

    cfg = load_audit_config(ws)
    gated = {p.name for p in cfg.policies if p.gate == "exclude"}  # guessers and grid rules are gated statistically
    pool = [p for p in policies(store, cfg, load_families(ws), load_episodes_config(ws)) if p.name in gated]
    return lambda episode: [(p.name, p) for p in pool if p.lacks in required_capabilities(episode, cfg)]


def _any_of(episode: Episode, scores: list, run: int):
    """One score for an episode: a single agent's, or the best of the controller's policies (any accomplishes)."""
    if len(scores) == 1:
        return scores[0]
    if not scores:
        return score_episode(episode, [], {}, run)
    return max(scores, key=score_rank)


def preflight_corpus(ws: Workspace, corpus: str) -> dict:
    """The preflight of a corpus's newest episodes; rows' other variants are lifted where the tasks stage's output
    is at hand (a release alone has none: those checks are listed as unchecked)."""
    from pipeline.episodes.stage import Variants

    select_corpora(ws, [corpus])
    cfg, families = load_episodes_config(ws), load_families(ws)
    episodes = [e for split in SPLITS for e in load_episodes(episode_file(ws, corpus, split)[1])]
    store = ToolStore.for_corpus(ws, corpus)
    tasks = ws.stage_dir(corpus, "tasks")
    try:
        variants = (
            Variants(
                store, tasks, cfg, families, load_answers(ws), load_mapping(ws.corpus_config(corpus)).time.timezone
            )
            if all((tasks / f"{split}.jsonl").is_file() for split in SPLITS)
            else None
        )
        return {"corpus": corpus, **preflight(episodes, store, cfg, families, variants)}
    finally:
        store.close()


def audit_summary(ws: Workspace, corpus: str) -> dict:
    from pipeline.core.manifest import require_manifest

    select_corpora(ws, [corpus])
    manifest = require_manifest(ws.stage_dir(corpus, "audit"), "audit")
    return {"corpus": corpus, **manifest.details, "splits": manifest.row_counts}
