"""Code identity by import closure: a stage's code is every project module its entry modules import, transitively.

Imports are read from the source text, at any depth (function-level imports count: they run when the stage
does), so no list of modules is kept by hand. A module that reads a non-Python file of the project at run time
declares it in a module-level `DATA_FILES` tuple of paths relative to the project root; those files count too.
"""

from __future__ import annotations

import ast
import functools
import re
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


# Import statements at the start of a line, at any indentation (function-level imports included). Read as text,
# not parsed: a whole closure costs milliseconds, and a docstring line that reads like an import only widens it.
IMPORT = re.compile(r"^[ \t]*import[ \t]+([\w. \t,]+)", re.M)
FROM_IMPORT = re.compile(r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]+)", re.M)


@functools.cache
def _source(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _names(text: str) -> list[str]:
    """Module or member names of an import list (`a as b, c`, parenthesized or not, comments dropped)."""
    text = re.sub(r"#[^\n]*", "", text).strip().strip("()")
    return [part.split()[0] for part in text.replace("\n", " ").split(",") if part.strip()]


@functools.cache
def imported_modules(name: str, path: Path) -> frozenset[str]:
    """Every module name the file imports, anywhere in it; `from a import b` names both a and a.b."""
    source = _source(path)
    found = {module for match in IMPORT.finditer(source) for module in _names(match.group(1))}
    for match in FROM_IMPORT.finditer(source):
        base, members = match.group(1), _names(match.group(2))
        level = len(base) - len(base.lstrip("."))
        if level:
            package = _package_of(name, path).split(".")
            package = package[: len(package) - level + 1]
            base = ".".join(package + ([base.lstrip(".")] if base.lstrip(".") else []))
        found.add(base)
        found.update(f"{base}.{member}" for member in members)
    return frozenset(found)


def declared_data_files(path: Path) -> list[str]:
    """The module's DATA_FILES: a literal tuple of project-relative paths it reads at run time."""
    if DECLARATION not in _source(path):
        return []
    for node in ast.parse(_source(path), filename=str(path)).body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(t, ast.Name) and t.id == DECLARATION for t in targets) and node.value is not None:
            return list(ast.literal_eval(node.value))
    return []


def import_closure(entries: Iterable[str], root: Path = PACKAGE_ROOT) -> list[Path]:
    """The project's source files that the entry modules import, transitively, with their packages' __init__ files,
    and the data files those modules declare; sorted."""
    return list(_closure(tuple(sorted(entries)), root))


@functools.cache
def _closure(entries: tuple[str, ...], root: Path) -> tuple[Path, ...]:
    # Cached for the process: the identity is that of the code this process imported (a source edited while it
    # runs is not the code it runs), and every stage of every corpus asks again.
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
    return tuple(sorted(files))
