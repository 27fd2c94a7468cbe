"""Oracle wall time per episode and scorer throughput, on one corpus's built episodes."""

from __future__ import annotations

import time

from pipeline.core.config import load_episodes_config
from pipeline.core.workspace import Workspace
from pipeline.harness.traces import episode_file, load_episodes
from pipeline.runtime.agents import OracleAgent
from pipeline.runtime.runner import run_episode
from pipeline.runtime.scoring import score_episode
from pipeline.runtime.simulator import slot_keywords
from pipeline.tools.access import ToolStore


def runtime_figures(ws: Workspace, corpus: str, split: str = "test", score_rounds: int = 20) -> dict[str, float]:
    episodes = load_episodes(episode_file(ws, corpus, split)[1])
    if not episodes:
        return {"episodes": 0, "oracle_ms_per_episode": 0.0, "scored_traces_per_s": 0.0}
    keywords = slot_keywords(load_episodes_config(ws))
    store = ToolStore.for_corpus(ws, corpus)
    agent, traces = OracleAgent(), []
    try:
        start = time.perf_counter()
        for episode in episodes:
            traces.append((episode, [r for r in run_episode(agent, episode, store, keywords) if r.type == "turn"]))
        oracle = (time.perf_counter() - start) / len(episodes)
    finally:
        store.close()
    start = time.perf_counter()
    for _ in range(score_rounds):
        for episode, turns in traces:
            score_episode(episode, turns, keywords)
    scoring = score_rounds * len(traces) / (time.perf_counter() - start)
    return {"episodes": len(episodes), "oracle_ms_per_episode": oracle * 1000, "scored_traces_per_s": scoring}
