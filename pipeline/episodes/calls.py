"""Call sets across phases: fresh ids per phase, references to earlier phases kept (state carried over)."""

from __future__ import annotations

import re
from typing import Any

from contracts.tasks import Call, CallSet
from pipeline.tasks import gold, render
from pipeline.tools.access import ToolStore

REF = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
REVISION_PREFIX = "p2_"  # the ids a revision phase gives the calls it runs again


def _rename(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):
        return REF.sub(lambda m: "$" + names.get(m.group(1), m.group(1)), value)
    if isinstance(value, dict):
        return {k: _rename(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_rename(v, names) for v in value]
    return value


def revised(callset: CallSet, slots: dict, prefix: str, keep: set[str]) -> tuple[list[dict], dict[str, str]]:
    """The call set rendered with new slots; calls whose id is in `keep` (resolutions of an earlier phase)
    are dropped and referenced instead; the others get ids `<prefix><id>`. Returns (calls, id renames)."""
    rendered = render.calls(callset, slots)
    names = {c["id"]: f"{prefix}{c['id']}" for c in rendered if c["id"] not in keep}
    return [
        {"id": names[c["id"]], "tool": c["tool"], "arguments": _rename(c["arguments"], names)}
        for c in rendered
        if c["id"] not in keep
    ], names


def gold_of(callset: CallSet, names: dict[str, str]) -> dict:
    """The call set's gold references, renamed like its calls."""
    return {field: spec.model_copy(update={"ref": _rename(spec.ref, names)}) for field, spec in callset.gold.items()}


def phase_gold(callset: CallSet, phase_call_ids: list[str]) -> dict:
    """The call set's gold references as a phase that ran it names its calls: the revision's ids for the calls it ran
    again, the earlier phase's for the resolutions it kept."""
    ran = set(phase_call_ids)
    return gold_of(callset, {c.id: REVISION_PREFIX + c.id for c in callset.calls if REVISION_PREFIX + c.id in ran})


def run(store: ToolStore, calls: list[dict], outputs: dict[str, Any]) -> dict[str, Any]:
    """Execute calls after the earlier phases' outputs; returns all outputs (earlier ones included)."""
    merged = dict(outputs)
    for name, result in gold.execute(store, calls, merged).items():
        merged[name] = result
    return merged


def as_calls(calls: list[dict]) -> list[Call]:
    return [Call(**c) for c in calls]
