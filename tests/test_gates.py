"""The release gates (design/VALIDITY.md sections 3-4): the week cap that keeps outcomes from being remembered, the
guessers, the grid rules, the canned clarification with its fixture, and the release refusing a failed gate."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import pytest

from contracts.tasks import SPLITS
from pipeline.audit.fixtures import both_withheld
from pipeline.audit.guessers import Guesser, Memory
from pipeline.audit.policies import ShortcutPolicy
from pipeline.audit.probe import allowed_margin
from pipeline.audit.stage import phases_needing, play, required_capabilities
from pipeline.core.config import load_answers, load_audit_config, load_episodes_config, load_families, load_mapping
from pipeline.core.errors import StageError
from pipeline.core.workspace import Workspace
from pipeline.episodes.lift import commitment_instant, week_index
from pipeline.episodes.stage import build_episodes, read_episodes
from pipeline.release.stage import build_release
from pipeline.runtime.simulator import slot_keywords
from pipeline.tasks.probes import MINUTE, grid_point, grid_rules
from tests.helpers import REPO, run_cli

WS = Workspace.from_root(REPO)
AUDIT, LIFTS, FAMILIES = load_audit_config(WS), load_episodes_config(WS), load_families(WS)
KEYWORDS = slot_keywords(LIFTS)


def week_of(episode) -> int:
    return int(week_index(commitment_instant([c.model_dump() for c in episode.phases[-1].canonical_calls])))


@pytest.fixture(scope="session")
def candidates(real_artifacts):
    return read_episodes(real_artifacts / "xai4heat" / "episodes")


@pytest.mark.parametrize("corpus", ["xai4heat", "hhw"])
def test_every_gate_holds_on_the_shipped_corpora(real_artifacts, corpus):
    report = json.loads(run_cli(real_artifacts, "audit", "--corpus", corpus, "--json").output)
    assert report["gates_ok"] and set(report["gates"].values()) == {"pass"}, report["gates"]
    policies = report["policies"]
    assert set(policies) == {p.name for p in AUDIT.policies}
    for name, entry in policies.items():
        assert {"kind", "lacks", "gate", "won_candidates", "won_released"} <= set(entry), name
        gate = entry["gate"]
        if gate.get("accuracy") is not None:  # the release's own bound: the margin, or 2 standard errors when more
            bound = allowed_margin(gate["majority"], gate["rows"], AUDIT.gates)
            assert gate["margin"] == bound and gate["accuracy"] <= gate["majority"] + bound, (name, gate)
    assert policies["canned_clarification"]["gate"]["won"] == 0  # no released row that needs clarify
    assert policies["canned_clarification"]["gate"]["positive_control"]["ok"]
    grid = policies["grid_rules"]["gate"]
    assert grid["rows"] > 0 and grid["share"] <= AUDIT.gates.grid_rule_max_share
    assert set(grid["won_by_rule"]) == {f"{m} min, {r}" for m, r in grid_rules(FAMILIES.grid_minutes)}
    mix = report["commitment_mix_gate"]
    for split, shares in [*mix["per_split"].items(), ("corpus", report["commitment_mix"])]:
        assert all(abs(shares[o] - LIFTS.outcome_shares[o]) <= LIFTS.mix_tolerance + 1e-9 for o in shares), split
    for name in ("quality_blind", "majority_commitment"):  # committing the train majority wins no more than its share
        gate = policies[name]["gate"]
        assert (
            gate["commits"] == "answer"
            and gate["share"] <= LIFTS.outcome_shares["answer"] + AUDIT.gates.majority_margin
        )
        assert policies[name]["won_candidates"] > 0  # the positive control: the strategy wins something
    release = json.loads((real_artifacts / corpus / "release" / "release.json").read_text())
    assert set(release["gates"]) == set(report["gates"]) and all(
        g["status"] == "pass" for g in release["gates"].values()
    )
    card = (real_artifacts / corpus / "release" / "README.md").read_text()
    assert "| week_memory | accuracy on the commitments <= majority share + margin |" in card


@pytest.mark.parametrize("corpus", ["xai4heat", "hhw"])
def test_no_week_holds_more_than_the_cap_of_one_outcome(real_artifacts, corpus):
    """Outages span weeks: released rows sharing a week and an outcome are capped, so that the week's other rows
    do not tell a row's outcome (leave-one-out week majority no better than the majority share + margin)."""
    rows = [e for e in read_episodes(real_artifacts / corpus / "audit") if e.phases[-1].type == "commitment"]
    per_week = Counter((e.split, week_of(e), e.commitment_outcome) for e in rows)
    assert max(per_week.values()) <= LIFTS.commit_week_cap
    weeks = defaultdict(list)
    for e in rows:
        weeks[week_of(e)].append(e.commitment_outcome)
    overall = Counter(e.commitment_outcome for e in rows).most_common(1)[0]
    hits = 0
    for outcomes in weeks.values():
        for i, outcome in enumerate(outcomes):
            rest = Counter(outcomes[:i] + outcomes[i + 1 :])
            guess = max(sorted(rest), key=lambda k: rest[k]) if rest else overall[0]
            hits += guess == outcome
    assert hits / len(rows) <= overall[1] / len(rows) + AUDIT.gates.margin


def test_the_week_cap_is_counted_per_split(real_artifacts):
    """daiad splits by household, so every split shares calendar weeks: counted over the corpus, a week filled in
    train told a test row's outcome (the outcome with the fewest train and dev rows of its week won 0.513 of the test
    rows against a majority of 0.421). Each split now has its own cap per week and outcome, and the week complement
    is within the gate's margin of the majority on every split it gates."""
    folder = real_artifacts / "daiad"
    caps = json.loads((folder / "episodes" / "manifest.json").read_text())["details"]["commit_week_caps"]
    assert set(caps) == set(SPLITS)
    rows = read_episodes(folder / "episodes")
    per_split = Counter((e.split, week_of(e), e.commitment_outcome) for e in rows)
    assert all(n <= caps[split][outcome] for (split, _, outcome), n in per_split.items())
    over_corpus = Counter((week_of(e), e.commitment_outcome) for e in rows)
    assert max(over_corpus.values()) > max(max(c.values()) for c in caps.values())  # the splits' caps add up
    gate = json.loads((folder / "audit" / "manifest.json").read_text())["details"]["policies"]["week_complement"]
    test = gate["gate"]["per_split"]["test"]
    assert test["status"] == "pass" and test["accuracy"] <= test["majority"] + test["margin"], test


def test_a_tighter_week_cap_is_kept_and_every_outcome_stays(real_artifacts, tmp_path):
    folder = real_artifacts / "hhw"
    cfg = LIFTS.model_copy(update={"commit_week_cap": 1})
    result = build_episodes(folder / "store", folder / "tasks", FAMILIES, cfg, load_answers(WS), tmp_path)
    rows = read_episodes(tmp_path)
    assert rows and max(Counter((e.split, week_of(e), e.commitment_outcome) for e in rows).values()) == 1
    assert min(result.details["commitment_shares"].values()) > 0  # the audit trims the mix; each outcome must be there
    assert any("its commitment week is full" in reason for reason in result.details["dropped"])


def test_guessers_remember_only_the_other_splits(candidates):
    guesser = Guesser("week_memory", candidates, LIFTS, AUDIT.guessers)
    for split in SPLITS:
        others = Counter(
            e.commitment_outcome for e in candidates if e.split != split and e.phases[-1].type == "commitment"
        )
        assert guesser.memory[split].overall == others


def test_week_memory_recalls_a_week_it_has_seen(candidates):
    """A positive control: remembering the rows' own weeks, the week memory tells the outcome of pure weeks."""
    rows = [e for e in candidates if e.phases[-1].type == "commitment"]
    memory = Memory(rows, LIFTS)
    pure = [e for e in rows if len(memory.weeks[week_of(e)]) == 1]
    at = commitment_instant([c.model_dump() for c in pure[0].phases[-1].canonical_calls])
    assert pure and all(
        memory.by_week(
            at if e is pure[0] else commitment_instant([c.model_dump() for c in e.phases[-1].canonical_calls]), 0
        )
        == e.commitment_outcome
        for e in pure
    )


def test_surface_guesser_commits_without_reading_quality(xai_store, candidates):
    guesser = Guesser("surface_guess", candidates, LIFTS, AUDIT.guessers)
    policy = ShortcutPolicy(
        "surface_guesser", "commitment_lookup", xai_store, FAMILIES, LIFTS, kind="surface_guess", guesser=guesser
    )
    decisions = Counter()
    for episode in candidates[:40]:
        score, decision = play(policy, episode, xai_store, KEYWORDS)
        assert decision in ("answer", "abstain", "re_clarify"), episode.id
        decisions[decision == episode.commitment_outcome] += 1
        assert score.temporal or not score.phase_results[-1]  # it looks up as told; only its decision is a guess
    assert decisions[True] and decisions[False]


def test_grid_rules_look_up_where_their_rule_puts_the_probe():
    probe = 1_700_000_000_000_000 + 7 * MINUTE + 5_000_000  # 22:20 + 7 min 5 s, in us
    assert grid_point(probe, 15, "down") == probe - (probe % (15 * MINUTE))
    assert grid_point(probe, 15, "up") == grid_point(probe, 15, "down") + 15 * MINUTE
    assert grid_point(probe, 15, "nearest") == grid_point(probe, 15, "down")
    assert grid_point(probe, 3, "nearest") == grid_point(probe, 3, "up")
    exact = grid_point(probe, 60, "down")
    assert {grid_point(exact, m, r) for m, r in grid_rules([3, 15, 60])} == {exact}


def test_a_grid_rule_finds_a_nearest_reading_on_its_grid(real_artifacts):
    """A positive control: on a row whose nearest readings lie on a grid, some rule answers every nearest lookup
    right, where exact lookups alone do not."""
    from pipeline.tools.access import ToolStore

    store = ToolStore(real_artifacts / "hhw" / "store" / "store.duckdb")
    try:
        rows = read_episodes(real_artifacts / "hhw" / "audit")
        players = [
            ShortcutPolicy("grid_rules", "nearest", store, FAMILIES, LIFTS, kind="grid_rules", rule=r)
            for r in grid_rules(FAMILIES.grid_minutes)
        ]
        exact = ShortcutPolicy("exact_only", "nearest", store, FAMILIES, LIFTS)
        found = 0
        for episode in (e for e in rows if "nearest" in required_capabilities(e, AUDIT)):
            lookups = phases_needing(episode, "nearest", AUDIT)
            if any(all(play(p, episode, store, KEYWORDS)[0].phase_results[i] for i in lookups) for p in players):
                found += 1
                assert not all(play(exact, episode, store, KEYWORDS)[0].phase_results[i] for i in lookups)
        assert found > 0
    finally:
        store.close()


def test_canned_question_wins_its_fixture_and_no_released_row(xai_store, candidates, real_artifacts):
    capable = ShortcutPolicy("capable", "nothing", xai_store, FAMILIES, LIFTS)
    fixture = both_withheld(
        candidates, xai_store, LIFTS, lambda e: play(capable, e, xai_store, KEYWORDS)[0].accomplished
    )
    assert fixture is not None and [w.slot for w in fixture.withheld] == ["site", "time"]
    assert xai_store.sites[fixture.site_ids[0]]["label"] not in fixture.initial_message
    canned = ShortcutPolicy("canned_clarification", "clarify", xai_store, FAMILIES, LIFTS, kind="canned_clarification")
    assert play(canned, fixture, xai_store, KEYWORDS)[0].accomplished
    targeted = ShortcutPolicy("single_pass", "clarify", xai_store, FAMILIES, LIFTS)
    assert not play(targeted, fixture, xai_store, KEYWORDS)[0].accomplished
    released = read_episodes(real_artifacts / "xai4heat" / "audit")
    assert all(len(e.withheld) <= 1 for e in released)
    assert not any(play(canned, e, xai_store, KEYWORDS)[0].accomplished for e in released if e.withheld)


def test_release_refuses_a_failed_gate(tmp_path):
    mapping = load_mapping(WS.corpus_config("xai4heat"))
    upstream = {
        "audit": {"details": {"gates": {"artifact_probe": "fail", "week_memory": "pass", "grid_rules": "fail"}}}
    }
    with pytest.raises(StageError) as failed:
        build_release(mapping, tmp_path, tmp_path, upstream, tmp_path, "v", {}, {}, categories={}, card_license={})
    message = str(failed.value)
    assert (
        "\n" not in message
        and "artifact_probe, grid_rules" in message
        and "telemetry-bench audit --corpus xai4heat" in message
    )
    assert not list(tmp_path.iterdir())


def test_release_refuses_rows_that_break_the_answer_contract(tmp_path):
    """Gates passing is not enough: a preflight issue on any audited row (a label that says "household household")
    or a row the oracle does not accomplish stops the release in one line naming the checks."""
    mapping = load_mapping(WS.corpus_config("xai4heat"))
    controls = {
        "preflight_issue_count": 3,
        "preflight_failed_checks": {"doubled_word": 3},
        "oracle_accomplished_released": 10,
        "oracle_all_released": True,
    }
    upstream = {"audit": {"details": {"gates": {"artifact_probe": "pass"}, "released": 10, "controls": controls}}}
    with pytest.raises(StageError) as failed:
        build_release(mapping, tmp_path, tmp_path, upstream, tmp_path, "v", {}, {}, categories={}, card_license={})
    message = str(failed.value)
    assert "\n" not in message and "preflight issues: 3 (doubled_word 3)" in message
    assert "telemetry-bench preflight --corpus xai4heat" in message and not list(tmp_path.iterdir())
    unplayed = {**controls, "preflight_issue_count": 0, "preflight_failed_checks": {}, "oracle_all_released": False}
    upstream["audit"]["details"]["controls"] = {**unplayed, "oracle_accomplished_released": 9}
    with pytest.raises(StageError, match="oracle accomplished 9 of 10"):
        build_release(mapping, tmp_path, tmp_path, upstream, tmp_path, "v", {}, {}, categories={}, card_license={})


def test_release_refuses_an_empty_test_split(tmp_path):
    """Gates passing on a short corpus can still leave the test split empty after the audit's trims: such a release
    scores nothing, so it is refused in one line that says what each split holds and what to change."""
    mapping = load_mapping(WS.corpus_config("xai4heat"))
    controls = {"preflight_issue_count": 0, "oracle_accomplished_released": 7, "oracle_all_released": True}
    details = {"gates": {"artifact_probe": "pass"}, "released": 7, "controls": controls}
    upstream = {"audit": {"details": details, "row_counts": {"train": 5, "dev": 2, "test": 0}}}
    with pytest.raises(StageError) as failed:
        build_release(mapping, tmp_path, tmp_path, upstream, tmp_path, "v", {}, {}, categories={}, card_license={})
    message = str(failed.value)
    assert "\n" not in message and "the test split is empty after the audit (train 5, dev 2)" in message
    assert "[splits] shares" in message and not list(tmp_path.iterdir())


@pytest.mark.slow
def test_build_says_when_a_gate_has_too_few_rows(tmp_path):
    from click.testing import CliRunner

    from pipeline.cli import main
    from tests.helpers import tiny_workspace

    ws = tiny_workspace(tmp_path / "project")
    audit = ws.root / "configs" / "audit.toml"
    audit.write_text(audit.read_text().replace("min_rows = 60", "min_rows = 100000"))
    result = CliRunner().invoke(main, ["--root", str(ws.root), "build", "--corpus", "xai4heat", "--verbose"])
    assert result.exit_code == 0, result.output
    assert "xai4heat     audit      note: artifact_probe: insufficient_rows (" in result.output
    assert "released commitments, fewer than 100000): not gated" in result.output
    assert "note: week_memory: insufficient_rows" in result.output
    release = json.loads((ws.artifacts_dir / "xai4heat" / "release" / "release.json").read_text())
    assert release["gates"]["surface_guesser"]["status"] == "insufficient_rows"
    # without --verbose: one short line of information per stage, and the summary says which gates decided nothing
    quiet = CliRunner().invoke(main, ["--root", str(ws.root), "build", "--corpus", "xai4heat"])
    assert quiet.exit_code == 0, quiet.output
    assert "note:" not in quiet.output
    assert (
        "xai4heat     audit      info: 5 notes (artifact_probe; surface_guesser; week_memory; clock; week_complement): "
        "telemetry-bench audit --corpus xai4heat, or build --verbose" in quiet.output
    )
    counts = release["counts"]["split"]
    assert (
        f"  xai4heat     released {sum(counts.values()):>4} rows: {counts['train']} train / {counts['dev']} dev / "
        f"{counts['test']} test; gates pass (5 of " in quiet.output
    )
    assert "next:\n  telemetry-bench run --corpus xai4heat --split test --agent oracle" in quiet.output


@pytest.mark.parametrize("corpus", ["xai4heat", "hhw", "ucam", "daiad"])
def test_answers_with_few_codes_are_balanced_and_counted_by_the_preflight(real_artifacts, corpus):
    """No value of a verdict an agent could guess blind is more than balance_max_share of a split's rows of it (the
    preference was "first" in 14 of 15 test rows, and daiad's "second" in 7 of 8), and the audit records the
    preflight's count of the balanced answers and the gate."""
    from pipeline.runtime.preflight import balance_counts, unbalanced_verdicts

    rows = read_episodes(real_artifacts / corpus / "audit")
    counts = balance_counts(rows, LIFTS)
    assert set(counts) == set(LIFTS.balanced_answers) == {"prefer", "decide_quality"}
    assert unbalanced_verdicts(rows, LIFTS) == []
    for split in SPLITS:
        for codes in balance_counts([e for e in rows if e.split == split], LIFTS).values():
            total = sum(codes.values())
            slack = 0 if total >= LIFTS.balance_min_rows else 1
            assert not codes or max(codes.values()) <= LIFTS.balance_max_share * total + slack, (split, codes)
    audit = json.loads((real_artifacts / corpus / "audit" / "manifest.json").read_text())["details"]
    assert audit["balanced_answers"] == counts
    assert audit["gates"]["answer_balance"] == "pass" and audit["answer_balance_gate"]["unbalanced"] == []
    for row in rows:  # a preference is asked only where one window's data are better: never "first" by a tie
        for phase in row.phases:
            if phase.type == "preference":
                assert phase.gold["preferred"] in ("first", "second")


def test_one_code_over_the_share_is_trimmed_and_a_tie_prefers_nothing(real_artifacts):
    from pipeline.audit.stage import trim_to_mix
    from pipeline.episodes.rules import over_share, preferred_window

    assert over_share({"first": 14, "second": 1}, 0.6, 8) == "first"
    assert over_share({"first": 6, "second": 4}, 0.6, 8) is None  # 0.6 is the bound itself
    assert over_share({"second": 7, "first": 1}, 0.6, 8) == "second"  # daiad's test split before issue 51
    assert over_share({"first": 5, "second": 2}, 0.6, 8) is None  # below min_rows: within one row (5.2)
    assert over_share({"first": 7}, 0.6, 8) == "first" and over_share({"first": 2}, 0.6, 8) is None
    healthy = {"coverage": 1.0, "gap_ratio": 1.0}
    assert preferred_window([healthy], [dict(healthy)]) is None
    assert preferred_window([healthy], [{"coverage": 0.5, "gap_ratio": 1.0}]) == "first"
    assert preferred_window([{"coverage": 0.9, "gap_ratio": 3.0}], [healthy]) == "second"

    rows = read_episodes(real_artifacts / "hhw" / "audit")
    prefer = [e for e in rows if any(p.type == "preference" for p in e.phases)]
    firsts = [e for e in prefer if any(p.gold.get("preferred") == "first" for p in e.phases)]
    # a release whose preferences are all "first": the trim leaves out "first" rows until the corpus has at most two
    # (0.6 of two rows, within one row)
    skewed = [e for e in rows if e not in prefer or e in firsts]
    kept, _, balanced = trim_to_mix(skewed, LIFTS.outcome_shares, LIFTS.mix_tolerance, LIFTS)
    left = [e for e in kept if any(p.type == "preference" for p in e.phases)]
    assert len(left) <= 2 and balanced["prefer"] == {"first": len(firsts) - len(left)}
