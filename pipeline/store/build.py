"""Build the DuckDB tool store from the ingest stage's Parquet tables."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa

from contracts.build import StoreConfig
from pipeline.errors import StageError
from pipeline.manifest import StageResult
from pipeline.parquet import write_table
from pipeline.store import compute, sql
from pipeline.store.digest import table_digest

STORE_FILE = "store.duckdb"

# Table -> full sort key. Every table is exported to <name>.parquet in this order.
KEYS: dict[str, list[str]] = {
    "sites": ["site_id"],
    "entities": ["entity_id"],
    "relations": ["subject", "predicate", "object"],
    "streams": ["stream_id"],
    "observations": ["stream_id", "ts"],
    "quality": ["stream_id"],
    "aggregates": ["stream_id", "period", "window_start"],
    "profiles": ["stream_id", "dow", "hour"],
    "previews": ["stream_id", "idx"],
    "thresholds": ["name"],
    "rejects": ["stream_id", "ts", "reason", "raw"],
}


def _quantile(values: pl.Series, q: float) -> float:
    finite = values.drop_nulls().cast(pl.Float64).to_numpy()
    return round(float(np.quantile(np.sort(finite), q)), 4) if len(finite) else 0.0


def thresholds(aggregates: pl.DataFrame, quality: pl.DataFrame, cfg: StoreConfig) -> pl.DataFrame:
    """Quality thresholds: declared quantiles of weekly windows (and of whole streams), rounded to 4 dp."""
    weekly = aggregates.filter(pl.col("period") == "week")
    q = cfg.thresholds
    rows = [
        ("coverage_abstain", _quantile(weekly["coverage"], q.coverage_abstain), q.coverage_abstain, "weekly windows"),
        ("coverage_answer", _quantile(weekly["coverage"], q.coverage_answer), q.coverage_answer, "weekly windows"),
        ("gap_ratio_answer", _quantile(weekly["gap_ratio"], q.gap_ratio_answer), q.gap_ratio_answer, "weekly windows"),
        ("gap_ratio_abstain_window", _quantile(weekly["gap_ratio"], q.gap_ratio_abstain_window), q.gap_ratio_abstain_window, "weekly windows"),
        ("gap_ratio_abstain_stream", _quantile(quality["gap_ratio"], q.gap_ratio_abstain_stream), q.gap_ratio_abstain_stream, "streams"),
    ]
    return pl.DataFrame(rows, schema={"name": pl.String, "value": pl.Float64, "quantile": pl.Float64, "population": pl.String},
                        orient="row").sort("name")


def shown(column: str) -> pl.Expr:
    """A value as the tools show it (Python's round to 4 decimals): decisions use what an agent can see."""
    return pl.col(column).map_elements(lambda x: round(x, 4) + 0.0, return_dtype=pl.Float64)


def quality_band(limits: dict[str, float], gap_limit: str, clean: pl.Expr | None = None) -> pl.Expr:
    """The quality decision on the rounded values, in order: low_coverage, long_gap, healthy, marginal."""
    coverage, ratio = shown("coverage").fill_null(0.0), shown("gap_ratio")
    healthy = (coverage >= limits["coverage_answer"]) & (ratio <= limits["gap_ratio_answer"])
    if clean is not None:
        healthy = healthy & clean
    return (
        pl.when(coverage < limits["coverage_abstain"]).then(pl.lit("low_coverage"))
        .when(ratio.is_null() | (ratio > limits[gap_limit])).then(pl.lit("long_gap"))
        .when(healthy.fill_null(False)).then(pl.lit("healthy"))
        .otherwise(pl.lit("marginal"))
    )


def derive_tables(ingest_dir: Path, cfg: StoreConfig) -> dict[str, pa.Table]:
    """Every store table except the stream index, as Arrow tables sorted by their full key."""
    read = lambda name: pl.read_parquet(ingest_dir / f"{name}.parquet")  # noqa: E731
    obs = compute.with_steps(read("observations"), cfg.step_window)
    streams, rejects = read("streams"), read("rejects")
    codes = compute.stream_codes(obs["stream_id"])
    timed_rejects = rejects.filter(pl.col("stream_id").is_not_null() & pl.col("ts").is_not_null())
    aggregates = compute.aggregates(obs, cfg.std_ddof, codes, timed_rejects.select("stream_id", "ts", "reason"))
    quality = compute.quality(obs, streams, rejects)
    limits_frame = thresholds(aggregates, quality, cfg)
    limits = dict(limits_frame.select("name", "value").iter_rows())
    clean = (pl.col("duplicate_fraction") == 0) & (pl.col("nan_fraction") == 0)
    clean_window = (pl.col("duplicates") == 0) & (pl.col("non_finite") == 0)
    tables = {
        "sites": read("sites"), "entities": read("entities"), "relations": read("relations"),
        "streams_in": streams,
        "observations": obs.select("stream_id", "ts", "value", "step_us"),
        "quality": quality.with_columns(quality_band=quality_band(limits, "gap_ratio_abstain_stream", clean)),
        "aggregates": aggregates.with_columns(quality_band=quality_band(limits, "gap_ratio_abstain_window", clean_window)),
        "profiles": compute.profiles(obs, cfg.std_ddof, codes),
        "previews": compute.previews(obs, cfg.preview_points),
        "thresholds": limits_frame,
        # Rejected cells that have a stream and a time: tools report defect fractions per window.
        "rejects": timed_rejects.select("stream_id", "ts", "reason", "raw").sort("stream_id", "ts", "reason", "raw"),
    }
    return {name: frame.to_arrow() for name, frame in tables.items()}


def build_store(ingest_dir: Path, out: Path, cfg: StoreConfig, threads: int | None = None) -> StageResult:
    """Write store.duckdb (read-only afterwards) and one deterministic Parquet export per table."""
    tables = derive_tables(ingest_dir, cfg)
    path = out / STORE_FILE
    con = duckdb.connect(str(path))
    try:
        if threads:
            con.execute(f"SET threads = {int(threads)}")
        for name, table in tables.items():
            con.register("incoming", table)
            # Arrow tables arrive sorted by their key; insertion order is kept (preserve_insertion_order).
            con.execute(f"CREATE {'TEMP ' if name == 'streams_in' else ''}TABLE {name} AS SELECT * FROM incoming")
            con.unregister("incoming")
        con.execute(sql.STREAM_INDEX)
        con.execute("DROP TABLE streams_in")
        tables["streams"] = con.sql("SELECT * FROM streams ORDER BY stream_id").to_arrow_table()
        con.execute("CHECKPOINT")
    finally:
        con.close()
    if Path(str(path) + ".wal").exists():
        raise StageError(f"{path}.wal left after CHECKPOINT and close; the store is not self-contained")
    os.chmod(path, 0o444)
    for name in KEYS:
        write_table(tables[name], out / f"{name}.parquet")
    limits = {row["name"]: row["value"] for row in tables["thresholds"].to_pylist()}
    return StageResult(
        outputs=[f"{name}.parquet" for name in KEYS],
        row_counts={name: tables[name].num_rows for name in KEYS},
        # Digests of the tables as inserted; `logical_digests(path)` re-reads the file (verify does).
        logical_digests={name: table_digest(tables[name]) for name in KEYS},
        details={"thresholds": limits, "std_ddof": cfg.std_ddof},
        unhashed_outputs=[STORE_FILE],
    )


def open_store(path: Path, threads: int | None = None) -> duckdb.DuckDBPyConnection:
    """Open a built store read-only (writes are refused by DuckDB)."""
    if not path.is_file():
        raise StageError(f"{path}: no tool store; run `telemetry-bench build` first")
    config = {"threads": int(threads)} if threads else {}
    return duckdb.connect(str(path), read_only=True, config=config)


def logical_digests(path: Path) -> dict[str, str]:
    """Digest of every table read back from the store file in key order."""
    con = open_store(path)
    try:
        return {
            name: table_digest(con.sql(f"SELECT * FROM {name} ORDER BY {', '.join(key)}").to_arrow_table())
            for name, key in KEYS.items()
        }
    finally:
        con.close()
