"""Validate ground-truth trajectory files (anyone's): the seed's Appendix A schema plus its DAG and reference rules."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator

from pipeline.core.canonical import loads_untrusted
from pipeline.core.code_identity import PACKAGE_ROOT
from pipeline.core.errors import FIELD_WIDTH, clipped

DATA_FILES = ("contracts/schemas/ground_truth_trajectory.schema.json",)  # read at run time: part of the code identity
SCHEMA_PATH = PACKAGE_ROOT / DATA_FILES[0]
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
FLAGS = ("name", "action", "arguments", "outputs")
FINDING_WIDTH = 500  # characters of one finding: names and values in it come from the file and may be huge


def load(path: Path) -> list[tuple[str, Any]]:
    """Trajectories of a .json file (one object or a list) or a .jsonl file (one per line), each with where it is
    (`line 3`, `item 2`). Strings must be valid Unicode and numbers finite (a ValueError, like bad JSON)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":  # lines end in \n: a string may hold U+2028 as it is, which splitlines would split at
        lines = enumerate(text.split("\n"), start=1)
        return [(f"line {n}", loads_untrusted(line)) for n, line in lines if line.strip()]
    data = loads_untrusted(text)
    return [(f"item {n}", t) for n, t in enumerate(data, start=1)] if isinstance(data, list) else [("item 1", data)]


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
    """The first cycle of links met walking from each name in order (a depth-first walk on an explicit stack: a chain
    of any length is walked without recursion)."""
    state: dict[str, int] = {}
    for start in names:
        if start in state:
            continue
        state[start], path, stack = 1, [start], [iter(sorted(edges.get(start, ())))]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(edges.get(nxt, ()))))
    return None


def check(trajectory: Any, validator: Draft7Validator) -> list[str]:
    """Findings for one trajectory, each naming the step it concerns (empty: clean). The schema's findings come first;
    the rules after read only the steps and links whose names are text (the schema names the others)."""
    findings = [
        f"schema: {clipped('/'.join(map(str, e.path)), FIELD_WIDTH) or '(top)'}: {clipped(e.message)}"
        for e in sorted(validator.iter_errors(trajectory), key=lambda e: (list(map(str, e.path)), e.message))
    ]
    if isinstance(trajectory, dict):
        steps = [s for s in _listed(trajectory, "execution_steps") if isinstance(s.get("name"), str)]
        links = [
            link
            for link in _listed(trajectory, "execution_links")
            if isinstance(link.get("source"), str) and isinstance(link.get("target"), str)
        ]
        findings += _graph_findings(steps, links) + _finish_findings(steps, links) + _step_findings(steps)
        findings += _agent_findings(trajectory, steps)
    return [clipped(f, FINDING_WIDTH) for f in findings]


def _listed(trajectory: dict, key: str) -> list[dict]:
    """The objects of one of the trajectory's lists (nothing when it is not a list)."""
    items = trajectory.get(key)
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def _graph_findings(steps: list[dict], links: list[dict]) -> list[str]:
    """Steps named twice, links whose ends are not steps, and a cycle of links."""
    names = [s["name"] for s in steps]
    counts, known = Counter(names), set(names)
    findings = [
        f"step {name}: name is not unique ({counts[name]} steps)" for name in sorted(counts) if counts[name] > 1
    ]
    edges: dict[str, set[str]] = defaultdict(set)
    for link in links:
        source, target = link["source"], link["target"]
        for end, value in (("source", source), ("target", target)):
            if value not in known:
                findings.append(f"link {source}->{target}: {end} {value!r} is not a step")
        edges[source].add(target)
    cycle = _cycle(names, edges)
    if cycle:
        findings.append(f"step {cycle[0]}: cycle {' -> '.join(cycle)}")
    return findings


def _finish_findings(steps: list[dict], links: list[dict]) -> list[str]:
    """A missing Finish step, or the steps from which no chain of links reaches one (a walk back from the Finish
    steps along the links: linear in the links)."""
    finishes = [s["name"] for s in steps if s.get("action") == "Finish"]
    if not finishes:
        return ["trajectory: no Finish step (action 'Finish')"]
    sources: dict[str, list[str]] = defaultdict(list)
    for link in links:
        sources[link["target"]].append(link["source"])
    reaching, todo = set(finishes), list(finishes)
    while todo:
        for source in sources[todo.pop()]:
            if source not in reaching:
                reaching.add(source)
                todo.append(source)
    return [f"step {s['name']}: does not reach the Finish step" for s in steps if s["name"] not in reaching]


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
    agents = {
        s.get("agent") for s in [*steps, *_listed(trajectory, "planning_steps")] if isinstance(s.get("agent"), str)
    } - {""}
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
            lines.append(f"{path}: cannot read ({clipped(str(exc))})")
            continue
        for index, (_, trajectory) in enumerate(trajectories):
            scenario = trajectory.get("id", f"#{index + 1}") if isinstance(trajectory, dict) else f"#{index + 1}"
            named = clipped(str(scenario), FIELD_WIDTH)
            lines += [f"{path} scenario {named}: {finding}" for finding in check(trajectory, validator)]
    return lines
