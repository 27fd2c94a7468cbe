"""Verification: a release against its own manifest, and two clean rebuilds against each other and the commit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
from pydantic import ValidationError

from contracts.episodes import Episode
from contracts.tasks import SPLITS
from pipeline.canonical import digest
from pipeline.checksums import sha256_file
from pipeline.errors import StageError
from pipeline.release.stage import RELEASE_MANIFEST
from pipeline.workspace import Workspace

IGNORED = {"store.duckdb"}  # never byte-identical between builds; its tables are compared by logical digest
ENVIRONMENTS = (
    {"TELEMETRY_BENCH_THREADS": "1", "PYTHONHASHSEED": "0", "TZ": "UTC", "LC_ALL": "C", "POLARS_MAX_THREADS": "1",
     "TELEMETRY_BENCH_PARTITIONS": "1", "TELEMETRY_BENCH_WORKERS": "1"},
    # Another split of the work too: three hash partitions on two spawned workers.
    {"TELEMETRY_BENCH_THREADS": "2", "PYTHONHASHSEED": "4242", "TZ": "Pacific/Auckland", "LC_ALL": "C.UTF-8", "POLARS_MAX_THREADS": "2",
     "TELEMETRY_BENCH_PARTITIONS": "3", "TELEMETRY_BENCH_WORKERS": "2"},
)


def _row_id(line: bytes) -> str:
    try:
        data = json.loads(line)
        return f" (id {data.get('id') or data.get('task_id')})"
    except ValueError:
        return ""


def verify_release(folder: Path) -> list[str]:
    """Problems of a release folder against its release.json: hashes, counts, rows, schema. Empty: it is intact."""
    manifest_path = folder / RELEASE_MANIFEST
    if not manifest_path.is_file():
        return [f"{manifest_path}: missing; not a release folder (run `telemetry-bench build`)"]
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    problems = []
    for name, entry in sorted(manifest["files"].items()):
        path = folder / name
        if not path.is_file():
            problems.append(f"{path}: listed in {RELEASE_MANIFEST} but missing")
            continue
        data = path.read_bytes()
        if name.endswith(".jsonl"):
            rows = data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n")
            if len(rows) != entry["rows"]:
                problems.append(f"{path}: {len(rows)} rows, {RELEASE_MANIFEST} says {entry['rows']}")
            for number, (row, expected) in enumerate(zip(rows, entry["row_xxh3"], strict=False), start=1):
                if digest(row) != expected:
                    problems.append(f"{path}: row {number}{_row_id(row)} differs from {RELEASE_MANIFEST}")
                    break
            if name in {f"{s}.jsonl" for s in SPLITS}:
                for number, row in enumerate(rows, start=1):
                    try:
                        Episode.model_validate_json(row)
                    except ValidationError as exc:
                        problems.append(f"{path}: row {number}: not a valid episode ({exc.errors()[0]['msg']})")
                        break
        changed = sha256_file(path) != entry["sha256"] or digest(data) != entry["xxh3"]
        if changed and not any(p.startswith(f"{path}:") for p in problems):
            problems.append(f"{path}: content differs from {RELEASE_MANIFEST} (sha256 and xxh3)")
    split_counts = {s: manifest["files"].get(f"{s}.jsonl", {}).get("rows") for s in SPLITS}
    if split_counts != manifest["splits"]:
        problems.append(f"{manifest_path}: split counts {manifest['splits']} disagree with the files {split_counts}")
    return problems


def first_difference(a: Path, b: Path) -> str:
    """Where two versions of an output first differ: row and key for JSONL and Parquet, key path for JSON."""
    if not b.exists():
        return "missing in the other run"
    if a.suffix == ".jsonl":
        left, right = a.read_bytes().split(b"\n"), b.read_bytes().split(b"\n")
        for number, (x, y) in enumerate(zip(left, right, strict=False), start=1):
            if x != y:
                return f"row {number}{_row_id(x)}"
        return f"row count {len(left) - 1} vs {len(right) - 1}"
    if a.suffix == ".parquet":
        x, y = pq.read_table(a), pq.read_table(b)
        if x.schema != y.schema or x.num_rows != y.num_rows:
            return f"schema or row count ({x.num_rows} vs {y.num_rows} rows)"
        for column in x.column_names:
            left, right = x[column].to_pylist(), y[column].to_pylist()
            for row, (p, q) in enumerate(zip(left, right, strict=True)):
                if p != q:
                    return f"row {row}, column {column}: {p!r} vs {q!r}"
        return "same rows, different bytes (encoding or library version)"
    if a.suffix == ".json":
        def walk(p, q, where="$"):
            if isinstance(p, dict) and isinstance(q, dict):
                for key in sorted(set(p) | set(q)):
                    found = walk(p.get(key), q.get(key), f"{where}.{key}")
                    if found:
                        return found
                return None
            return None if p == q else where
        return f"key {walk(json.loads(a.read_text()), json.loads(b.read_text()))}"
    left, right = a.read_bytes(), b.read_bytes()
    offset = next((i for i, (x, y) in enumerate(zip(left, right, strict=False)) if x != y), min(len(left), len(right)))
    return f"byte {offset}"


def _files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} if folder.is_dir() else set()


def compare_folders(a: Path, b: Path) -> list[str]:
    """Every file (subfolders included) that differs between two output folders, with where it first differs."""
    names = sorted(_files(a) | _files(b))
    return [f"{n}: {first_difference(a / n, b / n) if (a / n).exists() else 'missing in the first run'}" for n in names
            if Path(n).name not in IGNORED and (not (a / n).exists() or not (b / n).exists() or (a / n).read_bytes() != (b / n).read_bytes())]


def _build(ws: Workspace, artifacts: Path, corpora: list[str], env: dict[str, str]) -> list[dict]:
    command = [sys.executable, "-m", "pipeline.cli", "--root", str(ws.root), "--artifacts", str(artifacts), "build", "--json",
               *[arg for c in corpora for arg in ("--corpus", c)]]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **env, "TELEMETRY_BENCH_QUIET": "1"})
    if done.returncode != 0:
        raise StageError(f"rebuild failed ({' '.join(f'{k}={v}' for k, v in env.items())}): {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


def replay(ws: Workspace, corpora: list[str]) -> dict:
    """Build twice from raw in fresh folders under different environments; compare runs and the committed release."""
    with tempfile.TemporaryDirectory(prefix="tb-verify-") as tmp:
        runs = [Path(tmp) / "a", Path(tmp) / "b"]
        outcomes = [_build(ws, folder, corpora, env) for folder, env in zip(runs, ENVIRONMENTS, strict=True)]
        rows = []
        for first, second in zip(outcomes[0], outcomes[1], strict=True):
            corpus, stage = first["corpus"], first["stage"]
            differences = compare_folders(runs[0] / corpus / stage, runs[1] / corpus / stage)
            rows.append({"corpus": corpus, "stage": stage, "status": [first["status"], second["status"]],
                         "matched": not differences and first["status"] == second["status"] == "built", "differences": differences})
        committed = {}
        for corpus in sorted({row["corpus"] for row in rows}):  # corpora skipped for want of raw data are not compared
            differences = compare_folders(runs[0] / corpus / "release", ws.artifacts_dir / corpus / "release")
            committed[corpus] = {"matched": not differences, "differences": differences}
    ok = all(r["matched"] for r in rows) and all(c["matched"] for c in committed.values())
    return {"ok": ok, "stages": rows, "committed_release": committed}
