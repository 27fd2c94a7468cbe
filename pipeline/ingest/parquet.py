"""Deterministic Parquet: fixed schema, full-key sort, explicit row groups, zstd, atomic rename."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.ipc  # noqa: F401  (pa.ipc)
import pyarrow.parquet as pq

from pipeline.core.executor import Background

ROW_GROUP_SIZE = 1 << 20


def to_arrow(frame: pl.DataFrame, schema: pa.Schema) -> pa.Table:
    """Polars frame -> Arrow table with exactly the declared schema (plain string, int64, float64)."""
    return frame.select(schema.names).to_arrow().cast(schema)


def _encodings(schema: pa.Schema) -> tuple[list[str], dict[str, str]]:
    """Dictionary pages for text, delta encoding for integers (sorted times compress to almost nothing)."""
    text = [
        f.name
        for f in schema
        if pa.types.is_string(f.type) or pa.types.is_large_string(f.type) or pa.types.is_dictionary(f.type)
    ]
    integers = {f.name: "DELTA_BINARY_PACKED" for f in schema if pa.types.is_integer(f.type)}
    return text, integers


def write_table(table: pa.Table, path: Path) -> None:
    writer = RowGroupWriter(path, table.schema)
    try:
        writer.write(table)
        writer.close()
    except BaseException:
        writer.abort()
        raise


class RowGroupWriter:
    """Write a sorted table piece by piece, in row groups of exactly ROW_GROUP_SIZE rows (the last one shorter).

    The bytes depend only on the rows written, not on how they arrived. Groups are encoded (and passed
    to `on_group`) on a second thread, in order, while the caller assembles the next ones; at most two
    wait in between. Written to a temporary file and renamed on `close`; `abort` removes it. `statistics`: every
    column's min and max (for readers that skip row groups), or only the named columns'. `compression`: zstd, or
    lz4 for a file read once by the next stage (a third faster to write and half the time to read, 60 % larger)."""

    def __init__(
        self,
        path: Path,
        schema: pa.Schema,
        on_group=None,
        statistics: bool | list[str] = True,
        compression: str = "zstd",
    ) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path, self.schema, self.on_group = path, schema, on_group
        fd, self.tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        dictionary, encodings = _encodings(schema)
        self.writer = pq.ParquetWriter(
            self.tmp,
            schema,
            compression=compression,
            store_schema=False,
            write_statistics=statistics,
            use_dictionary=dictionary,
            column_encoding=encodings or None,
        )
        self.pending: list[pa.Table] = []
        self.pending_rows = 0
        self.rows = 0
        self.encoder = Background(self._encode, depth=2, name="parquet-writer")

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        self.pending.append(table.cast(self.schema) if table.schema != self.schema else table)
        self.pending_rows += table.num_rows
        while self.pending_rows >= ROW_GROUP_SIZE:
            self._emit(ROW_GROUP_SIZE)

    def _emit(self, rows: int) -> None:
        joined = pa.concat_tables(self.pending)
        group, rest = joined.slice(0, rows), joined.slice(rows)
        self.encoder.put(group.combine_chunks())
        self.rows += rows
        self.pending = [rest] if rest.num_rows else []
        self.pending_rows = rest.num_rows

    def _encode(self, group: pa.Table) -> None:
        self.writer.write_table(group, row_group_size=ROW_GROUP_SIZE)
        if self.on_group:
            self.on_group(group)

    def close(self) -> int:
        """Flush, close and move into place; returns the number of rows written."""
        if self.pending_rows:
            self._emit(self.pending_rows)
        elif self.rows == 0:
            self.encoder.put(self.schema.empty_table())
        self.encoder.close()
        self.writer.close()
        os.replace(self.tmp, self.path)
        return self.rows

    def abort(self) -> None:
        self.encoder.close(check=False)
        self.writer.close()
        Path(self.tmp).unlink(missing_ok=True)


def read_rows(path: Path, start: int, count: int, columns: list[str] | None = None) -> pa.Table:
    """Rows [start, start + count) of a Parquet file, reading only the row groups that hold them."""
    file = pq.ParquetFile(path)
    groups, offset, first = [], 0, None
    for index in range(file.metadata.num_row_groups):
        n = file.metadata.row_group(index).num_rows
        if offset + n > start and offset < start + count:
            groups.append(index)
            first = offset if first is None else first
        offset += n
    if not groups:
        return file.schema_arrow.empty_table() if columns is None else file.schema_arrow.empty_table().select(columns)
    return file.read_row_groups(groups, columns=columns).slice(start - first, count)


def write_frame(frame: pl.DataFrame, schema: pa.Schema, key: list[str], path: Path) -> None:
    """Sort by the full key (nulls first) and write; equal input gives equal bytes."""
    write_table(to_arrow(frame.sort(key, nulls_last=False), schema), path)
