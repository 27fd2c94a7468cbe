"""Library entry points behind the ingest CLI commands."""

from __future__ import annotations

from pipeline import checksums
from pipeline.config import load_mapping, select_corpora
from pipeline.ingest.stage import read_report
from pipeline.workspace import Workspace


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
