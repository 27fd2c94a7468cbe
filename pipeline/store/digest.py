"""Logical digest of a table: xxh3-128 over schema, row count and column buffers in key order."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from pipeline.canonical import HASH_SCHEME_VERSION


def _column_bytes(column: pa.ChunkedArray) -> list[bytes | memoryview]:
    array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    valid = np.asarray(pc.is_valid(array).to_numpy(zero_copy_only=False), dtype=np.uint8).tobytes()
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type) or pa.types.is_string_view(array.type):
        array = pc.fill_null(array, "").cast(pa.large_string())
        offsets = np.frombuffer(array.buffers()[1], dtype=np.int64)[array.offset : array.offset + len(array) + 1]
        data = array.buffers()[2]
        body = memoryview(b"") if data is None else memoryview(data)[offsets[0] : offsets[-1]]
        return [valid, (offsets - offsets[0]).astype("<i8").tobytes(), body]
    if pa.types.is_boolean(array.type):
        return [valid, np.asarray(pc.fill_null(array, False).to_numpy(zero_copy_only=False), dtype=np.uint8).tobytes()]
    if pa.types.is_dictionary(array.type):
        return _column_bytes(pa.chunked_array([array.cast(array.type.value_type)]))
    filled = pc.fill_null(array, pa.scalar(0, type=array.type))
    numbers = filled.to_numpy(zero_copy_only=False)
    return [valid, np.ascontiguousarray(numbers).astype(numbers.dtype.newbyteorder("<")).tobytes()]


def table_digest(table: pa.Table) -> str:
    """Same rows in the same order and the same logical types give the same digest."""
    hasher = xxhash.xxh3_128()
    hasher.update(f"v{HASH_SCHEME_VERSION}|{table.num_rows}|".encode())
    for field, column in zip(table.schema, table.columns, strict=True):
        kind = "string" if pa.types.is_string(field.type) or pa.types.is_large_string(field.type) or pa.types.is_string_view(field.type) else str(field.type)
        hasher.update(f"{field.name}:{kind}|".encode())
        for part in _column_bytes(column):
            hasher.update(part.nbytes.to_bytes(8, "little") if isinstance(part, memoryview) else len(part).to_bytes(8, "little"))
            hasher.update(part)
    return hasher.hexdigest()
