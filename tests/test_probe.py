"""The artifact probe: deterministic, it finds an outcome written on the surface, and says when rows are too few."""

from __future__ import annotations

import json

from pipeline.audit.probe import artifact_probe
from pipeline.core.config import load_audit_config, load_episodes_config
from pipeline.core.workspace import Workspace
from pipeline.harness.traces import load_episodes
from tests.helpers import REPO, run_cli

WS = Workspace.from_root(REPO)
LIFTS, PROBE, GATES = load_episodes_config(WS), load_audit_config(WS).artifact_probe, load_audit_config(WS).gates


def released(artifacts, corpus="xai4heat"):
    return [e for s in ("train", "dev", "test") for e in load_episodes(artifacts / corpus / "audit" / f"{s}.jsonl")]


def test_audit_reports_the_probe(real_artifacts):
    result = run_cli(real_artifacts, "audit", "--corpus", "hhw", "--json")
    probe = json.loads(result.output)["artifact_probe"]
    assert {"accuracy", "majority", "model", "features", "status", "by_quarter"} <= set(probe)
    assert probe["status"] == "pass" and 0 < probe["majority"] < 1 and probe["rows"] >= GATES.min_rows
    assert probe["accuracy"] <= probe["majority"] + GATES.margin
    assert "week start" in probe["features"] and "visible text (words and bigrams)" in probe["features"]
    card = (real_artifacts / "hhw" / "release" / "README.md").read_text()
    assert "Artifact probe" in card and f"against a majority share of {probe['majority']}" in card


def test_probe_is_deterministic(real_artifacts):
    rows = released(real_artifacts)
    assert artifact_probe(rows, LIFTS, PROBE, GATES) == artifact_probe(list(reversed(rows)), LIFTS, PROBE, GATES)


def test_probe_finds_an_outcome_written_on_the_surface(real_artifacts):
    """A positive control: when the commitment prompt names its outcome, the probe fails the rows."""
    rows = released(real_artifacts)
    leaky = []
    for episode in rows:
        commit = episode.phases[-1]
        hint = {"answer": "Looks fine to me.", "abstain": "I doubt it.", "re_clarify": "Hmm, not sure."}[
            episode.commitment_outcome
        ]
        leaky.append(
            episode.model_copy(
                update={
                    "phases": [*episode.phases[:-1], commit.model_copy(update={"prompt": f"{hint} {commit.prompt}"})]
                }
            )
        )
    probe = artifact_probe(leaky, LIFTS, PROBE, GATES)
    assert probe["status"] == "fail" and probe["accuracy"] > 0.95


def test_too_few_rows_are_insufficient(real_artifacts):
    probe = artifact_probe(released(real_artifacts)[: GATES.min_rows - 1], LIFTS, PROBE, GATES)
    assert probe["status"] == "insufficient_rows" and probe["accuracy"] is None


PROBE_IN_A_PROCESS = """
import json, sys
from pathlib import Path
from threadpoolctl import threadpool_info
from pipeline.audit.probe import artifact_probe
from tests.test_probe import GATES, LIFTS, PROBE, released
probe = artifact_probe(released(Path(sys.argv[1]), "hhw"), LIFTS, PROBE, GATES)
kernels = sorted({i.get("architecture") for i in threadpool_info() if i.get("internal_api") == "openblas"} - {None})
print(json.dumps({"kernels": kernels, "accuracy": probe["accuracy_by_model"], "by_quarter": probe["by_quarter"]}))
"""


def test_probe_does_not_depend_on_the_blas_kernel(real_artifacts):
    """OpenBLAS picks a kernel per processor; a fit stopped short of its optimum gave another accuracy on another
    machine
    (hhw's logistic regression, 0.5986 against 0.6009). Two kernels every x86-64 processor runs must agree."""
    import os
    import platform
    import subprocess
    import sys

    import pytest

    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the OpenBLAS kernels compared are x86-64 ones")
    results = []
    for kernel in ("Prescott", "Haswell"):  # both in one process each, at once (two cores)
        env = {**os.environ, "OPENBLAS_CORETYPE": kernel}
        results.append(
            subprocess.Popen(
                [sys.executable, "-c", PROBE_IN_A_PROCESS, str(real_artifacts)],
                env=env,
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    finished = [process.communicate(timeout=600) for process in results]
    assert all(process.returncode == 0 for process in results), [err[-2000:] for _, err in finished]
    results = [json.loads(out) for out, _ in finished]
    if results[0]["kernels"] == results[1]["kernels"]:
        pytest.skip(f"OPENBLAS_CORETYPE was not honoured here ({results[0]['kernels']})")
    assert results[0]["accuracy"] == results[1]["accuracy"] and results[0]["by_quarter"] == results[1]["by_quarter"]


def test_a_fold_whose_training_rows_hold_one_outcome_predicts_it():
    """Grouped by site, a fold can train on one outcome only (a held-out site with all the others): it predicts that
    outcome instead of stopping the audit."""
    import numpy as np

    from pipeline.audit.probe import _cross_validated

    cfg = load_audit_config(Workspace.from_root(REPO)).artifact_probe
    texts = [f"row {i}" for i in range(6)]
    labels = np.array(["answer", "answer", "answer", "answer", "abstain", "abstain"], dtype=object)
    groups = ["a", "a", "b", "b", "c", "c"]
    accuracy = _cross_validated(texts, [{"k": i % 2} for i in range(6)], labels, groups, cfg)
    assert set(accuracy) == {"logistic_regression", "decision_tree"} and all(0 <= v <= 1 for v in accuracy.values())


def test_under_a_site_plan_the_probe_holds_out_whole_sites(real_artifacts):
    """Outcomes tied to sites: folds by task see each site on both sides and read the outcome off its name; a site
    plan never shows a test site in train, so its folds hold out whole sites and a site's name tells them nothing."""
    rows = released(real_artifacts, "daiad")
    outcome = {}  # each household's outcome: that of its first row, written into every row's sites
    tied = [
        e.model_copy(update={"commitment_outcome": outcome.setdefault(e.site_ids[0], e.commitment_outcome)})
        for e in sorted(rows, key=lambda e: e.id)
    ]
    by_task = artifact_probe(tied, LIFTS, PROBE, GATES, "time")
    by_site = artifact_probe(tied, LIFTS, PROBE, GATES, "site")
    assert by_task["grouped_by"] == "task" and by_site["grouped_by"] == "site"
    assert by_task["status"] == "fail" and by_site["by_task"] == by_task["accuracy_by_model"]
    assert by_site["accuracy"] < by_task["accuracy"]
