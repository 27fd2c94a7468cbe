"""A gym-style API for agent frameworks (docs/agents.md): the caller drives the episode, one action at a time.

    from pipeline.harness.gym import TelemetryEnv

    env = TelemetryEnv("xai4heat", split="test")
    observation = env.reset(env.episode_ids[0])          # contracts.agent_view.AgentObservation
    while True:
        action = my_policy(observation)                  # a dict or a model of contracts.protocol
        observation, done = env.step(action)
        if done:
            break
    print(env.score().accomplished)                      # the same scoring as `telemetry-bench score`
    env.close()

The observation is the agent view, and nothing else: no golds, no hidden instruction. The store is opened read-only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contracts.agent_io import EpisodeStart
from contracts.agent_view import AgentObservation
from contracts.runtime import EpisodeEnd, EpisodeScore, TurnRecord
from pipeline.core.config import load_episodes_config, select_corpora
from pipeline.core.errors import GymError
from pipeline.core.workspace import Workspace
from pipeline.harness.traces import episode_file, load_episodes
from pipeline.runtime.plugins import as_action, episode_start
from pipeline.runtime.runner import EpisodeSession
from pipeline.runtime.scoring import score_episode
from pipeline.runtime.simulator import slot_keywords
from pipeline.tools.access import ToolStore


class TelemetryEnv:
    """The episodes of one corpus and split, played one at a time: reset(episode_id), then step(action) until done."""

    def __init__(
        self, corpus: str, split: str = "test", root: str | Path | None = None, artifacts: str | Path | None = None
    ) -> None:
        self.ws = Workspace.from_root(root, artifacts)
        select_corpora(self.ws, [corpus])
        _, path = episode_file(self.ws, corpus, split)
        self.episodes = {e.id: e for e in load_episodes(path)}
        self.keywords = slot_keywords(load_episodes_config(self.ws))
        self.store = ToolStore.for_corpus(self.ws, corpus)
        self.session: EpisodeSession | None = None
        self.records: list[TurnRecord] = []

    @property
    def episode_ids(self) -> list[str]:
        return list(self.episodes)

    def start_info(self) -> EpisodeStart:
        """What the episode now in play tells an agent at its start: id, corpus, split, budget and tools."""
        return episode_start(self._session().episode)

    def reset(self, episode_id: str | None = None) -> AgentObservation:
        """Begin an episode (the split's first when no id is given); returns the first observation."""
        if episode_id is None:
            episode_id = next(iter(self.episodes))
        if episode_id not in self.episodes:
            raise GymError(f"no episode {episode_id!r} in this split; env.episode_ids lists them")
        self.session = EpisodeSession(self.episodes[episode_id], self.store, self.keywords)
        self.records = []
        return self.session.observation.view()

    def step(self, action: Any) -> tuple[AgentObservation, bool]:
        """Play one action; returns the next observation and whether the episode is over."""
        session = self._session()
        if session.done:
            raise GymError(f"episode {session.episode.id} is over; call reset() for another")
        self.records.append(session.step(as_action(action)))
        return session.observation.view(), session.done

    @property
    def turns(self) -> list[TurnRecord]:
        """The records of the episode in play, as a trace holds them."""
        return list(self.records)

    def end(self) -> EpisodeEnd:
        return self._session().end()

    def score(self) -> EpisodeScore:
        """The episode's score so far (final once done), as `telemetry-bench score` computes it."""
        return score_episode(self._session().episode, self.records, self.keywords)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> TelemetryEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _session(self) -> EpisodeSession:
        if self.session is None:
            raise GymError("call reset(episode_id) first")
        return self.session
