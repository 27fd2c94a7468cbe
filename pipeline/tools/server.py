"""An MCP server over stdio exposing the telemetry tools of one corpus (read-only, same schemas)."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from pipeline import __version__
from pipeline.core.canonical import MAX_JSON_DEPTH, JSONTooDeep, json_depth, loads_untrusted
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


def _malformed(line: str) -> tuple[types.RequestId | None, int, str] | None:
    """Why a line is not a JSON-RPC 2.0 message MCP takes, as (id, code, message); None when it is one. The id is the
    request's where it can be read (JSON-RPC 2.0 §5: null when it cannot)."""
    too_deep = f"Invalid Request: nested deeper than {MAX_JSON_DEPTH} levels"
    try:
        message = loads_untrusted(line, max_depth=sys.maxsize)  # the depth is checked below, once the id is read
    except JSONTooDeep:
        return None, types.INVALID_REQUEST, too_deep
    except ValueError as exc:
        return None, types.PARSE_ERROR, f"Parse error: not JSON ({exc})"
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
        return ident, types.INVALID_REQUEST, too_deep
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


class CheckedLines:
    """Standard input for the SDK's stdio transport, one JSON-RPC message a line: a line that is not a message MCP takes
    is answered here with the JSON-RPC error it owes (-32700 parse error, -32600 invalid request, -32602 invalid
    params), through the transport's own writer, and never reaches the SDK, which would drop it unanswered."""

    def __init__(self, lines: Any) -> None:
        self.lines = lines
        self.ready = anyio.Event()
        self.reply: Any = None

    def answer_through(self, write: Any) -> None:
        self.reply = write
        self.ready.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._checked()

    async def _checked(self) -> AsyncIterator[str]:
        async for line in self.lines:
            if not line.strip():
                continue
            problem = _malformed(line)
            if problem is None:
                yield line
                continue
            ident, code, text = problem
            await self.ready.wait()
            error = types.JSONRPCError(jsonrpc="2.0", id=ident, error=types.ErrorData(code=code, message=text))
            await self.reply.send(SessionMessage(error))


def serve_stdio(store: ToolStore, corpus: str) -> None:
    server = build_server(store, corpus)
    stdin = CheckedLines(anyio.wrap_file(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")))

    async def main() -> None:
        async with stdio_server(stdin=stdin) as (read, write):
            stdin.answer_through(write)
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
