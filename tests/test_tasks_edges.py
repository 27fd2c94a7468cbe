"""Eligibility edge cases on a small real slice: ties, a stream without observations, duplicate timestamps."""

from __future__ import annotations

import json

import pytest

from pipeline.harness.build import build
from tests.helpers import make_workspace, real_lines, xai_config

# Every 8th record of L4 (years long, as time-blocked splits need), `pe` emptied in every row (its stream then has
# no observations).


pytestmark = pytest.mark.slow  # builds a corpus of its own (make test-fast skips it)


LINES = real_lines("xai4heat/xai4heat_scada_L4.csv", range(2, 44400, 8))


def _tie_primary_and_secondary_return(lines: list[str]) -> list[str]:
    out = [lines[0]]
    for line in lines[1:]:
        cells = line.split(",")
        cells[6] = cells[4]  # t_ret_sec := t_ret_prim: equal means every week
        cells[8] = ""  # no pe reading
        out.append(",".join(cells))
    return out


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    lines = _tie_primary_and_secondary_return(LINES)
    lines.insert(3, lines[2])  # one repeated record: a duplicate timestamp in every stream of the file
    ws = make_workspace(
        tmp_path_factory.mktemp("edges"),
        "xai4heat",
        xai_config(held_out_sites="[]"),
        {"xai4heat_scada_L4.csv": "\n".join(lines) + "\n"},
    )
    build(ws, until="tasks")  # the tasks are what these tests read (this tiny corpus's release is refused by its mix)
    folder = ws.stage_dir("xai4heat", "tasks")
    tasks = [
        json.loads(line) for s in ("train", "dev", "test") for line in (folder / f"{s}.jsonl").read_text().splitlines()
    ]
    return tasks, json.loads((folder / "manifest.json").read_text())["details"]


def test_tied_means_are_never_compared(built):
    tasks, details = built
    pairs = [t for t in tasks if t["family"] == "window_pairwise_compare"]
    assert not any(set(t["evidence_stream_ids"]) == {"L4__t_ret_prim", "L4__t_ret_sec"} for t in pairs)
    predicates = {p["name"]: p["passed"] for p in details["families"]["window_pairwise_compare"]["predicates"]}
    assert predicates["means_differ_when_rounded"] < predicates["both_coverage_at_least_p10"]


def test_stream_without_observations_is_never_asked(built):
    tasks, _ = built
    assert not any("L4__pe" in t["evidence_stream_ids"] for t in tasks)


def test_duplicate_timestamps_empty_the_timestamp_families(built):
    tasks, details = built
    for family in ("timestamp_value_lookup", "timestamp_nearest_lookup"):
        assert not any(t["family"] == family for t in tasks)
        assert details["missing_families"][family] == "no_duplicate_timestamps"
        assert details["families"][family]["emptied_by"] == "no_duplicate_timestamps"


def test_single_site_has_no_rank_group(built):
    _, details = built
    assert details["missing_families"]["window_rank"] == "at_least_three_members"
