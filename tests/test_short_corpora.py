"""Corpora as they come (issue 39): a short corpus of many sites splits by site, the families that fit its span are
kept (the others named with the reason), a corpus no plan fits is one line saying what would, and a release whose
commitments test no quality gate is refused by the commitment-mix gate."""

from __future__ import annotations

import csv
import datetime as dt
import json
import tomllib
from collections import Counter
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from contracts.tasks import SplitOverrides
from pipeline.cli import main
from pipeline.core.config import load_episodes_config, load_families, weekly_commitments
from pipeline.core.errors import StageError
from pipeline.core.workspace import Workspace
from pipeline.episodes.stage import week_caps
from pipeline.tasks.fit import DAY, Span, fit, summary
from tests.helpers import REPO, copy_shared_configs, fill_drafted_mapping
from tests.shapes import METERS, OFFICE_POINTS, write_estate, write_office, write_office_in_one_file

WEDNESDAY = 1_677_628_800_000_000  # 2023-03-01 00:00 UTC
LIFTS = load_episodes_config(Workspace.from_root(REPO))


def _drafted(root: Path, name: str, classes: dict[str, str]) -> Path:
    """Draft the mapping of data/raw/<name> with `corpus draft` and fill in nothing but the point classes."""
    (root / "configs" / "corpora").mkdir(parents=True, exist_ok=True)
    copy_shared_configs(root)
    drafted = cli(root, "corpus", "draft", str(root / "data" / "raw" / name), "--name", name)
    assert drafted.exit_code == 0, drafted.output
    fill_drafted_mapping(root / "configs" / "corpora" / f"{name}.toml")
    points = root / "configs" / "corpora" / name / "points.csv"
    with points.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {r["key"] for r in rows} == set(classes), rows
    assert all(r["point_class"].startswith("CHECK ") for r in rows)  # the lexicon proposed each, to be confirmed
    for row in rows:
        row["point_class"] = classes[row["key"]]
    with points.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    root.joinpath("draft.txt").write_text(drafted.output, encoding="utf-8")
    return root


def _project(root: Path, name: str, rooms: int, days: int, step: int = 10, outages: bool = True) -> Path:
    """A generated office corpus whose mapping is what `corpus draft` wrote, only the point classes filled in."""
    write_office(root / "data" / "raw" / name, rooms=rooms, days=days, step_minutes=step, outages=outages)
    return _drafted(root, name, OFFICE_CLASSES)


OFFICE_CLASSES = {key: cls for key, (cls, _) in OFFICE_POINTS.items()}


def cli(root: Path, *args: str):
    return CliRunner().invoke(main, ["--root", str(root), *args])


@pytest.fixture(scope="session")
def shipped():
    ws = Workspace.from_root(REPO)
    return load_families(ws), weekly_commitments(ws)


def test_a_span_counts_calendar_and_whole_weeks():
    eight = Span(WEDNESDAY, WEDNESDAY + 8 * DAY, 45)
    assert (eight.weeks, eight.whole_weeks, round(eight.days)) == (2, 0, 8)  # Wed..Thu: two partial weeks
    monday = WEDNESDAY + 5 * DAY
    assert Span(monday, monday + 14 * DAY - 1, 1).whole_weeks == 2
    assert Span(monday, monday + 14 * DAY - 2, 1).whole_weeks == 1


def test_short_many_site_span_gets_a_site_plan_and_only_the_families_that_fit(shipped):
    families, weekly = shipped
    found = fit(families, "auto", None, Span(WEDNESDAY, WEDNESDAY + 8 * DAY, 45), "office", weekly)
    assert found.plan == "site"
    assert set(found.kept) == {"timestamp_nearest_lookup", "timestamp_value_lookup"} | (
        {"point_disambiguation", "day_mean_lookup", "relative_24h_mean_lookup"} - weekly
    )
    assert "month window" in found.left_out["window_rank"] and "21 days" in found.left_out["window_mean_lookup"]
    assert found.rule.buffer_days < families.splits.buffer_days  # no month window: shorter buffers


def test_long_corpus_keeps_every_family_and_the_time_plan(shipped):
    families, weekly = shipped
    found = fit(families, "auto", None, Span(WEDNESDAY, WEDNESDAY + 700 * DAY, 1), "plant", weekly)
    assert (found.plan, found.left_out, found.rule) == ("time", {}, families.splits)


@pytest.mark.parametrize(
    ("kind", "sites", "days", "said"),
    [
        ("auto", 1, 8, "a time split needs"),
        ("auto", 4, 8, "a site split needs 5 sites"),
        ("time", 45, 8, "split = 'time'"),
        ("site", 2, 700, "split = 'site'"),
    ],
)
def test_no_plan_is_one_line_naming_span_sites_and_each_minimum(shipped, kind, sites, days, said):
    families, weekly = shipped
    with pytest.raises(StageError) as info:
        fit(families, kind, None, Span(WEDNESDAY, WEDNESDAY + days * DAY, sites), "c", weekly)
    message = str(info.value)
    assert "\n" not in message and said in message and f"at {sites} site" in message
    assert "configs/corpora/c.toml" in message
    lines = summary(families, kind, None, Span(WEDNESDAY, WEDNESDAY + days * DAY, sites), weekly)
    assert lines[0].startswith("span: ") and lines[1].startswith("split plan: none; ")


def test_a_corpus_may_lower_its_own_minimum_of_sites(shipped):
    families, weekly = shipped
    span = Span(WEDNESDAY, WEDNESDAY + 8 * DAY, 3)
    with pytest.raises(StageError):
        fit(families, "auto", None, span, "c", weekly)
    assert fit(families, "auto", SplitOverrides(min_sites=3), span, "c", weekly).plan == "site"


def test_week_caps_follow_the_shares_only_on_a_corpus_of_few_weeks():
    cfg = load_episodes_config(Workspace.from_root(REPO))
    assert week_caps(cfg, 540, 280) == dict.fromkeys(cfg.outcome_shares, cfg.commit_week_cap)  # years: unchanged
    assert cfg.outcome_shares == {"answer": 0.4, "abstain": 0.3, "re_clarify": 0.3}
    assert week_caps(cfg, 120, 2) == {"answer": 24, "abstain": 18, "re_clarify": 18}  # 60 rows a week, by the shares


def test_eight_days_of_45_rooms_release_in_every_split_and_play(tmp_path):
    root = _project(tmp_path / "p", "office", rooms=45, days=8)
    built = cli(root, "build", "--corpus", "office", "--verbose")
    assert built.exit_code == 0, built.output
    assert "family window_rank left out: its month window" in built.output
    drafted = (root / "draft.txt").read_text(encoding="utf-8")
    assert "split plan: site (whole sites per split, 45 sites)" in drafted
    assert "families that fit: timestamp_nearest_lookup, timestamp_value_lookup" in drafted
    artifacts = root / "artifacts" / "office"
    plan = json.loads((artifacts / "tasks" / "manifest.json").read_text())["details"]["split_rule"]
    assert plan["by"] == "site"
    placed = [site for split in ("train", "dev", "test") for site in plan["sites"][split]]
    assert sorted(placed) == sorted(set(placed)) and len(placed) == 45
    for split in ("train", "dev", "test"):
        rows = [json.loads(line) for line in (artifacts / "release" / f"{split}.jsonl").read_text().splitlines()]
        assert rows, split
        assert all(set(r["site_ids"]) <= set(plan["sites"][split]) for r in rows)  # no site in two splits
    audit = json.loads((artifacts / "audit" / "manifest.json").read_text())["details"]
    assert audit["gates"]["commitment_mix"] == "pass"
    assert all(status in ("pass", "insufficient_rows", "unproven") for status in audit["gates"].values())
    scores = {}
    for agent in ("oracle", "noop", "controller"):
        trace = tmp_path / f"{agent}.jsonl"
        played = cli(root, "run", "--corpus", "office", "--split", "test", "--agent", agent, "--out", str(trace))
        assert played.exit_code == 0, played.output
        scored = cli(root, "score", str(trace), "--json")
        scores[agent] = json.loads(scored.output)["summaries"][0]["accomplished_rate"]
    assert scores == {"oracle": 1.0, "noop": 0.0, "controller": 0.0}


def test_one_site_of_eight_days_splits_its_sensors_and_the_gate_refuses_too_few_rows_in_one_line(tmp_path):
    """One room's five sensors over eight days: a group plan (each sensor a stream group) fits, as the draft said;
    19 rows cannot hold the commitment mix, so the release is refused in one line."""
    root = _project(tmp_path / "p", "one", rooms=1, days=8)
    built = cli(root, "build", "--corpus", "one")
    assert built.exit_code == 1
    error = [line for line in built.output.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "Traceback" not in built.output
    assert "commitment_mix" in error[0] and "nothing was released" in error[0]
    drafted = (root / "draft.txt").read_text(encoding="utf-8")  # the draft stated the plan the build took
    plan = next(line for line in drafted.splitlines() if line.startswith("split plan:"))
    assert plan == "split plan: group (whole zones, rooms or stream groups per split, 5 groups at 1 site)"


def test_a_release_whose_commitments_test_no_quality_gate_is_refused(tmp_path):
    root = _project(tmp_path / "p", "clean", rooms=6, days=35, step=30, outages=False)
    built = cli(root, "build", "--corpus", "clean")
    assert built.exit_code == 1
    error = next(line for line in built.output.splitlines() if line.startswith("error:"))
    assert "commitment_mix" in error and "has no re_clarify row" in error and "re_clarify 0.0" in error
    assert error.count("\n") == 0 and "refused" in error
    assert not (root / "artifacts" / "clean" / "release" / "train.jsonl").exists()


def _rows(outcome: str, n: int, split: str = "train", site: str = "s1") -> list:
    from types import SimpleNamespace

    return [
        SimpleNamespace(id=f"{split}-{site}-{outcome}-{i}", commitment_outcome=outcome, site_ids=[site], split=split)
        for i in range(n)
    ]


def _counts(rows: list, split: str | None = None) -> dict[str, int]:
    return {
        o: sum(e.commitment_outcome == o and split in (None, e.split) for e in rows)
        for o in ("answer", "abstain", "re_clarify")
    }


def test_a_skewed_mix_is_trimmed_to_the_declared_shares_in_every_split_and_the_corpus():
    from pipeline.audit.stage import trim_to_mix
    from pipeline.episodes.rules import off_mix

    shares = LIFTS.outcome_shares
    skewed = _rows("answer", 80) + _rows("abstain", 16) + _rows("re_clarify", 24)
    skewed += _rows("answer", 30, "test") + _rows("abstain", 12, "test") + _rows("re_clarify", 7, "test")
    kept, dropped, _ = trim_to_mix(skewed, shares, 0.05)
    for split in ("train", "test", None):
        counts = _counts(kept, split)
        assert not off_mix(counts, shares, 0.05), (split, counts)
        rows = sum(counts.values())
        assert all(abs(counts[o] / rows - shares[o]) <= 0.05 + 1e-9 for o in shares), (split, counts)
    # the scarce outcome of each split is kept whole: only rows over their share leave
    assert _counts(kept, "train")["abstain"] == 16 and _counts(kept, "test")["re_clarify"] == 7
    assert set(dropped) == {"train", "test"} and sum(map(sum, (d.values() for d in dropped.values()))) == len(
        skewed
    ) - len(kept)
    assert [e.id for e in kept] == [e.id for e in skewed if e in kept]  # the release keeps its order
    assert trim_to_mix(skewed, shares, 0.05) == (kept, dropped, {})  # the same rows every time
    balanced = _rows("answer", 40) + _rows("abstain", 30) + _rows("re_clarify", 30)
    assert trim_to_mix(balanced, shares, 0.05) == (balanced, {}, {})


def test_a_split_without_an_outcome_shrinks_to_a_few_rows_and_the_gate_refuses_it():
    from pipeline.audit.trim import commitment_mix_gate, trim_to_mix

    lone = _rows("answer", 70) + _rows("abstain", 30) + _rows("answer", 4, "dev") + _rows("abstain", 2, "dev")
    lone += _rows("re_clarify", 3, "dev")
    kept, _, _ = trim_to_mix(lone, LIFTS.outcome_shares, 0.05)
    assert len([e for e in kept if e.split == "train"]) <= 3  # one row of slack cannot hold 0.3 of re_clarify
    gate = commitment_mix_gate(lone, kept, LIFTS)
    assert gate["status"] == "fail" and gate["why"].startswith("split train has no re_clarify row")
    assert "answer 0.7, abstain 0.3, re_clarify 0.0 over 100 audited rows" in gate["why"]
    # a small split (one row is more than the tolerance) may miss an outcome: only one row of slack applies
    small = _rows("answer", 40) + _rows("abstain", 30) + _rows("re_clarify", 30) + _rows("answer", 2, "dev")
    small += _rows("abstain", 1, "dev")
    kept, _, _ = trim_to_mix(small, LIFTS.outcome_shares, 0.05)
    # 2 answer and 1 abstain of 3 rows: each within one row of 0.4 / 0.3 / 0.3 of 3 rows, so nothing is left out
    assert commitment_mix_gate(small, kept, LIFTS)["status"] == "pass" and _counts(kept, "dev") == {
        "answer": 2,
        "abstain": 1,
        "re_clarify": 0,
    }


CROWDED = {  # rows per (site, outcome) -> the site whose answers leave, the site that keeps all of its answers
    "a building with outages among clean ones": (
        {("clean", "answer"): 60, ("outages", "answer"): 10, ("outages", "abstain"): 10, ("outages", "re_clarify"): 10},
        "clean",
        "outages",
    ),
    "answers leave the all-answer site while its answer share is above the other's": (
        {("a", "answer"): 40, ("b", "answer"): 40, ("b", "abstain"): 30, ("b", "re_clarify"): 30},
        "a",
        "b",
    ),
}


@pytest.mark.parametrize("case", CROWDED)
def test_the_mix_trim_leaves_out_rows_where_the_outcome_crowds_a_site(case):
    """A building with outages keeps its answers: the trim takes answers from the sites that are mostly answers, so
    that no site's remaining rows tell the outcome (the artifact probe reads the site from the text)."""
    from pipeline.audit.stage import trim_to_mix

    counts, crowded, spared = CROWDED[case]
    release = [row for (site, outcome), n in counts.items() for row in _rows(outcome, n, site=site)]
    kept, dropped, _ = trim_to_mix(release, LIFTS.outcome_shares, 0.05)
    at = Counter((e.site_ids[0], e.commitment_outcome) for e in kept)
    assert (
        at[(spared, "answer")] == counts[(spared, "answer")] and at[(crowded, "answer")] < counts[(crowded, "answer")]
    )
    assert dropped == {"train": {"answer": len(release) - len(kept)}}  # only the outcome over its share leaves


def _released(root: Path, name: str) -> dict[str, list[dict]]:
    release = root / "artifacts" / name / "release"
    return {
        split: [json.loads(line) for line in (release / f"{split}.jsonl").read_text().splitlines()]
        for split in ("train", "dev", "test")
    }


def test_a_sharded_estate_tree_is_one_stream_per_building_and_meter_across_years(tmp_path):
    root = tmp_path / "p"
    written = write_estate(
        root / "data" / "raw" / "estate", 6, dt.date(2021, 1, 1), dt.date(2022, 6, 30), overlap_hours=24
    )
    _drafted(root, "estate", {meter: cls for meter, (cls, _) in METERS.items()})
    mapping = tomllib.loads((root / "configs" / "corpora" / "estate.toml").read_text(encoding="utf-8"))
    assert mapping["values"]["file_pattern"] == r"(?P<site>b\d+)/(?P<key>[^/]+)/(?P<year>\d{4})\.csv"  # years: shards
    built = cli(root, "build", "--corpus", "estate")
    assert built.exit_code == 0, built.output
    ingest = root / "artifacts" / "estate" / "ingest"
    streams = duckdb.sql(
        f"SELECT stream_id, source_file FROM '{ingest / 'streams.parquet'}' ORDER BY stream_id"
    ).fetchall()
    assert [s for s, _ in streams] == sorted(key.replace("/", "__") for key in written)
    assert all(
        files.split(";") == [f"{s.replace('__', '/')}/2021.csv", f"{s.replace('__', '/')}/2022.csv"]
        for s, files in streams
    )
    per_stream = dict(
        duckdb.sql(f"SELECT stream_id, count(*) FROM '{ingest / 'observations.parquet'}' GROUP BY 1").fetchall()
    )
    assert per_stream == {key.replace("/", "__"): n for key, n in written.items()}  # every reading once
    report = json.loads((ingest / "report.json").read_text())
    assert report["raw_value_cells"] == report["observations"] + report["rejects"]
    assert report["rejects_by_reason"] == {"duplicate_timestamp": 24 * len(written)}  # the repeated day, once each
    assert all(_released(root, "estate").values())


def test_a_site_column_inside_one_file_splits_by_site(tmp_path):
    root = tmp_path / "p"
    rooms = write_office_in_one_file(root / "data" / "raw" / "readings", rooms=45, days=8)
    _drafted(root, "readings", OFFICE_CLASSES)
    assert "site_column  'room'" in (root / "draft.txt").read_text(encoding="utf-8")
    built = cli(root, "build", "--corpus", "readings")
    assert built.exit_code == 0, built.output
    report = json.loads((root / "artifacts" / "readings" / "ingest" / "report.json").read_text())
    assert report["sites"] == len(rooms) and report["streams"] == len(rooms) * len(OFFICE_POINTS)
    assert report["raw_value_cells"] == report["observations"] + report["rejects"]
    released = _released(root, "readings")
    sites = {split: {s for row in rows for s in row["site_ids"]} for split, rows in released.items()}
    assert all(sites.values()) and not (sites["train"] & sites["test"]) and not (sites["dev"] & sites["test"])
    assert all("room " in row["initial_message"] or "room " in row["hidden_instruction"] for row in released["test"])


def test_weekly_commitments_need_whole_weeks_inside_one_streams_span(shipped):
    """Sites whose data do not overlap in time (a few days each over a month): the corpus's span holds whole weeks,
    no stream's does, so every week a commitment could ask about is partial and the families asking about a week are
    left out, saying so; streams with two whole weeks keep them."""
    families, weekly = shipped
    rule = SplitOverrides(min_sites=4)
    span = Span(WEDNESDAY, WEDNESDAY + 30 * DAY, 4, stream_whole_weeks=0)
    asking = sorted(n for n in weekly & set(families.families) if families.families[n].period != "month")
    found = fit(families, "site", rule, span, "c", weekly)
    assert asking and all("its longest stream has 0" in found.left_out.get(name, "") for name in asking)
    whole = fit(families, "site", rule, Span(WEDNESDAY, WEDNESDAY + 30 * DAY, 4, 2), "c", weekly)
    assert not set(asking) & set(whole.left_out)
