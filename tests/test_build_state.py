"""The recorded build state: a file that stats as recorded passes, one rewritten with the same bytes passes by digest,
any change of bytes, a file added or a running build sends the check to the full identity check."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from pipeline.core import build_state
from pipeline.core.build_state import Changed, Entries, check, unchanged, write_state


def _old(path: Path) -> None:
    """Times well before now: the entry is not racily clean."""
    os.utime(path, ns=(10**18, 10**18))


def _entries(folder: Path) -> dict:
    entries = Entries()
    entries.add_tree(folder, now_ns=os.stat(folder).st_mtime_ns + 10 * build_state.RACY_NS)
    return entries.as_json()


@pytest.fixture
def code(tmp_path) -> Path:
    folder = tmp_path / "code"
    (folder / "pkg").mkdir(parents=True)
    for name in ("a.py", "pkg/b.py"):
        (folder / name).write_text(f"# {name}\n", encoding="utf-8")
    return folder


def test_an_untouched_tree_passes_without_reading_a_file(code, monkeypatch):
    entries = _entries(code)
    monkeypatch.setattr(build_state, "digest_file", lambda path: pytest.fail(f"{path} was read"))
    assert check(entries, 0, {}) is False


def test_same_bytes_with_new_times_pass_by_digest_and_are_refreshed(code):
    entries = _entries(code)
    _old(code / "a.py")
    assert check(entries, os.stat(code).st_mtime_ns + 10 * build_state.RACY_NS, {}) is True
    assert entries["files"][str(code / "a.py")][1] == 10**18  # the new time, so the next check needs no digest


@pytest.mark.parametrize(
    "change",
    [
        lambda code: (code / "a.py").write_text("# a.pz\n", encoding="utf-8"),  # same size, other bytes
        lambda code: (code / "pkg" / "c.py").write_text("", encoding="utf-8"),  # a file added
        lambda code: (code / "pkg" / "b.py").unlink(),
    ],
    ids=["same-size-edit", "added", "removed"],
)
def test_any_change_of_bytes_or_names_is_seen(code, change):
    entries = _entries(code)
    change(code)
    with pytest.raises(Changed):
        check(entries, 0, {})


def test_a_racily_clean_entry_is_compared_by_digest(code):
    """Written within RACY_NS of the recording, a file may have changed again within one timestamp tick."""
    entries = Entries()
    entries.add_tree(code, now_ns=os.stat(code / "a.py").st_mtime_ns)
    stat = os.stat(code / "a.py")
    (code / "a.py").write_text("# a.pz\n", encoding="utf-8")
    os.utime(code / "a.py", ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the same times, as within one tick
    entries_json = entries.as_json()
    entries_json["files"][str(code / "a.py")][2] = os.stat(code / "a.py").st_ctime_ns  # and the same ctime
    with pytest.raises(Changed):
        check(entries_json, 0, {})


def _state(tmp_path: Path, code: Path) -> tuple[Path, dict]:
    artifacts = tmp_path / "artifacts"
    stage = artifacts / "c1" / "s1"
    stage.mkdir(parents=True)
    (stage / "out.txt").write_text("out", encoding="utf-8")
    digest = build_state.digest_file(stage / "out.txt")
    manifest = {"outputs": {"out.txt": {"xxh3": digest}}, "details": {"notes": ["n: x"]}, "row_counts": {"a": 1}}
    (stage / "manifest.json").write_text(__import__("json").dumps(manifest), encoding="utf-8")
    for path in (stage / "out.txt", stage / "manifest.json", code / "a.py", code / "pkg" / "b.py"):
        _old(path)
    key = build_state.state_key(tmp_path, None, artifacts)
    section = {
        "stages": ["s1"],
        "env": {"RAW_ENV_OF_C1": None},
        "skipped": None,
        "absent": [],
        "inputs": {"files": {}, "dirs": {}},
        "outputs": {"s1": build_state.stage_outputs(stage, 0)},
    }
    write_state(artifacts, key, ["s1"], _entries(code), {"c1": section})
    return artifacts, key


def test_unchanged_reports_the_recorded_manifests(tmp_path, code, monkeypatch):
    artifacts, key = _state(tmp_path, code)
    monkeypatch.delenv("RAW_ENV_OF_C1", raising=False)
    found = unchanged(artifacts, key, ["c1"], None)
    assert [(o.corpus, o.stage, o.status) for o in found.outcomes] == [("c1", "s1", "cached")]
    assert found.outcomes[0].manifest.details == {"notes": ["n: x"]}
    assert unchanged(artifacts, key, ["c2"], None) is None  # never recorded
    assert unchanged(artifacts, {**key, "raw": "/elsewhere"}, ["c1"], None) is None
    assert unchanged(artifacts, key, ["c1"], "s2") is None  # no such stage: the full build says so
    monkeypatch.setenv("RAW_ENV_OF_C1", "/raw")
    assert unchanged(artifacts, key, ["c1"], None) is None


def test_an_edited_output_or_code_file_or_a_running_build_goes_to_the_full_check(tmp_path, code):
    artifacts, key = _state(tmp_path, code)
    assert unchanged(artifacts, key, ["c1"], None) is not None
    with open(artifacts / "c1" / build_state.LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        assert unchanged(artifacts, key, ["c1"], None) is None
        fcntl.flock(handle, fcntl.LOCK_UN)
    (code / "pkg" / "b.py").write_text("# edited\n", encoding="utf-8")
    assert unchanged(artifacts, key, ["c1"], None) is None
    artifacts, key = _state(tmp_path / "again", code)
    (artifacts / "c1" / "s1" / "out.txt").write_text("OUT", encoding="utf-8")
    assert unchanged(artifacts, key, ["c1"], None) is None


def test_a_stage_folder_reads_the_digests_of_files_that_stat_as_recorded(tmp_path, code, monkeypatch):
    """A stage that checks a cached stage it reads (pipeline.core.manifest.damaged_output) hashes no file that stats
    as the state recorded it; a file written again (its ctime moves, whatever its mtime says) or racily recorded is
    hashed, so an edit in place is still found."""
    from contracts.manifest import StageManifest
    from pipeline.core.manifest import damaged_output

    artifacts, _ = _state(tmp_path, code)
    stage = artifacts / "c1" / "s1"
    digest = build_state.digest_file(stage / "out.txt")
    _record(artifacts, stage, racy=False)
    assert build_state.unchanged_digests(stage) == {
        "out.txt": digest,
        "manifest.json": build_state.digest_file(stage / "manifest.json"),
    }
    assert build_state.unchanged_digests(tmp_path / "elsewhere" / "c1" / "s1") == {}  # no state there
    manifest = StageManifest.model_construct(outputs={"out.txt": _output(stage / "out.txt")}, details={})
    read = []
    monkeypatch.setattr("pipeline.core.manifest.digest_file", lambda path: read.append(path) or digest)
    assert damaged_output(stage, manifest) is None and read == []
    monkeypatch.undo()
    stat = os.stat(stage / "out.txt")
    (stage / "out.txt").write_text("OUT", encoding="utf-8")  # same size, other bytes, the old times put back
    os.utime(stage / "out.txt", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert "out.txt" not in build_state.unchanged_digests(stage)
    assert (
        damaged_output(stage, manifest) == "out.txt differs from its size and xxh3 in manifest.json (damaged or edited)"
    )
    # recorded racily clean (within RACY_NS of its writing), a file is hashed whatever its stat says
    (stage / "out.txt").write_text("out", encoding="utf-8")
    _record(artifacts, stage, racy=False)
    assert "out.txt" in build_state.unchanged_digests(stage)
    _record(artifacts, stage, racy=True)
    assert "out.txt" not in build_state.unchanged_digests(stage)


def _record(artifacts: Path, stage: Path, racy: bool) -> None:
    """The state's record of the stage's outputs as they are now, taken long after they were written (or not)."""
    state = build_state.read_state(artifacts)
    now_ns = 0 if racy else max(os.stat(p).st_ctime_ns for p in stage.iterdir()) + 10 * build_state.RACY_NS
    state["corpora"]["c1"]["outputs"]["s1"] = build_state.stage_outputs(stage, now_ns)
    (artifacts / build_state.STATE).write_text(__import__("json").dumps(state), encoding="utf-8")


def _output(path: Path):
    from contracts.manifest import OutputFile

    return OutputFile(xxh3=build_state.digest_file(path), bytes=path.stat().st_size)
