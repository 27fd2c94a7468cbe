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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import xxhash
from pydantic import ValidationError

from contracts.episodes import Episode
from contracts.tasks import SPLITS
from pipeline.core.canonical import (
    HASH_SCHEME_VERSION,
    TooLarge,
    canonical_bytes,
    digest,
    digest_value,
    file_blocks,
    iter_rows,
    loads_untrusted,
    pretty_json,
    read_bounded,
)
from pipeline.core.errors import ConfigError, StageError
from pipeline.core.manifest import LOCAL_DIGESTS, StageIdentity
from pipeline.core.resources import DEFAULT_BUDGET, MEMORY_ENV, MIN_BUDGET, parse_bytes
from pipeline.core.workspace import Workspace
from pipeline.release.ground_truth import trajectory
from pipeline.release.playable import store_problems
from pipeline.release.stage import (
    CARD,
    MAX_DOCUMENT_BYTES,
    RELEASE_MANIFEST,
    STORE_TABLES,
    release_version,
)
from pipeline.release.trust import DIGEST, expected_digest, folder_digest, not_expected
from pipeline.store.reader import KEYS

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


# What a dataset hub's download adds to a release folder, by exact name (huggingface_hub's download to a folder): the
# repository's .gitattributes, and its bookkeeping under .cache/huggingface/: a .gitignore, a CACHEDIR.TAG, and a
# .metadata and a .lock file per downloaded file. Nothing else is accepted beside the release's own files.
HUB_FILES = (".gitattributes", ".cache/huggingface/.gitignore", ".cache/huggingface/CACHEDIR.TAG")
HUB_DOWNLOAD = ".cache/huggingface/download/{name}.{kind}"
STAGE_MANIFEST = "manifest.json"  # the release stage's own manifest, beside release.json
REQUIRED = {
    "files": dict,
    "splits": dict,
    "counts": dict,
    "release_version": str,
    "release_digest": str,
    "manifest_xxh3": str,
}
RESTORE = "restore it from the release (or rebuild it: `telemetry-bench build`)"
CHUNK = 1 << 22  # what verify holds of a file at once while it hashes it
MAX_THRESHOLDS = 100_000  # rows of store/thresholds.parquet verify reads (a store has some dozens)


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
    if wrong == ["release_digest (str)"] and "release_digest" not in manifest:
        return None, [
            f"{path}: no release_digest: this release was built before releases carried the digest that `verify "
            "--expect` checks (sha256 of its whole content), so it cannot be verified; rebuild it with "
            "`telemetry-bench build`, or download the release again from its publisher"
        ]
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
    (libraries, raw inputs, cache keys) cannot be edited carelessly, nor can a byte of the file (spaces included)."""
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


@dataclass(frozen=True)
class _Scan:
    """One file read through once, a chunk at a time: its digests, size and rows (as pipeline.core.canonical.iter_rows
    counts them)."""

    sha256: str
    xxh3: str
    size: int
    rows: int

    @classmethod
    def of(cls, path: Path) -> _Scan:
        sha256, xxh3, size, newlines, last = hashlib.sha256(), xxhash.xxh3_128(), 0, 0, b""
        for block in file_blocks(path, CHUNK):
            sha256.update(block)
            xxh3.update(block)
            size, newlines, last = size + len(block), newlines + block.tobytes().count(b"\n"), bytes(block[-1:])
        return cls(sha256.hexdigest(), xxh3.hexdigest(), size, newlines + (last != b"\n"))

    @classmethod
    def of_bytes(cls, data: bytes) -> _Scan:
        return cls(hashlib.sha256(data).hexdigest(), digest(data), len(data), 0)


def _rows_of(path: Path, problems: list[str]) -> Iterator[bytes]:
    """A JSON-lines file's rows, one at a time; a row too long to be one a build writes ends them, with a problem."""
    with path.open("rb") as handle:
        try:
            yield from iter_rows(handle)
        except TooLarge as exc:
            problems.append(f"{path}: {exc}; {RESTORE}")


def _check_file(path: Path, name: str, entry: dict, scan: _Scan | None) -> list[str]:
    """One file against its entry: rows and their digests (a JSON-lines file), then its digests and size."""
    if scan is None:
        return [f"{path}: listed in {RELEASE_MANIFEST} but missing"]
    problems = []
    if name.endswith(".jsonl"):
        if scan.rows != entry.get("rows"):
            problems.append(f"{path}: {scan.rows} rows, {RELEASE_MANIFEST} says {entry.get('rows')}")
        expected = entry.get("row_xxh3") if isinstance(entry.get("row_xxh3"), list) else []
        for number, (row, want) in enumerate(zip(_rows_of(path, problems), expected, strict=False), start=1):
            if digest(row) != want:
                problems.append(f"{path}: row {number}{_row_id(row)} differs from {RELEASE_MANIFEST}")
                break
    changed = scan.xxh3 != entry.get("xxh3") or scan.size != entry.get("bytes") or scan.sha256 != entry.get("sha256")
    if changed and not problems:
        problems.append(f"{path}: content differs from {RELEASE_MANIFEST} (sha256, xxh3 and size)")
    return problems


Tally = Counter  # (family, split, interaction mode, commitment outcome) -> episode rows, as the counts compare them


def _tally(row: bytes, seen: Tally) -> None:
    """Count a split row that is a JSON object (a damaged row is named by the row checks, and left out here); a key is
    kept as text, so that no edit of a family, a mode or an outcome to another type hides."""
    with contextlib.suppress(ValueError):
        data = loads_untrusted(row)
        if isinstance(data, dict):
            split = data.get("split")
            seen[
                (
                    str(data.get("family")),
                    split if isinstance(split, str) else None,
                    str(data.get("interaction_mode")),
                    str(data.get("commitment_outcome")),
                )
            ] += 1


def _truth_problem(path: Path, number: int, row: bytes | None, episode: Episode, categories: dict) -> str | None:
    """Ground-truth row `number` against the trajectory of the split's row `number` (pipeline.release.ground_truth):
    equal bytes, the category (configs/families.toml, not in the release) taken from the row and checked to be one per
    family by the caller."""
    where = f"{path}: row {number} (episode {episode.id})"
    if row is None:
        return f"{where}: missing; the ground truth has a row per episode of its split; {RESTORE}"
    try:
        data = loads_untrusted(row)
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("category"), str):
        return f"{where}: not a ground-truth trajectory (a JSON object with a category); {RESTORE}"
    categories.setdefault(episode.family, set()).add(data["category"])
    try:
        expected = trajectory(episode, data["category"])
    except (KeyError, TypeError, ValueError) as exc:  # a valid episode whose golds do not fit its forms
        return (
            f"{where}: its episode has no trajectory ({type(exc).__name__}: {exc}): not a row a build writes; {RESTORE}"
        )
    if row != canonical_bytes(expected):
        return (
            f"{where}: not the ground truth of its episode (first differs at {_json_difference(data, expected)}); "
            f"{RESTORE}"
        )
    return None


def _split_rows(path: Path, truth: Path | None, seen: Tally, categories: dict) -> list[str]:
    """A split file row by row, beside its ground-truth file: every row a valid episode, every ground-truth row the
    trajectory of its episode; the rows are counted into `seen`."""
    problems: list[str] = []
    named: list[str] = []  # a row too long: named by _check_file already (both files are listed)
    truths = _rows_of(truth, named) if truth is not None else None
    schema_ok, truth_ok = True, truths is not None
    for number, row in enumerate(_rows_of(path, named), start=1):
        _tally(row, seen)
        truth_row = next(truths, None) if truths is not None else None
        if not schema_ok:
            continue
        try:
            episode = Episode.model_validate_json(row)
        except ValidationError as exc:
            problems.append(f"{path}: row {number}: not a valid episode ({exc.errors()[0]['msg']})")
            schema_ok = False
            continue
        if truth_ok and (found := _truth_problem(truth, number, truth_row, episode, categories)):
            problems.append(found)
            truth_ok = False
    if truths is not None and truth_ok and schema_ok and next(truths, None) is not None:
        problems.append(f"{truth}: more rows than {path.name} has episodes; {RESTORE}")
    return problems


def _splits(folder: Path, manifest: dict) -> tuple[list[str], Tally]:
    """Every split file the release lists, with its ground truth: the row problems, and the tally of the rows."""
    problems, seen, categories = [], Tally(), {}
    for split in SPLITS:
        path, truth = folder / f"{split}.jsonl", f"ground_truth/{split}.jsonl"
        if path.name in manifest["files"] and path.is_file():
            listed = truth in manifest["files"] and (folder / truth).is_file()
            problems += _split_rows(path, folder / truth if listed else None, seen, categories)
    problems += [
        f"{folder / 'ground_truth'}: family {family} has the categories {', '.join(sorted(names))}, not one; {RESTORE}"
        for family, names in sorted(categories.items())
        if len(names) > 1
    ]
    return problems, seen


def _recount(folder: Path, manifest: dict, seen: Tally) -> list[str]:
    """The counts release.json claims, recomputed from the split files' rows (`_tally`)."""

    def tally(index: int) -> dict[str, int]:
        counted: Counter = Counter()
        for key, n in seen.items():
            counted[key[index]] += n
        return dict(sorted(counted.items()))

    def rows(family: str | None, split: str) -> int:
        return sum(n for key, n in seen.items() if key[1] == split and family in (None, key[0]))

    counts = {
        "family": tally(0),
        "split": {s: rows(None, s) for s in SPLITS},
        "interaction_mode": tally(2),
        "commitment_outcome": tally(3),
        "family_x_split": {f: {s: rows(f, s) for s in SPLITS} for f in sorted({key[0] for key in seen})},
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
            {
                "counts": manifest["counts"],
                "release_version": manifest["release_version"],
                "release_digest": manifest["release_digest"],
                # the build marks every stage built from generated data (pipeline/harness/build.py: _marked)
                **({"synthetic": True} if "synthetic" in manifest else {}),
            },
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


def _stage_manifest(folder: Path, manifest: dict, scans: dict[str, _Scan | None]) -> list[str]:
    """manifest.json (the release stage's): as the build writes it, every output it lists (release.json included) has
    the digest it records, and every other claim agrees with release.json or its own cache key."""
    path = folder / STAGE_MANIFEST
    if not path.is_file():
        return [f"{path}: missing; {RESTORE}"]
    unreadable = [f"{path}: not a stage manifest (unreadable, or no outputs with xxh3); restore it from the release"]
    try:
        data = read_bounded(path, MAX_DOCUMENT_BYTES)
        stage = loads_untrusted(data)
        named = sorted((name, entry["xxh3"], entry["bytes"]) for name, entry in stage["outputs"].items())
        claims = _stage_claims(stage, manifest)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return unreadable
    if not all(isinstance(name, str) and _safe_name(name) for name, _, _ in named):
        return unreadable
    problems = [
        f"{folder / name}: differs from {STAGE_MANIFEST} (xxh3 or size)"
        for name, xxh3, size in named
        if scans.get(name) is None or scans[name].xxh3 != xxh3 or scans[name].size != size
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
    """The thresholds release.json claims, against the release's own store table where it carries one (read only when
    it is the size of a thresholds table)."""
    path, claimed = folder / STORE_TABLES / "thresholds.parquet", manifest.get("thresholds")
    if not path.is_file() or claimed is None:
        return []
    if not isinstance(claimed, dict):
        return [f"{folder / RELEASE_MANIFEST}: thresholds is not a table of names and values; {RESTORE}"]
    try:
        if path.stat().st_size > MAX_DOCUMENT_BYTES:
            return [f"{path}: larger than a thresholds table; restore it from the release"]
        table = pq.ParquetFile(path)
        if table.metadata.num_rows > MAX_THRESHOLDS:
            return [
                f"{path}: {table.metadata.num_rows} rows, more than a thresholds table; restore it from the release"
            ]
        rows = table.read().to_pylist()
    except (OSError, ValueError, pa.ArrowException) as exc:  # pyarrow's ArrowInvalid is a ValueError
        return [f"{path}: not a readable Parquet file ({type(exc).__name__}); restore it from the release"]
    stored = {row.get("name"): row.get("value") for row in rows if isinstance(row.get("name"), str)}
    wrong = sorted(k for k, v in claimed.items() if stored.get(k) != v)
    return (
        [f"{folder / RELEASE_MANIFEST}: thresholds {', '.join(wrong)} disagree with {STORE_TABLES}/thresholds.parquet"]
        if wrong
        else []
    )


def _unknown_files(folder: Path, manifest: dict) -> list[str]:
    """Files of the folder that are neither the release's nor, by exact name, what a hub's download adds."""
    known = {*manifest["files"], RELEASE_MANIFEST, STAGE_MANIFEST}
    downloaded = [*known, HUB_FILES[0]]
    hub = {*HUB_FILES, *(HUB_DOWNLOAD.format(name=n, kind=k) for n in downloaded for k in ("metadata", "lock"))}
    found = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() or p.is_symlink())
    return [
        f"{folder / name}: not part of the release (release.json does not list it); remove it"
        for name in found
        if name not in known and name not in hub
    ]


def _release_digests(folder: Path, manifest: dict, card_intact: bool) -> tuple[list[str], str | None]:
    """release_version and release_digest recomputed from the content (release.json's checked claims and the card):
    the problems, and the release digest (None when the card cannot be read). A card that is not the one release.json
    lists is named by its own file check: the digest it changes is not blamed on release.json too."""
    path, card = folder / RELEASE_MANIFEST, folder / CARD
    problems = []
    try:
        version = release_version(manifest["files"])
    except ValueError as exc:  # a value the canonical writer refuses (NaN)
        return [f"{path}: holds a value no build writes ({exc}); {RESTORE}"], None
    if manifest["release_version"] != version:
        problems.append(
            f"{path}: release_version {manifest['release_version']} is not the digest of the files ({version}): edited "
            f"after the build; {RESTORE}"
        )
    claimed = manifest["release_digest"]
    if not DIGEST.fullmatch(claimed):
        return [*problems, f"{path}: release_digest {claimed!r} is not a sha256 digest; {RESTORE}"], None
    try:
        actual = folder_digest(folder, manifest)
        text = read_bounded(card, MAX_DOCUMENT_BYTES)
    except OSError as exc:
        return [*problems, f"{card}: cannot be read ({exc.strerror or exc}); {RESTORE}"], None
    except ValueError as exc:  # larger than a card, or a value the canonical writer refuses
        return [*problems, f"{card}: {exc}; {RESTORE}"], None
    if claimed.encode("ascii") not in text:
        problems.append(f"{card}: does not state the release digest; {RESTORE}")
    if actual != claimed and card_intact:
        problems.append(
            f"{path}: release_digest is not the digest of the content (that is sha256:{actual}): edited after the "
            f"build; {RESTORE}"
        )
    return problems, actual


def verify_release(folder: Path, expect: str | None = None) -> list[str]:
    """Problems of a release folder against its release.json: every claim recomputed from the folder where it can be
    (hashes, rows, schema, ground truth, counts, thresholds, the stage manifest, release_version, the release digest),
    release.json's own digest for the rest, and no unknown file; with `expect` (a digest the user trusts: `build`
    printed it, the card of the publisher states it), the content's digest must be that one, since a folder, rewritten
    whole, agrees with itself. Files are read a chunk and a row at a time. Empty: it is intact."""
    wanted = expected_digest(expect) if expect is not None else None
    manifest_path = folder / RELEASE_MANIFEST
    if not manifest_path.is_file():
        return [f"{manifest_path}: missing; not a release folder (run `telemetry-bench build`)"]
    try:
        own = read_bounded(manifest_path, MAX_DOCUMENT_BYTES)
    except (OSError, TooLarge) as exc:
        return [f"{manifest_path}: cannot be read ({exc}); {RESTORE}"]
    manifest, problems = _load_manifest(manifest_path, own)
    if manifest is None:
        return problems
    problems += _self_digest(manifest_path, manifest, own)
    scans: dict[str, _Scan | None] = {RELEASE_MANIFEST: _Scan.of_bytes(own)}
    changed = set()  # the files that are not as release.json lists them
    for name, entry in sorted(manifest["files"].items()):
        path = folder / name
        try:
            scans[name] = _Scan.of(path) if path.is_file() else None
            file_problems = _check_file(path, name, entry, scans[name])
        except OSError as exc:
            scans[name] = None
            file_problems = [f"{path}: cannot be read ({exc.strerror or exc}); {RESTORE}"]
        problems += file_problems
        changed |= {name} if file_problems else set()
    row_problems, seen = _splits(folder, manifest)
    digest_problems, actual = _release_digests(folder, manifest, card_intact=CARD not in changed)
    # counts recomputed from a split file already named as changed (a row no longer an episode is not counted) would
    # blame release.json for that file's change: they are compared only when every split file is as listed
    intact_splits = not any(f"{split}.jsonl" in changed for split in SPLITS)
    problems += (
        row_problems
        + (_recount(folder, manifest, seen) if intact_splits else [])
        + _thresholds(folder, manifest)
        + _stage_manifest(folder, manifest, scans)
        + _unknown_files(folder, manifest)
        + digest_problems
    )
    stored = [f"{STORE_TABLES}/{table}.parquet" for table in KEYS]
    if not problems and all(name in manifest["files"] for name in stored):  # intact, but for what its values say
        problems += store_problems(folder)
    # with --expect, a folder with a problem above is told by that problem alone (the file that changed), whichever
    # file it is; the digest you trust speaks for a folder that agrees with itself, as one rewritten whole does
    if wanted is not None and not problems and (refused := not_expected(folder, actual, wanted)):
        problems.append(refused)
    return problems


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


def _halved_budget() -> dict[str, str]:
    """The memory budget of each rebuild: half the build's (TELEMETRY_BENCH_MEMORY, else the default), since the two
    run at once and together keep to what one build may use."""
    given = os.environ.get(MEMORY_ENV)
    budget = parse_bytes(given) if given else DEFAULT_BUDGET
    if budget // 2 < MIN_BUDGET:
        raise ConfigError(
            f"{MEMORY_ENV}={given}: verify runs its two rebuilds at once, each on half of it; give at least "
            f"{2 * MIN_BUDGET >> 20}MB"
        )
    return {MEMORY_ENV: str(budget // 2)}


def _start(ws: Workspace, artifacts: Path, corpora: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """One rebuild in a process of its own, its output and errors in `log`.json and `log`.err."""
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
    with log.with_suffix(".json").open("wb") as out, log.with_suffix(".err").open("wb") as err:
        return subprocess.Popen(
            command, stdout=out, stderr=err, env={**os.environ, **env, "TELEMETRY_BENCH_QUIET": "1"}
        )


def _finish(process: subprocess.Popen, env: dict[str, str], log: Path) -> list[dict]:
    if process.wait() != 0:
        errors = log.with_suffix(".err").read_text(encoding="utf-8", errors="replace")
        raise StageError(f"rebuild failed ({' '.join(f'{k}={v}' for k, v in env.items())}): {errors.strip()[-2000:]}")
    return json.loads(log.with_suffix(".json").read_text(encoding="utf-8"))


def replay(ws: Workspace, corpora: list[str]) -> dict:
    """Build twice from raw in fresh folders under different environments; compare runs and the committed release."""
    with tempfile.TemporaryDirectory(prefix="tb-verify-") as tmp:
        runs = [Path(tmp) / "a", Path(tmp) / "b"]
        logs = [Path(tmp) / "a-build", Path(tmp) / "b-build"]
        environments = tuple({**env, **_halved_budget()} for env in _environments())
        # both at once: the first is one thread, one worker, one partition, so that alone it leaves the other cores idle
        started = [_start(ws, *each) for each in zip(runs, [corpora] * 2, environments, logs, strict=True)]
        try:
            outcomes = [_finish(*each) for each in zip(started, environments, logs, strict=True)]
        finally:
            for process in started:  # a failed rebuild ends the replay: the other is not left running
                if process.poll() is None:
                    process.kill()
                    process.wait()
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
