"""A model that never stops is the model's own failure, never infra_error: the reply cap (--max-tokens), replies cut
at it, and the per-episode budget of generated tokens (--episode-tokens), against local fake servers, one of which
streams tokens without end and ignores max_tokens."""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from contracts.agent_view import AgentObservation, ViewMessage
from pipeline.harness.traces import load_episodes
from pipeline.release.playable import Release
from pipeline.runtime.openai_agent import LOCAL_TIMEOUT_S, TIMEOUT_S, OpenAIAgent, OpenAISettings
from pipeline.runtime.runner import run_episode
from pipeline.runtime.scoring import score_episode
from tests.fake_providers import LoopbackServer
from tests.test_openai_agent import FakeServer, completion

RELEASE = Path(__file__).resolve().parent.parent / "artifacts" / "pvdaq" / "release"
SERVER_LIMIT_S = 30.0  # the endless server gives up by itself after this long (a test never hangs on it)


class EndlessServer(LoopbackServer):
    """Streams `"word "` chunks as server-sent events until the client hangs up (or SERVER_LIMIT_S): a runaway
    model behind a server that ignores max_tokens. Counts the chunks it wrote per request."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.written: list[int] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                outer.requests.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                count, deadline = 0, time.monotonic() + SERVER_LIMIT_S
                try:
                    while time.monotonic() < deadline:
                        chunk = {
                            "id": "c",
                            "object": "chat.completion.chunk",
                            "created": 0,
                            "model": "fake",
                            "choices": [{"index": 0, "delta": {"content": "word "}, "finish_reason": None}],
                        }
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                        self.wfile.flush()
                        count += 1
                except (BrokenPipeError, ConnectionResetError):
                    pass
                outer.written.append(count)
                self.close_connection = True

            def log_message(self, *args):
                pass

        self.serve(Handler)


@pytest.fixture(scope="session")
def pvdaq(tmp_path_factory):
    """The shipped pvdaq release played on its own (its store loaded into a temporary cache): one episode."""
    release = Release(RELEASE, tmp_path_factory.mktemp("cache"), lambda note: None)
    episode = load_episodes(release.episodes_path("test"))[0]
    store = release.store()
    yield episode, store, release.keywords()
    store.close()


def agent_for(url: str, monkeypatch, **settings) -> OpenAIAgent:
    monkeypatch.setenv("FAKE_KEY", "sk-test")
    return OpenAIAgent(OpenAISettings(base_url=url, model="fake", api_key_env="FAKE_KEY", max_retries=0, **settings))


def test_an_endless_stream_is_cut_at_the_cap_and_the_episode_ends_not_terminated(pvdaq, monkeypatch):
    episode, store, keywords = pvdaq
    server = EndlessServer()
    started = time.monotonic()
    with server as url:
        agent = agent_for(url, monkeypatch, stream=True, max_tokens=40, episode_tokens=100)
        records = list(run_episode(agent, episode, store, keywords))
    turns, end = [r for r in records if r.type == "turn"], records[-1]
    score = score_episode(episode, turns, keywords)
    assert time.monotonic() - started < SERVER_LIMIT_S  # cut by the agent, not by the server giving up
    assert end.infra_error is None and "infra_error" not in score.issues and "agent_error" not in score.issues
    assert "not_terminated" in score.issues and not score.accomplished
    assert len(turns) == episode.turn_budget and all(t.issues == ["parse_error"] for t in turns)
    cut = [t for t in turns if "cut at the cap of 40 tokens" in t.raw["error"]]
    assert len(cut) == 3 == len(server.requests)  # 40 + 40 + 40 >= 100: the budget is spent after the third
    assert all(t.usage == {"completion_tokens": 40} for t in cut)
    assert all(r["max_tokens"] == 40 and r["stream"] and r["tool_choice"] == "auto" for r in server.requests)
    waited = time.monotonic() + 5
    while len(server.written) < 3 and time.monotonic() < waited:
        time.sleep(0.05)
    assert len(server.written) == 3  # the server saw each hang-up and stopped (not at its own limit)
    spent = turns[3].raw["error"]
    assert "budget of 100 generated tokens is spent" in spent and "120 out" in spent, spent
    assert turns[3].usage is None


def test_a_reply_cut_at_the_cap_by_the_server_is_a_parse_error_with_its_counts(monkeypatch):
    cut = completion(content="the the the")
    cut["choices"][0]["finish_reason"] = "length"
    cut["usage"] = {"prompt_tokens": 900, "completion_tokens": 64, "total_tokens": 964}
    plan = completion([("plan", json.dumps({"text": "look it up"}))])
    server = FakeServer([(200, cut), (200, plan)])
    messages = [ViewMessage(role="user", text="What was the mean?")]
    with server as url:
        agent = agent_for(url, monkeypatch, max_tokens=64)
        agent.start()
        first = agent.act(AgentObservation(episode_id="e", turn=0, budget=5, messages=messages, answer_form=None))
        messages = [*messages, ViewMessage(role="user", text="(your last output was not a valid action)")]
        second = agent.act(AgentObservation(episode_id="e", turn=1, budget=5, messages=messages, answer_form=None))
    assert "cut at the cap of 64 tokens (finish_reason length)" in first["error"]
    assert "900 tokens in, 64 out" in first["error"] and first["usage"]["completion_tokens"] == 64
    assert second["kind"] == "plan"
    assert server.requests[0]["max_tokens"] == 64 and "stream" not in server.requests[0]


def test_the_request_timeout_fits_where_the_server_runs():
    local = OpenAISettings(base_url="http://127.0.0.1:8080/v1", model="m")
    assert local.request_timeout() == LOCAL_TIMEOUT_S
    assert OpenAISettings(base_url="http://localhost:1/v1", model="m").request_timeout() == LOCAL_TIMEOUT_S
    assert OpenAISettings(base_url="https://api.example.com/v1", model="m").request_timeout() == TIMEOUT_S
    assert OpenAISettings(base_url="http://127.0.0.1:1/v1", model="m", timeout=5).request_timeout() == 5


def test_a_streamed_tool_call_is_put_together_from_its_pieces():
    from openai.types.chat import ChatCompletionChunk

    from pipeline.runtime.openai_stream import read_stream

    def chunk(delta: dict, finish: str | None = None, usage: dict | None = None) -> ChatCompletionChunk:
        choices = [{"index": 0, "delta": delta, "finish_reason": finish}] if delta is not None else []
        body = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": choices}
        return ChatCompletionChunk.model_validate({**body, **({"usage": usage} if usage else {})})

    class Stream(list):
        closed = False

        def close(self):
            self.closed = True

    pieces = [
        {"tool_calls": [{"index": 0, "id": "call_7", "function": {"name": "plan", "arguments": ""}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"text": '}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '"look"}'}}]},
    ]
    stream = Stream([chunk(p) for p in pieces] + [chunk({}, "tool_calls")])
    stream.append(chunk(None, usage={"prompt_tokens": 50, "completion_tokens": 9, "total_tokens": 59}))
    reply = read_stream(stream, cap=100)
    call = reply.message().tool_calls[0]
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == ("call_7", "plan", {"text": "look"})
    assert reply.finish_reason == "tool_calls" and stream.closed
    assert reply.usage_counts() == {"prompt_tokens": 50, "completion_tokens": 9, "total_tokens": 59}
    cut = read_stream(Stream([chunk(p) for p in pieces]), cap=2)
    assert cut.finish_reason == "length" and cut.usage_counts() == {"completion_tokens": 2}
    assert cut.message().tool_calls[0].function.arguments == '{"text": '
