"""Gold answers: run a call set through the tools (the code agents call) and read the gold from its outputs."""

from __future__ import annotations

from typing import Any

from contracts.tasks import GoldField
from pipeline.core.errors import GoldError
from pipeline.tools import refs, registry
from pipeline.tools.access import ToolStore


def execute(store: ToolStore, calls: list[dict], earlier: dict[str, Any] | None = None) -> dict[str, Any]:
    """Outputs by call id (after `earlier` outputs, which references may use); the registry resolves references."""
    outputs: dict[str, Any] = dict(earlier or {})
    for call in calls:
        result = registry.call(store, call["tool"], call["arguments"], outputs)
        if result.get("error"):
            raise GoldError(f"{call['id']} {call['tool']}: {result['code']}: {result['message']}")
        outputs[call["id"]] = result
    return outputs


def extract(gold: dict[str, GoldField], outputs: dict[str, Any]) -> dict[str, Any]:
    answer = {}
    for field, spec in gold.items():
        try:
            value = refs.resolve(spec.ref, outputs)
        except refs.ReferenceError_ as exc:
            raise GoldError(f"gold {field}: {exc}") from exc
        if spec.map is not None:
            if value not in spec.map:
                raise GoldError(f"gold {field}: {value!r} has no mapping")
            value = spec.map[value]
        if value is None:
            raise GoldError(f"gold {field} is null")
        answer[field] = value
    return answer
