"""What `inspect tasks` shows: tasks per family and split, candidate pools, and why a family is missing."""

from __future__ import annotations

from pipeline.core.config import select_corpora
from pipeline.core.manifest import require_manifest
from pipeline.core.workspace import Workspace


def tasks_summary(ws: Workspace, corpus: str) -> dict:
    select_corpora(ws, [corpus])
    manifest = require_manifest(ws.stage_dir(corpus, "tasks"), "tasks")
    families = manifest.details["families"]
    return {
        "corpus": corpus,
        "counts": {name: report["selected"] for name, report in families.items()},
        "pools": {name: report["pool"] for name, report in families.items()},
        "eligible": {name: report["eligible"] for name, report in families.items()},
        "predicates": {name: report["predicates"] for name, report in families.items()},
        "streams_left_out": {name: report.get("streams_left_out", {}) for name, report in families.items()},
        "streams_in_no_family": manifest.details.get("streams_in_no_family", []),
        "missing_families": manifest.details["missing_families"],
        "empty_splits": {name: report["empty_splits"] for name, report in families.items()},
        "dropped_by_split_rule": {name: report["dropped_by_split_rule"] for name, report in families.items()},
        "split_rule": manifest.details["split_rule"],
        "splits": manifest.row_counts,
    }
