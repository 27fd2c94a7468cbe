"""A release folder played on its own (`run`, `score`, `serve`, `evaluate` with `--release DIR`).

A release carries what playing needs: the episodes per split, the tool store's tables as Parquet (store/), the user
simulator's phrases (simulator.json) and release.json with the digests of every file. The DuckDB store is loaded
from the Parquet tables on first use, after their digests are checked, into a cache folder outside the release
(hub copies are read-only): `--cache-dir`, default the user cache directory. The release folder is never written.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import duckdb

from contracts.tasks import SPLITS
from pipeline.core.checksums import sha256_file
from pipeline.core.errors import ReleaseError
from pipeline.release.stage import RELEASE_MANIFEST, SIMULATOR, STORE_TABLES
from pipeline.runtime.simulator import Lexicon, lexicon
from pipeline.store.reader import KEYS, STORE_FILE
from pipeline.tools.access import ToolStore

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # what may become a folder name in the cache


def default_cache_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("telemetry-bench"))


@dataclass
class Release:
    """One release folder, read only."""

    folder: Path
    cache_dir: Path | None = None

    def __post_init__(self) -> None:
        self.folder = Path(self.folder).resolve()
        path = self.folder / RELEASE_MANIFEST
        if not path.is_file():
            raise ReleaseError(
                f"{self.folder}: no {RELEASE_MANIFEST}; give --release the folder of a release "
                "(artifacts/<corpus>/release/ or its copy)"
            )
        try:
            self.manifest = json.loads(path.read_text(encoding="utf-8"))
            files, corpus, version = self.manifest["files"], self.manifest["corpus"], self.manifest["release_version"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ReleaseError(
                f"{path}: not a release manifest ({type(exc).__name__}: {exc}); download the release again"
            ) from exc
        if not (isinstance(corpus, str) and NAME.match(corpus) and isinstance(version, str) and NAME.match(version)):
            raise ReleaseError(
                f"{path}: corpus {corpus!r} or release_version {version!r} is not a plain name; download the release "
                f"again"
            )
        self._checked: set[str] = set()
        missing = [name for name in files if name.startswith(f"{STORE_TABLES}/") or name == SIMULATOR]
        if len(missing) < len(KEYS) + 1:
            raise ReleaseError(
                f"{self.folder}: this release carries no tool store ({STORE_TABLES}/*.parquet, {SIMULATOR}); "
                "it was built before releases could be played on their own: rebuild it with `telemetry-bench build`"
            )
        self.cache_dir = Path(self.cache_dir) if self.cache_dir else default_cache_dir()

    @property
    def corpus(self) -> str:
        return self.manifest["corpus"]

    def checked(self, name: str) -> Path:
        """A file of the release, once its sha256 is checked against release.json (a damaged copy is refused)."""
        path = self.folder / name
        if name not in self._checked:
            entry = self.manifest["files"].get(name)
            if entry is None or not path.is_file():
                raise ReleaseError(f"{path}: missing from the release; download it again")
            if sha256_file(path) != entry["sha256"]:
                raise ReleaseError(
                    f"{path}: does not match {RELEASE_MANIFEST} (sha256); the copy is damaged: download the "
                    "release again (`telemetry-bench verify --release DIR` lists what differs)"
                )
            self._checked.add(name)
        return path

    def episodes_path(self, split: str) -> Path:
        if split not in SPLITS:
            raise ReleaseError(f"unknown split {split!r}: use one of {', '.join(SPLITS)}")
        return self.checked(f"{split}.jsonl")

    def keywords(self) -> Lexicon:
        return lexicon(json.loads(self.checked(SIMULATOR).read_text(encoding="utf-8"))["slots"])

    def store_path(self) -> Path:
        """The DuckDB store of this release in the cache, loaded from the Parquet tables on first use."""
        target = self.cache_dir / f"{self.corpus}-{self.manifest['release_version']}" / STORE_FILE
        if target.is_file():
            return target
        for table in KEYS:
            self.checked(f"{STORE_TABLES}/{table}.parquet")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            handle, tmp = tempfile.mkstemp(dir=target.parent, prefix=".store-", suffix=".duckdb")
            os.close(handle)
            os.unlink(tmp)  # DuckDB creates the file itself
            try:
                con = duckdb.connect(tmp)
                try:
                    for table, key in KEYS.items():
                        source = str(self.folder / STORE_TABLES / f"{table}.parquet")
                        con.execute(
                            f"CREATE TABLE {table} AS SELECT * FROM read_parquet(?) ORDER BY {', '.join(key)}", [source]
                        )
                    con.execute("CHECKPOINT")
                finally:
                    con.close()
                os.replace(tmp, target)  # another process may have won the race: same content
            finally:
                for leftover in (Path(tmp), Path(f"{tmp}.wal")):
                    leftover.unlink(missing_ok=True)
        except OSError as exc:
            raise ReleaseError(
                f"{target.parent}: cannot write the store cache ({exc}); give a writable --cache-dir"
            ) from exc
        return target

    def store(self) -> ToolStore:
        return ToolStore(self.store_path())
