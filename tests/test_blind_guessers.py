"""The clock and week-complement guessers on small synthetic episode sets (a set built to leak is caught, a balanced one
passes), and the per-split balance of the verdicts an agent could guess blind: trimmed to it, and the release refused
in one line when a split breaks it (issue 51)."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from zoneinfo import ZoneInfo

import pytest

from contracts.episodes import Episode
from pipeline.audit.guessers import Guesser, clock, commitment_clock
from pipeline.audit.stage import _scored
from pipeline.audit.trim import answer_balance_gate, trim_to_mix
from pipeline.core.config import load_audit_config, load_episodes_config, load_mapping
from pipeline.core.errors import StageError
from pipeline.core.workspace import Workspace
from pipeline.episodes.lift import commitment_instant
from pipeline.release.stage import build_release
from pipeline.tools.timeutil import format_us
from tests.helpers import REPO

WS = Workspace.from_root(REPO)
AUDIT, LIFTS = load_audit_config(WS), load_episodes_config(WS)
HOUR, DAY = 3_600_000_000, 86_400_000_000
MONDAY = int(datetime(2024, 1, 1, tzinfo=UTC).timestamp() * 1_000_000)  # 2024-01-01 is a Monday
SHARES = ["answer"] * 4 + ["abstain"] * 3 + ["re_clarify"] * 3  # the declared 0.4 / 0.3 / 0.3, in a cycle of ten
REASONS = {"answer": "exact_timestamp", "abstain": "long_gap", "re_clarify": "timestamp_too_imprecise"}


@pytest.fixture(scope="session")
def template() -> Episode:
    """A shipped row whose commitment asks about a reading: the synthetic rows are copies of it."""
    for line in (REPO / "artifacts" / "xai4heat" / "release" / "train.jsonl").read_text().splitlines():
        episode = Episode.model_validate_json(line)
        if any(c.tool == "lookup_observation" for c in episode.phases[-1].canonical_calls):
            return episode
    raise AssertionError("no shipped xai4heat row commits on a reading")


def row(template: Episode, n: int, split: str, outcome: str, at: int) -> Episode:
    """A copy of the template in `split` whose commitment asks about the reading at `at` and has gold `outcome`."""
    commit = template.phases[-1]
    calls = [
        c.model_copy(update={"arguments": {**c.arguments, "timestamp": format_us(at)}})
        if c.tool == "lookup_observation"
        else c
        for c in commit.canonical_calls
    ]
    gold = {**commit.gold, "decision": outcome, "reason": REASONS[outcome]}
    phases = [*template.phases[:-1], commit.model_copy(update={"canonical_calls": calls, "gold": gold})]
    return template.model_copy(
        update={"id": f"{split}.{n}", "split": split, "commitment_outcome": outcome, "phases": phases}
    )


def scores(kind: str, rows: list[Episode], zone: str = "UTC") -> dict[str, dict]:
    """The guesser's figures (accuracy, majority, margin, status) over all rows and per split, as the gate has them."""
    guesser = Guesser(kind, rows, LIFTS, AUDIT.guessers, lambda _: zone)
    decisions = {}
    for e in rows:
        at = commitment_instant([c.model_dump() for c in e.phases[-1].canonical_calls])
        when = commitment_clock(e, lambda _: zone)
        decisions[e.id] = guesser.guess(e.split, e.family, {}, at, when)[0]
    figures = {"all": _scored(rows, decisions, AUDIT.gates)}
    for split in ("train", "dev", "test"):
        figures[split] = _scored([e for e in rows if e.split == split], decisions, AUDIT.gates)
    return figures


def clock_rows(template: Episode, leaky: bool, zone: str = "UTC") -> list[Episode]:
    """Readings at every hour of ten days per split. Leaky: the outcome follows the local hour (night abstain, day
    answer, evening re_clarify). Balanced: every hour has the same outcomes (the declared shares, by day)."""
    rows, local = [], ZoneInfo(zone)
    for split, days in (("train", range(0, 10)), ("dev", range(10, 20)), ("test", range(20, 30))):
        for day in days:
            for hour in range(24):
                moment = datetime(2024, 1, 1 + day, hour, 30, tzinfo=local)
                at = int(moment.timestamp() * 1_000_000)
                outcome = (
                    ("abstain" if hour < 8 else "answer" if hour < 16 else "re_clarify") if leaky else SHARES[day % 10]
                )
                rows.append(row(template, len(rows), split, outcome, at))
    return rows


def test_the_clock_reads_the_local_hour_and_weekday():
    at = MONDAY + 23 * HOUR  # Monday 23:00 UTC is Tuesday 00:00 in Madrid (winter, UTC+1)
    assert clock(at, "UTC", True) == ("instant", 23, 0)
    assert clock(at, "Europe/Madrid", True) == ("instant", 0, 1)
    assert clock(at, "Europe/Madrid", False) == ("week",)  # a week's commitment has no hour


@pytest.mark.parametrize("zone", ["UTC", "Europe/Madrid"])
def test_the_clock_catches_outcomes_that_follow_the_local_hour(template, zone):
    figures = scores("clock", clock_rows(template, leaky=True, zone=zone), zone)
    assert figures["all"]["status"] == "fail" and figures["test"]["status"] == "fail", figures
    assert figures["test"]["accuracy"] == 1.0  # fit on train, the hour tells every test row


def test_the_clock_is_at_the_majority_when_the_hour_tells_nothing(template):
    figures = scores("clock", clock_rows(template, leaky=False))
    assert all(f["status"] == "pass" for f in figures.values()), figures
    assert figures["test"]["accuracy"] == figures["test"]["majority"]  # every hour's majority is the overall one


def week_rows(template: Episode, leaky: bool) -> list[Episode]:
    """Twenty weeks shared by the splits. Leaky, as a corpus-wide cap of two rows per week and outcome made it: train
    and dev fill two outcomes of each week, and the test row of the week has the third. Balanced: each split's week has
    one row of each outcome in train and dev, and test rows follow the declared shares whatever the week."""
    rows = []
    outcomes = ("answer", "abstain", "re_clarify")
    for week in range(20):
        at = MONDAY + week * 7 * DAY + 10 * HOUR
        missing = outcomes[week % 3]
        for split in ("train", "dev"):
            kept = [o for o in outcomes if o != missing] if leaky else list(outcomes)
            rows += [row(template, len(rows), split, o, at + len(rows) * HOUR) for o in kept]
        rows.append(row(template, len(rows), "test", missing if leaky else SHARES[week % 10], at + DAY))
    return rows


def test_the_week_complement_catches_a_cap_counted_over_the_corpus(template):
    figures = scores("week_complement", week_rows(template, leaky=True))
    assert figures["test"]["accuracy"] == 1.0 and figures["all"]["status"] == "fail", figures


def test_the_week_complement_passes_weeks_whose_splits_say_nothing_of_each_other(template):
    figures = scores("week_complement", week_rows(template, leaky=False))
    assert figures["all"]["status"] == "pass", figures
    assert figures["test"]["accuracy"] <= figures["test"]["majority"]


def verdict_row(n: int, split: str, preferred: str | None, outcome: str = "answer"):
    """A row as the balance sees it: its phases' obligations and golds, its commitment outcome."""
    phases = (
        [SimpleNamespace(obligation="prefer", type="preference", gold={"preferred": preferred})] if preferred else []
    )
    commit = SimpleNamespace(obligation="commit", type="commitment", gold={"decision": outcome}, canonical_calls=[])
    return SimpleNamespace(
        id=f"{split}.{n}",
        split=split,
        site_ids=[f"s{n % 7}"],
        family="window_pairwise_compare",
        commitment_outcome=outcome,
        phases=[*phases, commit],
    )


def skewed_release() -> list:
    """daiad's test split before issue 51: the preference "second" in 7 of 8 rows; train and the corpus within 0.6."""
    rows = []
    for split, prefs in (("train", ["first"] * 12 + ["second"] * 8), ("test", ["second"] * 7 + ["first"])):
        for i, preferred in enumerate(prefs):
            rows.append(verdict_row(len(rows), split, preferred, SHARES[i % 10]))
        rows += [verdict_row(len(rows), split, None, SHARES[(i + 3) % 10]) for i in range(20)]
    return rows


def test_a_skewed_split_fails_the_balance_gate_in_one_line():
    gate = answer_balance_gate(skewed_release(), LIFTS)
    assert gate["status"] == "fail"
    assert gate["why"] == "split test: prefer 'second' in 7 of 8 rows (0.875), over 0.6", gate["why"]
    assert LIFTS.balance_max_share == 0.6 and LIFTS.balance_min_rows == 8  # configs/episodes.toml, the one home


def test_the_release_refuses_an_unbalanced_split_in_one_line(tmp_path):
    mapping = load_mapping(WS.corpus_config("daiad"))
    gate = answer_balance_gate(skewed_release(), LIFTS)
    upstream = {"audit": {"details": {"gates": {"answer_balance": "fail"}, "answer_balance_gate": gate}}}
    with pytest.raises(StageError) as failed:
        build_release(mapping, tmp_path, tmp_path, upstream, tmp_path, "v", {}, {}, categories={}, card_license={})
    message = str(failed.value)
    assert "\n" not in message and message.startswith("daiad: the release gates failed (answer_balance;")
    assert "split test: prefer 'second' in 7 of 8 rows (0.875), over 0.6: refused" in message
    assert not list(tmp_path.iterdir())


def test_the_trim_balances_every_split_and_the_gate_then_passes():
    kept, _, balanced = trim_to_mix(skewed_release(), LIFTS.outcome_shares, LIFTS.mix_tolerance, LIFTS)
    assert answer_balance_gate(kept, LIFTS)["status"] == "pass"
    test = [e for e in kept if e.split == "test" and len(e.phases) == 2]
    seconds = sum(e.phases[0].gold["preferred"] == "second" for e in test)
    slack = 0 if len(test) >= LIFTS.balance_min_rows else 1  # within one row below min_rows
    assert seconds <= LIFTS.balance_max_share * len(test) + slack
    assert list(balanced) == ["prefer"] and list(balanced["prefer"]) == ["second"]  # only "second" rows left out
    assert [e.id for e in kept if e.split == "train"] == [e.id for e in skewed_release() if e.split == "train"]
