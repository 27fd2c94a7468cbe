"""One canonical JSON writer; pinned digests (changing them is a deliberate, reviewed act)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.canonical import HASH_SCHEME_VERSION, canonical_json, digest, digest_value, write_json, write_jsonl


def test_canonical_json_is_sorted_compact_and_utf8():
    assert canonical_json({"b": 1, "a": [1.5, "ü"]}) == '{"a":[1.5,"ü"],"b":1}'


def test_non_finite_floats_are_refused(tmp_path):
    with pytest.raises(ValueError):
        canonical_json({"x": math.nan})
    with pytest.raises(ValueError, match=r"\$.x\[0\]"):
        write_json(tmp_path / "x.json", {"x": [math.inf]})
    with pytest.raises(ValueError, match=r"non-finite float at \$.x\[1\].y: "):
        write_json(tmp_path / "x.json", {"x": [1.0, {"y": -math.inf}]}, pretty=False)
    with pytest.raises(ValueError, match=r"non-finite float at \$.b: "):  # the row's place, in the row refused
        write_jsonl(tmp_path / "x.jsonl", [{"a": 1.0}, {"b": math.nan}])
    assert not list(tmp_path.iterdir())  # nothing written


def test_pinned_digests():
    assert HASH_SCHEME_VERSION == 1
    assert digest(b"telemetry-bench") == "a835166896dc4eeba9b433abe0ec7907"
    assert digest_value({"a": 1, "b": [1, 2]}) == digest('{"a":1,"b":[1,2]}')


def test_untrusted_json_is_bounded_in_depth():
    import json

    from pipeline.core.canonical import MAX_JSON_DEPTH, JSONTooDeep, json_depth, loads_untrusted

    assert loads_untrusted('{"a": [1, {"b": 2}]}') == {"a": [1, {"b": 2}]}
    assert json_depth(3) == 0 and json_depth([]) == 1 and json_depth({"a": [1, {"b": []}]}) == 4
    assert loads_untrusted("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH) is not None
    for depth in (MAX_JSON_DEPTH + 1, 200, 100_000):  # within and beyond the parser's own recursion limit
        with pytest.raises(JSONTooDeep, match=f"nested deeper than {MAX_JSON_DEPTH} levels"):
            loads_untrusted("[" * depth + "]" * depth)
    with pytest.raises(json.JSONDecodeError):  # every reader that refuses bad JSON refuses this too
        loads_untrusted("[" * 5000 + "]" * 5000)
    assert json_depth(loads_untrusted("[" * 500 + "]" * 500, max_depth=10**6)) == 500


def _depth_by_recursion(value) -> int:
    """The definition: a scalar is 0, a container one more than its deepest member."""
    if isinstance(value, dict):
        return 1 + max(map(_depth_by_recursion, value.values()), default=0)
    if isinstance(value, (list, tuple)):
        return 1 + max(map(_depth_by_recursion, value), default=0)
    return 0


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=2), inner, max_size=4),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_json_depth_is_the_recursive_definition(value):
    from pipeline.core.canonical import json_depth

    assert json_depth(value) == _depth_by_recursion(value)


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=3000), chunk=st.integers(min_value=1, max_value=5000))
def test_a_file_hashed_block_by_block_is_hashed_as_its_whole_bytes(tmp_path_factory, data, chunk):
    """digest_file and sha256_file read a file into one reused buffer (file_blocks): whatever the chunk and the size
    (empty, smaller than the chunk, a multiple of it or not), the digest is the one of the whole bytes."""
    import hashlib

    from pipeline.core.canonical import digest_file, file_blocks
    from pipeline.core.checksums import sha256_file

    path = tmp_path_factory.mktemp("blocks") / "file.bin"
    path.write_bytes(data)
    assert digest_file(path, chunk) == digest(data)
    assert sha256_file(path, chunk) == hashlib.sha256(data).hexdigest()
    assert b"".join(bytes(block) for block in file_blocks(path, chunk)) == data


def test_a_pipe_is_hashed_as_the_bytes_written_into_it(tmp_path):
    """A file that is no regular file (its size says nothing of its bytes) is read in whole chunks, to its end."""
    import os
    import threading

    from pipeline.core.canonical import digest_file

    data = bytes(range(256)) * 1000
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_bytes, args=(data,))
    writer.start()
    try:
        assert digest_file(fifo, 1 << 12) == digest(data)
    finally:
        writer.join()
