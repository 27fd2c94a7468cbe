"""`make bench`'s cached build: a whole `build --json` process with nothing to rebuild, over the timed corpora and over
a project grown to more corpora by copies of the smallest one (generated: same files, another name), to show the
check is flat in the number of corpora."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from pipeline.core.workspace import Workspace


def cached_cli(root: Path, artifacts: Path, corpora: list[str]) -> float:
    """Wall seconds of a whole `build --json` process with nothing to rebuild (after one untimed run that builds what
    is missing and records the state)."""
    command = [sys.executable, "-m", "pipeline.cli", "--root", str(root), "--artifacts", str(artifacts), "build"]
    command += [a for c in corpora for a in ("--corpus", c)]
    env = dict(os.environ, TELEMETRY_BENCH_QUIET="1")
    first = subprocess.run(command, capture_output=True, text=True, env=env)
    if first.returncode:
        raise RuntimeError(f"{' '.join(command)} failed: {first.stderr.strip()[-2000:]}")
    start = time.perf_counter()
    out = subprocess.run([*command, "--json"], check=True, capture_output=True, env=env)
    elapsed = time.perf_counter() - start
    assert {row["status"] for row in json.loads(out.stdout)} == {"cached"}
    return elapsed


def _link_tree(source: Path, target: Path) -> None:
    """A copy whose files are hard links where the file system allows (raw folders are tens of MB)."""

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, target, copy_function=link)


def grown_project(ws: Workspace, built: Path, corpora: list[str], total: int, folder: Path) -> tuple[Path, list[str]]:
    """A project of the timed corpora (their built artifacts copied: identities hold no paths, so they are cached) and
    copies of the smallest one up to `total` corpora; its root and every corpus name."""
    root = folder / "project"
    shutil.copytree(ws.configs_dir, root / "configs")
    for corpus in corpora:
        _link_tree(ws.raw_dir(corpus), root / "data" / "raw" / corpus)
        shutil.copytree(built / corpus, root / "artifacts" / corpus, ignore=shutil.ignore_patterns(".build.lock"))
    smallest = min(corpora, key=lambda c: sum(p.stat().st_size for p in ws.raw_dir(c).rglob("*") if p.is_file()))
    mapping = (ws.corpus_config(smallest)).read_text(encoding="utf-8")
    names = list(corpora)
    for index in range(1, total - len(corpora) + 1):
        name = f"{smallest}_g{index:02d}"
        text = mapping.replace(f'name = "{smallest}"', f'name = "{name}"', 1)
        (root / "configs" / "corpora" / f"{name}.toml").write_text(text, encoding="utf-8")
        _link_tree(ws.raw_dir(smallest), root / "data" / "raw" / name)
        if ws.corpus_metadata_dir(smallest).is_dir():  # metadata written beside the mapping (metadata.location)
            shutil.copytree(ws.corpus_metadata_dir(smallest), root / "configs" / "corpora" / name)
        names.append(name)
    return root, names


def cached_figures(ws: Workspace, built: Path, corpora: list[str], total: int, repeat: int, folder: Path) -> dict:
    """Median seconds of the cached `build --json` process over the timed corpora and over `total` corpora."""
    figures = {len(corpora): statistics.median(cached_cli(ws.root, built, corpora) for _ in range(repeat))}
    if total > len(corpora):
        root, names = grown_project(ws, built, corpora, total, folder)
        figures[len(names)] = statistics.median(cached_cli(root, root / "artifacts", names) for _ in range(repeat))
    return figures
