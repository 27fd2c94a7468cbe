"""Results people compare (issue 41): `score` gives one summary per agent identity, corpus and split, never pooling
two identities; a trace that covers part of its split is marked partial; usage, latency and cost are summed from
the trace's own turns."""

from __future__ import annotations

import json

import pytest

from pipeline.harness.traces import load_episodes
from pipeline.runtime.identity import identity
from tests.fake_providers import GoldServer
from tests.helpers import run_cli


@pytest.fixture
def no_openai_env(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _play(artifacts, out, agent, *args):
    return run_cli(
        artifacts, "run", "--corpus", "xai4heat", "--split", "test", "--agent", agent, "--out", str(out), *args
    )


def _run(artifacts, out, agent, *args):
    result = _play(artifacts, out, agent, *args)
    assert result.exit_code == 0, result.output
    return out


def _scored(artifacts, *args):
    result = run_cli(artifacts, "score", *map(str, args), "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["summaries"]


def test_two_agents_are_two_summaries_never_one(real_artifacts, tmp_path):
    oracle = _run(real_artifacts, tmp_path / "oracle.jsonl", "oracle")
    noop = _run(real_artifacts, tmp_path / "noop.jsonl", "noop")
    summaries = _scored(real_artifacts, oracle, noop)
    assert [s["identity"]["agent"] for s in summaries] == ["noop", "oracle"]
    rates = {s["identity"]["agent"]: (s["accomplished_rate"], s["pass^1"], s["flip_rate"]) for s in summaries}
    assert rates == {"oracle": (1.0, 1.0, 0.0), "noop": (0.0, 0.0, 0.0)}  # pooled, they were pass^2 0.0, flip 1.0
    assert all(not s["partial"] and s["episodes"] == s["episodes_in_split"] for s in summaries)
    printed = run_cli(real_artifacts, "score", str(oracle), str(noop)).output
    assert printed.count(" on xai4heat test") == 2 and "PARTIAL" not in printed
    assert _scored(real_artifacts, oracle, oracle)[0]["runs"] == 2 * summaries[1]["episodes"]  # one identity: pooled


def test_a_trace_of_part_of_its_split_is_partial(real_artifacts, tmp_path):
    part = _run(real_artifacts, tmp_path / "part.jsonl", "oracle", "--limit", "3")
    (summary,) = _scored(real_artifacts, part)
    assert summary["partial"] and summary["episodes"] == 3 and summary["episodes_in_split"] > 3
    assert "PARTIAL: a run covers 3 of" in run_cli(real_artifacts, "score", str(part)).output


def test_identity_is_kind_model_and_behaviour_not_endpoint():
    base = {"model": "m", "temperature": 0, "base_url": "http://a/v1", "api_key_env": "K", "runtime": {"timeout": 5}}
    same = identity("openai", {**base, "base_url": "http://b/v1", "api_key_env": "OTHER", "runtime": {}, "limit": 3})
    assert identity("openai", base) == same and same["label"].startswith("openai m #")
    assert identity("openai", {**base, "temperature": 0.7})["digest"] != same["digest"]
    assert identity("openai", {**base, "model": "n"})["digest"] != same["digest"]
    assert identity("oracle", {"limit": None, "runtime": {}})["model"] is None


def test_usage_is_summed_over_the_turns_and_priced(real_artifacts, tmp_path, no_openai_env):
    episodes = load_episodes(real_artifacts / "xai4heat" / "audit" / "test.jsonl")[:4]
    traces = []
    with GoldServer(episodes, "vllm") as url:
        for model in ("model-a", "model-b"):
            out = tmp_path / f"{model}.jsonl"
            _run(real_artifacts, out, "openai", "--limit", "4", "--base-url", url, "--model", model)
            traces.append(out)
    prices = tmp_path / "prices.toml"
    prices.write_text('[models."model-a"]\ninput = 2.5\noutput = 10.0\n', encoding="utf-8")
    result = run_cli(real_artifacts, "score", *map(str, traces), "--prices", str(prices), "--json")
    assert result.exit_code == 0, result.output
    by_model = {s["identity"]["model"]: s for s in json.loads(result.output)["summaries"]}
    assert set(by_model) == {"model-a", "model-b"}
    for model, out in zip(("model-a", "model-b"), traces, strict=True):
        turns = [json.loads(line) for line in out.read_text().splitlines()[1:]]
        turns = [t for t in turns if t["type"] == "turn"]
        usage = by_model[model]["usage"]
        assert usage["tokens_in"] == sum(t["usage"]["prompt_tokens"] for t in turns if t["usage"])
        assert usage["tokens_out"] == sum(t["usage"]["completion_tokens"] for t in turns if t["usage"])
        assert usage["tokens_in"] > 0 and by_model[model]["per_episode"]["tool_calls"] > 0
        assert by_model[model]["latency_ms"]["turn"]["p50"] is not None
    a = by_model["model-a"]["usage"]
    assert a["cost_usd"] == round((a["tokens_in"] * 2.5 + a["tokens_out"] * 10.0) / 1e6, 6)
    assert "cost_usd" not in by_model["model-b"]["usage"]  # no price given: no cost claimed


def test_a_bad_price_table_is_one_line(real_artifacts, tmp_path):
    trace = _run(real_artifacts, tmp_path / "o.jsonl", "oracle", "--limit", "1")
    prices = tmp_path / "prices.toml"
    prices.write_text('[models."m"]\ninput = -1\n', encoding="utf-8")
    result = run_cli(real_artifacts, "score", str(trace), "--prices", str(prices))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert str(prices) in result.output and "output" in result.output


def test_resume_accepts_another_endpoint_but_not_another_model(real_artifacts, tmp_path, no_openai_env):
    episodes = load_episodes(real_artifacts / "xai4heat" / "audit" / "test.jsonl")[:2]
    out = tmp_path / "t.jsonl"
    with GoldServer(episodes, "vllm") as first, GoldServer(episodes, "vllm") as second:
        _run(real_artifacts, out, "openai", "--limit", "2", "--base-url", first, "--model", "m")
        _run(real_artifacts, out, "openai", "--limit", "2", "--base-url", second, "--model", "m", "--resume")
        refused = _play(real_artifacts, out, "openai", "--limit", "2", "--base-url", second, "--model", "x", "--resume")
    assert refused.exit_code == 1 and "settings.model" in refused.output


def test_a_sweep_plays_each_model_into_its_own_trace(real_artifacts, tmp_path, no_openai_env):
    episodes = load_episodes(real_artifacts / "xai4heat" / "audit" / "test.jsonl")[:2]
    models = tmp_path / "models.txt"
    models.write_text("# the models to compare\nmodel-b\nvendor/model:c  # a name with a slash\n", encoding="utf-8")
    with GoldServer(episodes, "vllm") as url:
        out = str(tmp_path / "t-{model}.jsonl")
        _run(
            real_artifacts,
            out,
            "openai",
            "--limit",
            "2",
            "--base-url",
            url,
            "--model",
            "model-a",
            "--models",
            str(models),
        )
        unnamed = _play(
            real_artifacts, tmp_path / "t.jsonl", "openai", "--base-url", url, "--model", "a", "--model", "b"
        )
    played = sorted(p.name for p in tmp_path.glob("t-*.jsonl"))
    assert played == ["t-model-a.jsonl", "t-model-b.jsonl", "t-vendor-model-c.jsonl"]
    summaries = _scored(real_artifacts, *sorted(tmp_path.glob("t-*.jsonl")))
    assert [s["identity"]["model"] for s in summaries] == ["model-a", "model-b", "vendor/model:c"]
    assert unnamed.exit_code == 2 and "name {model} in it" in unnamed.output


def test_a_sweep_refuses_two_models_that_map_to_one_trace(real_artifacts, tmp_path, no_openai_env):
    # `a/b` and `a-b` both become `a-b` in a file name: the second trace would overwrite the first (issue 53).
    models = tmp_path / "models.txt"
    models.write_text("a/b\na-b\n", encoding="utf-8")
    out = tmp_path / "runs" / "{model}.jsonl"
    refused = _play(
        real_artifacts, out, "openai", "--base-url", "http://127.0.0.1:9", "--models", str(models), "--limit", "1"
    )
    assert refused.exit_code == 2, refused.output
    assert "'a/b' and 'a-b' both write" in refused.output and "a-b.jsonl" in refused.output
    assert not (tmp_path / "runs").exists()
