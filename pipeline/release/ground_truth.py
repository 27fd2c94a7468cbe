"""Episodes as ground-truth trajectories (the seed's format): planning steps, execution steps, a DAG, Finish.

The telemetry tools are one MCP server: every execution step has agent = the server, action = the tool,
type = the server. References to earlier outputs are written `@<step>.<field>` (the seed allows
`@variable`); each tool step outputs one variable named like the step. Planning steps are one line per
action of the gold path, rendered by `render_action`, the same function the evaluator applies to an
agent's actions, so a perfect agent's plan matches word for word.
"""

from __future__ import annotations

import re
from typing import Any

from contracts.episodes import Episode
from pipeline.core.canonical import digest
from pipeline.runtime.gold_path import gold_actions

SERVER = "telemetry-bench"
FINISH = "finish"
REF = re.compile(r"^\$([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\])*)$")
DETERMINISTIC = {"name": False, "action": True, "arguments": True, "outputs": True}


def _as_gt_reference(value: Any) -> Any:
    if isinstance(value, str):
        match = REF.match(value)
        return f"@{match.group(1)}{match.group(2)}" if match else value
    if isinstance(value, list):
        return [_as_gt_reference(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_gt_reference(v) for k, v in value.items()}
    return value


def _referenced(value: Any) -> set[str]:
    if isinstance(value, str) and value.startswith("@"):
        return {re.split(r"[.\[]", value[1:], maxsplit=1)[0]}
    if isinstance(value, list):
        return set().union(*(_referenced(v) for v in value)) if value else set()
    if isinstance(value, dict):
        return set().union(*(_referenced(v) for v in value.values())) if value else set()
    return set()


def _value_text(value: Any) -> str:
    if isinstance(value, str) and (value.startswith("$") or value.startswith("@")):
        return (
            "an earlier result's " + re.split(r"[.\[]", value, maxsplit=1)[-1] if "." in value else "an earlier result"
        )
    if isinstance(value, list):
        return "[" + ", ".join(_value_text(v) for v in value) + "]"
    return str(value)


def render_action(action: dict) -> str:
    """One deterministic line per action: what a plan step says for it (references named, not their ids)."""
    kind = action.get("kind")
    if kind == "ask_user":
        return "ask the user for the missing detail"
    if kind == "call_tool":
        arguments = action.get("arguments") or {}
        return f"call {action.get('name')} with " + ", ".join(
            f"{k} {_value_text(v)}" for k, v in sorted(arguments.items())
        )
    if kind == "answer":
        return "answer " + ", ".join(sorted((action.get("fields") or {}).keys()) or ["nothing"])
    if kind == "plan":
        return str(action.get("text", ""))
    return "unreadable action"


def _form(episode: Episode) -> str:
    parts = [f"phase {i + 1} ({p.type}): fields {', '.join(p.form.names)}" for i, p in enumerate(episode.phases)]
    parts += [f"{f.kind}: {', '.join(f.form.names)}" for f in episode.follow_ups]
    return (
        "A structured answer to every phase and follow-up, numbers within the stated tolerances: "
        + "; ".join(parts)
        + ". The commitment is answer, abstain or re_clarify with its reason."
    )


def _descriptions(episode: Episode) -> list[str]:
    lines = []
    for i, step in enumerate([*episode.phases, *episode.follow_ups]):
        label = f"phase {i + 1}" if i < len(episode.phases) else step.kind
        for field in step.form.fields:
            tolerance = field.tolerance
            within = (
                f" (within max({tolerance.abs:g}, {tolerance.rel:g} x |value|))" if tolerance else f" ({field.type})"
            )
            lines.append(f"{label} {field.name} = {step.gold[field.name]}{within}")
    return lines


def trajectory(episode: Episode, category: str) -> dict:
    """The ground-truth trajectory of one episode; `category` is its family's (configs/families.toml)."""
    return {**execution(episode), "category": category}


def execution(episode: Episode) -> dict:
    """The trajectory without its category: what the evaluator compares a run with."""
    steps, links = [], []
    for phase in episode.phases:
        for call in phase.canonical_calls:
            arguments = _as_gt_reference(call.arguments)
            steps.append(
                {
                    "name": call.id,
                    "action": call.tool,
                    "agent": SERVER,
                    "arguments": arguments,
                    "outputs": [call.id],
                    "deterministic": dict(DETERMINISTIC),
                }
            )
            links += [{"source": source, "target": call.id} for source in sorted(_referenced(arguments))]
    final = {"phases": [p.gold for p in episode.phases], **{f.kind: f.gold for f in episode.follow_ups}}
    sources = {link["source"] for link in links}
    links += [{"source": s["name"], "target": FINISH} for s in steps if s["name"] not in sources]
    steps.append(
        {
            "name": FINISH,
            "action": "Finish",
            "agent": SERVER,
            "arguments": final,
            "outputs": ["final_answer"],
            "deterministic": dict(DETERMINISTIC),
        }
    )
    return {
        "id": int(digest(episode.id)[:12], 16),
        "episode_id": episode.id,
        "text": episode.hidden_instruction,
        "type": SERVER,
        "deterministic": True,
        "characteristic_form": _form(episode),
        "planning_steps": [
            {"agent": SERVER, "instruction": render_action(a.model_dump())} for a in gold_actions(episode)
        ],
        "execution_steps": steps,
        "execution_links": links,
        "final_out": final,
        "final_out_description": _descriptions(episode),
        "family": episode.family,
        "split": episode.split,
        "interaction_mode": episode.interaction_mode,
    }
