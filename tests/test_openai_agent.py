"""The openai agent against a local fake OpenAI-compatible server with scripted responses."""

from __future__ import annotations

import json

import pytest

from pipeline.harness.traces import load_episodes
from pipeline.runtime.gold_path import gold_actions
from pipeline.runtime.openai_agent import OpenAIAgent, OpenAISettings, function_specs
from pipeline.runtime.runner import run_episode
from pipeline.runtime.scoring import score_episode
from tests.fake_providers import JsonServer
from tests.test_runtime import KEYWORDS


def completion(tool_calls=None, content=None, ids=None) -> dict:
    message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {
                "id": (ids or {}).get(i, f"call_{i}_{name}"),
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            for i, (name, arguments) in enumerate(tool_calls)
        ]
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


class FakeServer(JsonServer):
    """Serves scripted responses in order; each is (status, body). Records the request bodies."""

    def __init__(self, script: list[tuple[int, dict]]) -> None:
        super().__init__()
        self.script = list(script)

    def reply(self, body: dict) -> tuple[int, bytes]:
        status, reply = self.script.pop(0) if self.script else (200, completion(content="out of script"))
        return status, json.dumps(reply).encode()


@pytest.fixture(scope="session")
def setup(real_artifacts, xai_store):
    episode = next(
        e
        for e in load_episodes(real_artifacts / "xai4heat" / "audit" / "test.jsonl")
        if e.family == "timestamp_nearest_lookup"
    )
    return xai_store, episode


def gold_script(episode) -> list[tuple[int, dict]]:
    """The gold path as the model's function calls, one completion per action."""
    script = []
    for action in gold_actions(episode):
        data = action.model_dump()
        if data["kind"] == "call_tool":  # the model names its calls like the gold path, so references resolve
            script.append((200, completion([(data["name"], json.dumps(data["arguments"]))], ids={0: data["id"]})))
        else:
            kind = data.pop("kind")
            script.append((200, completion([(kind, json.dumps(data))])))
    return script


def play(base_url, store, episode, monkeypatch, **settings):
    monkeypatch.setenv("FAKE_KEY", "sk-test")
    agent = OpenAIAgent(OpenAISettings(base_url=base_url, model="fake", api_key_env="FAKE_KEY", **settings))
    turns = [r for r in run_episode(agent, episode, store, KEYWORDS) if r.type == "turn"]
    return turns, score_episode(episode, turns, KEYWORDS)


def test_correct_play_after_a_rate_limit(setup, monkeypatch):
    store, episode = setup
    script = [(429, {"error": {"message": "slow down", "type": "rate_limit"}}), *gold_script(episode)]
    server = FakeServer(script)
    with server as url:
        turns, score = play(url, store, episode, monkeypatch, temperature=0.3, seed=7, max_retries=2)
    assert score.accomplished, score
    assert all(t.usage == {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18} for t in turns)
    assert len(server.requests) == len(turns) + 1  # the rate-limited request was retried


def test_requests_carry_tools_temperature_and_seed(setup, monkeypatch):
    store, episode = setup
    server = FakeServer(gold_script(episode))
    with server as url:
        play(url, store, episode, monkeypatch, temperature=0.3, seed=7)
    first = server.requests[0]
    assert first["temperature"] == 0.3 and first["seed"] == 7 and first["model"] == "fake"
    names = [t["function"]["name"] for t in first["tools"]]
    assert names == [t["function"]["name"] for t in function_specs()]
    assert {"ask_user", "answer", "plan", "lookup_observation"} <= set(names)
    form = episode.phases[0].form
    assert first["messages"][1] == {"role": "user", "content": f"{episode.initial_message} {form.sentence()}"}
    answer = next(t["function"] for t in first["tools"] if t["function"]["name"] == "answer")
    assert answer["parameters"]["properties"]["fields"]["required"] == form.names  # the open question's answer form
    assert answer["parameters"]["properties"]["fields"]["properties"] == form.json_schema()["properties"]
    later = server.requests[1]["messages"]
    assert later[-1]["role"] == "tool" and later[-1]["tool_call_id"] == episode.phases[0].canonical_calls[0].id


def test_malformed_parallel_and_garbage_are_protocol_issues(setup, monkeypatch):
    store, episode = setup
    gold = gold_script(episode)
    script = [
        (200, completion([("lookup_observation", "{not json")])),
        (200, completion([("plan", json.dumps({"text": "a"})), ("plan", json.dumps({"text": "b"}))])),
        (200, completion(content="The answer is 42.")),
        (500, {"error": {"message": "boom"}}),
        *gold,
    ]
    with FakeServer(script) as url:
        turns, score = play(url, store, episode, monkeypatch, max_retries=1)
    issues = [i for t in turns for i in t.issues]
    assert issues.count("parse_error") == 2 and "parallel_calls" in issues
    assert turns[1].raw and len(turns[1].raw) == 2
    assert not score.protocol and {"parse_error", "parallel_calls"} <= set(score.issues)


@pytest.mark.slow
def test_the_key_is_optional_and_the_endpoint_is_not(monkeypatch):
    """Keyless local servers (vLLM, Ollama, llama.cpp) need no key; a missing endpoint or model is a clear error."""
    from pipeline.core.errors import OpenAIAgentError

    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    for name in ("OPENAI_BASE_URL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)
    agent = OpenAIAgent(OpenAISettings(base_url="http://127.0.0.1:9/v1", model="m", api_key_env="NO_SUCH_KEY"))
    assert agent.client.api_key == "no-key"
    with pytest.raises(
        OpenAIAgentError, match=r"needs --base-url \(or OPENAI_BASE_URL\) and --model \(or OPENAI_MODEL\)"
    ):
        OpenAISettings.resolve()
    monkeypatch.setenv("OPENAI_BASE_URL", "http://env/v1")
    monkeypatch.setenv("OPENAI_MODEL", "env-model")
    assert OpenAISettings.resolve(model="flag-model").base_url == "http://env/v1"
    assert OpenAISettings.resolve(model="flag-model").model == "flag-model"


def test_a_reply_holding_a_lone_surrogate_is_a_parse_error_said_back_escaped(monkeypatch):
    """A model's reply is checked as Unicode where it enters: its content or a tool call's id with a lone surrogate
    (a \\ud800 escape in the endpoint's JSON) is a parse_error, and the conversation goes on (it is said back
    escaped, so that the next request can be written)."""
    from contracts.agent_view import AgentObservation, ViewMessage
    from pipeline.runtime.runner import unrecordable

    script = [
        (200, completion(content="think \ud800")),
        (200, completion([("plan", json.dumps({"text": "a"}))], ids={0: "call_\udc00"})),
        (200, completion([("plan", json.dumps({"text": "b"}))])),
    ]
    server = FakeServer(script)
    monkeypatch.setenv("FAKE_KEY", "sk-test")
    messages = [ViewMessage(role="user", text="What was the mean?")]
    with server as url:
        agent = OpenAIAgent(OpenAISettings(base_url=url, model="fake", api_key_env="FAKE_KEY", max_retries=0))
        agent.start()
        outputs = []
        for turn in range(3):
            outputs.append(
                agent.act(AgentObservation(episode_id="e", turn=turn, budget=5, messages=messages, answer_form=None))
            )
            messages = [*messages, ViewMessage(role="user", text="(your last output was not a valid action)")]
    first, second, third = outputs
    assert "lone surrogate \\ud800" in first["error"] and "think \\\\ud800" in first["unparsed"], first
    assert "lone surrogate \\udc00" in second["error"], second
    assert third["kind"] == "plan" and third["text"] == "b"
    assert all(unrecordable(output) is None for output in outputs)
    sent = server.requests[2]["messages"]
    assert sent[2]["content"] == "think \\ud800" and sent[4]["tool_calls"][0]["id"] == "call_\\udc00", sent


def test_a_tool_call_is_said_back_with_an_empty_content(setup, monkeypatch):
    """issue 54: the model's tool-call message went back without `content` (null dropped), and llama-cpp-python's
    chatml-function-calling template (jinja2 StrictUndefined) failed the next request with a 500 ("'dict object' has
    no attribute 'content'"): an infra_error for what was the model's own turn. Its server also refuses a null
    content (its request model wants a string), so the content goes back as an empty string."""
    store, episode = setup
    server = FakeServer(gold_script(episode))
    with server as url:
        play(url, store, episode, monkeypatch)
    said = [m for request in server.requests[1:] for m in request["messages"] if m["role"] == "assistant"]
    assert said and all(isinstance(m.get("content"), str) for m in said)
    assert any(m.get("tool_calls") and m["content"] == "" for m in said)
