"""The MCP server, started as a subprocess and driven by the official SDK client, answers like the library."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from pipeline.harness.build import build
from pipeline.tools import registry
from pipeline.tools.access import ToolStore
from tests.helpers import make_workspace, real_lines, xai_config

pytestmark = pytest.mark.slow  # builds a corpus of its own (make test-fast skips it)


BODY = "\n".join(real_lines("xai4heat/xai4heat_scada_L8.csv", range(20000, 20400))) + "\n"


@pytest.fixture(scope="session")
def ws(tmp_path_factory):
    workspace = make_workspace(
        tmp_path_factory.mktemp("mcp"), "xai4heat", xai_config(held_out_sites="[]"), {"xai4heat_scada_L8.csv": BODY}
    )
    build(workspace, until="store")
    return workspace


CALLS = [
    (
        "resolve_point",
        {"site": "L8", "point_class": "Leaving_Hot_Water_Temperature_Sensor", "equipment": "secondary loop"},
    ),
    ("lookup_observation", {"stream_id": "L8__t_sup_sec", "timestamp": "2023-02-01T10:20:00Z", "mode": "nearest"}),
    ("lookup_observation", {"stream_id": "no_such_stream", "timestamp": "2023-02-01T10:20:00Z"}),
    ("lookup_observation", {"stream_id": "$c1.stream_id", "timestamp": "2023-02-01T10:20:00Z", "mode": "nearest"}),
]


async def _session_calls(ws) -> tuple[list, list]:
    exe = Path(sys.executable).with_name("telemetry-bench")
    params = StdioServerParameters(command=str(exe), args=["--root", str(ws.root), "serve", "--corpus", "xai4heat"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        results = [await session.call_tool(name, arguments) for name, arguments in CALLS]
    return listed.tools, results


def test_mcp_server_matches_in_process_results(ws):
    tools, results = anyio.run(_session_calls, ws)
    assert [t.name for t in tools] == [t.name for t in registry.TOOLS]
    for listed, declared in zip(tools, registry.TOOLS, strict=True):
        assert listed.input_schema == declared.input_schema()
        assert listed.description == declared.description
    store = ToolStore.for_corpus(ws, "xai4heat")
    outputs = {}  # references work across the calls of one connection: results are c1, c2, ...
    for number, ((name, arguments), result) in enumerate(zip(CALLS, results, strict=True), start=1):
        expected = registry.call(store, name, arguments, outputs)
        outputs[f"c{number}"] = expected
        assert result.meta == {"call_id": f"c{number}"} and f"${'{'}c{number}{'}'}" not in result.content[1].text
        assert f'"$c{number}.<field>"' in result.content[1].text
        assert json.loads(result.content[0].text) == expected
        assert result.is_error == bool(expected.get("error"))
        if not result.is_error:
            assert result.structured_content == expected
    assert json.loads(results[3].content[0].text) == json.loads(results[1].content[0].text)  # "$c1.stream_id" resolved
    store.close()
