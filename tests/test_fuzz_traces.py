"""Damaged traces and ground-truth files through `score`, `evaluate`, `run --resume` and `validate-gt` (issue 44):
a valid file with one value replaced (hostile JSON, lone surrogates, NaN, paths, hostile units), a key dropped or
added, or its bytes cut, repeated or flipped, ends in exit status 0, or 1 with one `error:` line (a refused trace is
left as it was); never a traceback. Few examples in make test, many in make fuzz."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import given
from hypothesis import strategies as st

from pipeline.cli import main
from tests.helpers import REPO, fuzz_settings

RELEASE = REPO / "artifacts" / "xai4heat" / "release"
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()  # NaN and infinities included: Python writes them, JSON has none
    | st.text(max_size=20)
    | st.sampled_from(
        [
            "\ud800",
            "a\udfffb",
            "../../x",
            "/etc",
            "test",
            "release",
            "audit",
            "answer",
            "call_tool",
            "12 degC/0",
            "12 degC**9**9**9",
            "12 " + "(" * 3000 + "degC" + ")" * 3000,
            "12 " + "degF*" * 3000,
            "\u2028",
            10**400,
            -1,
            0.5,
        ]
    )
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def mutated(data: st.DataObject, value: Any) -> Any:
    """The value with one place in it replaced by hostile JSON, dropped (a key) or added to (a key)."""
    children = sorted(value) if isinstance(value, dict) else list(range(len(value))) if isinstance(value, list) else []
    if not children or data.draw(st.integers(0, 3)) == 0:
        return data.draw(SCALARS | VALUES, label="replacement")  # scalars often keep a record valid: deeper paths run
    child = data.draw(st.sampled_from(children), label="at")
    copy = dict(value) if isinstance(value, dict) else list(value)
    how = data.draw(st.sampled_from(["descend", "descend", "drop", "add"]), label="how")
    if how == "drop" and isinstance(copy, dict):
        del copy[child]
    elif how == "add" and isinstance(copy, dict):
        copy[data.draw(st.text(max_size=8), label="key")] = data.draw(VALUES, label="added")
    else:
        copy[child] = mutated(data, copy[child])
    return copy


def damaged_bytes(data: st.DataObject, rows: list[Any]) -> bytes:
    """The rows as JSON lines with one row mutated, then maybe the bytes cut, a line repeated or a byte flipped."""
    rows = list(rows)
    at = data.draw(st.integers(0, len(rows) - 1), label="row")
    rows[at] = mutated(data, rows[at])
    text = "".join(json.dumps(row) + "\n" for row in rows).encode("utf-8")
    how = data.draw(st.sampled_from(["as is", "as is", "cut", "repeat", "flip"]), label="bytes")
    where = data.draw(st.integers(0, max(0, len(text) - 1)), label="where")
    if how == "cut":
        return text[:where]
    if how == "repeat":
        lines = text.split(b"\n")
        return b"\n".join(lines[: where % len(lines) + 1] + lines[where % len(lines) :])
    if how == "flip" and text:
        return text[:where] + bytes([text[where] ^ data.draw(st.integers(1, 255), label="mask")]) + text[where + 1 :]
    return text


def ends_well(result: Result) -> None:
    """Exit 0, or 1 with one `error:` line; never an exception escaping the command."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code in (0, 1), result.output
    if result.exit_code == 1:
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), result.output


@pytest.fixture(scope="session")
def played(tmp_path_factory) -> tuple[Path, list[str], list[dict]]:
    """A copy of the shipped xai4heat release, where to load its store, and an oracle trace of two test episodes."""
    base = tmp_path_factory.mktemp("fuzz-traces")
    release = base / "release"
    shutil.copytree(RELEASE, release)
    where = ["--release", str(release), "--cache-dir", str(base / "cache")]
    trace = base / "oracle.jsonl"
    done = CliRunner().invoke(
        main, ["run", *where, "--split", "test", "--agent", "oracle", "--limit", "2", "--out", str(trace)]
    )
    assert done.exit_code == 0, done.output
    return base, where, [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]


@pytest.mark.fuzz
def test_damaged_traces_score_and_evaluate_or_stop_in_one_line(played):
    base, where, rows = played
    trace = base / "damaged.jsonl"

    @fuzz_settings(25, 400)
    @given(st.data())
    def check(data):
        trace.write_bytes(damaged_bytes(data, rows))
        ends_well(CliRunner().invoke(main, ["score", str(trace), where[0], where[1]]))
        ends_well(CliRunner().invoke(main, ["evaluate", "--trace", str(trace), *where]))

    check()


@pytest.mark.fuzz
def test_damaged_traces_resume_or_stop_in_one_line(played):
    base, where, rows = played
    trace = base / "resumed.jsonl"
    resume = ["run", *where, "--split", "test", "--agent", "oracle", "--limit", "2", "--resume", "--out", str(trace)]
    ends = {(r["episode_id"], r["run"]) for r in rows if r["type"] == "end"}

    @fuzz_settings(15, 200)
    @given(st.data())
    def check(data):
        trace.write_bytes(damaged_bytes(data, rows))
        before = trace.read_bytes()
        result = CliRunner().invoke(main, resume)
        ends_well(result)
        if result.exit_code == 1:
            assert trace.read_bytes() == before  # a refused trace is left as it was
            return
        records = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
        assert {(r["episode_id"], r["run"]) for r in records if r["type"] == "end"} == ends  # every episode run, once
        ends_well(CliRunner().invoke(main, ["score", str(trace), where[0], where[1]]))

    check()


@pytest.mark.fuzz
def test_damaged_ground_truth_validates_and_evaluates_or_stops_in_one_line(played):
    base, where, rows = played
    played_ids = {r["episode_id"] for r in rows[1:]}
    gt_rows = [json.loads(line) for line in (RELEASE / "ground_truth" / "test.jsonl").read_text().splitlines()]
    gt_rows = [t for t in gt_rows if t["episode_id"] in played_ids]
    trace, gt = base / "trace.jsonl", base / "gt.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

    @fuzz_settings(25, 400)
    @given(st.data())
    def check(data):
        gt.write_bytes(damaged_bytes(data, gt_rows))
        validated = CliRunner().invoke(main, ["validate-gt", str(gt)])
        assert validated.exception is None or isinstance(validated.exception, SystemExit), repr(validated.exception)
        assert validated.exit_code in (0, 1) and validated.output.strip().splitlines()[-1].startswith(
            "error: " if validated.exit_code else "1 file(s): no findings"
        ), validated.output
        ends_well(CliRunner().invoke(main, ["evaluate", "--ground-truth", str(gt), "--trace", str(trace), *where]))

    check()
