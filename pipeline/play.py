"""Library entry points behind `run`, `score`, `preflight` and `audit` (above runtime and audit: it wires both)."""

from __future__ import annotations

import json
from collections import defaultdict
from importlib import metadata
from pathlib import Path
from typing import NamedTuple

from contracts.episodes import Episode
from contracts.runtime import EpisodeEnd, EpisodeScore, TraceHeader, TurnRecord
from contracts.tasks import SPLITS
from pipeline.canonical import atomic_write_bytes, canonical_bytes, digest_file
from pipeline.config import load_episodes_config, select_corpora
from pipeline.errors import StageError, TelemetryBenchError
from pipeline.runtime.agents import AGENTS, Agent
from pipeline.runtime.preflight import preflight
from pipeline.runtime.runner import run_episode
from pipeline.runtime.scoring import score_episode, summarize
from pipeline.runtime.simulator import slot_keywords
from pipeline.tools.access import ToolStore
from pipeline.workspace import Workspace


class RunError(TelemetryBenchError):
    """A run or a score cannot start (unknown agent or split, trace and episodes that do not belong together)."""


def episode_file(ws: Workspace, corpus: str, split: str) -> tuple[str, Path]:
    """The newest stage's episodes of a split: the audited set once it exists, else the episodes stage."""
    if split not in SPLITS:
        raise RunError(f"unknown split {split!r}: use one of {', '.join(SPLITS)}")
    for stage in ("audit", "episodes"):
        path = ws.stage_dir(corpus, stage) / f"{split}.jsonl"
        if path.is_file():
            return stage, path
    raise StageError(f"{ws.stage_dir(corpus, 'episodes')}: no episodes for {split}; run `telemetry-bench build` first")


def load_episodes(path: Path) -> list[Episode]:
    return [Episode.model_validate_json(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


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

        settings = dict(options or {})
        if not settings.get("base_url") or not settings.get("model"):
            raise RunError("the openai agent needs --base-url and --model")
        return _runnable(OpenAIAgent(OpenAISettings(**settings)), name)
    if name not in AGENTS:
        raise RunError(f"unknown agent {name!r}: agents are {', '.join(sorted([*AGENTS, 'controller', 'openai']))}, "
                       "a Python agent as module:factory, or a process with --agent-cmd")
    return _runnable(AGENTS[name](), name)


def _runnable(agent: object, name: str) -> Agent:
    """The runner's interface for an agent of the documented protocol (given the agent view only)."""
    from pipeline.runtime.plugins import PythonAgent

    return agent if isinstance(agent, Agent) else PythonAgent(agent, name)


def run_agent(ws: Workspace, corpus: str, split: str, agent_name: str, repeat: int, out: Path, limit: int | None = None,
              agent_options: dict | None = None) -> dict:
    """Play the agent on every episode of the split `repeat` times; write the trace; return its score summary."""
    select_corpora(ws, [corpus])
    stage, path = episode_file(ws, corpus, split)
    episodes = load_episodes(path)[:limit] if limit else load_episodes(path)
    keywords = slot_keywords(load_episodes_config(ws))
    header = TraceHeader(corpus=corpus, split=split, episode_set=stage, episode_set_hash=digest_file(path), agent=agent_options["command"] if agent_name == "cmd" else agent_name,
                         repeat=repeat, settings={"limit": limit, **(agent_options or {})},
                         versions={"telemetry-bench": metadata.version("telemetry-bench")})
    lines = [canonical_bytes(header.model_dump(mode="json"))]
    store = ToolStore.for_corpus(ws, corpus)
    scores = []
    agents: list[Agent] = []
    try:
        players = _players(ws, store, agent_name, agent_options, agents)
        for run in range(repeat):
            for episode in episodes:
                per_player = []
                for player, agent in players(episode):
                    turns = []
                    for record in run_episode(agent, episode, store, keywords, run, player):
                        lines.append(canonical_bytes(record.model_dump(mode="json")))
                        if isinstance(record, TurnRecord):
                            turns.append(record)
                    per_player.append(score_episode(episode, turns, keywords, run))
                scores.append(_any_of(episode, per_player, run))
    finally:
        store.close()
        for agent in agents:
            if hasattr(agent, "close"):
                agent.close()
    atomic_write_bytes(out, b"\n".join(lines) + b"\n")
    return summarize(scores)


def _players(ws: Workspace, store: ToolStore, agent_name: str, options: dict | None = None, made: list | None = None):
    """(player name, agent) pairs for an episode: one agent, or the controller's applicable shortcut policies."""
    if agent_name != "controller":
        agent = make_agent(agent_name, options)
        if made is not None:
            made.append(agent)
        return lambda episode: [(None, agent)]
    from pipeline.audit.stage import policies, required_capabilities
    from pipeline.config import load_audit_config, load_families

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
    return max(scores, key=_rank)


def _rank(score: EpisodeScore) -> tuple[bool, bool, bool]:
    """How the best of several players of one episode is chosen (any accomplishes: the controller's rule)."""
    return score.accomplished, score.task, score.protocol


def _trace_lines(path: Path, first_only: bool = False) -> list[str]:
    if not path.is_file():
        raise RunError(f"{path}: no such trace file")
    try:
        with path.open("rb") as handle:
            data = handle.readline() if first_only else handle.read()
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise RunError(f"{path}: not UTF-8 text ({exc}); was it written by `telemetry-bench run`?") from exc


def _header(path: Path, lines: list[str]) -> TraceHeader:
    try:
        return TraceHeader.model_validate_json(lines[0])
    except (IndexError, ValueError) as exc:
        raise RunError(f"{path}: line 1 is not a trace header ({exc}); was it written by `telemetry-bench run`?") from exc


def trace_header(path: Path) -> TraceHeader:
    """Only the header of a trace (which corpus, split and agent), without reading its records."""
    return _header(path, _trace_lines(path, first_only=True))


def read_trace(path: Path) -> tuple[TraceHeader, dict, set[int]]:
    lines = _trace_lines(path)
    header = _header(path, lines)
    turns: dict[tuple[str, int], dict[str | None, list[TurnRecord]]] = defaultdict(lambda: defaultdict(list))
    runs: set[int] = set()
    for number, line in enumerate(lines[1:], start=2):
        try:
            data = json.loads(line)
            if not isinstance(data, dict):
                raise ValueError(f"a JSON {type(data).__name__}, not an object")
            if data.get("type") == "turn":
                record = TurnRecord.model_validate(data)
                turns[(record.episode_id, record.run)][record.player].append(record)
                runs.add(record.run)
            elif data.get("type") == "end":
                runs.add(EpisodeEnd.model_validate(data).run)
        except ValueError as exc:
            raise RunError(f"{path}: line {number}: not a trace record ({exc})") from exc
    return header, turns, runs


class Played(NamedTuple):
    """One run of one episode as scored: the player that counts (the best of a controller's policies), its turns and score."""

    episode: Episode
    run: int
    player: str | None
    turns: list[TurnRecord]
    score: EpisodeScore


def played_episodes(ws: Workspace, path: Path) -> tuple[TraceHeader, list[Played]]:
    """A saved trace scored against the episodes it was played on (the episode file's hash must match)."""
    header, turns, runs = read_trace(path)
    episodes_path = ws.stage_dir(header.corpus, header.episode_set) / f"{header.split}.jsonl"
    if not episodes_path.is_file() or digest_file(episodes_path) != header.episode_set_hash:
        raise RunError(f"{path}: played on an episode set that {episodes_path} no longer is (hash differs); "
                       "re-run the agent on the current build")
    keywords = slot_keywords(load_episodes_config(ws))
    out = []
    episodes = load_episodes(episodes_path)
    for run in sorted(runs):
        for episode in episodes:
            if header.settings.get("limit") is None or (episode.id, run) in turns:
                played = turns.get((episode.id, run)) or {None: []}
                scored = [(player, t, score_episode(episode, t, keywords, run)) for player, t in played.items()]
                player, chosen, score = max(scored, key=lambda p: _rank(p[2]))
                out.append(Played(episode, run, player, chosen, score))
    return header, out


def score_traces(ws: Workspace, paths: list[Path]) -> dict:
    """Score saved traces against the episodes they were played on."""
    scores = [p.score for path in paths for p in played_episodes(ws, path)[1]]
    summary = summarize(scores)
    summary["rows"] = [s.model_dump() for s in scores]
    return summary


def preflight_corpus(ws: Workspace, corpus: str) -> dict:
    select_corpora(ws, [corpus])
    cfg = load_episodes_config(ws)
    episodes = [e for split in SPLITS for e in load_episodes(episode_file(ws, corpus, split)[1])]
    store = ToolStore.for_corpus(ws, corpus)
    try:
        return {"corpus": corpus, **preflight(episodes, store, cfg)}
    finally:
        store.close()


def audit_summary(ws: Workspace, corpus: str) -> dict:
    from pipeline.manifest import require_manifest

    select_corpora(ws, [corpus])
    manifest = require_manifest(ws.stage_dir(corpus, "audit"), "audit")
    return {"corpus": corpus, **manifest.details, "splits": manifest.row_counts}
