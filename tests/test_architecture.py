"""Data flows one way: no module imports a later stage, and contracts never import pipeline."""

from __future__ import annotations

import ast

from pipeline.manifest import CORE_MODULES
from tests.helpers import REPO

# Lowest first; a module may import only its own layer or lower ones.
LAYERS = ["contracts", "core", "ingest", "store", "tools", "tasks", "episodes", "runtime", "audit", "release", "report", "cli"]
CORE = set(CORE_MODULES)  # the modules every stage runs (and whose code enters every stage's identity)


def layer_of(module: str) -> int:
    parts = module.split(".")
    if parts[0] == "contracts":
        return 0
    if parts[0] != "pipeline" or len(parts) == 1:
        return -1
    head = parts[1]
    if head in CORE:
        return 1
    if head in LAYERS:
        return LAYERS.index(head)
    if head in {"play", "evaluation"}:  # library entry points wiring runtime, audit and release ground truth
        return LAYERS.index("release")
    return LAYERS.index("cli")  # bench, build and every other top-level module


def imports(path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
    return found


def test_no_backward_imports():
    problems = []
    for package in ("contracts", "pipeline"):
        for path in (REPO / package).rglob("*.py"):
            module = ".".join(path.relative_to(REPO).with_suffix("").parts)
            mine = layer_of(module)
            for target in imports(path):
                if target.split(".")[0] in {"contracts", "pipeline"} and layer_of(target) > mine >= 0:
                    problems.append(f"{module} imports {target}")
    assert not problems, problems


def test_contracts_never_import_pipeline():
    for path in (REPO / "contracts").rglob("*.py"):
        assert not [t for t in imports(path) if t.startswith("pipeline")], path
