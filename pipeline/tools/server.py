"""An MCP server over stdio exposing the telemetry tools of one corpus (read-only, same schemas)."""

from __future__ import annotations

import io
import json
import sys
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from pipeline import __version__
from pipeline.core.canonical import (
    MAX_JSON_DEPTH,
    JSONTooDeep,
    JSONValueError,
    json_depth,
    loads_untrusted,
    not_unicode,
)
from pipeline.tools import registry
from pipeline.tools.access import ToolStore


def build_server(store: ToolStore, corpus: str) -> Server:
    """A low-level MCP server whose tools are the registry's, answered by `registry.call`."""
    tools = [
        types.Tool(
            name=tool.name,
            description=tool.description,
            input_schema=tool.input_schema(),
            output_schema=tool.output_model.model_json_schema(),
            annotations=types.ToolAnnotations(
                read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
            ),
        )
        for tool in registry.TOOLS
    ]

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    outputs: dict[
        str, Any
    ] = {}  # this connection's results, c1, c2, ...: later arguments may reference "$c1.stream_id"

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        call_id = f"c{len(outputs) + 1}"
        result = registry.call(store, params.name, params.arguments or {}, outputs)
        outputs[call_id] = result
        text = json.dumps(result, sort_keys=True, ensure_ascii=False)
        said = [
            types.TextContent(text=text),
            types.TextContent(text=f'(result {call_id}: a later argument may be "${call_id}.<field>")'),
        ]
        if result.get("error") is True:
            # Errors are results the agent reads and acts on (is_error), not protocol failures.
            return types.CallToolResult(content=said, is_error=True, _meta={"call_id": call_id})
        return types.CallToolResult(content=said, structured_content=result, _meta={"call_id": call_id})

    return Server(
        f"telemetry-bench-{corpus}",
        version=__version__,
        instructions=f"Read-only telemetry tools over the {corpus} tool store. Timestamps are ISO 8601 with an offset "
        f"or Z. "
        "Results are numbered c1, c2, ... in this connection; an argument may reference one as $c1.stream_id.",
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


def _request_id(message: dict) -> types.RequestId | None:
    ident = message.get("id")
    return ident if isinstance(ident, str) or (isinstance(ident, int) and not isinstance(ident, bool)) else None


def _readable_id(message: Any) -> types.RequestId | None:
    """The request id of a message refused for what it holds (the text of a line, read leniently, when its numbers
    stopped the parse), where it is one a reply can carry."""
    if isinstance(message, str):
        try:
            message = json.loads(message)
        except (ValueError, RecursionError):
            return None
    ident = _request_id(message) if isinstance(message, dict) else None
    return ident if not_unicode(ident) is None else None


Problem = tuple[types.RequestId | None, int, str]  # why a line is not a message MCP takes: (id, code, message)
TOO_DEEP = f"Invalid Request: nested deeper than {MAX_JSON_DEPTH} levels"


def _read(line: str) -> tuple[Any, Problem | None]:
    """A line's JSON-RPC message and why it is not one MCP takes (None when it is one). The id of a reply is the
    request's where it can be read (JSON-RPC 2.0 §5: null when it cannot)."""
    try:
        message = loads_untrusted(line, max_depth=sys.maxsize)  # the depth is checked below, once the id is read
    except JSONTooDeep:
        return None, (None, types.INVALID_REQUEST, TOO_DEEP)
    except JSONValueError as exc:  # JSON, but not text or numbers the server can take: answered with the id it has
        ident = _readable_id(line if exc.value is None else exc.value)
        if exc.msg.startswith("$.params"):
            return None, (ident, types.INVALID_PARAMS, f"Invalid params: {exc.msg}")
        return None, (ident, types.INVALID_REQUEST, f"Invalid Request: {exc.msg}")
    except ValueError as exc:
        return None, (None, types.PARSE_ERROR, f"Parse error: not JSON ({exc})")
    return message, _malformed(message)


def _malformed(message: Any) -> Problem | None:
    """Why parsed JSON is not a JSON-RPC 2.0 message MCP takes; None when it is one."""
    if not isinstance(message, dict):
        return (
            None,
            types.INVALID_REQUEST,
            f"Invalid Request: a message is one JSON object, not a {type(message).__name__} (MCP has no batches)",
        )
    ident = _request_id(message)
    if "id" in message and ident is None:
        return None, types.INVALID_REQUEST, "Invalid Request: id must be a string or an integer"
    if json_depth(message) > MAX_JSON_DEPTH:
        return ident, types.INVALID_REQUEST, TOO_DEEP
    if message.get("jsonrpc") != "2.0":
        return ident, types.INVALID_REQUEST, 'Invalid Request: jsonrpc must be "2.0"'
    if "method" not in message and not ({"result", "error"} & set(message) and "id" in message):
        return (
            ident,
            types.INVALID_REQUEST,
            "Invalid Request: no method (and not a response to a request of the server)",
        )
    if "method" in message and not isinstance(message["method"], str):
        return ident, types.INVALID_REQUEST, "Invalid Request: method must be a string"
    params = message.get("params")
    if isinstance(params, list):
        return ident, types.INVALID_PARAMS, "Invalid params: MCP params are an object, not an array"
    if params is not None and not isinstance(params, dict):
        return ident, types.INVALID_REQUEST, f"Invalid Request: params must be an object, not a {type(params).__name__}"
    try:
        types.jsonrpc_message_adapter.validate_python(message, by_name=False)
    except ValidationError as exc:
        first = exc.errors()[0]
        return (
            ident,
            types.INVALID_REQUEST,
            f"Invalid Request: {'.'.join(str(p) for p in first['loc'])}: {first['msg']}",
        )
    return None


EOF_GRACE = 30.0  # seconds without any answer after the end of input before the requests still open are refused


class CheckedLines:
    """Standard input for the SDK's stdio transport, one JSON-RPC message a line: a line that is not a message MCP takes
    is answered here with the JSON-RPC error it owes (-32700 parse error, -32600 invalid request, -32602 invalid
    params), through the transport's own writer, and never reaches the SDK, which would drop it unanswered.

    Every request passed on is answered too, even when the input ends: the SDK cancels the requests still running
    when its input ends, without a reply, so the end of input is passed on only once each has its answer handed to
    the transport's writer (seen on the way out, `answers`); a request still unanswered after EOF_GRACE seconds in
    which nothing was answered is refused (-32603), and a request the client cancelled is owed nothing.

    An answer counts once the writer has taken it, not when the handler starts sending it: the writer takes one
    message at a time, so an answer may wait while the one before it is written, and a handler cancelled in that wait
    (the end of input passed on too early) lost its answer (issue 53: 3 of 10 piped sessions)."""

    def __init__(self, lines: Any, grace: float = EOF_GRACE) -> None:
        self.lines, self.grace = lines, grace
        self.ready = anyio.Event()
        self.reply: Any = None
        self.open: Counter = Counter()  # ids of the requests passed on and not answered yet
        self.sending = 0  # answers on their way to the writer, which has not taken them yet
        self.answered = anyio.Event()
        self.settled = False

    def answer_through(self, write: Any) -> None:
        self.reply = write
        self.ready.set()

    def answers(self, write: Any) -> AnsweredWrites:
        """The server's writer, through which every answer is seen."""
        return AnsweredWrites(write, self)

    def sending_answer(self, message: Any) -> bool:
        """Take note of an answer on its way out; False when it is owed to no request still open."""
        if self.open[message.id] <= 0:
            return False
        self.open[message.id] -= 1
        self.sending += 1
        return True

    def handed_over(self, message: Any, taken: bool) -> None:
        """An answer the writer took, or did not (its sender was cancelled first: the request is open again)."""
        self.sending -= 1
        if not taken:
            self.open[message.id] += 1
        self.answered.set()
        self.answered = anyio.Event()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._checked()

    async def _checked(self) -> AsyncIterator[str]:
        async for line in self.lines:
            if not line.strip():
                continue
            message, problem = _read(line)
            if problem is None:
                self._passing(message)
                yield line
                continue
            await self._refuse(*problem)
        await self._settle()

    def _passing(self, message: dict) -> None:
        if "method" in message and _request_id(message) is not None:
            self.open[_request_id(message)] += 1
        elif message.get("method") == "notifications/cancelled" and isinstance(message.get("params"), dict):
            ident = message["params"].get("requestId")
            if isinstance(ident, str | int) and self.open[ident] > 0:
                self.open[ident] -= 1  # the SDK answers a cancelled request with nothing, as the protocol says

    async def _refuse(self, ident: types.RequestId | None, code: int, text: str) -> None:
        await self.ready.wait()
        error = types.JSONRPCError(jsonrpc="2.0", id=ident, error=types.ErrorData(code=code, message=text))
        await self.reply.send(SessionMessage(error))

    async def _settle(self) -> None:
        """At the end of input: wait for the open requests' answers while they come, then refuse those left."""
        while +self.open or self.sending:
            answered = self.answered
            with anyio.move_on_after(self.grace):
                await answered.wait()
            if not answered.is_set():
                break
        left = list((+self.open).elements())
        self.settled = True
        for ident in left:
            self.open[ident] -= 1
            await self._refuse(
                ident, types.INTERNAL_ERROR, f"Internal error: not answered within {self.grace:g} s of the end of input"
            )


class AnsweredWrites:
    """The server's side of the transport's writer: what it sends goes on, and CheckedLines sees every answer."""

    def __init__(self, write: Any, lines: CheckedLines) -> None:
        self.write, self.lines = write, lines

    async def send(self, item: SessionMessage) -> None:
        message = item.message
        answer = isinstance(message, types.JSONRPCResponse | types.JSONRPCError)
        if not (answer and self.lines.sending_answer(message)):
            if not (answer and self.lines.settled):  # an answer refused already at the end is not sent again
                await self.write.send(item)
            return
        taken = False
        try:
            await self.write.send(item)
            taken = True
        finally:
            self.lines.handed_over(message, taken)

    async def aclose(self) -> None:
        await self.write.aclose()

    async def __aenter__(self) -> AnsweredWrites:
        await self.write.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self.write.__aexit__(*exc)


def serve_stdio(store: ToolStore, corpus: str) -> None:
    server = build_server(store, corpus)
    # Bytes that are not UTF-8 become lone surrogates, which _malformed refuses with the request's id.
    stdin = CheckedLines(
        anyio.wrap_file(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="surrogateescape"))
    )

    async def main() -> None:
        async with stdio_server(stdin=stdin) as (read, write):
            stdin.answer_through(write)
            await server.run(read, stdin.answers(write), server.create_initialization_options())

    anyio.run(main)
