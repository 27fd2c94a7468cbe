"""Every shipped corpus, copied under a new name, drafted, and filled as a user fills a draft (each TODO answered as
its marker says, each CHECK confirmed, nothing else touched), builds and releases on the first try (issue 52), with
the oracle accomplishing every test episode. The user's answers are what the data's owner knows: the Brick class of
each stream key the lexicon does not name, as the shipped mapping gives it; the licence, title and citation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.core.config import load_mapping
from pipeline.core.workspace import Workspace
from tests.helpers import REPO, fill_drafted_mapping, renamed_copy, run_in, sweep

SPLITS = ("train", "dev", "test")


def shipped_classes(corpus: str) -> dict[str, str]:
    """Stream key -> Brick class in the shipped mapping's inline points (empty for a points table or Brick graphs)."""
    points = getattr(load_mapping(REPO / "configs" / "corpora" / f"{corpus}.toml").metadata, "points", {})
    return {key: point.point_class for key, point in points.items()}


# The keys the drafts name otherwise than the shipped mappings: pvdaq's by its files (one inverter each), daiad's by
# the archive's header (the shipped mapping renames the columns, and ignores the interval difference).
ANSWERS = {
    "daiad": {"meter reading": "Water_Usage_Sensor", "diff": "Water_Flow_Sensor"},
    "hhw": {},
    "pvdaq": dict.fromkeys(("TAEFC1044741", "ZT162185000441C1203"), "Electrical_Power_Sensor"),
    "ucam": {},
    "xai4heat": shipped_classes("xai4heat"),
}


def drafted_and_filled(tmp_path: Path, corpus: str) -> tuple[Workspace, str]:
    root, name = renamed_copy(tmp_path, corpus)
    ws = Workspace.from_root(root)
    drafted = run_in(ws, "corpus", "draft", str(root / "data" / "raw" / name), "--name", name)
    assert drafted.exit_code == 0, drafted.output
    mapping = root / "configs" / "corpora" / f"{name}.toml"
    tabled = (root / "configs" / "corpora" / name / "points.csv").is_file()
    fill_drafted_mapping(mapping, classes=ANSWERS[corpus] if tabled else None, license="MIT", license_url="")
    return ws, name


def released_rows(ws: Workspace, name: str) -> dict[str, int]:
    release = ws.root / "artifacts" / name / "release"
    return {split: len((release / f"{split}.jsonl").read_text().splitlines()) for split in SPLITS}


def oracle_rate(ws: Workspace, name: str, tmp_path: Path) -> float:
    trace = tmp_path / "oracle.jsonl"
    played = run_in(ws, "run", "--corpus", name, "--split", "test", "--agent", "oracle", "--out", str(trace))
    assert played.exit_code == 0, played.output
    return json.loads(run_in(ws, "score", str(trace), "--json").output)["summaries"][0]["accomplished_rate"]


@pytest.mark.slow
@pytest.mark.parametrize("corpus", sweep(["pvdaq", "xai4heat"], ["daiad", "hhw", "ucam"]))
def test_a_renamed_copy_releases_by_filling_only_the_todos(tmp_path, corpus):
    ws, name = drafted_and_filled(tmp_path, corpus)
    built = run_in(ws, "build", "--corpus", name)
    assert built.exit_code == 0, built.output
    rows = released_rows(ws, name)
    assert all(rows.values()), rows
    print(f"{name}: released {rows}")  # the figures the report quotes (pytest -s)
    assert oracle_rate(ws, name, tmp_path) == 1.0


def test_a_renamed_daiad_drafts_its_archives_members():
    """The draft reads a zip archive holding one CSV as that CSV, and writes the member for the build to read."""
    import tomllib

    from pipeline.ingest.draft import draft

    drafted = tomllib.loads(draft(REPO / "data" / "raw" / "daiad", "daiad_copy", None).mapping)
    values = drafted["values"]
    assert values["files"] == "swm_trialA.zip" and values["archive_member"] == r"swm_trialA\.csv"
    assert (values["kind"], values["delimiter"], values["site_column"]) == ("wide_csv", ";", "user key")
    assert drafted["time"]["format"] == "%d/%m/%Y %H:%M:%S"
    assert drafted["time"]["row_order"] == "any"  # ordered by meter, then time: seen in rows spread through the file
    assert drafted["metadata"]["counter_column"] == "counter"  # the cumulative register, proposed for a CHECK


def test_the_draft_proposes_a_counter_only_for_values_that_only_rise():
    from pipeline.ingest.draft_counters import rises_only

    register = [[(t, 100.0 + t // 3) for t in range(40)], [(t, 5.0 + 2 * t) for t in range(30)]]
    assert rises_only(register)
    assert not rises_only([[(t, 20 + (t % 7)) for t in range(40)]])  # a level: rises and falls
    assert not rises_only([[(t, 7.0) for t in range(40)]])  # flat: no rise
    assert not rises_only([[(t, float(t)) for t in range(5)]])  # too few readings to judge
    exchanged = [(t, float(t if t < 30 else t - 30)) for t in range(60)]  # a meter exchange: one fall in 59 steps
    assert not rises_only([exchanged])
    assert rises_only([[(t, float(t if t < 30 else t - 25)) for t in range(150)]])  # one fall in 149 steps


def test_the_draft_proposes_zero_dropouts_only_where_zeros_are_rare():
    from pipeline.ingest.draft_counters import dropout_zeros

    hourly = [(t, 0.0 if t % 40 == 0 else 5.0 + t % 3) for t in range(400)]  # 2.5% zeros amid positive readings
    assert dropout_zeros([hourly])
    assert not dropout_zeros([[(t, 5.0 + t % 3) for t in range(400)]])  # no zero
    assert not dropout_zeros([[(t, float(t % 2) * 5) for t in range(400)]])  # half zeros: the meter's own readings
    assert not dropout_zeros([[*hourly, (400, -1.0)]])  # a negative reading: no consumption meter
