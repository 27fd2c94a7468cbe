"""What the last builds read and wrote, by size, times and digest: `build` tells "nothing changed" from it without
importing the stages, re-reading inputs or opening stores.

artifacts/.build-state.json holds, for each corpus a build finished: every file of the code (pipeline/, contracts/),
of configs/ and of the corpus's raw folder, the installed libraries' metadata files, and each stage's manifest and
outputs, as (size, mtime_ns, ctime_ns, inode, xxh3); and the names in each of their folders (a file added counts).
When every file stats as recorded, the stages are reported cached from their manifests. A file that stats otherwise is
read and compared by digest (a checkout that rewrote it unchanged stays on this path); anything else that differs, a
missing or unreadable state, or another interpreter, root, --raw, artifacts folder, or a raw folder that now names
other data (from another working folder, or behind a link that moved), and the full identity check runs
(pipeline/harness/build.py, which writes the state again). A tree with a linked folder below it is never recorded. A
file changed within RACY_NS of the state's writing may change again within one timestamp tick unseen: it is always
compared by digest (git's racily-clean rule).

Only the standard library, xxhash and two small core modules: this runs before the rest of the pipeline is imported.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import xxhash

from pipeline.core.canonical import digest_file
from pipeline.core.code_identity import PACKAGE_ROOT

STATE = ".build-state.json"  # in the artifacts folder
STATE_SCHEME = 1
MANIFEST = "manifest.json"  # a stage folder's manifest (pipeline/core/manifest.py)
LOCAL_DIGESTS = "outputs.local.json"  # size and xxh3 of a stage's unhashed outputs, beside its manifest
LOCK = ".build.lock"  # artifacts/<corpus>/.build.lock, held while the corpus builds
RACY_NS = 2_000_000_000  # timestamps are kernel ticks (a few ms); two seconds leaves room for coarse file systems
SKIPPED_DIRS = frozenset({"__pycache__"})  # bytecode: written by the interpreter, never read as code identity


def _names_digest(folder: Path) -> str:
    names = sorted(name for name in os.listdir(folder) if name not in SKIPPED_DIRS)
    return xxhash.xxh3_64_hexdigest("\0".join(names).encode("utf-8", "surrogateescape"))


def _stat_key(stat: os.stat_result) -> list[int]:
    return [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]


def _racy(stat: os.stat_result, now_ns: int) -> bool:
    return max(stat.st_mtime_ns, stat.st_ctime_ns) >= now_ns - RACY_NS


def _as_recorded(stat: os.stat_result, entry: list) -> bool:
    """The file stats as its entry recorded it, and the entry was not racily clean: its recorded digest holds."""
    return _stat_key(stat) == entry[:4] and not entry[5]


def file_entry(path: Path, known: str | None = None, now_ns: int | None = None) -> list:
    """[size, mtime_ns, ctime_ns, inode, xxh3, racy] of a file; `known` is its digest when a manifest recorded it."""
    stat = os.stat(path)
    now_ns = time.time_ns() if now_ns is None else now_ns
    return [*_stat_key(stat), known if known is not None else digest_file(path), _racy(stat, now_ns)]


def dir_entry(path: Path) -> list:
    """[mtime_ns, digest of the sorted names] of a folder."""
    return [os.stat(path).st_mtime_ns, _names_digest(path)]


class LinkedFolder(ValueError):
    """A folder below a recorded tree is a link: the build reads through it, the state could not see it change."""


def tree(folder: Path) -> tuple[list[Path], list[Path]]:
    """Every file and folder below `folder` (itself included), bytecode folders left out; a linked folder below it
    raises LinkedFolder (no state is recorded then: every build takes the full check)."""
    files, dirs = [], []
    for top, subdirs, names in os.walk(folder):
        subdirs[:] = sorted(d for d in subdirs if d not in SKIPPED_DIRS)
        linked = [d for d in subdirs if os.path.islink(os.path.join(top, d))]
        if linked:
            raise LinkedFolder(f"{os.path.join(top, linked[0])} is a link to a folder")
        dirs.append(Path(top))
        files += [Path(top) / name for name in sorted(names)]
    return files, dirs


@dataclass
class Entries:
    """Files and folders with what they held when recorded."""

    files: dict[str, list] = field(default_factory=dict)
    dirs: dict[str, list] = field(default_factory=dict)

    def add_tree(self, folder: Path, now_ns: int) -> None:
        files, dirs = tree(folder)
        self.files.update({str(p): file_entry(p, now_ns=now_ns) for p in files})
        self.dirs.update({str(p): dir_entry(p) for p in dirs})

    def as_json(self) -> dict:
        return {"files": self.files, "dirs": self.dirs}


class Changed(Exception):
    """Something differs from the recorded state: the full identity check decides."""


def _check_file(path: str, recorded: list, now_ns: int) -> list | None:
    """None when the file stats as recorded; its fresh entry when only its stat changed (same size and digest)."""
    try:
        stat = os.stat(path)
    except OSError as exc:
        raise Changed(f"{path}: {exc.strerror}") from None
    size, xxh = recorded[0], recorded[4]
    if _as_recorded(stat, recorded):
        return None
    if stat.st_size != size or digest_file(Path(path)) != xxh:
        raise Changed(f"{path}: changed")
    return [*_stat_key(stat), xxh, _racy(stat, now_ns)]


def _check_dir(path: str, recorded: list) -> list | None:
    try:
        mtime = os.stat(path).st_mtime_ns
        if mtime == recorded[0]:
            return None
        if _names_digest(Path(path)) == recorded[1]:
            return [mtime, recorded[1]]
    except OSError as exc:
        raise Changed(f"{path}: {exc.strerror}") from None
    raise Changed(f"{path}: a file was added or removed")


def check(entries: dict, now_ns: int, seen: dict[str, bool]) -> bool:
    """Raise Changed unless every recorded file and folder is as recorded; True when some were refreshed in place
    (`entries` updated). `seen` skips paths already checked in this process (code and configs are shared)."""
    refreshed = False
    for kind, checker in (("dirs", lambda p, r: _check_dir(p, r)), ("files", lambda p, r: _check_file(p, r, now_ns))):
        for path, recorded in entries[kind].items():
            if path in seen:
                refreshed |= seen[path]
                continue
            fresh = checker(path, recorded)
            if fresh is not None:
                entries[kind][path] = fresh
            seen[path] = fresh is not None
            refreshed |= fresh is not None
    return refreshed


def state_key(root: Path, raw: str | None, artifacts: Path) -> dict:
    """What a recorded state is valid for besides its files: the interpreter and its import path, the code's and the
    project's folders, the raw folder given, and the artifacts folder it lies in. Its files are recorded by absolute
    path, so a state copied with its artifacts folder (`cp -r artifacts elsewhere`, then `build --artifacts
    elsewhere`) would vouch for the original's files, not the copy's: a copy's state is never read."""
    interpreter = {"executable": sys.executable, "version": sys.version, "path": sys.path[1:]}
    return {
        "interpreter": interpreter,
        "package_root": str(PACKAGE_ROOT),
        "root": str(root),
        "raw": raw,
        "artifacts": os.path.abspath(artifacts),
    }


def read_state(artifacts: Path) -> dict | None:
    try:
        state = json.loads((artifacts / STATE).read_bytes())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) and state.get("scheme") == STATE_SCHEME else None


@contextlib.contextmanager
def _state_lock(artifacts: Path) -> Iterator[None]:
    artifacts.mkdir(parents=True, exist_ok=True)
    with open(artifacts / f"{STATE}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _same_content(a: dict, b: dict) -> bool:
    """The same files of the same sizes and digests, the same names in the same folders (stats may differ)."""
    files = a["files"].keys() == b["files"].keys() and all(
        a["files"][p][0] == e[0] and a["files"][p][4] == e[4] for p, e in b["files"].items()
    )
    return files and a["dirs"].keys() == b["dirs"].keys() and all(a["dirs"][p][1] == e[1] for p, e in b["dirs"].items())


def write_state(artifacts: Path, key: dict, stages: list[str], shared: dict, corpora: dict[str, dict]) -> None:
    """Record `corpora`'s sections beside those of other corpora recorded under the same key and shared files (a
    section of another key or of other code and configs is dropped: it could never be read)."""
    with _state_lock(artifacts):
        old = read_state(artifacts)
        same = old and old["key"] == key and old["stages"] == stages and _same_content(old["shared"], shared)
        kept = old["corpora"] if same else {}
        state = {
            "scheme": STATE_SCHEME,
            "key": key,
            "stages": stages,
            "shared": shared,
            "corpora": {**kept, **corpora},
        }
        tmp = artifacts / f".{STATE}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(state, sort_keys=True), encoding="utf-8")
        os.replace(tmp, artifacts / STATE)


@dataclass(frozen=True)
class RecordedManifest:
    """What the build's report reads of a stage manifest."""

    row_counts: dict
    details: dict


@dataclass(frozen=True)
class Recorded:
    """A stage found unchanged from the recorded state (what StageOutcome says of a cached stage)."""

    corpus: str
    stage: str
    status: str
    seconds: float
    manifest: RecordedManifest
    note: str | None = None


def _unlocked(artifacts: Path, corpus: str) -> bool:
    """No build of the corpus is running (it would hold the lock): a shared lock, taken and given back at once."""
    try:
        fd = os.open(artifacts / corpus / LOCK, os.O_RDONLY)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Unchanged:
    """The outcome of a check that found nothing changed."""

    outcomes: list[Recorded]
    skipped: list[str]  # notes of corpora skipped for want of raw data, as the build says them


def unchanged(
    artifacts: Path, key: dict, corpora: list[str], until: str | None, environ: dict[str, str] | None = None
) -> Unchanged | None:
    """Every stage up to `until` of every corpus as recorded, or None when anything may have changed."""
    environ = os.environ if environ is None else environ
    state = read_state(artifacts)
    if state is None or state["key"] != key or (until is not None and until not in state["stages"]):
        return None
    wanted = state["stages"][: state["stages"].index(until) + 1] if until else state["stages"]
    sections = [state["corpora"].get(corpus) for corpus in corpora]
    if any(s is None or s["stages"][: len(wanted)] != wanted for s in sections):
        return None
    if any(environ.get(name) != value for s in sections for name, value in s["env"].items()):
        return None
    # the raw folder as the build names it (--raw, the variable or data/raw/<name>) and where it led, links followed:
    # a relative path from another working folder, or a link moved, names other data
    if any(os.path.realpath(path) != target for s in sections for path, target in s.get("raw_links", [])):
        return None
    if not all(_unlocked(artifacts, corpus) for corpus, s in zip(corpora, sections, strict=True) if not s["skipped"]):
        return None
    seen: dict[str, bool] = {}
    now_ns = time.time_ns()
    outcomes, skipped = [], []
    try:
        refreshed = check(state["shared"], now_ns, seen)
        for corpus, section in zip(corpora, sections, strict=True):
            if section["skipped"]:
                if any(os.path.isdir(p) for p in section["absent"]):
                    return None
                skipped.append(section["skipped"])
                continue
            start = time.perf_counter()
            refreshed |= check(section["inputs"], now_ns, seen)
            for stage in wanted:
                refreshed |= check(section["outputs"][stage], now_ns, seen)  # the manifest's bytes among them
                shown = section["outputs"][stage]["shown"]
                recorded = RecordedManifest(shown["row_counts"], shown["details"])
                outcomes.append(Recorded(corpus, stage, "cached", time.perf_counter() - start, recorded))
                start = time.perf_counter()
    except (Changed, OSError, ValueError, KeyError, TypeError):
        return None
    if refreshed:  # stats moved, bytes did not: record the new stats so the next check needs no digest
        with contextlib.suppress(OSError):
            write_state(artifacts, key, state["stages"], state["shared"], dict(zip(corpora, sections, strict=True)))
    return Unchanged(outcomes, skipped)


def stage_outputs(folder: Path, now_ns: int) -> dict:
    """A finished stage's files as entries: its manifest, its outputs under the digests the manifest recorded, and its
    unhashed outputs under the digests recorded beside it."""
    manifest = json.loads((folder / MANIFEST).read_bytes())
    known = {name: out["xxh3"] for name, out in manifest["outputs"].items()}
    unhashed = manifest["details"].get("unhashed_outputs", [])
    if unhashed:
        local = json.loads((folder / LOCAL_DIGESTS).read_bytes())
        known.update({name: local[name]["xxh3"] for name in unhashed})
        known[LOCAL_DIGESTS] = None
    entries = Entries()
    entries.files[str(folder / MANIFEST)] = file_entry(folder / MANIFEST, now_ns=now_ns)
    for name, xxh in known.items():
        entries.files[str(folder / name)] = file_entry(folder / name, xxh, now_ns)
    return {**entries.as_json(), "shown": shown(manifest)}


SHOWN = ("notes", "gates", "release_digest")  # the details of a stage manifest the build's report reads, with policies


def shown(manifest: dict) -> dict:
    """What the build's report (pipeline/cli/build.py: its stage lines and summary) reads of a stage manifest, kept in
    the state so that a cached build reads no manifest: the row counts, the notes, the audit's gates and its
    policies' gates, the release digest."""
    details = manifest["details"]
    kept = {key: details[key] for key in SHOWN if key in details}
    if "policies" in details:
        kept["policies"] = {name: {"gate": p["gate"]} for name, p in details["policies"].items() if "gate" in p}
    return {"row_counts": manifest["row_counts"], "details": kept}


def unchanged_digests(folder: Path) -> dict[str, str]:
    """The xxh3 that the state of a stage folder's artifacts (artifacts/<corpus>/<stage>) recorded for each of its
    files that still stats as recorded then (size, mtime_ns, ctime_ns, inode) and was not racy, by name: the cached
    build's rule, for a stage that checks the cached stages it reads (an edit in place changes a file's ctime, which
    no one sets). Empty when there is no readable state."""
    state = read_state(folder.parent.parent)
    found: dict[str, str] = {}
    if state is None:
        return found
    prefix = str(folder / "x")[:-1]
    try:
        for section in state["corpora"].values():
            for outputs in section["outputs"].values():
                for path, entry in outputs["files"].items():
                    if not path.startswith(prefix) or not isinstance(entry[4], str):
                        continue
                    with contextlib.suppress(OSError):
                        if _as_recorded(os.stat(path), entry):
                            found[path[len(prefix) :]] = entry[4]
    except (KeyError, TypeError, AttributeError, IndexError):
        return {}
    return found


def same_stats(entries: dict) -> bool:
    """The files and folders still stat as they did when recorded (nothing was written to them while the build ran)."""
    try:
        return all(_stat_key(os.stat(p)) == e[:4] for p, e in entries["files"].items()) and all(
            os.stat(p).st_mtime_ns == e[0] for p, e in entries["dirs"].items()
        )
    except OSError:
        return False
