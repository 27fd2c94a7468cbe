"""Validate ground-truth trajectory files (anyone's): the seed's Appendix A schema plus its DAG and reference rules."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator

from pipeline.core.canonical import loads_untrusted
from pipeline.core.code_identity import PACKAGE_ROOT

DATA_FILES = ("contracts/schemas/ground_truth_trajectory.schema.json",)  # read at run time: part of the code identity
SCHEMA_PATH = PACKAGE_ROOT / DATA_FILES[0]
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
FLAGS = ("name", "action", "arguments", "outputs")


def load(path: Path) -> list[Any]:
    """Trajectories of a .json file (one object or a list) or a .jsonl file (one per line)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return [loads_untrusted(line) for line in text.splitlines() if line.strip()]
    data = loads_untrusted(text)
    return data if isinstance(data, list) else [data]


def _references(value: Any, key: str | None = None) -> list[tuple[str, bool]]:
    """(variable, explicit) for '@var...' strings, and bare values that repeat their own key ({"date_range":
    "date_range"})."""
    if isinstance(value, str):
        if value.startswith("@"):
            return [(re.split(r"[.\[]", value[1:], maxsplit=1)[0], True)]
        if key is not None and value == key and IDENTIFIER.match(value):
            return [(value, False)]
        return []
    if isinstance(value, list):
        return [r for v in value for r in _references(v)]
    if isinstance(value, dict):
        return [r for k, v in value.items() for r in _references(v, k)]
    return []


def _cycle(names: list[str], edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if state.get(nxt) is None and (found := visit(nxt)):
                return found
        state[node] = 2
        path.pop()
        return None

    for name in names:
        if state.get(name) is None and (found := visit(name)):
            return found
    return None


def check(trajectory: Any, validator: Draft7Validator) -> list[str]:
    """Findings for one trajectory, each naming the step it concerns (empty: clean)."""
    findings = [
        f"schema: {'/'.join(map(str, e.path)) or '(top)'}: {e.message}"
        for e in sorted(validator.iter_errors(trajectory), key=str)
    ]
    if not isinstance(trajectory, dict):
        return findings
    steps = [s for s in trajectory.get("execution_steps") or [] if isinstance(s, dict)]
    links = [link for link in trajectory.get("execution_links") or [] if isinstance(link, dict)]
    return (
        findings
        + _graph_findings(steps, links)
        + _finish_findings(steps, links)
        + _step_findings(steps)
        + _agent_findings(trajectory, steps)
    )


def _graph_findings(steps: list[dict], links: list[dict]) -> list[str]:
    """Steps named twice, links whose ends are not steps, and a cycle of links."""
    names = [s.get("name") for s in steps]
    findings = [
        f"step {name}: name is not unique ({names.count(name)} steps)"
        for name in sorted({n for n in names if names.count(n) > 1})
    ]
    edges: dict[str, set[str]] = defaultdict(set)
    for link in links:
        source, target = link.get("source"), link.get("target")
        for end, value in (("source", source), ("target", target)):
            if value not in names:
                findings.append(f"link {source}->{target}: {end} {value!r} is not a step")
        edges[source].add(target)
    cycle = _cycle([n for n in names if isinstance(n, str)], edges)
    if cycle:
        findings.append(f"step {cycle[0]}: cycle {' -> '.join(cycle)}")
    return findings


def _finish_findings(steps: list[dict], links: list[dict]) -> list[str]:
    """A missing Finish step, or the steps from which no chain of links reaches one."""
    finishes = [s.get("name") for s in steps if s.get("action") == "Finish"]
    if not finishes:
        return ["trajectory: no Finish step (action 'Finish')"]
    reaching = set(finishes)
    changed = True
    while changed:
        changed = False
        for link in links:
            if link.get("target") in reaching and link.get("source") not in reaching:
                reaching.add(link.get("source"))
                changed = True
    return [f"step {s.get('name')}: does not reach the Finish step" for s in steps if s.get("name") not in reaching]


def _step_findings(steps: list[dict]) -> list[str]:
    """Per step in order: references to what no earlier step produced, and incomplete deterministic flags."""
    findings = []
    produced_before: set[str] = set()
    produced_all = {o for s in steps for o in _outputs(s)} | {s.get("name") for s in steps}
    for step in steps:
        for variable, explicit in _references(step.get("arguments")):
            if variable not in produced_before:
                where = "a later step" if variable in produced_all else "no step"
                kind = "reference" if explicit else "reference (bare name repeating its key)"
                findings.append(f"step {step.get('name')}: {kind} {variable!r} is produced by {where}")
        produced_before |= set(_outputs(step)) | {step.get("name")}
        flags = step.get("deterministic")
        if isinstance(flags, dict):
            missing = [f for f in FLAGS if not isinstance(flags.get(f), bool)]
            if missing:
                findings.append(
                    f"step {step.get('name')}: deterministic flags incomplete (missing {', '.join(missing)})"
                )
    return findings


def _outputs(step: dict) -> list[str]:
    outputs = step.get("outputs")
    return [o for o in outputs if isinstance(o, str)] if isinstance(outputs, list) else []


def _agent_findings(trajectory: dict, steps: list[dict]) -> list[str]:
    """Whether the trajectory's type says multiagent exactly when more than one agent appears."""
    agents = {s.get("agent") for s in steps if s.get("agent")} | {
        p.get("agent") for p in trajectory.get("planning_steps") or [] if isinstance(p, dict) and p.get("agent")
    }
    kind = trajectory.get("type")
    if len(agents) > 1 and kind != "multiagent":
        return [
            f"trajectory: {len(agents)} agents ({', '.join(sorted(agents))}) but type is {kind!r}, not 'multiagent'"
        ]
    if len(agents) <= 1 and kind == "multiagent":
        return ["trajectory: type is 'multiagent' but only one agent appears"]
    return []


def validate_files(paths: list[Path]) -> list[str]:
    """One line per finding: file, scenario id and the finding."""
    validator = Draft7Validator(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))
    lines = []
    for path in paths:
        try:
            trajectories = load(path)
        except (OSError, ValueError) as exc:
            lines.append(f"{path}: cannot read ({exc})")
            continue
        for index, trajectory in enumerate(trajectories):
            scenario = trajectory.get("id", f"#{index + 1}") if isinstance(trajectory, dict) else f"#{index + 1}"
            lines += [f"{path} scenario {scenario}: {finding}" for finding in check(trajectory, validator)]
    return lines
