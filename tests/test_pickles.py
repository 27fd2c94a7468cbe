"""Hostile BTS pickles: allocation bombs are refused before they allocate (proven under RLIMIT_AS), arrays of Python
objects or complex numbers are refused with a reason, bad timestamps become bad_timestamp rejects, and the accounting
holds through a whole build."""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import shutil
import struct
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
    with pytest.raises(UnsafePickle, match="numpy.ndarray asks for|_reconstruct asks for"):
        load_series(data, LIMIT)
    done = subprocess.run(
        [sys.executable, "-c", BOMB_UNDER_RLIMIT, str(REPO)], input=data, capture_output=True, timeout=120, check=False
    )
    assert done.returncode == 0 and done.stdout.startswith(b"refused:"), done.stderr[-2000:]


def _text(value: str) -> bytes:
    """BINUNICODE: a pickled str (surrogates kept, as a hostile writer may)."""
    data = value.encode("utf-8", "surrogatepass")
    return b"X" + struct.pack("<I", len(data)) + data


def encode_bomb(size: int = 1 << 20, calls: int | None = None) -> bytes:
    """A memoized text of half the member, encoded to latin1 again and again, every result kept: a 1 MB member asked
    for 2.1 GB before issue 44 (the calls alone), and `calls` few enough that only the encoder's count refuses it."""
    head = b"\x80\x02c_codecs\nencode\nq\x00" + _text("a" * (size // 2)) + b"q\x01" + _text("latin1") + b"q\x02"
    call = b"h\x00h\x01h\x02\x86R"
    return head + b"(" + call * (calls or (size - len(head)) // len(call)) + b"l0N."


def object_array_bomb(steps: int = 20_000) -> bytes:
    """An object array rebuilt from one growing list after each append: arrays of 1, 2, ... steps pointers, kept (600
    KB asked for 1.6 GB before issue 44)."""
    dtype_state = b"(K\x03" + _text("|") + b"NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK?t"
    head = (
        b"\x80\x02cnumpy.core.multiarray\n_reconstruct\nq\x00cnumpy\nndarray\nq\x01K\x00\x85q\x02C\x01bq\x03"
        + b"cnumpy\ndtype\n"
        + _text("O8")
        + b"\x89\x88\x87R"
        + dtype_state
        + b"bq\x05]q\x07("
    )
    step = b"h\x07Na0h\x00h\x01h\x02h\x03\x87R(K\x01J%s\x85h\x05\x89h\x07tb"
    return head + b"".join(step % struct.pack("<i", i + 1) for i in range(steps)) + b"l0N."


def memo_bomb() -> bytes:
    """9 bytes that name memo slot 200,000,000: pickle sizes its memo to it (3 GB before issue 44)."""
    return b"\x80\x02N" + b"r" + struct.pack("<I", 200_000_000) + b"."


BOMBS = {
    "encode, 1 MB": (encode_bomb, "opcode .* asks for"),
    "encode, 40 calls": (lambda: encode_bomb(1 << 20, 40), "_codecs.encode asks for"),
    "object arrays from a growing list": (object_array_bomb, "asks for"),
    "object arrays, 1,000 steps": (lambda: object_array_bomb(1_000), "asks for"),
    "memo slot": (memo_bomb, "names memo slot 200,000,000"),
}
# The child reads a member under an address-space limit and says how far its peak RSS rose above its imports'.
PEAK_OF_LOADING = """
import resource, sys
sys.path.insert(0, sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))
from pipeline.ingest.pickles import load_series
data = sys.stdin.buffer.read()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    load_series(data, 1 << 29)
    print("loaded")
except Exception as exc:
    print(type(exc).__name__, exc)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) >> 10)
"""


@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_amplifying_members_are_refused_before_they_allocate(bomb):
    """Issue 44: what a member allocates in all is bounded (every constructor, object arrays, the memo), not each
    array on its own: a member that asks for more is refused before it gets it, in a few MB."""
    make, reason = BOMBS[bomb]
    data = make()  # read in a child only: if the bound failed, this process would not survive it
    done = subprocess.run(
        [sys.executable, "-c", PEAK_OF_LOADING, str(REPO)], input=data, capture_output=True, timeout=120, check=False
    )
    outcome, grew_mb = done.stdout.decode().strip().rsplit("\n", 1)
    assert done.returncode == 0 and re.match(f"UnsafePickle .*{reason}", outcome), done.stdout + done.stderr[-2000:]
    assert int(grew_mb) < 64, f"{bomb}: peak RSS rose {grew_mb} MB while refusing a {len(data):,}-byte member"


def test_plain_members_stay_within_the_bound():
    """Float64 and datetime64 arrays at every protocol (and empty ones, bytes() in protocol 2) load."""
    n = 50_000
    times = np.datetime64("2020-01-01", "ns") + np.arange(n) * np.timedelta64(600, "s")
    for protocol in (2, 3, 4, 5):
        for obj in (["s1", times, np.arange(n) / 7], ["s1", np.arange(n, dtype=np.int32), np.ones(n, np.float32)]):
            assert len(load_series(pickle.dumps(obj, protocol=protocol), LIMIT).values) == n
        assert len(load_series(pickle.dumps(["s1", times[:0], np.array([])], protocol=protocol), LIMIT).values) == 0
    with pytest.raises(UnsafePickle, match="bytes\\(\\) admits no argument"):
        load_series(b"\x80\x02c__builtin__\nbytes\nJ\x00\x00\x00\x40\x85R.", LIMIT)
    with pytest.raises(UnsafePickle, match="_codecs.encode admits text to latin1"):
        load_series(b"\x80\x02c_codecs\nencode\n" + _text("ab") + _text("utf-32") + b"\x86R.", LIMIT)


def test_a_dtype_whose_state_was_forged_is_refused():
    """A pickle sets a dtype's state (BUILD) as it likes: a float64 flagged as holding Python objects (numpy then
    fails freeing it), or a void dtype of 2**40 bytes per item."""
    plain = pickle.dumps(["s1", np.arange(3.0), np.arange(3.0)], protocol=2)
    state = b"J\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00t"  # (..., elsize -1, alignment -1, flags 0)
    assert state in plain
    with pytest.raises(UnsafePickle, match="array dtype '<f8' has a state no '<f8' has .itemsize 8, flags 63"):
        load_series(plain.replace(state, state[:-3] + b"K?t", 1), LIMIT)
    void = pickle.dumps(["s1", np.zeros(1, dtype="V8"), np.arange(1.0)], protocol=2)
    assert b"K\x08K\x01K\x00t" in void  # (..., elsize 8, alignment 1, flags 0)
    with pytest.raises(UnsafePickle, match=r"state \(3, '\|', None, None, None, 1099511627776, 1, 0\) is not one"):
        load_series(void.replace(b"K\x08K\x01K\x00t", b"\x8a\x06\x00\x00\x00\x00\x00\x01K\x01K\x00t", 1), LIMIT)


def short_object_list() -> bytes:
    """An object array of 65,535 items whose state holds a list of one (numpy 2.4 reads past it: a crash)."""
    head, _ = object_array_bomb(0).rsplit(b"l0N.", 1)
    step = b"h\x07Na0h\x00h\x01h\x02h\x03\x87R(K\x01J\xff\xff\x00\x00\x85h\x05\x89h\x07tb"
    return head + step + b"l0N."


def odd_dtype_state() -> bytes:
    """A dtype whose state has 6 items where numpy writes 8 (numpy 2.4 crashes setting it)."""
    state = b"(K\x03" + _text("<") + b"NJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00t"
    return b"\x80\x02cnumpy\ndtype\n" + _text("i4") + b"\x89\x88\x87R" + state + b"b."


def straddling_frame() -> bytes:
    """A BININT that starts in a 3-byte frame and ends after it (pickle's C reader then reads on elsewhere)."""
    return b"\x80\x04\x95" + (3).to_bytes(8, "little") + b"NJ\x01" + b"\x00\x00\x00" + b"."


CRASHING = {
    "object array with a short list": (short_object_list, "UnsafePickle an object array of 65,535 items"),
    "dtype state of 6 items": (odd_dtype_state, "UnsafePickle a dtype's state .3, '<', None, -1, -1, 0. is not"),
    "opcode across a frame's end": (straddling_frame, "ValueError corrupt pickle .BININT at 12 runs past the end"),
}


@pytest.mark.parametrize("case", sorted(CRASHING))
def test_states_numpy_or_pickle_would_crash_on_are_refused(case):
    """Issue 44 (found by tests/test_fuzz_pickles.py): states that crash numpy 2.4 (a segmentation fault, the whole
    worker gone) or desynchronise pickle's C reader are refused before they reach it; read in a child."""
    make, outcome = CRASHING[case]
    done = subprocess.run(
        [sys.executable, "-c", PEAK_OF_LOADING, str(REPO)], input=make(), capture_output=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"{case}: the child ended with {done.returncode}: {done.stderr[-2000:]!r}"
    assert re.match(outcome, done.stdout.decode()), done.stdout


def test_a_stream_id_of_invalid_unicode_is_refused():
    obj = pickle.dumps(["s", np.arange(2.0), np.arange(2.0)], protocol=2).replace(_text("s"), _text("s\udcff"), 1)
    with pytest.raises(ValueError, match="StreamID 's\\\\udcff' is not valid Unicode"):
        load_series(obj, LIMIT)


def lying_member(archive: bytes, name: str, declared: int) -> bytes:
    """The archive with `name` declaring `declared` bytes, in its local header and in the central directory."""
    data, raw = bytearray(archive), name.encode()
    for signature, size_at, name_at in ((b"PK\x03\x04", 22, 30), (b"PK\x01\x02", 24, 46)):
        at = data.find(signature)
        while data[at + name_at : at + name_at + len(raw)] != raw:  # the signature may occur in compressed bytes
            at = data.find(signature, at + 4)
            assert at >= 0, name
        data[at + size_at : at + size_at + 4] = declared.to_bytes(4, "little")
    return bytes(data)


def inflating_archive(name: str, inflated: int = 256 << 20) -> bytes:
    """A deflated member of `inflated` zero bytes, written a MiB at a time (a few hundred KB compressed)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        with archive.open(info, "w") as member:
            for _ in range(inflated >> 20):
                member.write(bytes(1 << 20))
    return buffer.getvalue()


PEAK_OF_INFLATING = """
import resource, sys, zipfile
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from contracts.corpus import BtsPickle
from pipeline.ingest.layouts import _load_member
layout = BtsPickle(kind="bts_pickle", files="*.zip", member_pattern="(?P<key>.*)")
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
refused = []
with zipfile.ZipFile(sys.argv[2]) as archive:
    info = archive.infolist()[0]
    _load_member(Path(sys.argv[2]), archive, info.filename, info.file_size, "x", layout, lambda *r: refused.append(r))
print(refused)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) >> 10)
"""


def test_a_member_is_inflated_within_the_bound_not_its_declared_size(tmp_path):
    """Issue 44: a member that declares 1,000 bytes and inflates to 256 MiB is read a chunk at a time: its bad CRC
    refuses it after 1,000 bytes, and the reader's peak RSS barely moves (it rose by the 256 MiB before)."""
    archive = tmp_path / "Site_Xaa.zip"
    archive.write_bytes(lying_member(inflating_archive("Site_Xaa/x.pickle"), "Site_Xaa/x.pickle", 1_000))
    with zipfile.ZipFile(archive) as opened:
        assert opened.infolist()[0].file_size == 1_000
    done = subprocess.run(
        [sys.executable, "-c", PEAK_OF_INFLATING, str(REPO), str(archive)],
        capture_output=True,
        timeout=120,
        check=False,
    )
    refused, grew_mb = done.stdout.decode().strip().rsplit("\n", 1)
    assert done.returncode == 0 and "corrupt_pickle" in refused and "CRC" in refused, done.stdout + done.stderr[-2000:]
    assert int(grew_mb) < 64, f"peak RSS rose {grew_mb} MB reading a member that declares 1,000 bytes"


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
    """Bad timestamps are rejects; complex values, an encoding bomb, a member inflating past what it declares and a
    bzip2 member are refused with their reasons, and the build goes on (issue 44 for the last three)."""
    runner = CliRunner()
    raw = tmp_path / "raw"
    made = runner.invoke(
        main, ["--root", str(REPO), "synth", "bts", "--streams", "6", "--days", "30", "--seed", "3", "--out", str(raw)]
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
    members[names[2]] = encode_bomb(1 << 20, 600)  # 300 MB of encoded text
    members[names[3]] = bytes(64 << 20)  # declares 1,000 bytes below
    compression = {names[3]: zipfile.ZIP_DEFLATED, names[4]: zipfile.ZIP_BZIP2}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as target:
        for name, data in sorted(members.items()):
            target.writestr(name, data, compress_type=compression.get(name, zipfile.ZIP_STORED))
    archive.write_bytes(lying_member(buffer.getvalue(), names[3], 1_000))
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
    reasons = {m["member"]: m["reason"] for m in report["rejected_members"]}
    assert [reasons.get(name) for name in names[2:5]] == ["unsafe_pickle", "corrupt_pickle", "unsupported_compression"]
    assert "_codecs.encode asks for" in refused[names[2]] and "CRC" in refused[names[3]]
    assert report["streams"] == 2  # names[0] (its bad timestamps rejected) and names[5]


def _synthetic_bts(tmp_path):
    raw = tmp_path / "raw"
    made = CliRunner().invoke(
        main, ["--root", str(REPO), "synth", "bts", "--streams", "3", "--days", "30", "--seed", "3", "--out", str(raw)]
    )
    assert made.exit_code == 0, made.output
    return raw


def _ingest(tmp_path, raw):
    args = ["--root", str(REPO), "--artifacts", str(tmp_path / "art"), "build", "--corpus", "bts", "--raw", str(raw)]
    return CliRunner().invoke(main, [*args, "--until", "ingest"])


def test_member_names_that_are_not_unicode(tmp_path):
    """Issue 44: a raw file name that is not UTF-8 (here a member of an extracted archive) is one line naming it, as
    is an archive whose member names claim UTF-8 and are not; nothing fails later, where a report or manifest is
    written."""
    raw = _synthetic_bts(tmp_path)
    archive = raw / "Site_Baa.zip"
    with zipfile.ZipFile(archive) as source:
        source.extractall(raw)
    data = archive.read_bytes()
    archive.unlink()
    bad = os.fsencode(raw / "Site_Baa") + b"/\xff\xfe_0.pickle"
    os.close(os.open(bad, os.O_CREAT | os.O_WRONLY))
    result = _ingest(tmp_path, raw)
    message = result.output.strip()
    assert result.exit_code == 1 and "\n" not in message and isinstance(result.exception, SystemExit), result.output
    assert message.startswith(f"error: {raw}: file name 'Site_Baa/\\udcff\\udcfe_0.pickle' is not valid Unicode")
    shutil.rmtree(raw / "Site_Baa")
    name = next(n for n in zipfile.ZipFile(io.BytesIO(data)).namelist() if n.endswith(".pickle")).encode()
    flagged = bytearray(data.replace(name, name[:-8] + b"\xff" + name[-7:]))  # same length: offsets hold
    for signature, flags_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):  # flag bit 11: the names are UTF-8
        at = flagged.find(signature)
        while at >= 0:
            flagged[at + flags_at + 1] |= 0x08
            at = flagged.find(signature, at + 4)
    archive.write_bytes(bytes(flagged))
    result = _ingest(tmp_path, raw)
    message = result.output.strip()
    assert result.exit_code == 1 and "\n" not in message and isinstance(result.exception, SystemExit), result.output
    assert message.startswith(f"error: {archive}: a member's name is not valid UTF-8"), message
