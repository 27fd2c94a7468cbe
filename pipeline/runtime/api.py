"""Library entry points behind `run`, `score` and `preflight`."""

from __future__ import annotations

import json
from collections import defaultdict
from importlib import metadata
from pathlib import Path

from contracts.episodes import Episode
from contracts.runtime import EpisodeEnd, TraceHeader, TurnRecord
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

SPLITS = ("train", "dev", "test")


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


def make_agent(name: str) -> Agent:
    if name not in AGENTS:
        raise RunError(f"unknown agent {name!r}: agents are {', '.join(sorted(AGENTS))}")
    return AGENTS[name]()


def run_agent(ws: Workspace, corpus: str, split: str, agent_name: str, repeat: int, out: Path, limit: int | None = None) -> dict:
    """Play the agent on every episode of the split `repeat` times; write the trace; return its score summary."""
    select_corpora(ws, [corpus])
    stage, path = episode_file(ws, corpus, split)
    episodes = load_episodes(path)[:limit] if limit else load_episodes(path)
    agent = make_agent(agent_name)
    keywords = slot_keywords(load_episodes_config(ws))
    header = TraceHeader(corpus=corpus, split=split, episode_set=stage, episode_set_hash=digest_file(path), agent=agent_name,
                         repeat=repeat, settings={"limit": limit},
                         versions={"telemetry-bench": metadata.version("telemetry-bench")})
    lines = [canonical_bytes(header.model_dump(mode="json"))]
    store = ToolStore.for_corpus(ws, corpus)
    scores = []
    try:
        for run in range(repeat):
            for episode in episodes:
                turns = []
                for record in run_episode(agent, episode, store, keywords, run):
                    lines.append(canonical_bytes(record.model_dump(mode="json")))
                    if isinstance(record, TurnRecord):
                        turns.append(record)
                scores.append(score_episode(episode, turns, keywords, run))
    finally:
        store.close()
    atomic_write_bytes(out, b"\n".join(lines) + b"\n")
    return summarize(scores)


def _read_trace(path: Path) -> tuple[TraceHeader, dict[tuple[str, int], list[TurnRecord]], set[int]]:
    if not path.is_file():
        raise RunError(f"{path}: no such trace file")
    lines = path.read_text(encoding="utf-8").splitlines()
    try:
        header = TraceHeader.model_validate_json(lines[0])
    except (IndexError, ValueError) as exc:
        raise RunError(f"{path}: line 1 is not a trace header ({exc}); was it written by `telemetry-bench run`?") from exc
    turns: dict[tuple[str, int], list[TurnRecord]] = defaultdict(list)
    runs: set[int] = set()
    for number, line in enumerate(lines[1:], start=2):
        try:
            data = json.loads(line)
            if data.get("type") == "turn":
                record = TurnRecord.model_validate(data)
                turns[(record.episode_id, record.run)].append(record)
                runs.add(record.run)
            elif data.get("type") == "end":
                runs.add(EpisodeEnd.model_validate(data).run)
        except ValueError as exc:
            raise RunError(f"{path}: line {number}: not a trace record ({exc})") from exc
    return header, turns, runs


def score_traces(ws: Workspace, paths: list[Path]) -> dict:
    """Score saved traces against the episodes they were played on (the episode file's hash must match)."""
    scores = []
    for path in paths:
        header, turns, runs = _read_trace(path)
        episodes_path = ws.stage_dir(header.corpus, header.episode_set) / f"{header.split}.jsonl"
        if not episodes_path.is_file() or digest_file(episodes_path) != header.episode_set_hash:
            raise RunError(f"{path}: played on an episode set that {episodes_path} no longer is (hash differs); "
                           "re-run the agent on the current build")
        keywords = slot_keywords(load_episodes_config(ws))
        for run in sorted(runs):
            for episode in load_episodes(episodes_path):
                if header.settings.get("limit") is None or (episode.id, run) in turns:
                    scores.append(score_episode(episode, turns.get((episode.id, run), []), keywords, run))
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
