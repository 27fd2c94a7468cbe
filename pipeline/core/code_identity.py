"""Code identity by import closure: a stage's code is every project module its entry modules import, transitively.

Imports are read from the source (ast), at any depth (function-level imports count: they run when the stage
does), so no list of modules is kept by hand. A module that reads a non-Python file of the project at run time
declares it in a module-level `DATA_FILES` tuple of paths relative to the project root; those files count too.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
PROJECT_PACKAGES = ("contracts", "pipeline")
DECLARATION = "DATA_FILES"  # the module-level name a module declares its data files under


def module_file(name: str, root: Path = PACKAGE_ROOT) -> Path | None:
    """The source file of a project module (a package's __init__.py), or None outside the project."""
    parts = name.split(".")
    if parts[0] not in PROJECT_PACKAGES:
        return None
    base = root.joinpath(*parts)
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return base.with_suffix(".py") if base.with_suffix(".py").is_file() else None


def _package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


@functools.cache
def _parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def imported_modules(name: str, path: Path) -> set[str]:
    """Every module name the file imports, anywhere in it; `from a import b` names both a and a.b."""
    found: set[str] = set()
    for node in ast.walk(_parsed(path)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = _package_of(name, path).split(".")
                package = package[: len(package) - node.level + 1]
                base = ".".join(package + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def declared_data_files(path: Path) -> list[str]:
    """The module's DATA_FILES: a literal tuple of project-relative paths it reads at run time."""
    for node in _parsed(path).body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(t, ast.Name) and t.id == DECLARATION for t in targets) and node.value is not None:
            return list(ast.literal_eval(node.value))
    return []


def import_closure(entries: Iterable[str], root: Path = PACKAGE_ROOT) -> list[Path]:
    """The project's source files that the entry modules import, transitively, with their packages' __init__ files,
    and the data files those modules declare; sorted."""
    seen: dict[str, Path] = {}
    todo = list(entries)
    while todo:
        name = todo.pop()
        parts = name.split(".")
        # importing a.b.c runs a/__init__.py and a/b/__init__.py first
        for depth in range(1, len(parts) + 1):
            prefix = ".".join(parts[:depth])
            if prefix in seen:
                continue
            path = module_file(prefix, root)
            if path is None:
                continue
            seen[prefix] = path
            todo.extend(imported_modules(prefix, path))
    files = set(seen.values())
    for path in list(files):
        files.update(root / rel for rel in declared_data_files(path))
    return sorted(files)
