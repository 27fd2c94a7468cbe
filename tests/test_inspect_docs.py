"""docs/inspect.md runs as written (issue 54): every command of its ```bash blocks but the install, in order, in one
folder whose `artifacts` is the session's build, with inspect's model `telemetry_bench/oracle` (no key, no network, no
tokenizer download). inspect exits 0 even when a task is interrupted, so each log's status is read too; and
`write_trace`, the recipe's next step, refuses an interrupted log in one line."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")

from inspect_ai.log import list_eval_logs, read_eval_log  # noqa: E402

from pipeline.core.errors import RunError  # noqa: E402
from pipeline.harness.inspect_task import write_trace  # noqa: E402
from tests.helpers import REPO  # noqa: E402

DOC = (REPO / "docs" / "inspect.md").read_text(encoding="utf-8")
BIN = Path(sys.executable).parent


def doc_commands() -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", DOC, flags=re.S)
    lines = [line.split(" #", 1)[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith(("#", "pip "))]  # the install is the session's


def environment(folder: Path) -> dict[str, str]:
    """The commands' environment: this checkout first on the path, inspect's and the store cache's folders under
    the test's own, and no route to any model provider (no keys; a proxy that does not exist)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(
        PYTHONPATH=str(REPO),
        TELEMETRY_BENCH_ROOT=str(REPO),
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        XDG_CACHE_HOME=str(folder / "cache"),
        XDG_DATA_HOME=str(folder / "data"),
        INSPECT_LOG_DIR=str(folder / "logs-default"),
        HTTPS_PROXY="http://127.0.0.1:9",
        HTTP_PROXY="http://127.0.0.1:9",
    )
    return env


def test_the_inspect_doc_commands_run_as_written_offline(real_artifacts, tmp_path):
    commands = doc_commands()
    inspect_lines = [c for c in commands if c.startswith("inspect ")]
    assert [c.split()[1] for c in inspect_lines] == ["eval", "eval-set"], commands  # the two the doc promises
    here = tmp_path / "project"
    here.mkdir()
    (here / "artifacts").symlink_to(real_artifacts)
    env = environment(tmp_path)
    for command in commands:
        words = shlex.split(command)
        words[0] = str(BIN / words[0]) if (BIN / words[0]).exists() else words[0]
        if words[0].endswith("python"):
            words[0] = sys.executable
        result = subprocess.run(words, cwd=here, env=env, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, (command, result.stdout[-2000:], result.stderr[-2000:])
        if command.startswith("inspect "):
            log_dir = here / words[words.index("--log-dir") + 1]
            logs = [read_eval_log(info.name) for info in list_eval_logs(str(log_dir))]
            tasks = [w for w in words[2 : next(i for i, w in enumerate(words) if w.startswith("-"))]]
            assert sorted(log.eval.task.split("/")[-1] for log in logs) == sorted(t.split("/")[-1] for t in tasks)
            for log in logs:  # inspect exits 0 on an interrupted task: the status says whether it ran
                assert log.status == "success", (command, log.error)
                assert [s.scores["episode_score"].value for s in log.samples] == [1.0] * len(log.samples)
        if " score " in command:
            assert "accomplished 1.0000" in result.stdout or '"accomplished"' in result.stdout, result.stdout
    assert (here / "inspect.jsonl").is_file() and (here / "results.md").is_file()


def inspect_run(words: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([*words, "--display", "none"], env=env, capture_output=True, text=True, timeout=600)


def test_write_trace_refuses_an_interrupted_eval_and_takes_str_or_path(real_artifacts, tmp_path):
    """inspect's mockllm offline: the tokenizer download fails, the task is interrupted, `inspect eval` exits 0; the
    recipe's write_trace is where it shows, in one line naming the error."""
    env = environment(tmp_path)
    release = real_artifacts / "xai4heat" / "release"
    run = [str(BIN / "inspect"), "eval", "telemetry_bench/xai4heat", "-T", f"release={release}", "--limit", "1"]
    offline = {**env, "TIKTOKEN_CACHE_DIR": str(tmp_path / "no-tokenizer")}
    result = inspect_run([*run, "--model", "mockllm/model", "--log-dir", str(tmp_path / "mock")], offline)
    (log,) = list_eval_logs(str(tmp_path / "mock"))
    if read_eval_log(log.name).status == "success":
        pytest.skip("this machine reached tiktoken's download: mockllm ran, nothing was interrupted")
    assert result.returncode == 0  # inspect's own exit status says nothing of it
    with pytest.raises(RunError, match=r"the eval did not finish \(status error: .*\); fix that") as caught:
        write_trace(str(tmp_path / "mock"), str(tmp_path / "t.jsonl"))
    assert "\n" not in str(caught.value) and not (tmp_path / "t.jsonl").exists()
    result = inspect_run([*run, "--model", "telemetry_bench/oracle", "--log-dir", str(tmp_path / "oracle")], env)
    assert result.returncode == 0, result.stderr
    (log,) = list_eval_logs(str(tmp_path / "oracle"))
    for log_path, out in (
        (log.name.removeprefix("file://"), str(tmp_path / "a.jsonl")),
        (Path(log.name.removeprefix("file://")), tmp_path / "b.jsonl"),
        (str(tmp_path / "oracle"), str(tmp_path / "c.jsonl")),  # the log folder, as docs/inspect.md gives it
    ):
        assert write_trace(log_path, out).read_bytes().count(b"\n") > 1  # issue 54: a str `out` raised AttributeError
