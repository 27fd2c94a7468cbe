"""Hostile BTS pickles: allocation bombs are refused before they allocate (proven under RLIMIT_AS), arrays of Python
objects or complex numbers are refused with a reason, bad timestamps become bad_timestamp rejects, and the accounting
holds through a whole build."""

from __future__ import annotations

import io
import json
import pickle
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.core.errors import UnsafePickle
from pipeline.ingest.pickles import load_series
from tests.helpers import REPO

LIMIT = 1 << 29


class NdarrayBomb:
    """The allowed numpy.ndarray constructor asked for 400 MB, in a 64-byte member."""

    def __reduce__(self):
        return (np.ndarray, ((50_000_000,), "<f8"))


class ReconstructBomb:
    def __reduce__(self):
        from numpy._core.multiarray import _reconstruct

        return (_reconstruct, (np.ndarray, (10**12,), b"b"))


BOMB_UNDER_RLIMIT = """
import pickle, resource, sys
sys.path.insert(0, sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))
from pipeline.ingest.pickles import UnsafePickle, load_series
try:
    load_series(sys.stdin.buffer.read(), 1 << 29)
except UnsafePickle as exc:
    print("refused:", exc)
"""


@pytest.mark.parametrize("bomb", [NdarrayBomb, ReconstructBomb])
def test_allocation_bombs_are_refused_before_they_allocate(bomb):
    data = pickle.dumps(["s1", bomb(), bomb()])
    assert len(data) < 200
    with pytest.raises(UnsafePickle, match="asks for an array of"):
        load_series(data, LIMIT)
    done = subprocess.run(
        [sys.executable, "-c", BOMB_UNDER_RLIMIT, str(REPO)], input=data, capture_output=True, timeout=120, check=False
    )
    assert done.returncode == 0 and done.stdout.startswith(b"refused:"), done.stderr[-2000:]


def test_values_must_be_real_numbers():
    for values, reason in ((np.array([{"a": 1}], dtype=object), "not numbers"), (np.array([1 + 2j]), "complex")):
        with pytest.raises(ValueError, match=reason):
            load_series(pickle.dumps(["s1", np.array([1.6e9]), values]), LIMIT)


def test_bad_timestamps_are_flagged_not_wrapped():
    series = load_series(pickle.dumps(["s1", np.array([np.nan, 1e20, -np.inf, 1.6e9]), np.arange(4.0)]), LIMIT)
    assert series.valid_ts.tolist() == [False, False, False, True] and series.timestamps_us[3] == 1_600_000_000_000_000
    nat = load_series(
        pickle.dumps(["s1", np.array(["NaT", "2020-01-01"], dtype="datetime64[s]"), np.arange(2.0)]), LIMIT
    )
    assert nat.valid_ts.tolist() == [False, True]


def test_hostile_members_in_a_build_keep_the_accounting(tmp_path):
    runner = CliRunner()
    raw = tmp_path / "raw"
    made = runner.invoke(
        main, ["--root", str(REPO), "synth", "bts", "--streams", "3", "--days", "30", "--seed", "3", "--out", str(raw)]
    )
    assert made.exit_code == 0, made.output
    archive = raw / "Site_Baa.zip"
    with zipfile.ZipFile(archive) as source:
        members = {info.filename: source.read(info) for info in source.infolist()}
    names = sorted(members)
    first = pickle.loads(members[names[0]])  # noqa: S301 (our own synthetic member)
    timestamps = (
        np.array(first[1], dtype=np.float64)
        if not np.issubdtype(np.asarray(first[1]).dtype, np.datetime64)
        else np.asarray(first[1]).astype("datetime64[us]").astype(np.int64) / 1e6
    )
    timestamps[:3] = [np.nan, 1e20, -1e20]
    members[names[0]] = pickle.dumps([first[0], timestamps, np.asarray(first[2])])
    second = pickle.loads(members[names[1]])  # noqa: S301
    members[names[1]] = pickle.dumps([second[0], np.asarray(second[1]), np.asarray(second[2]).astype(complex)])
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as target:
        for name, data in sorted(members.items()):
            target.writestr(name, data)
    archive.write_bytes(buffer.getvalue())
    result = runner.invoke(
        main,
        [
            "--root",
            str(REPO),
            "--artifacts",
            str(tmp_path / "art"),
            "build",
            "--corpus",
            "bts",
            "--raw",
            str(raw),
            "--until",
            "store",
        ],
    )
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    report = json.loads((tmp_path / "art" / "bts" / "ingest" / "report.json").read_text())
    assert report["rejects_by_reason"].get("bad_timestamp") == 3
    assert report["observations"] + report["rejects"] == report["raw_value_cells"]
    refused = {m["member"]: m["detail"] for m in report["rejected_members"]}
    assert "complex" in refused[names[1]]
