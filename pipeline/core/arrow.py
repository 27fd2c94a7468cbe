"""Arrow arrays from numpy arrays and Python strings without pyarrow's conversion of Python objects.

`pa.array`, `pa.scalar` and a compute function given a Python number first ask whether the value is a pandas object,
which imports pandas (0.3 s, on a corpus thread holding the GIL) in a build that never uses it. These build the same
arrays from the values' buffers; a test runs a build to the store and asserts pandas was never imported."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl
import pyarrow as pa


def numbers(values: np.ndarray) -> pa.Array:
    """A 1-D numpy array of a fixed-width number type as an Arrow array of that type, no nulls, sharing its memory."""
    if values.ndim != 1 or values.dtype.kind not in "iuf":
        raise TypeError(f"numbers() takes a 1-D integer or float array, not {values.dtype} of {values.ndim} dimensions")
    values = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("="))  # Arrow's buffers are native
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])


def strings(values: Sequence[str]) -> pa.Array:
    """Python strings as an Arrow string array (no nulls)."""
    return pl.Series(values, dtype=pl.String).to_arrow().cast(pa.string())


def to_numpy(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """An Arrow array as pyarrow's `to_numpy(zero_copy_only=False)` gives it: integers, floats and booleans without
    nulls from their buffers; anything else (nulls, other types) by pyarrow itself."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    if array.null_count == 0 and (pa.types.is_integer(array.type) or pa.types.is_floating(array.type)):
        dtype, data = array.type.to_pandas_dtype(), array.buffers()[1]
        if data is None:  # an empty array may have no values buffer at all
            return np.empty(0, dtype=dtype)
        return np.frombuffer(data, dtype=dtype)[array.offset : array.offset + len(array)]
    if array.null_count == 0 and pa.types.is_boolean(array.type):
        return pl.from_arrow(array).to_numpy()
    return array.to_numpy(zero_copy_only=False)


def zero(arrow_type: pa.DataType) -> pa.Scalar:
    """The scalar that fills a null: 0, false or "" built from buffers; any other type's zero by pyarrow itself."""
    if pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type):
        return numbers(np.zeros(1, dtype=arrow_type.to_pandas_dtype()))[0]
    if pa.types.is_boolean(arrow_type):
        return pl.Series([False]).to_arrow()[0]
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type) or pa.types.is_string_view(arrow_type):
        return strings([""]).cast(arrow_type)[0]
    return pa.scalar(0, type=arrow_type)  # dates, times, decimals
