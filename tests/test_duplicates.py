"""Identical copies of one sensor: ingest reports them, tasks never use one as another's distractor, and preflight
rejects two rows whose question is the same while their golds differ."""

from __future__ import annotations

import json

import pytest

from pipeline.core.config import load_episodes_config, load_families
from pipeline.harness.build import build
from pipeline.harness.traces import load_episodes
from pipeline.runtime.preflight import ambiguous_questions, preflight
from pipeline.tools.access import ToolStore
from tests.helpers import TINY_XAI, make_workspace, xai_config

COPY = """
[metadata.points.t_sup_prim_copy]
point_class = "Leaving_Hot_Water_Temperature_Sensor"
label = "primary supply temperature at {site}"
unit = "DEG_C"
equipment = "district_loop"
equipment_type = "Hot_Water_Loop"
"""


def duplicated_sensor(tmp_path):
    """L8 with a second primary supply sensor: the same label and values, other equipment (a copy of one sensor)."""
    lines = TINY_XAI.splitlines()
    header = lines[0].split(",")
    column = header.index("t_sup_prim")
    rows = [",".join([*cells, cells[column]]) for cells in (line.split(",") for line in lines[1:])]
    body = "\n".join([",".join([*header, "t_sup_prim_copy"]), *rows]) + "\n"
    return make_workspace(tmp_path, "xai4heat", xai_config(held_out_sites="[]") + COPY, {"xai4heat_scada_L8.csv": body})


@pytest.mark.slow
def test_copies_are_reported_and_never_asked(tmp_path):
    ws = duplicated_sensor(tmp_path)
    build(ws, until="audit")  # what is read: the ingest report, the store, the tasks and the audited episodes
    report = json.loads((ws.stage_dir("xai4heat", "ingest") / "report.json").read_text())
    assert ["L8__t_sup_prim", "L8__t_sup_prim_copy"] in report["duplicate_streams"]
    store = ToolStore(ws.stage_dir("xai4heat", "store") / "store.duckdb")
    try:
        assert (
            store.streams["L8__t_sup_prim_copy"]["content_twins"] == 1
            and store.streams["L8__t_sup_sec"]["content_twins"] == 0
        )
        tasks = [
            json.loads(line)
            for s in ("train", "dev", "test")
            for line in (ws.stage_dir("xai4heat", "tasks") / f"{s}.jsonl").read_text().splitlines()
        ]
        copies = {"L8__t_sup_prim", "L8__t_sup_prim_copy"}
        assert not [
            t for t in tasks if t["family"] == "point_disambiguation" and copies & set(t["evidence_stream_ids"])
        ]
        episodes = [
            e for s in ("train", "dev", "test") for e in load_episodes(ws.stage_dir("xai4heat", "audit") / f"{s}.jsonl")
        ]
        assert preflight(episodes, store, load_episodes_config(ws), load_families(ws))["issue_count"] == 0
        # The same question with another gold (what a copy as distractor would give) is caught.
        lookup = next(e for e in episodes if e.family in ("point_disambiguation", "day_mean_lookup"))
        first = lookup.phases[0]
        other_gold = {k: (v + 1 if isinstance(v, float) else "L8__t_sup_prim_copy") for k, v in first.gold.items()}
        twin = lookup.model_copy(
            update={
                "id": lookup.id + ".twin",
                "phases": [first.model_copy(update={"gold": other_gold}), *lookup.phases[1:]],
            }
        )
        assert ambiguous_questions([lookup, twin]) == {lookup.id, twin.id}
        assert ambiguous_questions([lookup, lookup.model_copy(update={"id": lookup.id + ".same"})]) == set()
        assert (
            preflight([lookup, twin], store, load_episodes_config(ws), load_families(ws))["by_check"][
                "same_question_different_gold"
            ]
            == 2
        )
    finally:
        store.close()
