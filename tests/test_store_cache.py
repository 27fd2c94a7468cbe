"""The store cache of `--release`: a (re)load is said in one `info:` line on stderr, never in an output; old entries
are pruned (the KEEP most recently used stay, an entry used in the last hour stays), and nothing that is not an entry
this tool wrote is ever taken."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from click.testing import CliRunner, Result

from pipeline.cli import main
from pipeline.release import store_cache
from pipeline.release.playable import Release

HOUR = store_cache.IDLE_SECONDS
NOW = 2_000_000_000.0  # a fixed "now" for pruning: times are set, never waited for


def quality(release: Path, cache: Path) -> Result:
    arguments = json.dumps({"stream_id": "L8__t_sup_prim"})
    return CliRunner().invoke(
        main, ["tool", "inspect_quality", "--release", str(release), "--cache-dir", str(cache), "--args", arguments]
    )


STORE = "store-" + "a" * 32 + ".duckdb"


def entry(cache: Path, name: str, used: float, files: tuple[str, ...] = (STORE,), *, named: bool = True) -> Path:
    """A folder named as a cache entry (`named`: `<name>-<sha256>`; else `name` as it is), last used at `used`."""
    folder = cache / (f"{name}-{hashlib.sha256(name.encode()).hexdigest()}" if named else name)
    folder.mkdir(parents=True)
    for file in files:
        (folder / file).write_bytes(b"store")
        os.utime(folder / file, (used, used))
    os.utime(folder, (used, used))
    return folder


def test_a_load_is_one_info_line_on_stderr_and_a_reload_says_why(release, tmp_path):
    cache = tmp_path / "cache"
    first = quality(release, cache)
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["stream_id"] == "L8__t_sup_prim"  # the output holds the result alone
    (line,) = first.stderr.splitlines()
    assert line.startswith("info: loaded the tool store of ") and "(no cache entry for this release yet)" in line
    again = quality(release, cache)
    assert again.exit_code == 0 and again.stderr == "", again.stderr  # an intact entry is used silently
    (stored,) = cache.glob("xai4heat-*/store-*.duckdb")
    stored.write_bytes(b"garbage")
    damaged = quality(release, cache)
    assert damaged.exit_code == 0 and json.loads(damaged.stdout) == json.loads(first.stdout)
    (line,) = damaged.stderr.splitlines()
    assert line.startswith("info: loaded the tool store of ") and "failed its check" in line, line


def test_pruning_keeps_the_most_recently_used_and_the_recent(tmp_path):
    cache = tmp_path / "cache"
    current = entry(cache, "current", NOW)
    old = [entry(cache, f"old{i}", NOW - (10 + i) * HOUR) for i in range(6)]
    recent = entry(cache, "recent", NOW - HOUR / 2)
    removed = store_cache.prune(cache, current, now=NOW)
    kept = sorted(p.name for p in cache.iterdir())
    # current, then the KEEP - 1 most recently used: recent and the two newest old ones
    assert sorted(removed) == sorted(f.name for f in old[store_cache.KEEP - 2 :])
    assert kept == sorted([current.name, recent.name, *(f.name for f in old[: store_cache.KEEP - 2])])
    assert store_cache.prune(cache, current, now=NOW) == []  # nothing more to take


def test_an_entry_used_in_the_last_hour_is_never_pruned(tmp_path):
    """However many there are: another run may be playing on it (it touched its entry when it started)."""
    cache = tmp_path / "cache"
    current = entry(cache, "current", NOW)
    recent = [entry(cache, f"recent{i}", NOW - HOUR + 1 + i) for i in range(2 * store_cache.KEEP)]
    assert store_cache.prune(cache, current, now=NOW) == []
    assert all(folder.is_dir() for folder in recent)


def test_pruning_never_takes_what_is_not_an_entry_of_its_own(tmp_path):
    cache = tmp_path / "cache"
    current = entry(cache, "current", NOW)
    long_ago = NOW - 1000 * HOUR
    for i in range(store_cache.KEEP - 1):
        entry(cache, f"kept{i}", NOW - HOUR - i)  # the most recent besides current: kept
    foreign = [
        entry(cache, "notes", long_ago, files=("notes.txt",)).name,  # an entry's name, another file
        entry(cache, "mixed", long_ago, files=(STORE, "mine.txt")).name,
        entry(cache, "nested", long_ago, files=()).name,
        entry(cache, "plain-folder-of-the-user", long_ago, named=False).name,  # not an entry's name
    ]
    (cache / foreign[2] / "sub").mkdir()
    os.utime(cache / foreign[2], (long_ago, long_ago))
    (cache / "a-file.duckdb").write_bytes(b"x")
    target = entry(cache, "target", long_ago)
    os.symlink(target, cache / f"link-{'c' * 64}")  # a link named as an entry: never followed
    removed = store_cache.prune(cache, current, now=NOW)
    assert removed == [target.name]
    assert all((cache / name).is_dir() for name in foreign) and (cache / "a-file.duckdb").is_file()
    assert (cache / f"link-{'c' * 64}").is_symlink()


def test_two_pruning_runs_take_an_entry_once_and_finish_what_another_left(tmp_path):
    cache = tmp_path / "cache"
    current = entry(cache, "current", NOW)
    kept = [entry(cache, f"kept{i}", NOW - HOUR - i) for i in range(store_cache.KEEP - 1)]
    stale = entry(cache, "stale", NOW - 100 * HOUR)
    half_done = cache / f".pruned-{stale.name}-99999"
    os.rename(stale, half_done)  # a pruning run that stopped after its rename
    assert not store_cache._remove(cache, cache / f"gone-{'d' * 64}", NOW)  # another run renamed it first: its own
    assert store_cache.prune(cache, current, now=NOW) == [half_done.name]
    assert store_cache.prune(cache, current, now=NOW) == []
    assert sorted(p.name for p in cache.iterdir()) == sorted([current.name, *(f.name for f in kept)])
    touched = entry(cache, "touched", NOW - 10)  # used after a pruning run looked at it: renamed back, kept
    assert not store_cache._remove(cache, touched, NOW) and touched.is_dir()


def test_a_release_prunes_its_cache_and_says_so(release, tmp_path):
    cache = tmp_path / "cache"
    stale = [entry(cache, f"stale{i}", 1_000_000.0 + i) for i in range(store_cache.KEEP)]  # stale0 the oldest
    notes: list[str] = []
    path = Release(release, cache, notes.append).store_path()
    assert path.is_file() and len(notes) == 2, notes
    assert notes[0].startswith("loaded the tool store of ")
    assert notes[1].startswith("pruned 1 store cache entry unused for an hour") and stale[0].name in notes[1]
    assert sorted(p.name for p in cache.iterdir()) == sorted([path.parent.name, *(s.name for s in stale[1:])])
