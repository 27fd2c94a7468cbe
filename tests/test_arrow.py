"""pipeline/core/arrow.py: the arrays built from buffers equal pyarrow's own conversions."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pipeline.core.arrow import numbers, strings, to_numpy, zero

DTYPES = [np.int8, np.int32, np.int64, np.uint16, np.float32, np.float64]


@settings(max_examples=100, deadline=None)  # no deadline: a loaded machine is no failure
@given(st.sampled_from(DTYPES).flatmap(lambda d: hnp.arrays(d, st.integers(0, 40))), st.integers(1, 3))
def test_numbers_and_back_equal_pyarrow(values, step):
    strided = values[::step]  # not contiguous: copied first
    built = numbers(strided)
    theirs = pa.array(strided)  # NaN is a value in both (equals() would call NaN unequal to itself)
    assert built.type == theirs.type and built.null_count == theirs.null_count == 0
    assert built.to_numpy().tobytes() == theirs.to_numpy().tobytes() == strided.tobytes()
    assert to_numpy(built).tobytes() == strided.tobytes() and to_numpy(built).dtype == strided.dtype
    sliced = built.slice(1)  # an offset into the buffer
    assert to_numpy(sliced).tobytes() == strided[1:].tobytes()
    assert to_numpy(pa.chunked_array([built, built])).tobytes() == np.concatenate([strided, strided]).tobytes()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(), max_size=20))
def test_strings_equal_pyarrow(values):
    assert strings(values).equals(pa.array(values, type=pa.string()))


@pytest.mark.parametrize("arrow_type", [pa.int32(), pa.float64(), pa.bool_(), pa.string(), pa.large_string()])
def test_zero_fills_a_null_as_pyarrow_would(arrow_type):
    values = pa.array([None], type=arrow_type)
    plain = {pa.bool_(): False, pa.string(): "", pa.large_string(): ""}.get(arrow_type, 0)
    assert pc.fill_null(values, zero(arrow_type)).equals(pc.fill_null(values, pa.scalar(plain, type=arrow_type)))


def test_numbers_of_the_other_byte_order_are_the_same_numbers():
    values = np.array([1, -2, 3], dtype=">i8")
    assert numbers(values).to_pylist() == [1, -2, 3] == numbers(values.astype("<i8")).to_pylist()


def test_an_empty_array_without_a_values_buffer_reads_as_pyarrow_reads_it():
    empty = pa.Array.from_buffers(pa.int64(), 0, [None, None])
    assert to_numpy(empty).dtype == empty.to_numpy(zero_copy_only=False).dtype and len(to_numpy(empty)) == 0


def test_booleans_and_refusals():
    assert to_numpy(pc.is_valid(pa.array([1, None]))).tolist() == [True, False]
    for other in (pa.array([1, None]), pa.array([1.5, None]), pa.array([True, None]), pa.array(["a"])):
        assert repr(to_numpy(other).tolist()) == repr(other.to_numpy(zero_copy_only=False).tolist())  # by pyarrow
    with pytest.raises(TypeError, match="1-D integer or float"):
        numbers(np.array([True]))
    assert zero(pa.date32()) == pa.scalar(0, type=pa.date32())  # other types: pyarrow's own zero
