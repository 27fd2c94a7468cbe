"""The MCP server answers every malformed message with the JSON-RPC 2.0 error it owes, at once, and goes on serving
(issue 25 items 5 and 6): not JSON, [], no method, params as a string, an object id, jsonrpc "1.0", deep nesting."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pipeline.core.canonical import MAX_JSON_DEPTH
from tests.helpers import REPO

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
}
DEEP = '{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"list_sites","arguments":{"a":%s}}}' % (
    "[" * 200 + "]" * 200
)
MALFORMED = [  # (line, code, id of the reply)
    ("{bad", -32700, None),
    ("[]", -32600, None),
    ('[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]', -32600, None),
    ('{"jsonrpc":"2.0","id":1}', -32600, 1),
    ('{"jsonrpc":"2.0","id":2,"method":"tools/list","params":"x"}', -32600, 2),
    ('{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}', -32600, None),
    ('{"jsonrpc":"2.0","id":true,"method":"tools/list"}', -32600, None),
    ('{"jsonrpc":"1.0","id":3,"method":"tools/list"}', -32600, 3),
    ('{"id":3,"method":"tools/list"}', -32600, 3),
    ('{"jsonrpc":"2.0","id":4,"method":7}', -32600, 4),
    ('{"jsonrpc":"2.0","id":5,"method":"tools/list","params":[1]}', -32602, 5),
    (DEEP, -32600, 9),
    ("[" * 5000 + "]" * 5000, -32600, None),
    ('"just a string"', -32600, None),
    ("\ud800".encode("utf-8", "surrogatepass").decode("utf-8", "replace"), -32700, None),
]


class Server:
    """`telemetry-bench serve` on pipes, with a reader thread so that a missing reply is a time-out, not a hang."""

    def __init__(self, artifacts: Path) -> None:
        exe = Path(sys.executable).with_name("telemetry-bench")
        self.process = subprocess.Popen(
            [str(exe), "--root", str(REPO), "--artifacts", str(artifacts), "serve", "--corpus", "xai4heat"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.replies: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.replies.put(json.loads(line))

    def send(self, line: str) -> dict:
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        return self.replies.get(timeout=30)

    def close(self) -> str:
        self.process.stdin.close()
        self.process.wait(timeout=30)
        return self.process.stderr.read()


@pytest.fixture
def server(real_artifacts):
    running = Server(real_artifacts)
    assert running.send(json.dumps(INITIALIZE))["id"] == 0
    running.process.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    yield running
    running.close()


def test_every_malformed_message_gets_its_error_and_the_server_goes_on(server):
    """Each one answered at once with its code and id, the server still listing its tools after it; then a tool call
    is answered (one server for all: a start costs more than the messages)."""
    for line, code, ident in MALFORMED:
        reply = server.send(line)
        assert reply["jsonrpc"] == "2.0" and (reply["id"], reply["error"]["code"]) == (ident, code), (line[:80], reply)
        listed = server.send(json.dumps({"jsonrpc": "2.0", "id": 77, "method": "tools/list"}))
        assert listed["id"] == 77 and listed["result"]["tools"]
    called = server.send(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 78,
                "method": "tools/call",
                "params": {"name": "resolve_point", "arguments": {"site": "L8"}},
            }
        )
    )
    assert called["id"] == 78 and "result" in called


def test_tool_arguments_nested_too_deep_from_the_cli(real_artifacts):
    from tests.helpers import run_cli

    for depth in (MAX_JSON_DEPTH + 1, 5000):
        result = run_cli(
            real_artifacts,
            "tool",
            "resolve_point",
            "--corpus",
            "xai4heat",
            "--args",
            '{"site":' + "[" * depth + "]" * depth + "}",
        )
        answer = json.loads(result.output)
        assert result.exit_code == 0 and answer["error"] is True and answer["code"] == "invalid_argument"
        assert f"nested deeper than {MAX_JSON_DEPTH} levels" in answer["message"]


def call(ident: int, arguments: str | bytes) -> bytes:
    """A tools/call line with its arguments as JSON text (bytes: they may hold what is not UTF-8)."""
    head = b'{"jsonrpc":"2.0","id":' + str(ident).encode() + b',"method":"tools/call","params":{"name":"resolve_point"'
    return head + b',"arguments":' + (arguments.encode() if isinstance(arguments, str) else arguments) + b"}}"


def test_every_request_read_is_answered_even_at_the_end_of_input(tmp_path):
    """Strings that are not Unicode text (an escaped lone surrogate, its bytes, bytes that are not UTF-8) and numbers
    no JSON writer writes are refused with the request's id; requests still open when stdin closes are answered, not
    dropped. Played on the shipped release (no build)."""
    requests = [
        (1, call(1, '{"site": "\\ud800"}'), -32602),
        (2, call(2, b'{"site": "\xed\xa0\x80"}'), -32602),
        (3, call(3, b'{"site": "L\xff8"}'), -32602),
        (4, call(4, '{"site": "L8", "x": 1e999}'), -32600),
        (5, b'{"jsonrpc":"2.0","id":5,"method":"tools/list"}', None),
        *[(i, call(i, '{"site": "L8"}'), None) for i in range(6, 12)],
    ]
    lines = [json.dumps(INITIALIZE).encode(), b'{"jsonrpc":"2.0","method":"notifications/initialized"}']
    lines += [line for _, line, _ in requests] + [b'{"jsonrpc":"2.0","id":"\\udc00","method":"tools/list"}']
    exe = Path(sys.executable).with_name("telemetry-bench")
    release = REPO / "artifacts" / "xai4heat" / "release"
    served = subprocess.run(
        [str(exe), "serve", "--release", str(release), "--cache-dir", str(tmp_path / "cache")],
        input=b"\n".join(lines) + b"\n",  # all at once, then the end of input
        capture_output=True,
        timeout=120,
    )
    assert served.returncode == 0 and b"Traceback" not in served.stderr, served.stderr.decode(errors="replace")
    replies = {}
    for line in served.stdout.decode("utf-8").splitlines():
        reply = json.loads(line)
        replies.setdefault(reply["id"], []).append(reply)
    assert sorted(replies, key=str) == sorted([0, *[i for i, _, _ in requests], None], key=str), replies.keys()
    for ident, _, code in requests:
        (reply,) = replies[ident]
        assert (reply.get("error") or {}).get("code") == code, reply
    assert "lone surrogate \\ud800" in replies[1][0]["error"]["message"]
    assert replies[None][0]["error"]["code"] == -32600  # an id that is not text itself cannot be said back


def test_requests_left_unanswered_after_the_end_of_input_are_refused():
    """A request the server never answers (none does, here) is refused once EOF_GRACE passes without an answer."""
    import anyio

    from pipeline.tools.server import CheckedLines

    class Lines:
        def __aiter__(self):
            return self._lines()

        async def _lines(self):
            yield '{"jsonrpc":"2.0","id":7,"method":"tools/list"}\n'

    class Sent:
        def __init__(self):
            self.messages = []

        async def send(self, item):
            self.messages.append(item.message)

    async def main():
        checked, sent = CheckedLines(Lines(), grace=0.1), Sent()
        checked.answer_through(sent)
        passed = [line async for line in checked]
        return passed, sent.messages

    passed, messages = anyio.run(main)
    assert len(passed) == 1 and len(messages) == 1
    assert messages[0].id == 7 and messages[0].error.code == -32603, messages


class _Lines:
    """Standard input of one piped session: every line at once, then the end of input."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def __aiter__(self):
        return self._lines()

    async def _lines(self):
        for line in self.lines:
            yield line + "\n"


class _SlowStdout:
    """Standard output that takes a while to write each line (a pipe the client drains slowly)."""

    def __init__(self) -> None:
        self.text = ""

    async def write(self, text: str) -> None:
        import anyio

        await anyio.sleep(0.02)
        self.text += text

    async def flush(self) -> None:
        pass


def test_requests_open_when_stdin_closes_are_answered_while_the_writer_is_busy():
    """Issue 53: a tools/call open when stdin closed went unanswered in 3 of 10 piped sessions. An answer was counted
    as given when its handler began to send it, but the writer takes one message at a time: while it wrote the one
    before, the end of input was passed on and the SDK cancelled the handler waiting to hand its answer over. With a
    slow writer, every request but the first waits so; each is answered (the real SDK server and transport)."""
    import anyio
    from mcp.server.stdio import stdio_server

    from pipeline.tools.server import CheckedLines, build_server

    requests = [json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/list"}) for i in range(1, 6)]
    lines = [json.dumps(INITIALIZE), json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), *requests]
    server = build_server(None, "test")  # tools/list reads no store

    async def main() -> str:
        stdin, stdout = CheckedLines(_Lines(lines)), _SlowStdout()
        async with stdio_server(stdin=stdin, stdout=stdout) as (read, write):
            stdin.answer_through(write)
            await server.run(read, stdin.answers(write), server.create_initialization_options())
        return stdout.text

    replies = [json.loads(line) for line in anyio.run(main).splitlines()]
    assert sorted(r["id"] for r in replies) == [0, 1, 2, 3, 4, 5], replies
    assert all("result" in r for r in replies), [r for r in replies if "result" not in r]
