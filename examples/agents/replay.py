"""A Python agent for `telemetry-bench run --agent module:factory` (docs/agents.md): it replays the actions of a
trace, e.g. the oracle's. The agent view holds no golds, so this is how an example can play the gold path.

    telemetry-bench run --corpus xai4heat --split test --agent oracle --out /tmp/oracle.jsonl
    telemetry-bench run --corpus xai4heat --split test --agent examples.agents.replay:ReplayAgent \\
        --agent-option trace=/tmp/oracle.jsonl --out /tmp/replay.jsonl

Write your own agent the same way: a class with act(observation) -> action, and optionally start(episode),
finish(end) and close(). The observation is contracts.agent_view.AgentObservation; an action is a dict such as
{"kind": "call_tool", "name": "resolve_point", "arguments": {...}} or a model of contracts.protocol.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any


class ReplayAgent:
    """Plays, episode by episode, the actions a trace recorded (its first run of each episode)."""

    def __init__(self, trace: str) -> None:
        self.actions: dict[str, list[dict]] = defaultdict(list)
        for line in Path(trace).read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record.get("type") == "turn" and record.get("run") == 0 and record.get("action"):
                self.actions[record["episode_id"]].append(record["action"])
        self.queue: list[dict] = []

    def start(
        self, episode: Any
    ) -> None:  # episode: contracts.agent_io.EpisodeStart (id, corpus, split, budget, tools)
        self.queue = list(self.actions.get(episode.episode_id, []))

    def act(self, observation: Any) -> dict:  # observation: contracts.agent_view.AgentObservation
        if self.queue:
            return self.queue.pop(0)
        return {"kind": "answer", "text": "I have nothing more.", "fields": {}}
