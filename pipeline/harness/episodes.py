"""Library entry points behind `inspect episodes` and `inspect episode` (finding an episode by id)."""

from __future__ import annotations

from typing import Any

from contracts.agent_view import AgentObservation
from contracts.episodes import Episode
from contracts.tasks import SPLITS
from pipeline.core.config import select_corpora
from pipeline.core.errors import StageError
from pipeline.core.workspace import Workspace
from pipeline.runtime.agents import Observation, OracleAgent
from pipeline.runtime.runner import run_episode
from pipeline.runtime.simulator import Lexicon
from pipeline.tools.access import ToolStore


def find_episode(ws: Workspace, corpus: str, episode_id: str) -> Episode:
    select_corpora(ws, [corpus])
    folder = ws.stage_dir(corpus, "episodes")
    for split in SPLITS:
        path = folder / f"{split}.jsonl"
        if not path.is_file():
            raise StageError(f"{path}: no episodes; run `telemetry-bench build` first")
        for line in path.read_text(encoding="utf-8").splitlines():
            if f'"id":"{episode_id}"' in line:
                return Episode.model_validate_json(line)
    raise StageError(
        f"no episode {episode_id!r} in {folder}; list ids with `telemetry-bench inspect episodes --corpus {corpus}`"
    )


def episodes_summary(ws: Workspace, corpus: str) -> dict:
    from pipeline.core.manifest import require_manifest

    select_corpora(ws, [corpus])
    folder = ws.stage_dir(corpus, "episodes")
    manifest = require_manifest(folder, "episodes")
    examples = []
    for split in SPLITS:
        first = (folder / f"{split}.jsonl").read_text(encoding="utf-8").split("\n", 1)[0]
        if first:
            examples.append(Episode.model_validate_json(first).id)
    audit_dir = ws.stage_dir(corpus, "audit")
    audit = require_manifest(audit_dir, "audit") if (audit_dir / "manifest.json").is_file() else None
    released = (
        {
            "splits": audit.row_counts,
            "commitment_mix": audit.details["commitment_mix"],
            "per_split_mix": audit.details["commitment_mix_gate"].get("per_split", {}),
            "trimmed_for_mix": audit.details["trimmed_for_mix"],
            "trimmed_for_balance": audit.details.get("trimmed_for_balance", {}),
            "balanced_answers": audit.details.get("balanced_answers", {}),
            "mix_gate": audit.details["commitment_mix_gate"]["status"],
        }
        if audit is not None
        else None
    )
    return {
        "corpus": corpus,
        "splits": manifest.row_counts,
        "released": released,
        "per_family": manifest.details["per_family"],
        "interaction_modes": manifest.details["per_interaction_mode"],
        "commitment_shares": manifest.details["commitment_shares"],
        "commitment_outcomes": manifest.details["commitment_outcomes"],
        "balance_ok": manifest.details["balance_ok"],
        "examples": examples,
    }


class _Recording(OracleAgent):
    """The oracle, keeping every view it was given."""

    def __init__(self) -> None:
        self.views: list[AgentObservation] = []

    def act(self, observation: Observation) -> Any:
        self.views.append(observation.view())
        return super().act(observation)


def agent_views(episode: Episode, store: ToolStore, keywords: Lexicon) -> list[AgentObservation]:
    """What an agent receives before each turn along the episode's gold path."""
    agent = _Recording()
    for _ in run_episode(agent, episode, store, keywords):
        pass
    return agent.views
