"""Fake OpenAI-compatible servers that play the gold path the way real providers format it.

Stateless, like a model: each request's conversation tells which episode (its opening message) and which turn (how
many assistant messages it holds), so episodes may run concurrently and a run may be resumed. References to earlier
calls use the ids the conversation shows, as a model would.

Styles: vllm (ids chatcmpl-tool-<hex>), ollama (arguments as a JSON object, not a string), llamacpp (tool calls
without an id), openrouter (ids toolu_<hex>, extra fields); and failures: error (HTTP 500), garbage (200, not JSON).
"""

from __future__ import annotations

import hashlib
import json
import threading
from abc import ABC, abstractmethod
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from pipeline.runtime.gold_path import gold_actions
from pipeline.runtime.simulator import opening_message

STYLES = ("vllm", "ollama", "llamacpp", "openrouter")


def _id(style: str, episode_id: str, turn: int) -> str | None:
    token = hashlib.sha256(f"{episode_id}/{turn}".encode()).hexdigest()
    return {
        "vllm": f"chatcmpl-tool-{token[:32]}",
        "openrouter": f"toolu_vrtx_{token[:24]}",
        "ollama": f"call_{token[:8]}",
    }.get(style)


def _rewrite(value, ids: dict[str, str]):
    if isinstance(value, str) and value.startswith("$"):
        head, dot, rest = value[1:].partition(".")
        call, bracket, index = head.partition("[")
        if call in ids:
            return f"${ids[call]}{bracket}{index}{dot}{rest}"
        return value
    if isinstance(value, list):
        return [_rewrite(v, ids) for v in value]
    if isinstance(value, dict):
        return {k: _rewrite(v, ids) for k, v in value.items()}
    return value


class LoopbackServer:
    """An HTTP server on a free loopback port, serving `handler` on a thread while in a `with` block (which gives
    its /v1 base URL)."""

    def serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class JsonServer(LoopbackServer, ABC):
    """A local HTTP server answering each POSTed JSON body with `reply(body) -> (status, bytes)`."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                status, data = outer.reply(body)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Retry-After", "0")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.serve(Handler)

    @abstractmethod
    def reply(self, body: dict) -> tuple[int, bytes]:
        """The HTTP status and body answering one request."""


class GoldServer(JsonServer):
    """Serves the gold path of the given episodes, formatted in one provider's style (or failing)."""

    def __init__(self, episodes, style: str) -> None:
        super().__init__()
        self.style = style
        self.golds = {opening_message(e): (e.id, [a.model_dump() for a in gold_actions(e)]) for e in episodes}

    def reply(self, body: dict) -> tuple[int, bytes]:
        if self.style == "error":
            return 500, json.dumps({"error": {"message": "upstream model crashed"}}).encode()
        if self.style == "garbage":
            return 200, b"<html>502 Bad Gateway</html>"
        messages = body["messages"]
        opening = next(m["content"] for m in messages if m["role"] == "user")
        episode_id, actions = self.golds[opening]
        said = [m for m in messages if m["role"] == "assistant"]
        ids = {}  # the gold path's call ids -> the ids the conversation shows for them
        for action, message in zip(actions, said, strict=False):
            if action["kind"] == "call_tool" and message.get("tool_calls"):
                ids[action["id"]] = message["tool_calls"][0]["id"]
        turn = len(said)
        action = dict(actions[turn]) if turn < len(actions) else {"kind": "answer", "text": "done", "fields": {}}
        if action["kind"] == "call_tool":
            name, arguments = action["name"], _rewrite(action["arguments"], ids)
        else:
            name = action.pop("kind")
            arguments = {k: v for k, v in action.items() if v is not None}
        call = {
            "type": "function",
            "function": {"name": name, "arguments": arguments if self.style == "ollama" else json.dumps(arguments)},
        }
        call_id = _id(self.style, episode_id, turn)
        if call_id:
            call["id"] = call_id
        reply = {
            "id": f"chatcmpl-{turn}",
            "object": "chat.completion",
            "created": 0,
            "model": "fake",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
        if self.style == "openrouter":
            reply["provider"] = "Anthropic"
            reply["choices"][0]["native_finish_reason"] = "tool_use"
        return 200, json.dumps(reply).encode()
