"""Verification: a release against its own manifest, and two clean rebuilds against each other and the commit."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from pydantic import ValidationError

from contracts.episodes import Episode
from contracts.tasks import SPLITS
from pipeline.core.canonical import HASH_SCHEME_VERSION, digest, digest_value, loads_untrusted, pretty_json
from pipeline.core.errors import StageError
from pipeline.core.manifest import LOCAL_DIGESTS, StageIdentity
from pipeline.core.workspace import Workspace
from pipeline.release.stage import RELEASE_MANIFEST, STORE_TABLES

# Never byte-identical between builds: the store file (its tables are compared by logical digest) and its recorded
# size and digest.
IGNORED = {"store.duckdb", LOCAL_DIGESTS}
ENVIRONMENTS = (
    {
        "TELEMETRY_BENCH_THREADS": "1",
        "PYTHONHASHSEED": "0",
        "TZ": "UTC",
        "LC_ALL": "C",
        "POLARS_MAX_THREADS": "1",
        "TELEMETRY_BENCH_PARTITIONS": "1",
        "TELEMETRY_BENCH_WORKERS": "1",
    },
    # Another split of the work too: three hash partitions on two spawned workers.
    {
        "TELEMETRY_BENCH_THREADS": "2",
        "PYTHONHASHSEED": "4242",
        "TZ": "Pacific/Auckland",
        "LC_ALL": "C.UTF-8",
        "POLARS_MAX_THREADS": "2",
        "TELEMETRY_BENCH_PARTITIONS": "3",
        "TELEMETRY_BENCH_WORKERS": "2",
    },
)


def _row_id(line: bytes) -> str:
    try:
        data = loads_untrusted(line)
    except ValueError:
        return ""
    return f" (id {data.get('id') or data.get('task_id')})" if isinstance(data, dict) else ""


HUB_EXTRAS = (".gitattributes", ".cache/huggingface/")  # what dataset hubs add to a downloaded folder: allowed
STAGE_MANIFEST = "manifest.json"  # the release stage's own manifest, beside release.json
REQUIRED = {"files": dict, "splits": dict, "counts": dict, "manifest_xxh3": str}
RESTORE = "restore it from the release (or rebuild it: `telemetry-bench build`)"


def _safe_name(name: str) -> bool:
    """A file name of release.json that stays inside the folder: relative, forward slashes, no `..` or empty part."""
    parts = name.split("/")
    return (
        bool(name) and "\\" not in name and ":" not in parts[0] and all(part not in ("", ".", "..") for part in parts)
    )


def _load_manifest(path: Path, data: bytes) -> tuple[dict | None, list[str]]:
    """release.json (its bytes), or one problem line saying why it cannot be read."""
    try:
        manifest = loads_untrusted(data)
    except UnicodeDecodeError:
        return None, [f"{path}: not UTF-8 text; {RESTORE}"]
    except json.JSONDecodeError as exc:
        return None, [f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); {RESTORE}"]
    if not isinstance(manifest, dict):
        return None, [f"{path}: not a JSON object; {RESTORE}"]
    wrong = [f"{key} ({kind.__name__})" for key, kind in REQUIRED.items() if not isinstance(manifest.get(key), kind)]
    if wrong:
        return None, [f"{path}: no {', '.join(wrong)} key; {RESTORE}"]
    bad = sorted(
        name for name, entry in manifest["files"].items() if not isinstance(entry, dict) or not _safe_name(name)
    )
    if bad:
        return None, [
            f"{path}: files holds {bad[0]!r}, not a file entry of a relative path inside the folder; {RESTORE}"
        ]
    return manifest, []


def _self_digest(path: Path, manifest: dict, data: bytes) -> list[str]:
    """release.json's own digest, and its bytes as the one JSON writer writes them: claims that cannot be recomputed
    (libraries, raw inputs, cache keys) cannot be edited, nor can a byte of the file (spaces included)."""
    rest = {k: v for k, v in manifest.items() if k != "manifest_xxh3"}
    try:
        if digest_value(rest) != manifest["manifest_xxh3"]:
            return [
                f"{path}: its content differs from its own digest (manifest_xxh3): edited after the build; {RESTORE}"
            ]
        if data != pretty_json(manifest).encode("utf-8"):
            return [f"{path}: not as the build writes it (spacing, key order or escapes changed); {RESTORE}"]
    except ValueError as exc:  # a float the canonical writer refuses (NaN, Infinity)
        return [f"{path}: holds a value no build writes ({exc}); {RESTORE}"]
    return []


def _rows(data: bytes) -> list[bytes]:
    return data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n")


def _read(folder: Path, names: list[str]) -> dict[str, tuple[bytes, str]]:
    """Each named file of the folder that exists, read once: its bytes and their xxh3."""
    found = {}
    for name in names:
        if (folder / name).is_file():
            data = (folder / name).read_bytes()
            found[name] = (data, digest(data))
    return found


def _check_file(path: Path, name: str, entry: dict, read: tuple[bytes, str] | None) -> list[str]:
    if read is None:
        return [f"{path}: listed in {RELEASE_MANIFEST} but missing"]
    data, xxh3 = read
    problems = []
    if name.endswith(".jsonl"):
        rows, expected_rows = _rows(data), entry.get("row_xxh3")
        if len(rows) != entry.get("rows"):
            problems.append(f"{path}: {len(rows)} rows, {RELEASE_MANIFEST} says {entry.get('rows')}")
        for number, (row, expected) in enumerate(
            zip(rows, expected_rows if isinstance(expected_rows, list) else [], strict=False), start=1
        ):
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
    changed = (
        xxh3 != entry.get("xxh3")
        or len(data) != entry.get("bytes")
        or hashlib.sha256(data).hexdigest() != entry.get("sha256")
    )
    if changed and not problems:
        problems.append(f"{path}: content differs from {RELEASE_MANIFEST} (sha256, xxh3 and size)")
    return problems


def _episode_rows(read: dict[str, tuple[bytes, str]]) -> list[dict]:
    """The split files' rows that are JSON objects (a damaged row is named by _check_file, and left out here)."""
    episodes = []
    for split in SPLITS:
        data = read.get(f"{split}.jsonl", (b"", ""))[0]
        for line in _rows(data) if data else []:
            with contextlib.suppress(ValueError):
                row = loads_untrusted(line)
                if isinstance(row, dict):
                    episodes.append(row)
    return episodes


def _recount(folder: Path, manifest: dict, read: dict[str, tuple[bytes, str]]) -> list[str]:
    """The counts release.json claims, recomputed from the split files (a key is compared as text, so that no edit of
    a family, a mode or an outcome to another type hides)."""
    episodes = _episode_rows(read)
    tally = lambda key: dict(sorted(Counter(str(e.get(key)) for e in episodes).items()))  # noqa: E731
    families = sorted({str(e.get("family")) for e in episodes})
    counts = {
        "family": tally("family"),
        "split": {s: sum(e.get("split") == s for e in episodes) for s in SPLITS},
        "interaction_mode": tally("interaction_mode"),
        "commitment_outcome": tally("commitment_outcome"),
        "family_x_split": {
            f: {s: sum(str(e.get("family")) == f and e.get("split") == s for e in episodes) for s in SPLITS}
            for f in families
        },
    }
    claimed = manifest["counts"]
    problems = [
        f"{folder / RELEASE_MANIFEST}: counts.{key} {claimed.get(key)} disagree with the split files {value}"
        for key, value in counts.items()
        if claimed.get(key) != value
    ]
    problems += [
        f"{folder / RELEASE_MANIFEST}: counts.{key} is claimed but cannot be recomputed: not written by a build"
        for key in sorted(set(claimed) - set(counts))
    ]
    if manifest["splits"] != counts["split"]:
        problems.append(
            f"{folder / RELEASE_MANIFEST}: splits {manifest['splits']} disagree with the split files {counts['split']}"
        )
    return problems


def _stage_claims(stage: dict, manifest: dict) -> list[str]:
    """What manifest.json claims beside its outputs, recomputed: its cache key from the identity fields it records, the
    inputs, counts, libraries and version that release.json (self-digested) also states."""
    identity = {
        k: stage.get(k)
        for k in ("corpus", "stage", "code_version", "contract_hash", "config_hash", "libraries", "inputs")
    }
    if stage.get("scheme_version") != HASH_SCHEME_VERSION:
        return [f"scheme_version {stage.get('scheme_version')!r}, not this tool's {HASH_SCHEME_VERSION}"]
    wrong = (
        []
        if StageIdentity(**identity).cache_key == stage.get("cache_key")
        else ["cache_key (not the digest of its identity)"]
    )
    inputs = stage["inputs"] if isinstance(stage.get("inputs"), dict) else {}
    files = manifest["files"]
    expected = {
        "corpus": (identity["corpus"], manifest.get("corpus")),
        "stage": (identity["stage"], "release"),
        "libraries": (identity["libraries"], manifest.get("libraries")),
        "row_counts": (stage.get("row_counts"), manifest["splits"]),
        "details": (
            stage.get("details"),
            {"counts": manifest["counts"], "release_version": manifest.get("release_version")},
        ),
        "logical_digests": (stage.get("logical_digests"), {}),
        "inputs.tool_registry": (inputs.get("tool_registry"), manifest.get("tool_registry_version")),
        **{
            f"inputs.{name}/{key}": (inputs.get(f"{name}/{key}"), entry.get(key) if isinstance(entry, dict) else entry)
            for name, entry in (manifest["stages"].items() if isinstance(manifest.get("stages"), dict) else [])
            for key in ("config_hash", "outputs")
        },
        **{
            f"inputs.{key}": (inputs.get(key), files.get(name, {}).get("xxh3"))
            for key, name in [
                *((f"audit/{s}.jsonl", f"{s}.jsonl") for s in SPLITS),
                *((k, k) for k in inputs if k.startswith(f"{STORE_TABLES}/") and k.endswith(".parquet")),
            ]
        },
    }
    return wrong + [name for name, (claimed, actual) in expected.items() if claimed != actual]


def _stage_manifest(folder: Path, manifest: dict, read: dict[str, tuple[bytes, str]]) -> list[str]:
    """manifest.json (the release stage's): as the build writes it, every output it lists (release.json included) has
    the digest it records, and every other claim agrees with release.json or its own cache key."""
    path = folder / STAGE_MANIFEST
    if not path.is_file():
        return [f"{path}: missing; {RESTORE}"]
    data = path.read_bytes()
    unreadable = [f"{path}: not a stage manifest (unreadable, or no outputs with xxh3); restore it from the release"]
    try:
        stage = loads_untrusted(data)
        named = sorted((name, entry["xxh3"], entry["bytes"]) for name, entry in stage["outputs"].items())
        claims = _stage_claims(stage, manifest)
    except (ValueError, KeyError, TypeError, AttributeError):
        return unreadable
    if not all(isinstance(name, str) and _safe_name(name) for name, _, _ in named):
        return unreadable
    problems = [
        f"{folder / name}: differs from {STAGE_MANIFEST} (xxh3 or size)"
        for name, xxh3, size in named
        if name not in read or read[name][1] != xxh3 or len(read[name][0]) != size
    ]
    if set(stage["outputs"]) != {*manifest["files"], RELEASE_MANIFEST}:
        problems.append(f"{path}: its outputs are not the files of {RELEASE_MANIFEST}; restore it from the release")
    if claims:
        problems.append(
            f"{path}: {', '.join(claims)} disagree with {RELEASE_MANIFEST}: edited after the build; restore it from "
            f"the release"
        )
    try:
        if data != pretty_json(stage).encode("utf-8"):
            problems.append(
                f"{path}: not as the build writes it (spacing, key order or escapes changed); restore it from the "
                f"release"
            )
    except ValueError as exc:
        problems.append(f"{path}: holds a value no build writes ({exc}); restore it from the release")
    return problems


def _thresholds(folder: Path, manifest: dict) -> list[str]:
    """The thresholds release.json claims, against the release's own store table where it carries one."""
    path, claimed = folder / STORE_TABLES / "thresholds.parquet", manifest.get("thresholds")
    if not path.is_file() or claimed is None:
        return []
    if not isinstance(claimed, dict):
        return [f"{folder / RELEASE_MANIFEST}: thresholds is not a table of names and values; {RESTORE}"]
    try:
        table = pq.read_table(path).to_pylist()
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        return [f"{path}: not a readable Parquet file ({type(exc).__name__}); restore it from the release"]
    stored = {row["name"]: row["value"] for row in table if "name" in row and "value" in row}
    wrong = sorted(k for k, v in claimed.items() if stored.get(k) != v)
    return (
        [f"{folder / RELEASE_MANIFEST}: thresholds {', '.join(wrong)} disagree with {STORE_TABLES}/thresholds.parquet"]
        if wrong
        else []
    )


def _unknown_files(folder: Path, manifest: dict) -> list[str]:
    known = {*manifest["files"], RELEASE_MANIFEST, STAGE_MANIFEST}
    found = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() or p.is_symlink())
    return [
        f"{folder / name}: not part of the release (release.json does not list it); remove it"
        for name in found
        if name not in known and not any(name == h or name.startswith(h) for h in HUB_EXTRAS)
    ]


def verify_release(folder: Path) -> list[str]:
    """Problems of a release folder against its release.json: every claim recomputed from the folder where it can be
    (hashes, rows, schema, counts, thresholds, the stage manifest), release.json's own digest for the rest, and no
    unknown file. Empty: it is intact."""
    manifest_path = folder / RELEASE_MANIFEST
    if not manifest_path.is_file():
        return [f"{manifest_path}: missing; not a release folder (run `telemetry-bench build`)"]
    own = manifest_path.read_bytes()
    manifest, problems = _load_manifest(manifest_path, own)
    if manifest is None:
        return problems
    problems += _self_digest(manifest_path, manifest, own)
    read = {**_read(folder, sorted(manifest["files"])), RELEASE_MANIFEST: (own, digest(own))}  # each file read once
    for name, entry in sorted(manifest["files"].items()):
        problems += _check_file(folder / name, name, entry, read.get(name))
    return (
        problems
        + _recount(folder, manifest, read)
        + _thresholds(folder, manifest)
        + _stage_manifest(folder, manifest, read)
        + _unknown_files(folder, manifest)
    )


def first_difference(a: Path, b: Path) -> str:
    """Where two versions of an output first differ: row and key for JSONL and Parquet, key path for JSON."""
    if not b.exists():
        return "missing in the other run"
    if a.suffix == ".jsonl":
        return _jsonl_difference(a, b)
    if a.suffix == ".parquet":
        return _parquet_difference(a, b)
    if a.suffix == ".json":
        return f"key {_json_difference(json.loads(a.read_text()), json.loads(b.read_text()))}"
    left, right = a.read_bytes(), b.read_bytes()
    offset = next((i for i, (x, y) in enumerate(zip(left, right, strict=False)) if x != y), min(len(left), len(right)))
    return f"byte {offset}"


def _jsonl_difference(a: Path, b: Path) -> str:
    """The first differing row (with its id), or the row counts."""
    left, right = a.read_bytes().split(b"\n"), b.read_bytes().split(b"\n")
    for number, (x, y) in enumerate(zip(left, right, strict=False), start=1):
        if x != y:
            return f"row {number}{_row_id(x)}"
    return f"row count {len(left) - 1} vs {len(right) - 1}"


def _parquet_difference(a: Path, b: Path) -> str:
    """The first differing cell, column by column; or the schema, row count, or only the encoding."""
    x, y = pq.read_table(a), pq.read_table(b)
    if x.schema != y.schema or x.num_rows != y.num_rows:
        return f"schema or row count ({x.num_rows} vs {y.num_rows} rows)"
    for column in x.column_names:
        left, right = x[column].to_pylist(), y[column].to_pylist()
        for row, (p, q) in enumerate(zip(left, right, strict=True)):
            if p != q:
                return f"row {row}, column {column}: {p!r} vs {q!r}"
    return "same rows, different bytes (encoding or library version)"


def _json_difference(p: Any, q: Any, where: str = "$") -> str | None:
    """The key path of the first differing value of two JSON documents (keys in sorted order), None if equal."""
    if isinstance(p, dict) and isinstance(q, dict):
        for key in sorted(set(p) | set(q)):
            found = _json_difference(p.get(key), q.get(key), f"{where}.{key}")
            if found:
                return found
        return None
    return None if p == q else where


def _files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} if folder.is_dir() else set()


def compare_folders(a: Path, b: Path) -> list[str]:
    """Every file (subfolders included) that differs between two output folders, with where it first differs."""
    names = sorted(_files(a) | _files(b))
    return [
        f"{n}: {first_difference(a / n, b / n) if (a / n).exists() else 'missing in the first run'}"
        for n in names
        if Path(n).name not in IGNORED
        and (not (a / n).exists() or not (b / n).exists() or (a / n).read_bytes() != (b / n).read_bytes())
    ]


def _environments() -> tuple[dict[str, str], ...]:
    """The two rebuilds' environments; the second runs its batches and units as Ray tasks when Ray is installed."""
    first, second = ENVIRONMENTS
    if importlib.util.find_spec("ray") is not None:
        second = {**second, "TELEMETRY_BENCH_EXECUTOR": "ray"}
    return first, second


def _build(ws: Workspace, artifacts: Path, corpora: list[str], env: dict[str, str]) -> list[dict]:
    command = [
        sys.executable,
        "-m",
        "pipeline.cli",
        "--root",
        str(ws.root),
        "--artifacts",
        str(artifacts),
        "build",
        "--json",
        *[arg for c in corpora for arg in ("--corpus", c)],
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, env={**os.environ, **env, "TELEMETRY_BENCH_QUIET": "1"}
    )
    if done.returncode != 0:
        raise StageError(
            f"rebuild failed ({' '.join(f'{k}={v}' for k, v in env.items())}): {done.stderr.strip()[-2000:]}"
        )
    return json.loads(done.stdout)


def replay(ws: Workspace, corpora: list[str]) -> dict:
    """Build twice from raw in fresh folders under different environments; compare runs and the committed release."""
    with tempfile.TemporaryDirectory(prefix="tb-verify-") as tmp:
        runs = [Path(tmp) / "a", Path(tmp) / "b"]
        environments = _environments()
        outcomes = [_build(ws, folder, corpora, env) for folder, env in zip(runs, environments, strict=True)]
        rows = []
        for first, second in zip(outcomes[0], outcomes[1], strict=True):
            corpus, stage = first["corpus"], first["stage"]
            differences = compare_folders(runs[0] / corpus / stage, runs[1] / corpus / stage)
            rows.append(
                {
                    "corpus": corpus,
                    "stage": stage,
                    "status": [first["status"], second["status"]],
                    "matched": not differences and first["status"] == second["status"] == "built",
                    "differences": differences,
                }
            )
        committed = {}
        for corpus in sorted({row["corpus"] for row in rows}):  # corpora skipped for want of raw data are not compared
            differences = compare_folders(runs[0] / corpus / "release", ws.artifacts_dir / corpus / "release")
            committed[corpus] = {"matched": not differences, "differences": differences}
    ok = all(r["matched"] for r in rows) and all(c["matched"] for c in committed.values())
    executors = [env.get("TELEMETRY_BENCH_EXECUTOR", "local") for env in environments]
    return {"ok": ok, "stages": rows, "committed_release": committed, "executors": executors}
