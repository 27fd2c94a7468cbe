"""Traces and ground-truth files are validated against their models where they are read (issue 44): `score`,
`evaluate`, `run --resume` and `validate-gt` refuse a damaged file in one line naming the file, the line, the field
and the fix, never with a traceback, never reading outside the artifacts folder, never dropping a record in silence."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from pydantic import BaseModel, ValidationError

from pipeline.cli import main
from pipeline.core.errors import validation_problems
from tests.helpers import REPO

RELEASE = REPO / "artifacts" / "xai4heat" / "release"
LIMIT = "8"  # test episodes played: enough for the oracle to ask the user once


@pytest.fixture(scope="session")
def played(tmp_path_factory) -> tuple[Path, Path]:
    """A copy of the shipped xai4heat release in an artifacts folder, and an oracle trace of the first test episodes,
    as many as it takes to hold a question to the user."""
    base = tmp_path_factory.mktemp("traces")
    shutil.copytree(RELEASE, base / "artifacts" / "xai4heat" / "release")
    trace = base / "oracle.jsonl"
    result = cli(
        base, "run", *on_release(base), "--split", "test", "--agent", "oracle", "--limit", LIMIT, "--out", trace
    )
    assert result.exit_code == 0, result.output
    assert ask_line(rows_of(trace)), f"no oracle question in the first {LIMIT} test episodes: play more"
    return base, trace


def cli(base: Path, *args: object) -> Result:
    return CliRunner().invoke(main, ["--root", str(REPO), "--artifacts", str(base / "artifacts"), *map(str, args)])


def on_release(base: Path) -> list[str]:
    return ["--release", str(base / "artifacts" / "xai4heat" / "release"), "--cache-dir", str(base / "cache")]


def one_error_line(result: Result, *fragments: str) -> str:
    """The command failed with exit status 1 and one `error:` line holding every fragment, and no traceback."""
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1 and lines[0].startswith("error: "), result.output
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def rows_of(trace: Path) -> list[dict]:
    return [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]


def written(path: Path, rows: list[dict], ascii_only: bool = True) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=ascii_only) + "\n" for r in rows), encoding="utf-8")
    return path


def damaged_copy(trace: Path, change: Callable[[list[dict]], object], path: Path) -> Path:
    """The trace's records changed in place by `change`, written to `path`."""
    rows = rows_of(trace)
    change(rows)
    return written(path, rows)


def first(rows: list[dict], kind: str) -> dict:
    return next(r for r in rows if r["type"] == "turn" and (r["action"] or {}).get("kind") == kind)


def ask_line(rows: list[dict]) -> int:
    """The line number of the trace's first question to the user."""
    return 1 + rows.index(first(rows, "ask_user"))


def _set(row: Callable[[list[dict]], dict], key: str, value: object) -> Callable[[list[dict]], None]:
    return lambda rows: row(rows).__setitem__(key, value)


def _ghost_first_episode(rows: list[dict]) -> None:
    """The first episode's records renamed to an episode no split holds (the first only: every episode renamed to
    one would repeat its turns, refused as repeats before the episode is looked up)."""
    renamed = rows[1]["episode_id"]
    for row in rows[1:]:
        if row["episode_id"] == renamed:
            row["episode_id"] = "ghost"


DAMAGE = {  # what is changed in a valid trace -> what the one error line names
    "answer fields as a list": (
        _set(lambda r: first(r, "answer")["action"], "fields", [1, 2]),
        ["action.answer.fields", "was it written by `telemetry-bench run`"],
    ),
    "a bogus split": (_set(lambda r: r[0], "split", "bogus"), ["line 1: split"]),
    "a corpus that is a path": (_set(lambda r: r[0], "corpus", "../../x"), ["line 1: corpus"]),
    "an episode set that is a path": (_set(lambda r: r[0], "episode_set", "../.."), ["line 1: episode_set"]),
    "an episode id that is a list": (_set(lambda r: r[1], "episode_id", ["a"]), ["line 2: episode_id"]),
    "a run of 0.5": (_set(lambda r: r[1], "run", 0.5), ["line 2: run"]),
    "a run beyond the header's repeat": (_set(lambda r: r[1], "run", 7), ["line 2: run", "repeat 1"]),
    "a question that is a number": (
        _set(lambda r: first(r, "ask_user")["action"], "text", 5),
        ["line {ask}: action.ask_user"],
    ),
    "a lone surrogate": (_set(lambda r: first(r, "ask_user")["action"], "text", "\ud800"), ["line {ask}", "surrogate"]),
    "a NaN": (_set(lambda r: r[1], "elapsed_ms", float("nan")), ["line 2", "NaN"]),
    "an unknown record type": (_set(lambda r: r[1], "type", "bogus"), ["line 2: not a trace record"]),
    "an episode of another split": (
        # the first episode only: every episode renamed to one would repeat its turns (refused as repeats)
        _ghost_first_episode,
        ["line 2: episode_id: 'ghost' is not an episode of"],
    ),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_trace_is_one_error_line_in_score_and_evaluate(played, tmp_path, damage):
    base, trace = played
    change, fragments = DAMAGE[damage]
    fragments = [f.replace("{ask}", str(ask_line(rows_of(trace)))) for f in fragments]
    damaged = damaged_copy(trace, change, tmp_path / "damaged.jsonl")
    one_error_line(cli(base, "score", damaged, "--release", base / "artifacts" / "xai4heat" / "release"), *fragments)
    one_error_line(cli(base, "evaluate", "--trace", damaged, *on_release(base)), *fragments)


def test_a_corpus_in_a_trace_is_a_name_never_a_path(played, tmp_path):
    # artifacts/../outside/release held a release: `score` read it, outside the artifacts folder
    base, trace = played
    shutil.copytree(RELEASE, tmp_path / "outside" / "release")
    rows = rows_of(trace)
    rows[0]["corpus"] = "../outside"
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    damaged = written(tmp_path / "escape.jsonl", rows)
    result = CliRunner().invoke(main, ["--root", str(REPO), "--artifacts", str(artifacts), "score", str(damaged)])
    one_error_line(result, "line 1: corpus")


def test_a_string_holding_a_line_separator_is_not_a_line_break(played, tmp_path):
    base, trace = played
    rows = rows_of(trace)
    question = first(rows, "ask_user")["action"]
    question["text"] = question["text"].replace(" ", "\u2028", 1)  # written as it is (ensure_ascii=False)
    kept = written(tmp_path / "separator.jsonl", rows, ascii_only=False)
    result = cli(base, "score", kept, "--release", base / "artifacts" / "xai4heat" / "release", "--json")
    assert result.exit_code == 0, result.output


GROUND_TRUTH = {  # what is changed in a valid trajectory -> what the one error line of `evaluate` names
    "steps that are not a list": (lambda t: t.__setitem__("execution_steps", {"x": 1}), "line 1: execution_steps"),
    "a step name that is a list": (
        lambda t: t["execution_steps"][0].__setitem__("name", ["c1"]),
        "line 1: execution_steps.0.name",
    ),
    "a link end that is a list": (
        lambda t: t["execution_links"][0].__setitem__("source", ["c1"]),
        "line 1: execution_links.0.source",
    ),
    "an episode id that is a list": (lambda t: t.__setitem__("episode_id", ["x"]), "line 1: episode_id"),
}


def trajectories() -> list[dict]:
    lines = (RELEASE / "ground_truth" / "test.jsonl").read_text(encoding="utf-8").split("\n")
    return [json.loads(line) for line in lines if line]


@pytest.mark.parametrize("damage", GROUND_TRUTH)
def test_damaged_ground_truth_is_one_error_line_in_evaluate(played, tmp_path, damage):
    base, trace = played
    change, fragment = GROUND_TRUTH[damage]
    rows = trajectories()
    change(rows[0])
    gt = written(tmp_path / "gt.jsonl", rows)
    one_error_line(cli(base, "evaluate", "--ground-truth", gt, "--trace", trace, *on_release(base)), fragment)


def test_validate_gt_names_what_is_wrong_and_walks_long_chains(tmp_path):
    rows = trajectories()
    rows[0]["execution_steps"][0]["name"] = ["c1"]
    result = CliRunner().invoke(main, ["validate-gt", str(written(tmp_path / "list.jsonl", rows[:1]))])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1 and "execution_steps/0/name: ['c1'] is not of type 'string'" in result.output
    chain = trajectories()[0]
    n = 20_000  # a chain of steps far past Python's recursion limit: a RecursionError before
    chain["execution_steps"] = [
        {"name": f"s{i}", "action": "resolve_point", "agent": "telemetry-bench", "arguments": {}, "outputs": [f"s{i}"]}
        for i in range(n)
    ] + [{"name": "finish", "action": "Finish", "agent": "telemetry-bench", "arguments": {}, "outputs": []}]
    chain["execution_links"] = [{"source": f"s{i}", "target": f"s{i + 1}"} for i in reversed(range(n - 1))]
    chain["execution_links"].append({"source": f"s{n - 1}", "target": "finish"})
    result = CliRunner().invoke(main, ["validate-gt", str(written(tmp_path / "chain.jsonl", [chain]))])
    assert result.exit_code == 0 and "no findings" in result.output, (result.output, result.exception)
    chain["execution_links"].append({"source": "s9", "target": "s3"})  # and a cycle in it is found
    result = CliRunner().invoke(main, ["validate-gt", str(written(tmp_path / "cycle.jsonl", [chain]))])
    assert result.exit_code == 1 and "cycle s3 -> s4" in result.output, result.output


def test_ground_truth_with_a_line_separator_in_a_string_reads(tmp_path):
    rows = trajectories()
    rows[0]["text"] = rows[0]["text"].replace(" ", "\u2028", 1)
    result = CliRunner().invoke(main, ["validate-gt", str(written(tmp_path / "gt.jsonl", rows, ascii_only=False))])
    assert result.exit_code == 0 and "no findings" in result.output, result.output


RESUMED = {
    "an episode id that is a list": (_set(lambda r: r[1], "episode_id", ["a"]), "line 2: episode_id"),
    "a run of 0.5": (_set(lambda r: r[1], "run", 0.5), "line 2: run"),  # was dropped, its episode kept
    "an episode this run does not play": (
        lambda r: [row.__setitem__("episode_id", "ghost") for row in r[1:] if row["episode_id"] == r[1]["episode_id"]],
        "line 2: episode 'ghost' run 0 is not one this run plays",
    ),
}


@pytest.mark.parametrize("damage", RESUMED)
def test_resume_refuses_a_damaged_trace_in_one_line_and_leaves_it(played, tmp_path, damage):
    base, trace = played
    change, fragment = RESUMED[damage]
    damaged = damaged_copy(trace, change, tmp_path / "damaged.jsonl")
    before = damaged.read_bytes()
    args = ["run", *on_release(base), "--split", "test", "--agent", "oracle", "--limit", LIMIT, "--resume"]
    one_error_line(cli(base, *args, "--out", damaged), fragment, "drop --resume to start over")
    assert damaged.read_bytes() == before


class _Point(BaseModel):
    x: int
    y: int
    z: int
    w: int


def test_a_validation_error_is_one_short_line():
    with pytest.raises(ValidationError) as caught:
        _Point.model_validate({"x": "a" * 10_000, "y": [1], "z": {"k\nv": 2}})
    line = validation_problems(caught.value)
    assert "\n" not in line and len(line) < 400
    assert line.startswith("x: Input should be a valid integer") and line.endswith("; and 1 more")
    assert "w: required, missing" not in line and "y: Input should be a valid integer" in line


@pytest.mark.parametrize("unit", ["degC/0", "(" * 3000 + "degC" + ")" * 3000])
def test_hostile_units_in_a_saved_answer_are_wrong_units_in_score_and_evaluate(played, tmp_path, unit):
    base, trace = played

    numbers = [n for n, v in first(rows_of(trace), "answer")["action"]["fields"].items() if type(v) in (int, float)]
    assert numbers, "the first answer of the trace holds no number: pick another"

    def hostile(rows: list[dict]) -> None:  # each number of the first answer given with the hostile unit
        fields = first(rows, "answer")["action"]["fields"]
        fields.update({name: f"12 {unit}" for name in numbers})

    damaged = damaged_copy(trace, hostile, tmp_path / "units.jsonl")
    scored = cli(base, "score", damaged, "--release", base / "artifacts" / "xai4heat" / "release", "--json")
    assert scored.exit_code == 0, (scored.output, scored.exception)
    assert json.loads(scored.output)["summaries"][0]["rejections"] == {"wrong_unit": len(numbers)}
    evaluated = cli(base, "evaluate", "--trace", damaged, *on_release(base), "--json")
    assert evaluated.exit_code == 0 and json.loads(evaluated.output)["rejections"] == {"wrong_unit": len(numbers)}


def test_a_damaged_episode_file_is_one_error_line(played, tmp_path):
    # a trace of the project's audit stage, whose episode file (the one its hash names) holds a line that is no episode
    from pipeline.core.canonical import digest_file

    base, trace = played
    audit = tmp_path / "artifacts" / "xai4heat" / "audit"
    audit.mkdir(parents=True)
    lines = (RELEASE / "test.jsonl").read_text(encoding="utf-8").split("\n")
    lines[1] = json.dumps({**json.loads(lines[1]), "phases": "none"})
    (audit / "test.jsonl").write_text("\n".join(lines), encoding="utf-8")
    rows = rows_of(trace)
    rows[0].update(episode_set="audit", episode_set_hash=digest_file(audit / "test.jsonl"))
    damaged = written(tmp_path / "audit.jsonl", rows)
    result = CliRunner().invoke(
        main, ["--root", str(REPO), "--artifacts", str(tmp_path / "artifacts"), "score", str(damaged)]
    )
    one_error_line(result, f"{audit / 'test.jsonl'}: row 2: not an episode (phases: ", "build again")


def test_a_price_table_that_is_not_text_is_one_error_line(played, tmp_path):
    base, trace = played
    prices = tmp_path / "prices.toml"
    prices.write_bytes(b"\xff\xfe[models]")
    release = base / "artifacts" / "xai4heat" / "release"
    one_error_line(cli(base, "score", trace, "--release", release, "--prices", prices), f"{prices}: not valid TOML")


DEEP_PRICES = {
    "inline tables": "x = " + "{a = " * 5000 + "1" + "}" * 5000 + "\n",
    "arrays": "x = " + "[" * 100_000 + "]" * 100_000 + "\n",
}


@pytest.mark.parametrize("command", ["score", "leaderboard"])
@pytest.mark.parametrize("shape", sorted(DEEP_PRICES))
def test_a_price_table_nested_thousands_deep_is_one_error_line(played, tmp_path, command, shape):
    # tomllib recurses per level: without a bound this was a RecursionError traceback (issue 53)
    base, trace = played
    prices = tmp_path / "prices.toml"
    prices.write_text(DEEP_PRICES[shape], encoding="utf-8")
    release = base / "artifacts" / "xai4heat" / "release"
    out = ["--out", tmp_path / "board.md"] if command == "leaderboard" else []
    result = cli(base, command, trace, "--release", release, "--prices", prices, *out)
    one_error_line(result, f"{prices}: arrays or inline tables nested deeper than 32 levels")


@pytest.mark.parametrize("value", ["inf", "nan", "-1.0"])
def test_a_price_that_is_not_a_finite_amount_is_one_error_line(played, tmp_path, value):
    # TOML writes inf and nan; an infinite price made every cost infinite (make fuzz found `output = inf` accepted)
    base, trace = played
    prices = tmp_path / "prices.toml"
    prices.write_text(f'[models."m"]\ninput = 1.5\noutput = {value}\n', encoding="utf-8")
    result = cli(base, "score", trace, "--release", base / "artifacts" / "xai4heat" / "release", "--prices", prices)
    one_error_line(result, f"{prices}: invalid configuration: models.m.output: ")
