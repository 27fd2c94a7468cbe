"""Families are data: a family declared in configuration alone builds, and the oracle scores 1.0 on it; a family whose
declarations are missing or do not fit its lift fails at config load with one line naming file, family and field."""

from __future__ import annotations

import json

import pytest

from pipeline.core.config import load_episodes_config, load_families
from pipeline.core.errors import ConfigError
from pipeline.core.workspace import Workspace
from pipeline.harness.build import build
from pipeline.harness.play import run_agent
from tests.helpers import tiny_workspace

# The highest reading of one stream in one calendar month, answered in a field no other family has: no code knows this
# family or its answer field, only these declarations.
MONTH_FAMILY = '''
[families.month_max_lookup]
description = "The highest reading of one stream in one UTC calendar month."
definition = "The largest of the stream's readings whose time lies in the UTC calendar month."
category = "Data Query"
period = "month"
time_columns = ["window_start", "window_end"]
candidates = """
SELECT a.stream_id, s.site_id, s.point_class, s.equipment, s.ambiguity_count, a.window_start, a.window_end, a.max,
       a.coverage, a.min < a.max AS varies, [s.site_id] AS sites, [a.stream_id] AS streams
FROM aggregates a JOIN streams s USING (stream_id)
WHERE a.period = 'month'
"""
predicates = [
  { name = "unambiguous", sql = "ambiguity_count = 1" },
  { name = "coverage_at_least_p10", sql = "coverage >= {coverage_abstain}" },
  { name = "values_vary_in_window", sql = "varies" },
]
key = ["stream_id", "window_start"]
balance_key = ["point_class"]
cap_fraction = 0.5
cap_per_stream = 3
answer_fields = ["max"]
templates = ["What was the highest {phrase} in {month_name} (UTC)?"]

[families.month_max_lookup.canonical]
gold = { max = { ref = "$c2.value" } }

[[families.month_max_lookup.canonical.calls]]
id = "c1"
tool = "resolve_point"
arguments = { site = "{site_id}", point_class = "{point_class}", equipment = "{equipment}" }

[[families.month_max_lookup.canonical.calls]]
id = "c2"
tool = "aggregate_window"
[families.month_max_lookup.canonical.calls.arguments]
stream_id = "$c1.stream_id"
window_start = "{window_start_iso}"
window_end = "{window_end_iso}"
period = "month"
metric = "max"
'''

MAX_FIELD = """
[fields.max]
type = "number"
unit = "stream"
description = "The highest reading of the stream in the window, as aggregate_window returns it with metric max."
"""

MONTH_LIFT = """
[families.month_max_lookup]
phase = "aggregate"
withhold = "time"
time_reply = "I mean {month_name} (UTC)."
initial = [
  "What was the monthly maximum of the {phrase}?",
  "Give me the highest {phrase} over one month.",
  "I need the month's peak {phrase} for a month I'm reviewing.",
  "How high did the {phrase} get in one particular month?",
  "Pull the monthly maximum of the {phrase} for me, please.",
  "For a month I have in mind, what was the highest {phrase}?",
]
revision = "revise_window"
revision_prompts = [
  "And the {direction} month, {month_name} (UTC)?",
  "Same for {month_name} (UTC), please.",
  "Now {month_name} (UTC).",
  "What about the {direction} month ({month_name}, UTC)?",
]
commit_target = "window"
follow_ups = ["evidence"]
"""


def _declare(ws: Workspace, family: str = MONTH_FAMILY, lift: str = MONTH_LIFT) -> None:
    for name, text in (("families.toml", family), ("episodes.toml", lift), ("answers.toml", MAX_FIELD)):
        path = ws.configs_dir / name
        path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")


@pytest.mark.slow
def test_a_family_declared_in_configuration_alone_builds_and_the_oracle_scores_one(tmp_path):
    ws = tiny_workspace(tmp_path / "project")
    (ws.configs_dir / "corpora" / "hhw.toml").unlink()  # one corpus is enough
    _declare(ws)
    build(ws, ["xai4heat"], until="audit")
    played = 0
    for split in ("train", "dev", "test"):
        rows = [
            json.loads(line) for line in (ws.stage_dir("xai4heat", "audit") / f"{split}.jsonl").read_text().splitlines()
        ]
        ours = [row for row in rows if row["family"] == "month_max_lookup"]
        if not ours:
            continue
        summary = run_agent(ws, "xai4heat", split, "oracle", 1, tmp_path / f"{split}.jsonl")
        assert summary["per_family"]["month_max_lookup"] == 1.0, summary
        assert summary["final"] == 1.0 and summary["accomplished_rate"] == 1.0, summary
        played += len(ours)
    assert played >= 3  # the new family reached the audited episodes, with month windows and their revisions


@pytest.mark.parametrize("field", ["category", "definition"])
def test_a_family_without_a_required_field_fails_at_load(tmp_path, field):
    ws = tiny_workspace(tmp_path / "project")
    _declare(ws, MONTH_FAMILY.replace(f"{field} = ", f"# {field} = "))
    with pytest.raises(ConfigError) as failed:
        load_families(ws)
    message = str(failed.value)
    assert "\n" not in message and "families.toml" in message and f"families.month_max_lookup.{field}" in message
    assert f"add `{field} = ...`" in message


def test_a_family_without_a_lift_fails_at_load(tmp_path):
    ws = tiny_workspace(tmp_path / "project")
    _declare(ws, lift="")
    with pytest.raises(ConfigError) as failed:
        load_episodes_config(ws)
    message = str(failed.value)
    assert "\n" not in message and "episodes.toml" in message and "families.month_max_lookup" in message
    assert "add [families.month_max_lookup]" in message


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (('commit_target = "window"', 'commit_target = "timestamp"'), "commit_target"),
        (
            (
                'follow_ups = ["evidence"]',
                'prefer = true\nprefer_prompt = "Which month would you trust more?"\nfollow_ups = ["evidence"]',
            ),
            "prefer",
        ),
        (('revision = "revise_window"', 'revision = "probe_nearest"'), "revision"),
    ],
)
def test_a_lift_the_family_cannot_carry_fails_at_load(tmp_path, edit, field):
    ws = tiny_workspace(tmp_path / "project")
    _declare(ws, lift=MONTH_LIFT.replace(*edit))
    with pytest.raises(ConfigError) as failed:
        load_episodes_config(ws)
    message = str(failed.value)
    assert "\n" not in message and f"families.month_max_lookup.{field}:" in message


def test_commit_stream_must_name_a_gold_field(tmp_path):
    ws = tiny_workspace(tmp_path / "project")
    _declare(ws, MONTH_FAMILY.replace('period = "month"\n', 'period = "month"\ncommit_stream = "top_stream_id"\n'))
    with pytest.raises(
        ConfigError,
        match=r"families\.month_max_lookup: .*commit_stream 'top_stream_id' is not a field of canonical\.gold",
    ):
        load_families(ws)
