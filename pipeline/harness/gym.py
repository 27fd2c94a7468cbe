"""A gym-style API for agent frameworks (docs/agents.md), with Gymnasium's conventions: the caller drives the
episode, one action at a time.

    from pipeline.harness.gym import TelemetryEnv

    env = TelemetryEnv("xai4heat", split="test")         # or TelemetryEnv(release="path/to/release")
    observation, info = env.reset(options={"episode_id": env.episode_ids[0]})
    while True:
        action = my_policy(observation)                  # a dict or a model of contracts.protocol
        observation, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    print(reward, info["score"]["accomplished"])         # the same scoring as `telemetry-bench score`
    env.close()

The observation is the agent view, and nothing else: no golds, no hidden instruction. The store is opened read-only.
With Gymnasium installed (the `gym` extra), the env declares its spaces (pipeline/harness/gym_spaces.py) and passes
`gymnasium.utils.env_checker.check_env`; `register()` makes it `gymnasium.make("telemetry_bench/Episodes-v0",
corpus=..., split=...)`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy

from contracts.agent_io import EpisodeStart
from contracts.agent_view import AgentObservation
from contracts.runtime import EpisodeEnd, EpisodeScore, TurnRecord
from pipeline.core.errors import GymError
from pipeline.core.extras import optional
from pipeline.core.workspace import Workspace
from pipeline.harness.play import episode_source
from pipeline.harness.traces import load_episodes
from pipeline.runtime.plugins import ACTION_KINDS, as_action, episode_start
from pipeline.runtime.runner import EpisodeSession
from pipeline.runtime.scoring import score_episode
from pipeline.tools import registry
from pipeline.tools.access import ToolStore

try:  # Gymnasium is optional: with it, the env is a gymnasium.Env and can be registered
    import gymnasium

    _Base: type = gymnasium.Env
except ImportError:  # pragma: no cover - exercised where the extra is absent
    gymnasium = None
    _Base = object
else:
    from pipeline.harness.gym_spaces import ActionSpace, ObservationSpace

ENV_ID = "telemetry_bench/Episodes-v0"


class TelemetryEnv(_Base):  # type: ignore[misc, valid-type]
    """The episodes of one corpus and split, played one at a time: reset() to an episode, then step(action) until it
    terminates (the user stopped) or is truncated (the turn budget ran out)."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (Gymnasium's class attribute)

    def __init__(
        self,
        corpus: str | None = None,
        split: str = "test",
        root: str | Path | None = None,
        artifacts: str | Path | None = None,
        release: str | Path | None = None,
        cache_dir: str | Path | None = None,
    ) -> None:
        if release is not None:  # a release folder on its own: no project, configs or build needed
            from pipeline.release.playable import Release

            played = Release(Path(release), Path(cache_dir) if cache_dir else None)
            if corpus is not None and corpus != played.corpus:
                raise GymError(f"{release}: a release of {played.corpus}, not {corpus}; drop corpus= or fix it")
            ws, self.store = None, played.store()
        elif corpus is None:
            raise GymError("give corpus= (a built project) or release= (a release folder)")
        else:
            ws, played = Workspace.from_root(root, artifacts), None
        _, _, path, self.keywords = episode_source(ws, corpus, split, "gym", played)  # what `run` would play
        if played is None:
            self.store = ToolStore.for_corpus(ws, corpus)
        self.episodes = {e.id: e for e in load_episodes(path)}
        self.session: EpisodeSession | None = None
        self.records: list[TurnRecord] = []
        self._order, self._next = list(self.episodes), 0  # reset() with no id plays this order; a seed shuffles it
        if gymnasium is not None:
            self.observation_space = ObservationSpace(self._opening, len(self.episodes))
            self.action_space = ActionSpace(ACTION_KINDS, [tool.name for tool in registry.TOOLS])

    def _opening(self, index: int) -> AgentObservation:
        """The opening view of the split's episode at `index` (the observation space's sample)."""
        episode = self.episodes[self.episode_ids[index]]
        return EpisodeSession(episode, self.store, self.keywords).observation.view()

    @property
    def episode_ids(self) -> list[str]:
        return list(self.episodes)

    def start_info(self) -> EpisodeStart:
        """What the episode now in play tells an agent at its start: id, corpus, split, budget and tools."""
        return episode_start(self._session().episode)

    def reset(
        self, episode_id: str | None = None, *, seed: int | None = None, options: dict | None = None
    ) -> tuple[AgentObservation, dict]:
        """Begin an episode: `episode_id` (or options["episode_id"]), else the next one of the play order. Returns the
        first observation and info (`episode_id`, `start`: the EpisodeStart). The order is the split's until a `seed`
        is given; `seed` shuffles it with Gymnasium's seeded generator and starts it again, so that reset(seed=7)
        always begins the same episode and the resets after it follow the same order. The episodes themselves are
        fixed: nothing else is random."""
        if seed is not None:
            if gymnasium is not None:
                super().reset(seed=seed)  # Gymnasium's np_random, as its checker expects
                rng = self.np_random
            else:
                rng = numpy.random.default_rng(seed)
            self._order = [self.episode_ids[int(i)] for i in rng.permutation(len(self.episodes))]
            self._next = 0
        episode_id = episode_id or (options or {}).get("episode_id")
        if episode_id is None:
            episode_id = self._order[self._next % len(self._order)]
            self._next += 1
        if episode_id not in self.episodes:
            raise GymError(f"no episode {episode_id!r} in this split; env.episode_ids lists them")
        self.session = EpisodeSession(self.episodes[episode_id], self.store, self.keywords)
        self.records = []
        return self.session.observation.view(), {"episode_id": episode_id, "start": self.start_info()}

    def step(self, action: Any) -> tuple[AgentObservation, float, bool, bool, dict]:
        """Play one action: (observation, reward, terminated, truncated, info). The reward is 0 until the episode
        ends, then 1.0 when it is accomplished, else 0.0; `terminated` means the user stopped, `truncated` that the
        turn budget ran out. info holds the turn's `issues`, and at the end the `score` (EpisodeScore as a dict) and
        its `rejections` (why answer fields were not accepted). An action of no known kind raises GymError naming
        the kinds (a caller's bug: no turn is used); a known kind with bad content is the agent's parse_error, as in
        `run`."""
        session = self._session()
        if session.done:
            raise GymError(f"episode {session.episode.id} is over; call reset() for another")
        action = as_action(action)
        for item in action if isinstance(action, list) else [action]:
            kind = item.get("kind") if isinstance(item, dict) else None
            if not isinstance(kind, str) or kind not in ACTION_KINDS:
                got = f"kind {kind!r}" if isinstance(item, dict) else f"a {type(item).__name__}"
                raise GymError(
                    f"step(): an action is a dict (or contracts.protocol model) whose kind is one of "
                    f"{', '.join(ACTION_KINDS)}; got {got}"
                )
        record = session.step(action)
        self.records.append(record)
        info: dict[str, Any] = {"turn": record.turn, "issues": list(record.issues)}
        if not session.done:
            return session.observation.view(), 0.0, False, False, info
        score = self.score()
        info.update(
            score=score.model_dump(mode="json"), rejections=[r.model_dump(mode="json") for r in score.rejections]
        )
        terminated = session.end().stopped
        return session.observation.view(), float(score.accomplished), terminated, not terminated, info

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
            raise GymError("call reset() first")
        return self.session


def register() -> str:
    """Register the env with Gymnasium (the `gym` extra); returns its id for gymnasium.make(id, corpus=..., ...)."""
    gymnasium = optional("gymnasium", "register()")
    if ENV_ID not in gymnasium.registry:
        gymnasium.register(id=ENV_ID, entry_point=TelemetryEnv)
    return ENV_ID
