"""Logical table digests: the same rows give the same digest whatever their Arrow encoding."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.store.digest import table_digest

WORDS = ["", "a", "site__flow", "Überlauf", "b" * 40]


@settings(max_examples=200, deadline=None)
@given(
    runs=st.lists(st.tuples(st.integers(0, len(WORDS) - 1), st.integers(1, 300)), max_size=12),
    shuffled=st.booleans(),
    null_at=st.none() | st.integers(0, 10_000),
)
def test_a_dictionary_column_digests_as_its_strings(runs, shuffled, null_at):
    """Sorted runs take the path that never decodes the strings; shuffled codes and nulls take the decoding path:
    every one digests as the plain string column."""
    codes = np.repeat([code for code, _ in runs], [count for _, count in runs]).astype(np.int32)
    if shuffled:
        codes = np.random.default_rng(len(codes)).permutation(codes)
    mask = None
    if null_at is not None and len(codes):
        mask = np.zeros(len(codes), dtype=bool)
        mask[null_at % len(codes)] = True
    column = pa.DictionaryArray.from_arrays(pa.array(codes, type=pa.int32(), mask=mask), pa.array(WORDS))
    ts = pa.array(np.arange(len(codes), dtype=np.int64))
    encoded = pa.table({"stream_id": column, "ts": ts})
    plain = pa.table({"stream_id": column.cast(pa.string()), "ts": ts})
    assert table_digest(encoded) == table_digest(plain)


def test_digests_tell_rows_apart():
    ids = pa.DictionaryArray.from_arrays(pa.array(np.repeat([0, 1], 100).astype(np.int32)), pa.array(["ab", "c"]))
    moved = pa.DictionaryArray.from_arrays(pa.array(np.repeat([0, 1], [101, 99]).astype(np.int32)), ids.dictionary)
    renamed = pa.DictionaryArray.from_arrays(ids.indices, pa.array(["a", "bc"]))
    digests = {table_digest(pa.table({"s": column})) for column in (ids, moved, renamed)}
    assert len(digests) == 3
