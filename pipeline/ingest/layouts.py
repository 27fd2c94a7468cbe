"""Value layouts: each turns raw files into one frame of cells (source, row, column, stream, ts, raw)."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from contracts.corpus import CorpusMapping, FilePerStream, LongCsv, WideCsv
from pipeline.errors import IngestError
from pipeline.ingest.csvread import RawTable, read_strings
from pipeline.ingest.metadata import Resolver
from pipeline.ingest.timeparse import parse_times

CELL_SCHEMA = {
    "source": pl.String, "row": pl.Int64, "column": pl.String, "stream_id": pl.String,
    "ts": pl.Int64, "raw": pl.String, "pre_reason": pl.String,
}


def _file_groups(rel: str, pattern: str) -> dict[str, str]:
    match = re.fullmatch(pattern, Path(rel).name)
    if not match:
        raise IngestError(f"{rel}: file name does not match values.file_pattern {pattern!r}; rename it or fix the pattern")
    return {k: v for k, v in match.groupdict().items() if v is not None}


def _require(raw: RawTable, columns: list[str], what: str) -> None:
    absent = [c for c in columns if c not in raw.header]
    if absent:
        raise IngestError(
            f"{raw.path}: column {', '.join(map(repr, absent))} named in {what} is absent; "
            f"the file has {', '.join(raw.header)}; fix the mapping"
        )


def _timed_frame(raw: RawTable, mapping: CorpusMapping) -> pl.DataFrame:
    """Records as strings plus `row`, `ts` and `ts_reason`; checks the declared row order."""
    frame = pl.from_arrow(raw.table).with_columns(row=pl.Series(raw.rows))
    frame = parse_times(frame, mapping.time.column, mapping.time)
    if frame.height and frame["ts"].null_count() == frame.height:
        first = frame[mapping.time.column][0]
        raise IngestError(
            f"{raw.path}: row {raw.rows[0]}: no value of time column {mapping.time.column!r} matches format "
            f"{mapping.time.format!r} (first value {first!r}); fix time.format"
        )
    order = mapping.time.row_order
    if order != "any":
        timed = frame.filter(pl.col("ts").is_not_null()).select("row", "ts")
        step = timed["ts"].diff()
        wrong = (step < 0) if order == "ascending" else (step > 0)
        bad = timed.filter(wrong.fill_null(False))
        if bad.height:
            raise IngestError(
                f"{raw.path}: row {bad['row'][0]}: time goes against the declared {order} row order "
                f"({bad.height} such rows); fix the file or declare time.row_order = \"any\""
            )
    return frame


def _malformed_cells(raw: RawTable, rel: str, columns: list[str]) -> pl.DataFrame:
    rows = [(rel, number, column, None, None, text[:500], "malformed_row") for number, text in raw.malformed for column in columns]
    return pl.DataFrame(rows, schema=CELL_SCHEMA, orient="row")


def _stream_ids(resolver: Resolver, rel: str, site: str, keys: list[str], template: str) -> dict[str, str | None]:
    ids = {}
    unmapped = []
    for key in keys:
        stream = resolver.stream(rel, site, key, template)
        ids[key] = stream.stream_id if stream else None
        if stream is None:
            unmapped.append(key)
    if unmapped and resolver.unmapped_policy == "error":
        raise IngestError(
            f"{rel}: no metadata for {', '.join(map(repr, sorted(unmapped)))}; declare them in the mapping, "
            "or set metadata.unmapped_columns = \"reject\" to record their cells as rejects"
        )
    return ids


def _cells(frame: pl.DataFrame, rel: str, key_col: str, value_col: str, ids: dict[str, str | None]) -> pl.DataFrame:
    stream = pl.col(key_col).replace_strict(ids, default=None, return_dtype=pl.String)
    return frame.select(
        source=pl.lit(rel),
        row="row",
        column=pl.col(key_col) if key_col != "column" else pl.col("column"),
        stream_id=stream,
        ts="ts",
        raw=pl.col(value_col),
        pre_reason=pl.coalesce(
            pl.col("ts_reason"), pl.when(stream.is_null()).then(pl.lit("unmapped_column")).otherwise(None)
        ),
    ).cast(CELL_SCHEMA)


def read_wide(path: Path, rel: str, mapping: CorpusMapping, resolver: Resolver) -> tuple[pl.DataFrame, int]:
    layout: WideCsv = mapping.values
    raw = read_strings(path, layout.delimiter, layout.encoding)
    _require(raw, [mapping.time.column, *layout.ignore_columns], "time.column / values.ignore_columns")
    site = resolver.site_for(rel, _file_groups(rel, layout.file_pattern), layout.site)
    value_cols = [c for c in raw.header if c != mapping.time.column and c not in layout.ignore_columns]
    resolver.check_columns(rel, value_cols)
    ids = _stream_ids(resolver, rel, site, value_cols, layout.stream_id)
    frame = _timed_frame(raw, mapping).rename({c: f"v:{c}" for c in value_cols})
    long = frame.unpivot(on=[f"v:{c}" for c in value_cols], index=["row", "ts", "ts_reason"], variable_name="column", value_name="raw")
    long = long.with_columns(pl.col("column").str.slice(2))
    cells = pl.concat([_cells(long, rel, "column", "raw", ids), _malformed_cells(raw, rel, value_cols)])
    return cells, (raw.table.num_rows + len(raw.malformed)) * len(value_cols)


def read_long(path: Path, rel: str, mapping: CorpusMapping, resolver: Resolver) -> tuple[pl.DataFrame, int]:
    layout: LongCsv = mapping.values
    raw = read_strings(path, layout.delimiter, layout.encoding)
    _require(raw, [mapping.time.column, layout.stream_column, layout.value_column], "time.column / values")
    site = resolver.site_for(rel, _file_groups(rel, layout.file_pattern), layout.site)
    frame = _timed_frame(raw, mapping)
    keys = sorted(set(frame[layout.stream_column].to_list()))
    ids = _stream_ids(resolver, rel, site, keys, layout.stream_id)
    cells = pl.concat([
        _cells(frame, rel, layout.stream_column, layout.value_column, ids),
        _malformed_cells(raw, rel, [layout.value_column]),
    ])
    return cells, raw.table.num_rows + len(raw.malformed)


def read_file_per_stream(path: Path, rel: str, mapping: CorpusMapping, resolver: Resolver) -> tuple[pl.DataFrame, int]:
    layout: FilePerStream = mapping.values
    raw = read_strings(path, layout.delimiter, layout.encoding)
    _require(raw, [mapping.time.column, layout.value_column], "time.column / values.value_column")
    groups = _file_groups(rel, layout.file_pattern)
    site = resolver.site_for(rel, groups, layout.site)
    ids = _stream_ids(resolver, rel, site, [groups["key"]], layout.stream_id)
    frame = _timed_frame(raw, mapping).with_columns(_key=pl.lit(groups["key"]))
    cells = pl.concat([_cells(frame, rel, "_key", layout.value_column, ids), _malformed_cells(raw, rel, [layout.value_column])])
    return cells.with_columns(column=pl.lit(layout.value_column)), raw.table.num_rows + len(raw.malformed)


READERS = {"wide_csv": read_wide, "long_csv": read_long, "file_per_stream": read_file_per_stream}
