"""An MCP server over stdio exposing the telemetry tools of one corpus (read-only, same schemas)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from pipeline import __version__
from pipeline.tools import registry
from pipeline.tools.access import ToolStore


def build_server(store: ToolStore, corpus: str) -> Server:
    """A low-level MCP server whose tools are the registry's, answered by `registry.call`."""
    tools = [
        types.Tool(
            name=tool.name, description=tool.description, input_schema=tool.input_schema(),
            output_schema=tool.output_model.model_json_schema(),
            annotations=types.ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False),
        )
        for tool in registry.TOOLS
    ]

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    outputs: dict[str, Any] = {}  # this connection's results, c1, c2, ...: later arguments may reference "$c1.stream_id"

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        call_id = f"c{len(outputs) + 1}"
        result = registry.call(store, params.name, params.arguments or {}, outputs)
        outputs[call_id] = result
        text = json.dumps(result, sort_keys=True, ensure_ascii=False)
        said = [types.TextContent(text=text), types.TextContent(text=f"(result {call_id}: a later argument may be \"${call_id}.<field>\")")]
        if result.get("error") is True:
            # Errors are results the agent reads and acts on (is_error), not protocol failures.
            return types.CallToolResult(content=said, is_error=True, _meta={"call_id": call_id})
        return types.CallToolResult(content=said, structured_content=result, _meta={"call_id": call_id})

    return Server(
        f"telemetry-bench-{corpus}", version=__version__,
        instructions=f"Read-only telemetry tools over the {corpus} tool store. Timestamps are ISO 8601 with an offset or Z. "
                     "Results are numbered c1, c2, ... in this connection; an argument may reference one as $c1.stream_id.",
        on_list_tools=on_list_tools, on_call_tool=on_call_tool,
    )


def serve_stdio(store: ToolStore, corpus: str) -> None:
    server = build_server(store, corpus)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
