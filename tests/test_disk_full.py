"""A full disk is one line naming where, and leaves nothing torn (issue 53): a build whose artifacts fill their
filesystem (pyarrow's OSError: [Errno 28] was a traceback), and `run --out` on one (a traceback, and a trace cut at
65,536 bytes in the middle of a line). The full disk is injected in the process, so the tests run without root:
the writers meet the very OSError a full filesystem raises (measured on tmpfs mounts of 10 MB and 64 KB: the same
lines, docs/runtime.md)."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipeline.core.canonical import atomic_write_bytes
from pipeline.core.errors import DiskFull
from pipeline.harness.play import _append
from tests.helpers import REPO, fails, run_in, tiny_workspace

NO_SPACE = OSError(errno.ENOSPC, "No space left on device")


class _FullAfter:
    """A file on a filesystem with `room` bytes left. Unbuffered (`raw`), a write takes what fits and the next one
    fails, as write(2) does; buffered, a write that does not fit fails after writing what fits, as Python's does."""

    def __init__(self, real, room: int, raw: bool = True) -> None:
        self.real, self.room, self.raw = real, room, raw

    def write(self, data) -> int:
        if self.room == 0:
            raise NO_SPACE
        taken = self.real.write(bytes(data[: self.room]))
        self.room -= taken
        if taken < len(data) and not self.raw:
            raise NO_SPACE
        return taken

    def __getattr__(self, name: str):
        return getattr(self.real, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.real.close()


def test_an_episode_that_does_not_fit_is_cut_back_to_the_records_before_it(tmp_path):
    out = tmp_path / "trace.jsonl"
    out.write_bytes(b'{"header":1}\n')
    with out.open("ab", buffering=0) as real:
        trace = _FullAfter(real, 10)
        with pytest.raises(DiskFull, match=rf"^{out}: disk full \(no space left on device\); free space there"):
            _append(trace, [b'{"turn":1}', b'{"turn":2}'], out)
    assert out.read_bytes() == b'{"header":1}\n'  # 10 bytes had gone in, in the middle of a line


@pytest.mark.skipif(not Path("/dev/full").is_char_device(), reason="no /dev/full device here")
def test_a_trace_on_dev_full_is_one_disk_full_line():
    with open("/dev/full", "ab", buffering=0) as trace, pytest.raises(DiskFull, match="^/dev/full: disk full"):
        _append(trace, [b'{"turn":1}'], Path("/dev/full"))


def test_an_atomic_write_that_does_not_fit_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "report.json"
    target.write_text("old")
    real_fdopen = os.fdopen
    monkeypatch.setattr(os, "fdopen", lambda fd, mode: _FullAfter(real_fdopen(fd, mode), 3, raw=False))
    with pytest.raises(DiskFull, match=rf"^{target}: disk full"):
        atomic_write_bytes(target, b"a longer text than fits")
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_a_build_that_fills_its_disk_says_so_in_one_line_and_leaves_no_stage_half_written(tmp_path, monkeypatch):
    """pyarrow's own error for a full disk, met while the ingest stage writes its Parquet tables."""
    ws = tiny_workspace(tmp_path / "project")

    def no_space(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", no_space)
    result = run_in(ws, "build", "--corpus", "xai4heat", "--until", "ingest")
    stage = ws.stage_dir("xai4heat", "ingest")
    fails(result, f"{stage}: disk full (no space left on device)")
    assert not stage.exists() and not list(stage.parent.glob(".ingest*")), list(stage.parent.iterdir())


def test_a_run_whose_trace_fills_its_disk_keeps_whole_records_and_resumes(tmp_path, monkeypatch):
    """The run stops at the first episode that does not fit, with one line; the trace holds whole records only, and
    --resume on a disk with room again ends with the trace of an uninterrupted run."""
    from click.testing import CliRunner

    from pipeline.cli import main

    release, out = REPO / "artifacts" / "xai4heat" / "release", tmp_path / "trace.jsonl"
    args = ["run", "--release", str(release), "--cache-dir", str(tmp_path / "cache"), "--split", "test"]
    args += ["--agent", "oracle", "--limit", "6"]
    real_open = Path.open

    def opened(self, mode="r", *a, **k):
        handle = real_open(self, mode, *a, **k)
        return _FullAfter(handle, 20_000) if self == out and mode == "ab" else handle

    monkeypatch.setattr(Path, "open", opened)
    stopped = CliRunner().invoke(main, [*args, "--out", str(out)])
    assert stopped.exit_code == 1 and "Traceback" not in stopped.output, stopped.output
    said = f"error: {out}: disk full (no space left on device); free space there or write elsewhere"
    assert stopped.output.splitlines()[-1] == said  # after the line saying the tool store was loaded
    monkeypatch.undo()
    cut = out.read_bytes()
    header = cut.index(b"\n") + 1
    assert header < len(cut) <= header + 20_000 and cut.endswith(b"\n")
    kept = [json.loads(line) for line in cut.splitlines()]  # every line whole
    assert kept[0]["corpus"] == "xai4heat" and kept[-1]["episode_id"]

    resumed = CliRunner().invoke(main, [*args, "--out", str(out), "--resume"])
    assert resumed.exit_code == 0, resumed.output
    whole = CliRunner().invoke(main, [*args, "--out", str(tmp_path / "whole.jsonl")])
    assert whole.exit_code == 0, whole.output

    def played(path: Path) -> list[dict]:  # the records without what each run measures anew (wall times)
        return [{**json.loads(line), "elapsed_ms": 0} for line in path.read_text().splitlines()[1:]]

    assert played(out) == played(tmp_path / "whole.jsonl") and len(played(out)) > len(kept) - 1
