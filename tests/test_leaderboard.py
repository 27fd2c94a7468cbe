"""The leaderboard file (issue 41): one row per agent identity, corpus and split, valid against its schema, with
bootstrap intervals that are the same on every run; a trace scored on another episode set is refused from the
ranking with its reason; partial traces are listed, never ranked."""

from __future__ import annotations

import csv
import io
import json

import jsonschema
import numpy as np
import pytest

from pipeline.harness.leaderboard import bootstrap_interval
from pipeline.harness.traces import load_episodes
from tests.fake_providers import GoldServer
from tests.helpers import REPO, run_cli

SCHEMA = json.loads((REPO / "contracts" / "schemas" / "leaderboard.schema.json").read_text())


def _play(artifacts, out, agent, *args):
    result = run_cli(
        artifacts, "run", "--corpus", "xai4heat", "--split", "test", "--agent", agent, "--out", str(out), *args
    )
    assert result.exit_code == 0, result.output
    return out


def _half_right(oracle, out, agent):
    """The oracle's trace as another agent that gives no answer in every other episode: some episodes fail."""
    lines = [json.loads(line) for line in oracle.read_text().splitlines()]
    header, records = lines[0], lines[1:]
    episodes = sorted({r["episode_id"] for r in records})
    dropped = set(episodes[::2])
    kept = [
        r
        for r in records
        if not (r["episode_id"] in dropped and r["type"] == "turn" and r["action"] and r["action"]["kind"] == "answer")
    ]
    out.write_text("".join(json.dumps(r) + "\n" for r in [{**header, "agent": agent}, *kept]))
    return out


@pytest.fixture(scope="session")
def traces(real_artifacts, tmp_path_factory):
    folder = tmp_path_factory.mktemp("board")
    played = {
        agent: _play(real_artifacts, folder / f"{agent}.jsonl", agent) for agent in ("oracle", "noop", "controller")
    }
    played["half"] = _half_right(played["oracle"], folder / "half.jsonl", "half-right")
    episodes = load_episodes(real_artifacts / "xai4heat" / "audit" / "test.jsonl")
    with GoldServer(episodes, "vllm") as url:
        for model in ("model-a", "model-b"):
            played[model] = _play(
                real_artifacts, folder / f"{model}.jsonl", "openai", "--base-url", url, "--model", model
            )
    played["part"] = _play(real_artifacts, folder / "part.jsonl", "noop", "--limit", "4", "--repeat", "1")
    stale = [json.loads(line) for line in played["noop"].read_text().splitlines()]
    stale[0] = {**stale[0], "agent": "stale", "episode_set_hash": "0" * 32}
    played["stale"] = folder / "stale.jsonl"
    played["stale"].write_text("".join(json.dumps(r) + "\n" for r in stale))
    return folder, played


def test_the_board_is_valid_json_csv_and_markdown_and_ranks_what_it_may(real_artifacts, traces):
    folder, played = traces
    outs = [folder / "r.json", folder / "r.csv", folder / "r.md"]
    args = [str(p) for p in played.values()] + [a for o in outs for a in ("--out", str(o))]
    result = run_cli(real_artifacts, "leaderboard", *args)
    assert result.exit_code == 0, result.output
    board = json.loads(outs[0].read_text())
    jsonschema.validate(board, SCHEMA)
    rows = {r["identity"]["label"].split(" #")[0]: r for r in board["rows"]}
    assert set(rows) == {"oracle", "noop", "controller", "half-right", "openai model-a", "openai model-b"}
    ranks = {k: r["rank"] for k, r in rows.items()}
    assert ranks["oracle"] == 1 and ranks["openai model-a"] == ranks["openai model-b"]  # the same replies: a tie
    assert ranks["half-right"] == 4 and ranks["controller"] == 5
    half = rows["half-right"]
    assert 0 < half["interval"]["low"] < half["accomplished_rate"] < half["interval"]["high"] < 1
    assert rows["openai model-a"]["usage"]["tokens_in"] > 0
    # the partial noop trace is pooled with the full one (same identity): a run covers 4 episodes, so it is unranked
    assert rows["noop"]["partial"] and rows["noop"]["rank"] is None and rows["noop"]["least_covered"] == 4
    assert [r["trace"] for r in board["refused"]] == ["stale.jsonl"]
    assert "no longer is" in board["refused"][0]["reason"]
    with outs[1].open() as handle:
        table = list(csv.DictReader(handle))
    assert [r["identity"] for r in table] == [r["identity"]["label"] for r in board["rows"]]
    markdown = outs[2].read_text()
    assert "## xai4heat test" in markdown and "| 1 | oracle #" in markdown and "stale.jsonl" in markdown
    # issue 54: the failure-modes cell names the most frequent first and cuts none (a root cause was cut)
    for row in board["rows"]:
        (line,) = [line for line in markdown.splitlines() if f" {row['identity']['label']} |" in line]
        cell = line.rstrip(" |").rsplit(" | ", 2)[1]
        ranked = sorted(row["failure_modes"].items(), key=lambda kv: (-kv[1], kv[0]))
        expected = ", ".join(f"{k} {v}" for k, v in ranked)  # every mode, none cut
        assert cell == (expected or "-"), (cell, row["failure_modes"])
    assert any(len(r["failure_modes"]) > 1 for r in board["rows"])  # an order to get wrong
    # issue 53: every results file names the release each row was played on, in full
    digest = json.loads((real_artifacts / "xai4heat" / "release" / "release.json").read_text())["release_digest"]
    assert {r["release_digest"] for r in board["rows"]} == {digest}
    assert {r["release_digest"] for r in table} == {digest}
    assert f"- sha256:{digest[:12]}: sha256:{digest}" in markdown and f"| sha256:{digest[:12]} |" in markdown


def test_intervals_are_the_same_on_every_run(real_artifacts, traces):
    folder, played = traces
    for name in ("a.json", "b.json"):
        assert run_cli(real_artifacts, "leaderboard", str(played["half"]), "--out", str(folder / name)).exit_code == 0
    assert (folder / "a.json").read_bytes() == (folder / "b.json").read_bytes()
    other = run_cli(real_artifacts, "leaderboard", str(played["half"]), "--seed", "1", "--out", str(folder / "c.json"))
    assert other.exit_code == 0
    assert json.loads((folder / "c.json").read_text())["rows"][0]["interval"]["seed"] == 1


def test_a_partial_trace_is_listed_never_ranked(real_artifacts, traces):
    folder, played = traces
    result = run_cli(
        real_artifacts, "leaderboard", str(played["part"]), str(played["oracle"]), "--out", str(folder / "p.json")
    )
    assert result.exit_code == 0, result.output
    rows = json.loads((folder / "p.json").read_text())["rows"]
    part = next(r for r in rows if r["identity"]["agent"] == "noop")
    assert part["partial"] and part["rank"] is None and part["least_covered"] == 4
    assert next(r for r in rows if r["identity"]["agent"] == "oracle")["rank"] == 1


def test_bootstrap_interval_brackets_the_mean_and_needs_a_known_format(real_artifacts, traces, tmp_path):
    values = np.array([1.0] * 30 + [0.0] * 30)
    interval = bootstrap_interval(values, 2000, 0)
    assert interval["low"] < 0.5 < interval["high"] and interval == bootstrap_interval(values, 2000, 0)
    _, played = traces
    result = run_cli(real_artifacts, "leaderboard", str(played["oracle"]), "--out", str(tmp_path / "r.txt"))
    assert result.exit_code == 2 and "name a .json, .csv or .md file" in result.output


HOSTILE = (
    "a | b\n| injected | row |",
    "<script>alert(1)</script>",
    '=HYPERLINK("http://x","y")',
    "+1",
    "-1+2",
    "@SUM(A1)",
)


def test_agent_names_from_traces_cannot_add_rows_markup_or_formulas(real_artifacts, traces, tmp_path):
    # An agent name is whatever a trace header says (issue 53): it must stay one cell of one row, as text.
    _, played = traces
    hostile = [_half_right(played["oracle"], tmp_path / f"h{i}.jsonl", name) for i, name in enumerate(HOSTILE)]
    md, table = tmp_path / "r.md", tmp_path / "r.csv"
    result = run_cli(real_artifacts, "leaderboard", *map(str, hostile), "--out", str(md), "--out", str(table))
    assert result.exit_code == 0, result.output
    text = md.read_text(encoding="utf-8")
    assert "<script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| rank")]
    assert len(rows) == len(HOSTILE) and "a &#124; b &#124; injected &#124; row &#124;" in text
    assert all(row.count("|") == text.splitlines()[4].count("|") for row in rows)
    agents = sorted(r["agent"] for r in csv.DictReader(table.open(encoding="utf-8")))
    assert agents == sorted(f"'{n}" if n[0] in "=+-@" else n for n in HOSTILE)


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_a_csv_cell_starting_a_formula_is_text(start):
    """OWASP's CSV injection rule: a cell a spreadsheet would run (=, +, -, @, tab, CR first) gets a leading quote;
    numbers stay numbers, and the row stays one row."""
    from pipeline.harness.leaderboard import csv_text

    name = f'{start}cmd|"/c calc"!A1'
    (row,) = csv.DictReader(io.StringIO(csv_text(("agent", "rate"), [{"agent": name, "rate": -0.5}]), newline=""))
    assert row == {"agent": f"'{name}", "rate": "-0.5"}
