"""Data flows one way: no module imports a later layer, contracts never import pipeline, and every module is in a
layer."""

from __future__ import annotations

import ast

from tests.helpers import REPO

# Lowest first (design/ARCHITECTURE.md); a module may import only its own layer or lower ones.
LAYERS = [
    "contracts",
    "core",
    "ingest",
    "store",
    "tools",
    "tasks",
    "episodes",
    "runtime",
    "audit",
    "release",
    "harness",
    "report",
    "cli",
    "bench",
]
TOP_LEVEL = {"__init__", "__main__"}  # the only modules directly in pipeline/


def layer_of(module: str) -> int:
    parts = module.split(".")
    if parts[0] == "contracts":
        return 0
    if parts[0] != "pipeline" or len(parts) == 1 or parts[1] in TOP_LEVEL:
        return -1
    return LAYERS.index(parts[1])


def imports(path) -> list[str]:
    """Every absolute import in the file, function-level ones included."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
    return found


def modules(package: str):
    for path in sorted((REPO / package).rglob("*.py")):
        yield ".".join(path.relative_to(REPO).with_suffix("").parts), path


def test_every_module_is_in_a_layer():
    loose = [m for m, _ in modules("pipeline") if m.count(".") == 1 and m.split(".")[1] not in TOP_LEVEL]
    assert not loose, f"modules directly in pipeline/ (put each in its layer's package): {loose}"
    packages = {p.name for p in (REPO / "pipeline").iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert packages == set(LAYERS) - {"contracts"}, packages ^ (set(LAYERS) - {"contracts"})


def test_no_backward_imports():
    problems = []
    for package in ("contracts", "pipeline"):
        for module, path in modules(package):
            mine = layer_of(module)
            for target in imports(path):
                if target.split(".")[0] in {"contracts", "pipeline"} and layer_of(target) > mine >= 0:
                    problems.append(f"{module} imports {target}")
    assert not problems, problems


def test_contracts_never_import_pipeline():
    for path in (REPO / "contracts").rglob("*.py"):
        assert not [t for t in imports(path) if t.startswith("pipeline")], path


def test_the_architecture_doc_lists_the_layers_in_order():
    """docs/architecture.md's layer table names every layer, lowest first, with its package."""
    rows = [
        line.split("|")[1:3]
        for line in (REPO / "docs" / "architecture.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("| ") and "`" in line.split("|")[2]
    ]
    assert [layer.strip() for layer, _ in rows] == LAYERS
    assert [package.strip().strip("`").rstrip("/") for _, package in rows] == [
        "contracts",
        *(f"pipeline/{layer}" for layer in LAYERS[1:]),
    ]


def test_no_code_switches_on_a_family_name():
    """Families are data: no family name of configs/families.toml is written in pipeline/ code (docstrings, which hold
    the CLI's help examples, aside); what differs per family is declared and dispatched on."""
    import tomllib

    families = set(tomllib.loads((REPO / "configs" / "families.toml").read_text(encoding="utf-8"))["families"])
    found = []
    for module, path in modules("pipeline"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                found += [f"{module}:{node.lineno} {name}" for name in families if name in node.value]
            elif isinstance(node, ast.Name | ast.Attribute):
                name = node.id if isinstance(node, ast.Name) else node.attr
                found += [f"{module}:{node.lineno} {name}" for family in families if family in name]
    assert not found, found


def project_imports(module: str, path) -> set[str]:
    """The project modules a file imports, function-level ones included (`from a import b` counts a.b when b is a
    module)."""
    known = dict(modules("contracts")) | dict(modules("pipeline"))
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name in known and name != module}


def test_no_import_cycles():
    """No module reaches itself through imports, function-level ones included (a cycle that works only because one
    side imports late breaks when someone moves that import up)."""
    graph = {m: project_imports(m, p) for package in ("contracts", "pipeline") for m, p in modules(package)}
    cycles, state = [], dict.fromkeys(graph, 0)  # 0 unseen, 1 on the path, 2 done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state[target] == 1:
                cycles.append(" -> ".join([*path[path.index(target) :], target]))
            elif state[target] == 0:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if state[module] == 0:
            visit(module, [module])
    assert not cycles, cycles
