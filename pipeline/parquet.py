"""Deterministic Parquet: fixed schema, full-key sort, explicit row groups, zstd, atomic rename."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

ROW_GROUP_SIZE = 1 << 20


def to_arrow(frame: pl.DataFrame, schema: pa.Schema) -> pa.Table:
    """Polars frame -> Arrow table with exactly the declared schema (plain string, int64, float64)."""
    return frame.select(schema.names).to_arrow().cast(schema)


def _encodings(schema: pa.Schema) -> tuple[list[str], dict[str, str]]:
    """Dictionary pages for text, delta encoding for integers (sorted times compress to almost nothing)."""
    text = [f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type) or pa.types.is_dictionary(f.type)]
    integers = {f.name: "DELTA_BINARY_PACKED" for f in schema if pa.types.is_integer(f.type)}
    return text, integers


def write_table(table: pa.Table, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    dictionary, encodings = _encodings(table.schema)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(
            table, tmp, compression="zstd", row_group_size=ROW_GROUP_SIZE, store_schema=False,
            write_statistics=True, use_dictionary=dictionary, column_encoding=encodings or None,
        )
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_frame(frame: pl.DataFrame, schema: pa.Schema, key: list[str], path: Path) -> None:
    """Sort by the full key (nulls first) and write; equal input gives equal bytes."""
    write_table(to_arrow(frame.sort(key, nulls_last=False), schema), path)
