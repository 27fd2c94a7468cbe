"""The agent process of `run --agent-cmd` cannot crash, hang or swell a run (issue 44): output that is not Unicode,
an agent that reads nothing, children that outlive it, lines without end. Played on the shipped xai4heat release
(`run --release`), which needs no build."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from contracts.agent_io import MAX_ACTION_LINE_BYTES
from pipeline.runtime.processes import Oversized, split_lines
from tests.helpers import REPO, process_alive

RELEASE = REPO / "artifacts" / "xai4heat" / "release"
TB = str(Path(sys.executable).with_name("telemetry-bench"))


@pytest.fixture(scope="session")
def cache(tmp_path_factory) -> Path:
    """One tool-store cache for the module's runs (the release's tables loaded once)."""
    return tmp_path_factory.mktemp("release-cache")


def agent(tmp_path: Path, body: str, name: str = "agent.py") -> str:
    """A Python agent script in tmp_path, as an --agent-cmd command."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(path))}"


def run(cache: Path, out: Path, command: str, *extra: str, limit: int = 1) -> subprocess.CompletedProcess:
    """`telemetry-bench run` in its own process, bounded by the test's own timeout (a hang fails, never blocks)."""
    argv = [TB, "run", "--release", str(RELEASE), "--cache-dir", str(cache), "--split", "test"]
    argv += ["--limit", str(limit), "--agent-cmd", command, "--out", str(out), "--json", *extra]
    return subprocess.run(argv, capture_output=True, timeout=120)


def records(out: Path) -> list[dict]:
    """The trace's records, each line checked as UTF-8 JSON."""
    return [json.loads(line) for line in out.read_bytes().decode("utf-8").split("\n")[:-1]]


def turns(out: Path) -> list[dict]:
    return [r for r in records(out) if r["type"] == "turn"]


def ended_whole(result: subprocess.CompletedProcess, out: Path) -> None:
    """The run ended as a run does: exit 0, no traceback, a header and an end record for each episode."""
    assert result.returncode == 0 and b"Traceback" not in result.stderr, result.stderr.decode(errors="replace")
    kinds = [r["type"] for r in records(out)]
    assert kinds[0] == "header" and kinds[-1] == "end", kinds


@pytest.mark.parametrize(
    "write, error",
    [
        ('sys.stdout.write(\'{"kind": "ask_user", "text": "\\\\ud800"}\\n\')', "$.text: lone surrogate \\ud800"),
        ('sys.stdout.buffer.write(b\'{"kind": "plan", "text": "\\xed\\xa0\\x80"}\\n\')', "not UTF-8"),
        ('sys.stdout.buffer.write(b\'{"kind": "plan", "text": "\\xff"}\\n\')', "not UTF-8"),
        ('sys.stdout.write(\'{"kind": "answer", "fields": {"mean": 1e999}}\\n\')', "1e999 is out of range"),
        ('sys.stdout.write(\'{"kind": "answer", "fields": {"mean": NaN}}\\n\')', "NaN is not a JSON number"),
    ],
    ids=["surrogate escape", "surrogate bytes", "not UTF-8", "1e999", "NaN"],
)
def test_output_that_is_not_unicode_text_is_a_parse_error_and_the_trace_stays_whole(cache, tmp_path, write, error):
    command = agent(
        tmp_path,
        f"""
        import sys
        for line in sys.stdin:
            if '"observation"' in line:
                {write}
                sys.stdout.flush()
        """,
    )
    out = tmp_path / "t.jsonl"
    result = run(cache, out, command)
    ended_whole(result, out)
    played = turns(out)
    assert len(played) > 1 and all(t["issues"] == ["parse_error"] for t in played), played[0]
    assert error in played[0]["raw"]["error"] and played[0]["raw"]["unparsed"], played[0]["raw"]
    assert json.loads(result.stdout)["issues"]["parse_error"] == 1  # episodes with the issue


def test_an_agent_that_reads_nothing_cannot_hang_the_run(cache, tmp_path):
    """It answers without reading its input, which fills the pipe: the turn times out, the run ends."""
    command = agent(
        tmp_path,
        """
        import json, sys, time
        for _ in range(1000):
            print(json.dumps({"kind": "plan", "text": "y" * 30000}), flush=True)
            time.sleep(0.02)
        time.sleep(600)
        """,
    )
    out = tmp_path / "t.jsonl"
    result = run(cache, out, command, "--turn-timeout", "2")
    ended_whole(result, out)
    last = turns(out)[-1]
    assert last["issues"] == ["agent_error"] and "read none of its input" in last["raw"]["agent_error"], last


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="processes are found through /proc")
def test_the_agents_children_are_stopped_with_it_even_those_that_left_its_group(cache, tmp_path):
    """A shell wrapper starts one child in the background and one in a session of its own, both with their output
    elsewhere. Its first process crashes on the first turn (the episode ends: its children go too, as the next one
    sees); the second plays on to the end of the run (its children go then)."""
    pids = tmp_path / "pids"
    pids.mkdir()
    inner = agent(
        tmp_path,
        """
        import json, os, sys
        pids = sys.argv[1]
        for line in sys.stdin:
            if '"observation"' not in line:
                continue
            if len(os.listdir(pids)) == 1:
                sys.exit(3)  # the first process: crash on its first turn
            first = [int(pid) for pid in open(os.path.join(pids, "1")).read().split()]
            alive = []
            for pid in first:
                try:
                    alive.append(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z")
                except OSError:
                    alive.append(False)
            print(json.dumps({"kind": "plan", "text": f"first children alive: {alive}"}), flush=True)
        """,
    )
    wrapper = tmp_path / "wrapper.sh"
    folder = shlex.quote(str(pids))
    wrapper.write_text(
        "#!/bin/sh\n"
        "sleep 1000 >/dev/null 2>&1 &\n"
        "one=$!\n"
        "setsid sleep 1000 >/dev/null 2>&1 &\n"
        f"n=$(($(ls {folder} | wc -l) + 1))\n"
        f'echo "$one $!" > {folder}/$n\n'
        f"exec {inner} {folder}\n"
    )
    wrapper.chmod(0o755)
    out = tmp_path / "t.jsonl"
    result = run(cache, out, shlex.quote(str(wrapper)), limit=2)
    ended_whole(result, out)
    played = turns(out)
    assert played[0]["issues"] == ["agent_error"] and "exited with code 3" in played[0]["raw"]["agent_error"]
    assert played[1]["action"]["text"] == "first children alive: [False, False]", played[1]
    children = [int(pid) for name in pids.iterdir() for pid in name.read_text().split()]
    assert len(children) == 4 and not [pid for pid in children if process_alive(pid)], children


PEAK_RSS = """
import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
"""


@pytest.mark.parametrize("newline", [True, False], ids=["100 MB line", "endless line"])
def test_output_beyond_the_line_limit_is_a_parse_error_in_bounded_memory(cache, tmp_path, newline):
    """A 100 MB line, or output without a newline for the whole turn: the runner keeps at most the limit of it."""
    command = agent(
        tmp_path,
        f"""
        import sys
        chunk = b"x" * 65536
        for line in sys.stdin:
            if '"observation"' in line:
                for _ in range(1600 if {newline} else 10**9):
                    sys.stdout.buffer.write(chunk)
                sys.stdout.buffer.write(b"\\n")
                sys.stdout.flush()
        """,
    )
    out = tmp_path / "t.jsonl"
    argv = [TB, "run", "--release", str(RELEASE), "--cache-dir", str(cache), "--split", "test", "--limit", "1"]
    argv += ["--turn-timeout", "3", "--agent-cmd", command, "--out", str(out)]
    peak_mb = int(subprocess.run([sys.executable, "-c", PEAK_RSS, *argv], capture_output=True, timeout=180).stdout)
    played = turns(out)
    assert played[0]["issues"] == ["parse_error"], played[0]
    assert f"a line longer than {MAX_ACTION_LINE_BYTES} bytes" in played[0]["raw"]["error"]
    assert len(played[0]["raw"]["unparsed"]) < 1000
    if not newline:  # still writing the same line on the next turn: silent, so the episode ends there
        assert played[1]["issues"] == ["agent_error"] and len(played) == 2
    assert out.stat().st_size < MAX_ACTION_LINE_BYTES * len(played)
    assert peak_mb < 600, f"peak RSS {peak_mb} MB"  # about 230 MB for any run of this release; 1 GB and more before


def test_lines_are_split_within_the_limit():
    chunks = iter([b"ab\ncd", b"ef\n\n", b"x" * 10, b"yy\nlast", b""])
    seen: list = []
    split_lines(lambda: next(chunks), seen.append, limit=8, head=3)
    assert seen == [b"ab", b"cdef", b"", Oversized(b"xxx", 8), b"last"]


def test_the_limit_has_one_home_and_is_documented():
    docs = (REPO / "docs" / "agents.md").read_text()
    assert "MAX_ACTION_LINE_BYTES" in docs and f"{MAX_ACTION_LINE_BYTES // 2**20} MiB" in docs


def test_a_python_agents_output_is_checked_where_it_enters_too(cache, tmp_path, monkeypatch):
    """Every agent's output, whatever its kind: a lone surrogate or a NaN from a Python agent is its parse_error."""
    from click.testing import CliRunner

    from pipeline.cli import main

    (tmp_path / "odd_agent.py").write_text(
        "OUTPUTS = [{'kind': 'plan', 'text': '\\ud800'}, {'kind': 'answer', 'fields': {'mean': float('nan')}},\n"
        "           {'kind': 'plan', 'text': 'ok', 'usage': {'\\udc00': 1}}]\n"
        "class Agent:\n"
        "    turn = 0\n"
        "    def act(self, observation):\n"
        "        self.turn += 1\n"
        "        return OUTPUTS[(self.turn - 1) % 3]\n"
    )
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "t.jsonl"
    argv = ["run", "--release", str(RELEASE), "--cache-dir", str(cache), "--split", "test", "--limit", "1"]
    result = CliRunner().invoke(main, [*argv, "--agent", "odd_agent:Agent", "--out", str(out)])
    assert result.exit_code == 0 and result.exception is None, result.output
    played = turns(out)
    assert len(played) > 2 and all(t["issues"] == ["parse_error"] for t in played), played
    errors = [t["raw"]["error"] for t in played[:3]]
    assert "$.text: lone surrogate \\ud800" in errors[0] and "Out of range float" in errors[1], errors
    assert "$.usage key \\udc00: lone surrogate" in errors[2], errors
    assert played[0]["raw"]["unparsed"] == '{"kind": "plan", "text": "\\\\ud800"}'


def test_output_nested_to_the_limit_is_recorded_and_read_back(cache, tmp_path):
    """A line nested exactly MAX_JSON_DEPTH deep is taken as it came (a parse_error here), and its trace record, one
    level deeper, is read back by the run's own scoring; one level more is refused where it enters. (Found by
    tests/test_fuzz_agents.py: the run wrote a trace its scoring refused.)"""
    from pipeline.core.canonical import MAX_JSON_DEPTH

    command = agent(
        tmp_path,
        f"""
        import sys
        depth = [{MAX_JSON_DEPTH}, {MAX_JSON_DEPTH + 1}]
        turn = 0
        for line in sys.stdin:
            if '"observation"' in line:
                d = depth[turn % 2]
                turn += 1
                sys.stdout.write("[" * d + "]" * d + "\\n")
                sys.stdout.flush()
        """,
    )
    out = tmp_path / "t.jsonl"
    result = run(cache, out, command)
    ended_whole(result, out)
    played = turns(out)
    assert all(t["issues"] == ["parse_error"] for t in played)
    assert isinstance(played[0]["raw"], list) and "nested deeper than 64 levels" in played[1]["raw"]["error"]


def test_line_breaks_other_than_newline_in_an_action_leave_the_trace_readable(cache, tmp_path):
    """U+0085, U+2028 and the other characters str.splitlines breaks at are text in a trace record, not line ends.
    (Found by tests/test_fuzz_agents.py: the run wrote a trace its scoring refused.)"""
    command = agent(
        tmp_path,
        """
        import json, sys
        for line in sys.stdin:
            if '"observation"' in line:
                print(json.dumps({"kind": "plan", "text": "a\\x85b\\u2028c\\x1cd\\re"}), flush=True)
        """,
    )
    out = tmp_path / "t.jsonl"
    result = run(cache, out, command)
    ended_whole(result, out)
    assert turns(out)[0]["action"] == {"kind": "plan", "text": "a\x85b\u2028c\x1cd\re"}
