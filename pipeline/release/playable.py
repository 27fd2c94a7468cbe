"""A release folder played on its own (`run`, `score`, `serve`, `evaluate` with `--release DIR`).

A release carries what playing needs: the episodes per split, the tool store's tables as Parquet (store/), the user
simulator's phrases (simulator.json) and release.json with the digests of every file. The DuckDB store is loaded
from the Parquet tables on first use, after their digests, columns and values (pipeline.store.invariants) are
checked, into a cache folder outside the release (hub copies are read-only): `--cache-dir`, default the user cache
directory. The release folder is never written, and nothing of it is trusted before it is checked: every file against
release.json's sha256, every document within a size and a depth, every row within a length.

The cache entry of a release is keyed by the sha256 of its release.json, which names the sha256 of every file: the
release's full content, so that two releases never share an entry. The entry is one file, named by its own digest and
written by one rename; it is used only when its bytes still have that digest, and loaded again otherwise
(pipeline.release.store_cache, which also prunes the entries long unused).

A folder rewritten whole agrees with itself; given the release digest the user trusts (`--expect`), the folder's
content digest (pipeline.release.trust) must be that one before anything is read from it, and since that digest names
every file's sha256, the files checked against release.json as they are used are the trusted release's.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb

from contracts.tasks import SPLITS
from pipeline.core.canonical import loads_untrusted, read_bounded
from pipeline.core.checksums import sha256_file
from pipeline.core.errors import ReleaseError
from pipeline.release import store_cache
from pipeline.release.stage import MAX_DOCUMENT_BYTES, RELEASE_MANIFEST, SIMULATOR, STORE_TABLES
from pipeline.release.trust import expected_digest, folder_digest, not_expected
from pipeline.runtime.simulator import Lexicon, lexicon
from pipeline.store.invariants import first_breach
from pipeline.store.reader import COLUMNS, KEYS, OPTIONAL, READER_MEMORY
from pipeline.tools.access import ToolStore

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # what may become a folder name in the cache
AGAIN = "download the release again"
VERIFY_MEMORY = "256MB"  # what verify lets DuckDB hold while it reads the store's tables (it spills beyond)


def default_cache_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("telemetry-bench"))


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


@dataclass
class Release:
    """One release folder, read only."""

    folder: Path
    cache_dir: Path | None = None
    notify: Callable[[str], None] | None = None  # where a note goes (the CLI: an `info:` line on stderr)
    expect: str | None = None  # the release digest the user trusts (`--expect`): any other content is refused

    def __post_init__(self) -> None:
        self.folder = Path(self.folder).resolve()
        path = self.folder / RELEASE_MANIFEST
        if not path.is_file():
            raise ReleaseError(
                f"{self.folder}: no {RELEASE_MANIFEST}; give --release the folder of a release "
                "(artifacts/<corpus>/release/ or its copy)"
            )
        try:
            data = read_bounded(path, MAX_DOCUMENT_BYTES)
            self.manifest = loads_untrusted(data)
            files, corpus, version = self.manifest["files"], self.manifest["corpus"], self.manifest["release_version"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ReleaseError(f"{path}: not a release manifest ({type(exc).__name__}: {exc}); {AGAIN}") from exc
        if not (isinstance(corpus, str) and NAME.match(corpus) and isinstance(version, str) and NAME.match(version)):
            raise ReleaseError(f"{path}: corpus {corpus!r} or release_version {version!r} is not a plain name; {AGAIN}")
        if not isinstance(files, dict) or not all(
            isinstance(entry, dict) and isinstance(entry.get("sha256"), str) for entry in files.values()
        ):
            raise ReleaseError(f"{path}: files is not a table of file entries with a sha256; {AGAIN}")
        self.content_key = hashlib.sha256(data).hexdigest()  # names every file's sha256: the release's content
        self.digest = _digest(self.folder, self.manifest)
        wanted = expected_digest(self.expect) if self.expect is not None else None
        if wanted is not None and (refused := not_expected(self.folder, self.digest, wanted)):
            raise ReleaseError(refused)
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
                raise ReleaseError(f"{path}: missing from the release; {AGAIN}")
            try:
                actual = sha256_file(path)
            except OSError as exc:
                raise ReleaseError(f"{path}: cannot be read ({exc.strerror or exc}); {AGAIN}") from exc
            if actual != entry["sha256"]:
                raise ReleaseError(
                    f"{path}: does not match {RELEASE_MANIFEST} (sha256); the copy is damaged: {AGAIN} "
                    "(`telemetry-bench verify --release DIR` lists what differs)"
                )
            self._checked.add(name)
        return path

    def episodes_path(self, split: str) -> Path:
        if split not in SPLITS:
            raise ReleaseError(f"unknown split {split!r}: use one of {', '.join(SPLITS)}")
        return self.checked(f"{split}.jsonl")

    def keywords(self) -> Lexicon:
        """The user simulator's phrases per slot, from simulator.json ({"slots": {slot: [phrase, ...]}})."""
        path = self.checked(SIMULATOR)
        try:
            slots = loads_untrusted(read_bounded(path, MAX_DOCUMENT_BYTES))["slots"]
            valid = isinstance(slots, dict) and all(
                isinstance(phrases, list) and all(isinstance(p, str) for p in phrases) for phrases in slots.values()
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ReleaseError(f"{path}: not the simulator's phrases ({type(exc).__name__}: {exc}); {AGAIN}") from exc
        if not valid:
            raise ReleaseError(f'{path}: not the simulator\'s phrases ({{"slots": {{slot: [phrase, ...]}}}}); {AGAIN}')
        return lexicon(slots)

    def store_path(self) -> Path:
        """The DuckDB store of this release in the cache: the entry of this release's content when its bytes are
        intact, else loaded again from the Parquet tables (their digests, columns and invariants checked first), said
        in one `info:` line; older entries of the cache are pruned (pipeline.release.store_cache)."""
        entry = self.cache_dir / f"{self.corpus}-{self.content_key}"
        store_cache.touch(entry)  # in use from now: a pruning run leaves it (checking its digest takes a while)
        found, why = store_cache.intact(entry)
        if found is None:
            for table in [*KEYS, *(t for t in OPTIONAL if f"{STORE_TABLES}/{t}.parquet" in self.manifest["files"])]:
                self.checked(f"{STORE_TABLES}/{table}.parquet")
            try:
                found = store_cache.write(entry, self._load)
            except OSError as exc:
                raise ReleaseError(
                    f"{entry}: cannot write the store cache ({exc}); give a writable --cache-dir"
                ) from exc
            self._note(f"loaded the tool store of {self.folder} into the cache, {found} ({why})")
        pruned = store_cache.prune(self.cache_dir, entry)
        if pruned:
            self._note(
                f"pruned {len(pruned)} store cache entr{'ies' if len(pruned) > 1 else 'y'} unused for an hour, beyond "
                f"the {store_cache.KEEP} most recently used, from {self.cache_dir}: {', '.join(pruned)}"
            )
        return found

    def _note(self, text: str) -> None:
        if self.notify is not None:
            self.notify(text)

    def _load(self, path: Path) -> None:
        """Every Parquet table of the release into a new DuckDB file, sorted by its key, once its columns and the
        store's invariants are checked."""
        spills = Path(tempfile.gettempdir()) / f"telemetry-bench-load-{os.getpid()}"
        con = duckdb.connect(str(path), config={"memory_limit": READER_MEMORY, "temp_directory": str(spills)})
        try:
            _tables(con, self.folder, view=False)
            _check_values(con, self.folder)
            con.execute("CHECKPOINT")
        finally:
            con.close()

    def store(self) -> ToolStore:
        return ToolStore(self.store_path())


def _digest(folder: Path, manifest: dict) -> str | None:
    """The folder's release digest (pipeline.release.trust), which its traces record; None when release.json claims
    none or the card cannot be read (then no digest can be expected of it)."""
    try:
        return folder_digest(folder, manifest)
    except (OSError, ValueError, TypeError):  # TypeError: a claim of another type than a build writes
        return None


def _tables(con: duckdb.DuckDBPyConnection, folder: Path, *, view: bool) -> None:
    """Every Parquet table of a release's store as a table sorted by its key (or, with `view`, a view reading the file
    in place), each refused in one line when it is not a Parquet file of the table's columns (reader.COLUMNS)."""
    optional = [(t, k) for t, k in OPTIONAL.items() if (folder / STORE_TABLES / f"{t}.parquet").is_file()]
    for table, key in [*KEYS.items(), *optional]:
        source = folder / STORE_TABLES / f"{table}.parquet"
        try:
            described = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(source)]).fetchall()
            columns = ", ".join(f"{name} {kind}" for name, kind, *_ in described)
            if columns != COLUMNS[table]:
                raise ReleaseError(f"{source}: not the store's {table} table (its columns: {columns[:300]}); {AGAIN}")
            if view:  # a view takes no parameters: the path as a literal
                literal = "'" + str(source).replace("'", "''") + "'"
                con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet({literal})")
            else:
                con.execute(
                    f"CREATE TABLE {table} AS SELECT * FROM read_parquet(?) ORDER BY {', '.join(key)}", [str(source)]
                )
        except duckdb.Error as exc:
            raise ReleaseError(f"{source}: not a readable Parquet table ({_first_line(exc)}); {AGAIN}") from exc


def _check_values(con: duckdb.DuckDBPyConnection, folder: Path) -> None:
    """The store's invariants (pipeline.store.invariants) over the tables or views of `_tables`, the first one broken
    refused in one line naming the file, table and column."""
    try:
        breach = first_breach(con)
    except duckdb.Error as exc:  # a view reads its file only now (its text not UTF-8, say): DuckDB names the file
        raise ReleaseError(
            f"{folder / STORE_TABLES}: not a readable Parquet table ({_first_line(exc)}); {AGAIN}"
        ) from exc
    if breach is not None:
        raise ReleaseError(
            f"{folder / STORE_TABLES / breach.table}.parquet: {breach.message()}: not what the store stage writes, so "
            f"the release was altered after it was built; {AGAIN} (or rebuild it: `telemetry-bench build`)"
        )


def store_problems(folder: Path) -> list[str]:
    """`verify --release`: the store's tables, columns and invariants, read in place (views over the Parquet files,
    within VERIFY_MEMORY; nothing is written but DuckDB's spills): the one problem found first, or none."""
    spills = Path(tempfile.gettempdir()) / f"telemetry-bench-verify-{os.getpid()}"
    con = duckdb.connect(config={"memory_limit": VERIFY_MEMORY, "temp_directory": str(spills)})
    try:
        _tables(con, folder, view=True)
        _check_values(con, folder)
    except ReleaseError as exc:
        return [str(exc)]
    finally:
        con.close()
    return []
