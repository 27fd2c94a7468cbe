"""Random and hostile output from a command agent (issue 44): bytes that are not UTF-8, lone surrogates as escapes and
as bytes, numbers out of range, nesting past any limit, actions of the wrong types, lines past the size limit or
without a newline, crashes, silence and stderr garbage. Whatever it writes, `run --agent-cmd` exits 0 with a whole
trace (UTF-8 JSON lines, a record per turn and an end per episode) and no traceback, and no process of the agent's
outlives it. Few examples in make test, many in make fuzz. Played on the shipped release (no build)."""

from __future__ import annotations

import base64
import json
import shlex
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts.agent_io import MAX_ACTION_LINE_BYTES
from contracts.runtime import EpisodeEnd, TraceHeader, TurnRecord
from tests.helpers import REPO, fuzz_settings, process_alive

RELEASE = REPO / "artifacts" / "xai4heat" / "release"

# The agent plays one op per observation, in order across its restarts (the index is kept in a file), then plans.
AGENT = r"""
import base64, json, os, sys, time
ops, state, pids = sys.argv[1:4]
with open(pids, "a") as handle:
    handle.write(f"{os.getpid()}\n")
ops = json.load(open(ops))
out = sys.stdout.buffer
for line in sys.stdin:
    if '"observation"' not in line:
        continue
    index = int(open(state).read()) if os.path.exists(state) else 0
    open(state, "w").write(str(index + 1))
    op = ops[index] if index < len(ops) else {"bytes": base64.b64encode(b'{"kind": "plan", "text": "..."}').decode()}
    if "stderr" in op:
        sys.stderr.buffer.write(base64.b64decode(op["stderr"]))
        sys.stderr.flush()
    if "exit" in op:
        sys.exit(op["exit"])
    if "silent" in op:
        continue
    if "big" in op:
        for _ in range(op["big"] // 65536):
            out.write(b"x" * 65536)
        out.write(b"x" * (op["big"] % 65536))
    if "bytes" in op:
        out.write(base64.b64decode(op["bytes"]))
    if op.get("newline", True):
        out.write(b"\n")
    out.flush()
"""

SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, categories=["Cs"])
BREAKS = st.sampled_from(["\x0b", "\x0c", "\r", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"])  # splitlines'
TEXT = st.text(st.characters(codec="utf-8") | SURROGATES | BREAKS, max_size=12)
NUMBERS = st.integers(-(2**80), 2**80) | st.floats(allow_nan=True, allow_infinity=True)
SCALARS = st.none() | st.booleans() | NUMBERS | TEXT
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4), max_leaves=10
)
ACTIONS = st.fixed_dictionaries(
    {"kind": st.sampled_from(["ask_user", "call_tool", "answer", "plan"]) | TEXT},
    optional={
        "text": VALUES,
        "name": st.sampled_from(["resolve_point", "lookup_observation"]) | VALUES,
        "arguments": VALUES,
        "fields": VALUES,
        "id": VALUES,
        "usage": VALUES | st.dictionaries(TEXT, st.integers(-(2**70), 2**70)),
    },
)


def encoded(value, ascii_only: bool) -> bytes:
    """JSON text of any value: NaN and infinities as Python writes them, surrogates as escapes or as their bytes."""
    return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


@st.composite
def json_line(draw) -> bytes:
    return encoded(draw(ACTIONS | VALUES), draw(st.booleans()))


NESTING = st.builds(
    lambda depth, opener, closer: (opener * depth + closer * depth).encode(),
    st.sampled_from([10, 64, 65, 1000, 100_000]),
    st.sampled_from(['{"kind": "plan", "text": "x", "a": [', "["]),
    st.just("]"),
)
HUGE = st.sampled_from(
    [b"1e999", b"-1e999", b"NaN", b"Infinity", b"1" * 4301, b"9" * 20000, b'{"kind": "answer", "fields": {"m": 1e400}}']
)
RAW = st.binary(max_size=200) | NESTING | HUGE | json_line()
OPS = st.one_of(
    st.builds(lambda raw, newline: {"bytes": base64.b64encode(raw).decode(), "newline": newline}, RAW, st.booleans()),
    st.builds(
        lambda size, newline: {"big": size, "newline": newline},
        st.sampled_from([MAX_ACTION_LINE_BYTES - 1, MAX_ACTION_LINE_BYTES + 1, 3 * MAX_ACTION_LINE_BYTES]),
        st.booleans(),
    ),
    st.builds(lambda code: {"exit": code}, st.integers(0, 3)),
    st.builds(lambda junk: {"stderr": base64.b64encode(junk).decode(), "silent": True}, st.binary(max_size=300)),
)


@pytest.fixture(scope="session")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("release-cache")


@pytest.mark.fuzz
def test_whatever_a_command_agent_writes_run_ends_with_a_whole_trace(cache, tmp_path_factory):
    from click.testing import CliRunner

    from pipeline.cli import main

    @fuzz_settings(6, 120)
    @given(st.lists(OPS, min_size=1, max_size=8), st.sampled_from([1, 2]))
    def play(ops, concurrency):
        folder = tmp_path_factory.mktemp("fuzz-agent")
        (folder / "agent.py").write_text(AGENT)
        (folder / "ops.json").write_text(json.dumps(ops))
        command = " ".join(
            shlex.quote(str(part))
            for part in [sys.executable, folder / "agent.py", folder / "ops.json", folder / "state", folder / "pids"]
        )
        out = folder / "t.jsonl"
        argv = ["run", "--release", str(RELEASE), "--cache-dir", str(cache), "--split", "test", "--limit", "2"]
        argv += ["--turn-timeout", "1", "--concurrency", str(concurrency), "--agent-cmd", command, "--out", str(out)]
        result = CliRunner().invoke(main, [*argv, "--json"])
        assert result.exit_code == 0 and result.exception is None, (result.output, result.exception)
        assert "Traceback" not in result.output
        json.loads(result.stdout)  # the score summary (a load of the store is said on stderr)
        lines = out.read_bytes().decode("utf-8").split("\n")[:-1]
        TraceHeader.model_validate_json(lines[0])
        records = [json.loads(line) for line in lines[1:]]
        ends = [EpisodeEnd.model_validate(r) for r in records if r["type"] == "end"]
        played = [TurnRecord.model_validate(r) for r in records if r["type"] == "turn"]
        assert len(ends) == 2 and sum(end.turns for end in ends) == len(played)
        assert all(len(line.encode()) < 2 * MAX_ACTION_LINE_BYTES for line in lines)  # what it wrote, bounded
        pids = [int(pid) for pid in (folder / "pids").read_text().split()]
        assert not [pid for pid in pids if process_alive(pid)], pids

    play()
