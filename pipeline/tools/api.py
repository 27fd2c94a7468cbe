"""Library entry points behind the tool CLI commands."""

from __future__ import annotations

import json

from pipeline.core.canonical import JSONTooDeep, loads_untrusted
from pipeline.core.config import select_corpora
from pipeline.core.workspace import Workspace
from pipeline.tools import registry
from pipeline.tools.access import ToolStore


def open_tools(ws: Workspace, corpus: str) -> ToolStore:
    select_corpora(ws, [corpus])
    return ToolStore.for_corpus(ws, corpus)


def run_tool(store: ToolStore, name: str, arguments: str) -> dict:
    """One call from JSON text on an open store, which it closes; bad JSON is an error result like any other
    argument error."""
    try:
        parsed = loads_untrusted(arguments)
    except JSONTooDeep as exc:
        store.close()
        return {
            "error": True,
            "code": "invalid_argument",
            "message": f"--args is {exc.msg}; tool arguments are a flat JSON object",
            "argument": None,
        }
    except json.JSONDecodeError as exc:
        store.close()
        return {"error": True, "code": "invalid_argument", "message": f"--args is not JSON: {exc}", "argument": None}
    try:
        return registry.call(store, name, parsed)
    finally:
        store.close()


def listing() -> dict:
    return {"registry_version": registry.registry_version(), "tools": registry.describe()}
