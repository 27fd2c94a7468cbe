"""The store cache of playable releases (`--cache-dir`): its entries, how one is found intact or written, and pruning.

An entry is a folder `<corpus>-<sha256 of release.json>` holding one file, `store-<xxh3>.duckdb`, named by its own
digest and written by one rename; it is used only while its bytes still have that digest. Using an entry touches it.

Pruning keeps a cache bounded without ever taking what is not its own or what another run uses: after an entry is
used, the entries beyond the KEEP most recently used are removed when idle for IDLE_SECONDS (a run touches its entry
when it starts, so a run in progress, or one loading its entry, is never pruned under it). Only folders named as
entries and holding nothing but files this tool writes there are candidates; each is renamed away first (atomic: two
pruning runs never both take it, and a reader finds an entry whole or not at all), then its files are removed one by
one and the folder last (left in place if anything else appeared in it).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pipeline.core.canonical import digest_file

FOLDER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*-[0-9a-f]{64}$")  # an entry: the corpus, then the release's sha256
PRUNED = re.compile(r"^\.pruned-[A-Za-z0-9_.-]+$")  # an entry renamed away by a pruning run that did not finish
ENTRY = re.compile(r"^store-([0-9a-f]{32})\.duckdb$")  # the store, named by its own xxh3
LOADING = re.compile(r"^\.store-[A-Za-z0-9_]+\.duckdb(\.wal)?$")  # a store being loaded (tempfile's name), its WAL
KEEP = 4  # entries kept whatever their age: the few releases a user plays in turn
IDLE_SECONDS = 3600  # an entry used (or loaded) in the last hour is never pruned, however many there are


def intact(entry: Path) -> tuple[Path | None, str]:
    """The entry's store when its bytes have the digest its name states (damaged or stray files are removed), else
    None and why the store must be loaded."""
    why = "no cache entry for this release yet"
    for found in sorted(entry.glob("store-*.duckdb")) if entry.is_dir() else []:
        named = ENTRY.match(found.name)
        try:
            if named and found.is_file() and digest_file(found) == named.group(1):
                touch(found)
                return found, ""
            found.unlink()  # damaged, or half of something: loaded again
            why = f"its cache entry {found.name} failed its check (its bytes are not its digest) and was removed"
        except OSError:
            continue
    return None, why


def write(entry: Path, load: Callable[[Path], None]) -> Path:
    """A store loaded by `load(path)` into a new file of the entry, renamed to its digest once complete."""
    entry.mkdir(parents=True, exist_ok=True)
    touch(entry)  # a pruning run sees the entry in use while it loads
    handle, tmp = tempfile.mkstemp(dir=entry, prefix=".store-", suffix=".duckdb")
    os.close(handle)
    os.unlink(tmp)  # DuckDB creates the file itself
    try:
        load(Path(tmp))
        target = entry / f"store-{digest_file(Path(tmp))}.duckdb"
        os.replace(tmp, target)  # another process may have loaded its own: both are intact
    finally:
        for leftover in (Path(tmp), Path(f"{tmp}.wal")):
            leftover.unlink(missing_ok=True)
    return target


def touch(path: Path) -> None:
    """Mark an entry used now (what pruning goes by); a cache that cannot be written to keeps its times."""
    with contextlib.suppress(OSError):
        os.utime(path)


def _own_files(folder: Path) -> list[Path] | None:
    """The files of a folder when it holds nothing but what this tool writes in an entry, else None."""
    try:
        if folder.is_symlink() or not folder.is_dir():
            return None
        files = list(folder.iterdir())
    except OSError:
        return None
    own = all(f.is_file() and not f.is_symlink() and (ENTRY.match(f.name) or LOADING.match(f.name)) for f in files)
    return files if own else None


def _last_used(folder: Path, files: list[Path]) -> float | None:
    try:
        return max([folder.stat().st_mtime] + [f.stat().st_mtime for f in files])
    except OSError:
        return None


def prune(cache_dir: Path, current: Path, now: float | None = None) -> list[str]:
    """Remove the entries of the cache folder beyond the KEEP most recently used (`current`, just used, among them)
    that are idle for IDLE_SECONDS, and what pruning runs left half done; the names removed."""
    now = time.time() if now is None else now
    try:
        folders = sorted(cache_dir.iterdir())
    except OSError:
        return []
    entries, leftovers = [], []
    for folder in folders:
        if folder.name == current.name or not (FOLDER.match(folder.name) or PRUNED.match(folder.name)):
            continue
        files = _own_files(folder)
        used = _last_used(folder, files) if files is not None else None
        if used is not None:
            (leftovers if PRUNED.match(folder.name) else entries).append((used, folder.name, folder))
    entries.sort(reverse=True)
    removed = []
    for used, name, folder in entries[KEEP - 1 :] + leftovers:
        if now - used >= IDLE_SECONDS and _remove(cache_dir, folder, now):
            removed.append(name)
    return removed


def _remove(cache_dir: Path, folder: Path, now: float) -> bool:
    """Rename the folder away (atomic), then remove its files and itself; False when another run took it first, used
    it meanwhile (it is renamed back), or anything not this tool's appeared in it."""
    if PRUNED.match(folder.name):
        away = folder
    else:
        away = cache_dir / f".pruned-{folder.name}-{os.getpid()}"
        try:
            os.rename(folder, away)
        except OSError:
            return False
    files = _own_files(away)
    used = _last_used(away, files) if files is not None else None
    if files is None or used is None or now - used < IDLE_SECONDS:
        if away != folder:
            with contextlib.suppress(OSError):  # a run touched it between the look and the rename: it is its again
                os.rename(away, folder)
        return False
    try:
        for file in files:
            file.unlink(missing_ok=True)
        away.rmdir()
    except OSError:
        return False
    return True
