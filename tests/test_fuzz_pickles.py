"""Mutated small BTS pickles through the restricted unpickler (issue 44): each loads as a series or is refused with
UnsafePickle or ValueError (a member's reason), never another exception, and what it allocated at its peak stays
within the member's bound. Seeds are plain members at every protocol and small bombs; mutations flip, insert, delete
and repeat bytes (repeating a call is how a bomb amplifies). Few examples in make test, many in make fuzz."""

from __future__ import annotations

import pickle
import resource
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.core.errors import UnsafePickle
from pipeline.ingest.pickles import ALLOCATION_FACTOR, ALLOCATION_FLOOR, load_series
from tests.helpers import fuzz_settings
from tests.test_pickles import encode_bomb, memo_bomb, object_array_bomb

LIMIT = 1 << 29
SLACK = 256 << 10  # what tracemalloc sees beside the member's own allocations (interned names, caches)


def _seeds() -> list[bytes]:
    times = np.datetime64("2020-01-01", "ms") + np.arange(12) * np.timedelta64(600, "s")
    objects = [
        ["s1", times, np.arange(12) / 3],
        ["s1", 1.6e9 + np.arange(5.0), np.array([1.0, np.nan, np.inf, -0.0, 7.0], dtype=np.float32)],
        ["s1", np.arange(3, dtype=np.int32), np.array([True, False, True])],
        ["s1", times[:0], np.array([])],
    ]
    plain = [pickle.dumps(obj, protocol=protocol) for obj in objects for protocol in (2, 3, 4, 5)]
    return [*plain, encode_bomb(4096, 5), object_array_bomb(12), memo_bomb()]


SEEDS = _seeds()


@st.composite
def mutated(draw) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        how = draw(st.sampled_from(["flip", "insert", "delete", "repeat", "splice", "int"]))
        at = draw(st.integers(0, len(data)))
        if how == "flip" and data:
            data[min(at, len(data) - 1)] = draw(st.integers(0, 255))
        elif how == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=12))
        elif how == "delete":
            del data[at : at + draw(st.integers(1, 16))]
        elif how == "repeat":  # a slice again and again: a call, a GET, an APPEND
            end = min(len(data), at + draw(st.integers(1, 24)))
            data[end:end] = bytes(data[at:end]) * draw(st.integers(1, 400))
        elif how == "splice":
            other = draw(st.sampled_from(SEEDS))
            start = draw(st.integers(0, len(other)))
            data[at:at] = other[start : start + draw(st.integers(1, 64))]
        elif how == "int":  # a length, a shape or a memo index made large
            value = draw(st.sampled_from([0xFF, 0xFFFF, 1 << 24, 1 << 30, 0x7FFFFFFF, 0xFFFFFFFF]))
            data[at : at + 4] = value.to_bytes(4, "little")
    return bytes(data)


def _vm_bytes() -> int:
    for line in Path("/proc/self/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) << 10
    return 0


def _load(data: bytes) -> None:
    tracemalloc.start()
    try:
        load_series(data, LIMIT)
    except (UnsafePickle, ValueError):
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    bound = ALLOCATION_FACTOR * len(data) + ALLOCATION_FLOOR + SLACK
    assert peak <= bound, f"{len(data):,}-byte member peaked at {peak:,} bytes (bound {bound:,}): {data[:120]!r}"


@pytest.mark.fuzz
def test_mutated_pickles_are_refused_or_loaded_within_the_bound():
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    ceiling = _vm_bytes() + (2 << 30)  # should the bound fail, a MemoryError here rather than the machine's memory
    resource.setrlimit(resource.RLIMIT_AS, (ceiling if hard == resource.RLIM_INFINITY else min(ceiling, hard), hard))
    try:

        @fuzz_settings(60, 3000)
        @given(mutated())
        def members(data):
            _load(data)

        for seed in SEEDS:
            _load(seed)
        members()
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
