"""Library entry points behind the ingest CLI commands."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from contracts.corpus import CORPUS_NAME
from pipeline.core import checksums
from pipeline.core.config import load_mapping, select_corpora
from pipeline.core.workspace import Workspace
from pipeline.ingest.stage import read_report

if TYPE_CHECKING:
    from pipeline.ingest.draft_plan import PlanFn


def ingest_summary(ws: Workspace, corpus: str) -> dict:
    select_corpora(ws, [corpus])
    report = read_report(ws.stage_dir(corpus, "ingest"))
    return {
        "corpus": corpus,
        "sites": report.sites,
        "streams": report.streams,
        "observations": report.observations,
        "rejects": report.rejects,
        "rejects_by_reason": report.rejects_by_reason,
        "raw_value_cells": report.raw_value_cells,
        "missing_columns": [f"{m.source}:{m.column}" for m in report.missing_columns],
        "duplicate_streams": report.duplicate_streams,
    }


def checksum_corpus(ws: Workspace, corpus: str, write: bool) -> str:
    select_corpora(ws, [corpus])
    mapping = load_mapping(ws.corpus_config(corpus))
    folder = ws.raw_dir(corpus, mapping.raw_dir)
    if write:
        return f"{folder / checksums.SUMS_NAME}: {checksums.write_sums(folder)} files"
    if not (folder / checksums.SUMS_NAME).is_file():
        return f"{folder}: no {checksums.SUMS_NAME}; write one with --write"
    return f"{folder}: {len(checksums.verify(folder))} files match {checksums.SUMS_NAME}"


def draft_corpus(
    ws: Workspace, folder: str, name: str, force: bool, out: str | None = None, plan: PlanFn | None = None
) -> tuple[dict, list[str], list[str]]:
    """Write configs/corpora/<name>.toml (and <name>/points.csv without Brick graphs) drafted from a raw folder;
    into `out` instead when given. Returns the guesses, the files written and the plan lines (`plan` states what a
    build would do with the corpus's span: the tasks layer's rule, which this layer may not import)."""
    from pathlib import Path

    from pipeline.core.canonical import atomic_write_bytes
    from pipeline.core.config import load_lexicon
    from pipeline.core.errors import ConfigError
    from pipeline.ingest.draft import draft

    if not re.fullmatch(CORPUS_NAME, name):
        raise ConfigError(f"--name {name!r}: use lowercase letters, digits, '_' and '-' (it names folders)")
    raw = Path(folder).resolve()
    if not raw.is_dir():
        raise ConfigError(f"{folder}: no such folder; give the folder that holds the corpus's raw files")
    try:
        inside = raw.relative_to(ws.root.resolve()).as_posix()
    except ValueError:
        raise ConfigError(
            f"{folder}: outside the project {ws.root}; copy or link it to data/raw/{name} (raw data "
            "lives in the project, so that the mapping names no machine's paths)"
        ) from None
    if out is None:
        mapping_path, points_path = ws.corpus_config(name), ws.corpus_metadata_dir(name) / "points.csv"
    else:
        mapping_path, points_path = Path(out) / f"{name}.toml", Path(out) / name / "points.csv"
    result = draft(raw, name, None if inside == f"data/raw/{name}" else inside, load_lexicon(ws), plan)
    targets = [mapping_path] + ([points_path] if result.points is not None else [])
    existing = [p for p in targets if p.exists()]
    if existing and not force:
        raise ConfigError(f"{existing[0]}: already exists; pass --force to overwrite it, or choose another --name")
    if result.points is not None:
        points_path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(points_path, result.points.encode("utf-8"))
    mapping_path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(mapping_path, result.mapping.encode("utf-8"))
    written = [p.relative_to(ws.root).as_posix() if p.is_relative_to(ws.root) else str(p) for p in targets]
    return result.guesses, written, result.plan
