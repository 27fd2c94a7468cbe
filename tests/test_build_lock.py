"""Builds of one corpus never overlap (a lock that the kernel frees when its holder dies), and the next build removes
what a killed build left."""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.core.manifest import LOCK
from tests.helpers import tiny_workspace

pytestmark = pytest.mark.slow  # builds a corpus of its own (make test-fast skips it)


def test_a_killed_builds_leftovers_are_removed(tmp_path):
    ws = tiny_workspace(tmp_path / "project")
    folder = ws.artifacts_dir / "xai4heat"
    for name in (".store.tmp-k1ll3d", ".ingest.old-4242"):
        (folder / name / "part").mkdir(parents=True)
        (folder / name / "part" / "observations.arrow").write_bytes(b"x" * 1000)
    result = CliRunner().invoke(main, ["--root", str(ws.root), "build", "--corpus", "xai4heat", "--until", "ingest"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in folder.iterdir()) == [LOCK, "ingest"]


def test_a_second_build_waits_for_the_first(tmp_path):
    ws = tiny_workspace(tmp_path / "project")
    folder = ws.artifacts_dir / "xai4heat"
    folder.mkdir(parents=True)
    exe = Path(sys.executable).with_name("telemetry-bench")
    with (folder / LOCK).open("a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another build holds the corpus
        held.write("4242")
        held.flush()
        second = subprocess.Popen(
            [str(exe), "--root", str(ws.root), "build", "--corpus", "xai4heat", "--until", "ingest"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = second.stderr.readline()  # the first thing it says: it waits (a build that did not wait would build)
        assert "another build of this corpus is running (pid 4242); waiting" in line, line
        assert not (folder / "ingest").exists() and second.poll() is None
        fcntl.flock(held, fcntl.LOCK_UN)
    out, err = second.communicate(timeout=300)
    assert second.returncode == 0, err
    assert (folder / "ingest" / "manifest.json").is_file()
