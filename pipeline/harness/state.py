"""The build's state (pipeline/core/build_state.py) recorded around a full build: what it read, taken before it
starts, and what it wrote, taken after it ends; nothing is recorded for a corpus whose inputs changed while it ran."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from pipeline.core import build_state
from pipeline.core.code_identity import PACKAGE_ROOT, PROJECT_PACKAGES
from pipeline.core.config import load_mapping, select_corpora
from pipeline.core.manifest import LIBRARIES
from pipeline.core.workspace import Workspace
from pipeline.harness.build import raw_folder, skip_note, stage_names


@dataclass
class Snapshot:
    """The inputs as a build is about to read them."""

    shared: build_state.Entries
    corpora: dict[str, dict]  # corpus -> {"inputs", "env", "skipped", "absent"}


def _library_files() -> list[Path]:
    """The metadata files of the libraries whose versions enter every identity (an upgrade replaces them)."""
    found = []
    for name in LIBRARIES:
        folder = getattr(metadata.distribution(name), "_path", None)
        if folder is None:
            raise LookupError(name)
        found.append(Path(folder) / "METADATA")
    return found


def snapshot(ws: Workspace, corpora: tuple[str, ...] | list[str], raw: str | None) -> Snapshot | None:
    """The code, configs, libraries and each selected corpus's raw folder, stat and digest; None when they cannot be
    listed (the build then says why, and no state is recorded)."""
    now_ns = time.time_ns()
    try:
        shared = build_state.Entries()
        for package in PROJECT_PACKAGES:
            shared.add_tree(PACKAGE_ROOT / package, now_ns)
        shared.add_tree(ws.configs_dir, now_ns)
        for path in _library_files():
            shared.files[str(path)] = build_state.file_entry(path, now_ns=now_ns)
        sections = {}
        for corpus in select_corpora(ws, corpora):
            mapping = load_mapping(ws.corpus_config(corpus))
            folder = raw_folder(ws, mapping, raw)
            env = {mapping.raw_env: os.environ.get(mapping.raw_env)} if mapping.raw_env else {}
            inputs = build_state.Entries()
            if folder is not None:
                inputs.add_tree(folder, now_ns)
            checked = Path(raw or os.environ.get(mapping.raw_env or "") or ws.raw_dir(corpus, mapping.raw_dir))
            sections[corpus] = {
                "inputs": inputs.as_json(),
                "env": env,
                # the folder the build reads as named and where it led (its files are recorded there), checked again
                "raw_links": [[str(checked), os.path.realpath(checked)]] if folder is not None else [],
                "skipped": skip_note(mapping) if folder is None else None,
                "absent": [str(checked)] if folder is None else [],
            }
    except (OSError, LookupError, ValueError):  # a project error (a ConfigError is a ValueError) is the build's to say
        return None
    return Snapshot(shared, sections)


def record(ws: Workspace, taken: Snapshot | None, outcomes: list, key: dict, until: str | None) -> None:
    """Record every corpus whose stages up to `until` all ended, unless an input changed while the build ran."""
    if taken is None or not build_state.same_stats(taken.shared.as_json()):
        return
    stages = stage_names()
    wanted = stages[: stages.index(until) + 1] if until else stages
    done: dict[str, list[str]] = {}
    for outcome in outcomes:
        done.setdefault(outcome.corpus, []).append(outcome.stage)
    now_ns = time.time_ns()
    sections = {}
    for corpus, section in taken.corpora.items():
        if section["skipped"]:
            sections[corpus] = {**section, "stages": stages, "outputs": {}}  # skipped whatever the stages
            continue
        if done.get(corpus) != wanted or not build_state.same_stats(section["inputs"]):
            continue
        try:
            outputs = {stage: build_state.stage_outputs(ws.stage_dir(corpus, stage), now_ns) for stage in wanted}
        except (OSError, ValueError, KeyError):
            continue
        sections[corpus] = {**section, "stages": wanted, "outputs": outputs}
    if sections:
        build_state.write_state(ws.artifacts_dir, key, stages, taken.shared.as_json(), sections)
