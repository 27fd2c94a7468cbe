"""Library entry points behind `inspect episodes` and `inspect episode` (finding an episode by id)."""

from __future__ import annotations

from contracts.episodes import Episode
from contracts.tasks import SPLITS
from pipeline.config import select_corpora
from pipeline.errors import StageError
from pipeline.workspace import Workspace


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
    raise StageError(f"no episode {episode_id!r} in {folder}; list ids with `telemetry-bench inspect episodes --corpus {corpus}`")


def episodes_summary(ws: Workspace, corpus: str) -> dict:
    from pipeline.manifest import require_manifest

    select_corpora(ws, [corpus])
    folder = ws.stage_dir(corpus, "episodes")
    manifest = require_manifest(folder, "episodes")
    examples = []
    for split in SPLITS:
        first = (folder / f"{split}.jsonl").read_text(encoding="utf-8").split("\n", 1)[0]
        if first:
            examples.append(Episode.model_validate_json(first).id)
    return {
        "corpus": corpus, "splits": manifest.row_counts, "per_family": manifest.details["per_family"],
        "interaction_modes": manifest.details["per_interaction_mode"], "commitment_shares": manifest.details["commitment_shares"],
        "commitment_outcomes": manifest.details["commitment_outcomes"], "balance_ok": manifest.details["balance_ok"],
        "examples": examples,
    }
