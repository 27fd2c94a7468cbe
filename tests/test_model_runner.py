"""The model runner against fake providers: their id and argument formats, endpoint failures, resume, concurrency."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.harness.traces import load_episodes
from tests.fake_providers import STYLES, GoldServer
from tests.helpers import REPO, run_cli


@pytest.fixture(scope="session")
def test_split(real_artifacts):
    return load_episodes(real_artifacts / "xai4heat" / "audit" / "test.jsonl")


@pytest.fixture
def no_openai_env(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def comparable(path: Path) -> list[dict]:
    """A trace without what may differ between two runs of the same agent: wall times, token usage, runtime knobs."""
    records = []
    for line in path.read_text().splitlines():
        data = json.loads(line)
        data.pop("elapsed_ms", None)
        data.pop("usage", None)
        if data["type"] == "header":
            data["settings"].pop("runtime", None)
        records.append(data)
    return records


def run(artifacts, out, *args):
    return run_cli(
        artifacts,
        "run",
        "--corpus",
        "xai4heat",
        "--split",
        "test",
        "--agent",
        "openai",
        "--out",
        str(out),
        "--json",
        *args,
    )


@pytest.mark.parametrize("style", STYLES)
def test_each_provider_style_plays_the_gold_path(real_artifacts, test_split, tmp_path, no_openai_env, style):
    """vLLM ids with hyphens, Ollama's object arguments, llama.cpp's missing ids, OpenRouter's ids: all resolve. No key
    is needed; the endpoint and model come from the environment; episodes run concurrently, the trace stays in order."""
    with GoldServer(test_split[:8], style) as url:
        no_openai_env.setenv("OPENAI_BASE_URL", url)
        no_openai_env.setenv("OPENAI_MODEL", "fake-model")
        out = tmp_path / "t.jsonl"
        result = run(real_artifacts, out, "--limit", "8", "--concurrency", "3")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["accomplished_rate"] == 1.0 and summary["episodes"] == 8 and summary["infra_errors"] == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records[0]["settings"]["model"] == "fake-model" and records[0]["settings"]["base_url"] == url
    assert [r["episode_id"] for r in records if r["type"] == "end"] == [e.id for e in test_split[:8]]
    calls = [r["call_id"] for r in records if r.get("call_id")]
    expected = {"vllm": "chatcmpl-tool-", "openrouter": "toolu_vrtx_", "ollama": "call_", "llamacpp": "call_"}[style]
    assert calls and all(c.startswith(expected) for c in calls)


def test_flags_come_before_the_environment(real_artifacts, test_split, tmp_path, no_openai_env):
    no_openai_env.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens there
    no_openai_env.setenv("OPENAI_MODEL", "env-model")
    with GoldServer(test_split[:2], "vllm") as url:
        result = run(real_artifacts, tmp_path / "t.jsonl", "--limit", "2", "--base-url", url, "--model", "flag-model")
    assert result.exit_code == 0 and json.loads(result.output)["accomplished_rate"] == 1.0, result.output
    assert json.loads((tmp_path / "t.jsonl").read_text().split("\n")[0])["settings"]["model"] == "flag-model"
    no_openai_env.delenv("OPENAI_MODEL")
    result = run(real_artifacts, tmp_path / "u.jsonl", "--base-url", "http://127.0.0.1:9/v1")
    assert result.exit_code == 1 and "needs --model (or OPENAI_MODEL)" in result.output


@pytest.mark.parametrize("style, cause", [("error", "InternalServerError"), ("garbage", "")])
def test_a_failing_endpoint_is_infra_error_and_exits_non_zero(
    real_artifacts, test_split, tmp_path, no_openai_env, style, cause
):
    out = tmp_path / "t.jsonl"
    with GoldServer(test_split[:3], style) as url:
        started = time.monotonic()
        result = run(
            real_artifacts,
            out,
            "--limit",
            "3",
            "--base-url",
            url,
            "--model",
            "m",
            "--max-retries",
            "1",
            "--timeout",
            "5",
        )
    assert time.monotonic() - started < 60
    assert result.exit_code == 1, result.output
    assert "3 episode runs hit infrastructure errors" in result.output and "--resume" in result.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    ends = [r for r in records if r["type"] == "end"]
    assert len(ends) == 3 and all(e["infra_error"] and cause in e["infra_error"] for e in ends)
    turns = [r for r in records if r["type"] == "turn"]
    assert len(turns) == 3 and all(t["issues"] == ["infra_error"] for t in turns)  # one turn each: no 12-turn play-out
    (scored,) = json.loads(run_cli(real_artifacts, "score", str(out), "--json").output)["summaries"]
    assert scored["infra_errors"] == 3 and scored["episodes"] == 0 and scored["runs"] == 0


def test_resume_after_a_kill_ends_as_an_uninterrupted_run(real_artifacts, test_split, tmp_path, no_openai_env):
    episodes = test_split[:10]
    exe = str(Path(sys.executable).with_name("telemetry-bench"))
    with GoldServer(episodes, "vllm") as url:
        base = [
            exe,
            "--root",
            str(REPO),
            "--artifacts",
            str(real_artifacts),
            "run",
            "--corpus",
            "xai4heat",
            "--split",
            "test",
            "--agent",
            "openai",
            "--base-url",
            url,
            "--model",
            "m",
            "--limit",
            "10",
            "--json",
        ]
        whole = tmp_path / "whole.jsonl"
        assert subprocess.run([*base, "--out", str(whole)], capture_output=True, timeout=300).returncode == 0
        cut = tmp_path / "cut.jsonl"
        process = subprocess.Popen(
            [*base, "--out", str(cut)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (not cut.exists() or cut.read_text().count('"type":"end"') < 4):
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
        process.wait()
        finished = cut.read_text().count('"type":"end"')
        assert 4 <= finished < 10, finished
        with cut.open("ab") as handle:  # and a line half-written when it died
            handle.write(b'{"type":"turn","episode_id":')
        resumed = subprocess.run(
            [*base, "--out", str(cut), "--resume", "--concurrency", "2"], capture_output=True, timeout=300
        )
    assert resumed.returncode == 0, resumed.stderr.decode()
    assert json.loads(resumed.stdout)["accomplished_rate"] == 1.0
    assert comparable(cut) == comparable(whole)


def test_resume_refuses_other_settings(real_artifacts, test_split, tmp_path, no_openai_env):
    out = tmp_path / "t.jsonl"
    with GoldServer(test_split[:2], "vllm") as url:
        assert run(real_artifacts, out, "--limit", "2", "--base-url", url, "--model", "m").exit_code == 0
        result = run(real_artifacts, out, "--limit", "2", "--base-url", url, "--model", "other", "--resume")
    assert (
        result.exit_code == 1 and "cannot resume a trace played with other settings (settings.model)" in result.output
    )


class StatusServer(GoldServer):
    """Answers every request with one HTTP status (the body an OpenAI-compatible server would send)."""

    def __init__(self, episodes, status: int) -> None:
        super().__init__(episodes, "vllm")
        self.status = status

    def reply(self, body: dict) -> tuple[int, bytes]:
        return self.status, json.dumps(
            {"error": {"message": f"status {self.status}", "type": "invalid_request_error"}}
        ).encode()


def test_a_refused_request_is_the_models_and_a_refused_key_stops_the_run(
    real_artifacts, test_split, tmp_path, no_openai_env
):
    """400 (e.g. the conversation overflowed the context) is the model's failure, scored; 401 stops the run in one
    line."""
    out = tmp_path / "t.jsonl"
    with StatusServer(test_split[:2], 400) as url:
        result = run(real_artifacts, out, "--limit", "2", "--base-url", url, "--model", "m", "--max-retries", "0")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["infra_errors"] == 0 and summary["runs"] == 2 and summary["accomplished_rate"] == 0.0
    assert summary["issues"]["agent_error"] == 2
    with StatusServer(test_split[:2], 401) as url:
        result = run(
            real_artifacts,
            tmp_path / "u.jsonl",
            "--limit",
            "2",
            "--base-url",
            url,
            "--model",
            "m",
            "--max-retries",
            "0",
        )
    assert result.exit_code == 1 and "refused the request (AuthenticationError" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
