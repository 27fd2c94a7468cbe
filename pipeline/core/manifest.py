"""Stage identity and caching: code version, contract and config hashes, manifests, atomic stage swaps."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from pydantic import BaseModel, ValidationError

from contracts.manifest import OutputFile, StageManifest
from contracts.tasks import SPLITS
from pipeline.core.build_state import LOCAL_DIGESTS, LOCK, MANIFEST, unchanged_digests
from pipeline.core.canonical import (
    HASH_SCHEME_VERSION,
    digest_file,
    digest_value,
    loads_untrusted,
    read_bounded,
    write_json,
    write_jsonl,
)
from pipeline.core.checksums import list_files
from pipeline.core.code_identity import PACKAGE_ROOT, import_closure
from pipeline.core.errors import StageError, disk_full

LIBRARIES = (
    "duckdb",
    "huggingface_hub",
    "mlcroissant",
    "numpy",
    "polars",
    "pyarrow",
    "pydantic",
    "pyoxigraph",
    "scikit-learn",
    "xxhash",
)


def library_versions() -> dict[str, str]:
    return dict(_installed_versions())


@functools.lru_cache(maxsize=1)
def _installed_versions() -> tuple[tuple[str, str], ...]:
    # What this process imported: versions do not change under it, and every stage asks again.
    return tuple((name, metadata.version(name)) for name in LIBRARIES)


def code_version(entries: Iterable[str]) -> str:
    """Content hash of the source the stage runs (the import closure of its entry modules); independent of git,
    paths and mtimes."""
    parts = [(path.relative_to(PACKAGE_ROOT).as_posix(), digest_file(path)) for path in import_closure(entries)]
    return digest_value(parts)


def data_identity(manifest: dict) -> dict[str, str]:
    """What a stage produced and from which configuration, without its code version: a release depends on its upstream
    stages through this, so an upstream code change that leaves every output byte alone leaves the release alone."""
    outputs = sorted((name, out["xxh3"]) for name, out in manifest["outputs"].items())
    return {"config_hash": manifest["config_hash"], "outputs": digest_value(outputs)}


def contract_hash(models: Iterable[type[BaseModel]]) -> str:
    return digest_value([[model.__name__, _schema(model)] for model in models])


@functools.cache
def _schema(model: type[BaseModel]) -> dict:
    return model.model_json_schema()


def hash_outputs(folder: Path, names: Iterable[str]) -> dict[str, OutputFile]:
    return {
        name: OutputFile(xxh3=digest_file(folder / name), bytes=(folder / name).stat().st_size)
        for name in sorted(names)
    }


def read_manifest(folder: Path) -> StageManifest | None:
    path = folder / MANIFEST
    if not path.is_file():
        return None
    try:
        return StageManifest.model_validate_json(path.read_text(encoding="utf-8"))
    except (ValidationError, ValueError):
        return None  # unreadable manifest: the stage is simply rebuilt


# LOCAL_DIGESTS: the size and xxh3 of a stage's unhashed outputs (store.duckdb: never byte-identical between builds, so
# never in manifest.json, which is), beside the manifest: checked before the stage is said cached, never compared
# between builds.


def _local_digests(folder: Path) -> dict[str, OutputFile]:
    """The unhashed outputs' recorded sizes and digests (none when the file is missing or unreadable)."""
    try:
        data = loads_untrusted(read_bounded(folder / LOCAL_DIGESTS, 1 << 20))
        return {name: OutputFile.model_validate(out) for name, out in data.items()}
    except (OSError, ValueError, AttributeError):  # a pydantic ValidationError is a ValueError
        return {}


# DuckDB's write-ahead log of a database file: a read-only open replays it, so an edit left in one (a writer that
# ended before its checkpoint) changes what is read while the file keeps every byte of its recorded digest.
WAL_SUFFIX = ".wal"


def damaged_output(folder: Path, manifest: StageManifest, only: Iterable[str] | None = None) -> str | None:
    """Why a stage's outputs cannot be reused (or, with `only`, those of them a reader uses): the first output that
    is missing, not of its recorded size and xxh3 (the unhashed ones against LOCAL_DIGESTS), or a database with a
    write-ahead log beside it; None when every one is intact. A file that stats as the build state recorded it is
    taken to hold the digest recorded there (pipeline.core.build_state.unchanged_digests); any other is hashed."""
    unhashed = manifest.details.get("unhashed_outputs", [])
    local = _local_digests(folder) if unhashed else {}
    recorded = [(name, out, MANIFEST) for name, out in manifest.outputs.items()]
    recorded += [(name, local.get(name), LOCAL_DIGESTS) for name in unhashed]
    chosen = None if only is None else set(only)
    known = unchanged_digests(folder)  # what stats as the last build left it needs no hashing (build_state)
    for name, out, where in recorded:
        if chosen is not None and name not in chosen:
            continue
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if out is None:
            return f"{name} has no recorded size and xxh3 in {where}"
        if path.stat().st_size != out.bytes or (known.get(name) != out.xxh3 and digest_file(path) != out.xxh3):
            return f"{name} differs from its size and xxh3 in {where} (damaged or edited)"
        if name in unhashed and os.path.lexists(f"{path}{WAL_SUFFIX}"):
            return f"{name} has a write-ahead log beside it ({name}{WAL_SUFFIX}): opened for writing after the build"
    return None


@dataclass
class StageResult:
    """What a stage's run function returns about the files it wrote into its folder."""

    outputs: list[str]
    row_counts: dict[str, int]
    logical_digests: dict[str, str] = field(default_factory=dict)
    details: dict = field(default_factory=dict)
    unhashed_outputs: list[str] = field(default_factory=list)  # e.g. a .duckdb file: checked to exist only


def write_splits(folder: Path, records: Iterable, sort_key: Callable | None = None) -> dict[str, int]:
    """Write records (models with a .split) to <split>.jsonl per split, in order (or sorted by sort_key); row counts."""
    records = list(records)
    counts = {}
    for split in SPLITS:
        rows = [r for r in records if r.split == split]
        if sort_key is not None:
            rows.sort(key=sort_key)
        write_jsonl(folder / f"{split}.jsonl", [r.model_dump(mode="json") for r in rows])
        counts[split] = len(rows)
    return counts


@dataclass(frozen=True)
class StageIdentity:
    corpus: str
    stage: str
    code_version: str
    contract_hash: str
    config_hash: str
    libraries: dict[str, str]
    inputs: dict[str, str]

    @property
    def cache_key(self) -> str:
        return digest_value(
            [
                HASH_SCHEME_VERSION,
                self.corpus,
                self.stage,
                self.code_version,
                self.contract_hash,
                self.config_hash,
                self.libraries,
                self.inputs,
            ]
        )


@dataclass(frozen=True)
class StageOutcome:
    corpus: str
    stage: str
    status: str  # "built" or "cached"
    seconds: float
    manifest: StageManifest
    note: str | None = None  # why a stage whose identity was unchanged was built again (a damaged output)


LEFTOVERS = (".*.tmp-*", ".*.old-*")  # what a build killed mid-stage leaves beside the stage folders


@contextlib.contextmanager
def corpus_lock(folder: Path, on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold artifacts/<corpus>/.build.lock while a corpus builds: a second build waits for the first (the kernel frees
    the lock when its holder dies, so a killed build never leaves a stale lock). Holding it, the build removes the
    temporary folders that a killed build left."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / LOCK).open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            if on_wait:
                on_wait(
                    f"{folder.name}: another build of this corpus is running (pid {holder}); waiting for it to finish"
                )
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(str(os.getpid()))
            handle.flush()
            for pattern in LEFTOVERS:
                for leftover in sorted(folder.glob(pattern)):
                    shutil.rmtree(leftover, ignore_errors=True)
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _swap_in(tmp: Path, final: Path) -> None:
    """Replace `final` by `tmp` so a reader sees the old folder, then the new one, never half of one."""
    old = None
    if final.exists():
        old = final.with_name(f".{final.name}.old-{os.getpid()}")
        os.replace(final, old)
    os.replace(tmp, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _reusable(identity: StageIdentity, final: Path) -> tuple[StageManifest | None, str | None]:
    """The stage's manifest when its cache key matches and its outputs are intact (every one of its recorded size and
    xxh3); else None, and why the stage is built again when only its outputs or manifest were in the way."""
    existing = read_manifest(final)
    if existing is None:
        return None, f"rebuilt: its {MANIFEST} cannot be read" if (final / MANIFEST).is_file() else None
    if existing.cache_key != identity.cache_key:
        return None, None
    why = damaged_output(final, existing)
    return (existing, None) if why is None else (None, f"rebuilt: {why}")


def _cached(identity: StageIdentity, existing: StageManifest, start: float) -> StageOutcome:
    return StageOutcome(identity.corpus, identity.stage, "cached", time.perf_counter() - start, existing)


def cached_outcome(identity: StageIdentity, final: Path) -> StageOutcome | None:
    """The outcome of a stage a build would report cached, None for one it would build."""
    start = time.perf_counter()
    existing = _reusable(identity, final)[0]
    return None if existing is None else _cached(identity, existing, start)


def run_stage(
    identity: StageIdentity, final: Path, run: Callable[[Path], StageResult], force: bool = False
) -> StageOutcome:
    """Skip the stage when its manifest's cache key matches and its outputs are intact (every one of its recorded
    size and xxh3); else build atomically, with a note saying why when only the outputs were in the way."""
    start = time.perf_counter()
    existing, note = (None, None) if force else _reusable(identity, final)
    if existing is not None:
        return _cached(identity, existing, start)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    try:
        result = run(tmp)
        details = dict(result.details)
        if result.unhashed_outputs:
            details["unhashed_outputs"] = sorted(result.unhashed_outputs)
            local = hash_outputs(tmp, result.unhashed_outputs)
            write_json(tmp / LOCAL_DIGESTS, {name: out.model_dump(mode="json") for name, out in local.items()})
        manifest = StageManifest(
            scheme_version=HASH_SCHEME_VERSION,
            corpus=identity.corpus,
            stage=identity.stage,
            code_version=identity.code_version,
            contract_hash=identity.contract_hash,
            config_hash=identity.config_hash,
            libraries=identity.libraries,
            inputs=identity.inputs,
            outputs=hash_outputs(tmp, result.outputs),
            row_counts=dict(sorted(result.row_counts.items())),
            logical_digests=dict(sorted(result.logical_digests.items())),
            cache_key=identity.cache_key,
            details=details,
        )
        write_json(tmp / MANIFEST, manifest.model_dump(mode="json"))
        os.chmod(tmp, 0o755)  # mkdtemp makes 0700
        _swap_in(tmp, final)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)  # a stage is whole or absent, a full disk too
        if full := disk_full(exc, final):
            raise full from exc
        raise
    return StageOutcome(identity.corpus, identity.stage, "built", time.perf_counter() - start, manifest, note)


def require_manifest(folder: Path, what: str) -> StageManifest:
    manifest = read_manifest(folder)
    if manifest is None:
        raise StageError(f"{folder}: no {what} manifest; run `telemetry-bench build` first")
    return manifest


def raw_inputs(folder: Path) -> dict[str, str]:
    """Content hash of every file of a raw corpus folder (its identity as an input)."""
    return {rel: digest_file(folder / rel) for rel in list_files(folder, sums=True)}


def config_digest(value: object) -> str:
    return digest_value(value)
