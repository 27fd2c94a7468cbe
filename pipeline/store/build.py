"""Build the DuckDB tool store from the ingest stage's Parquet tables."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from contracts.build import StoreConfig
from contracts.tools import QUALITY_BANDS, VALUE_DP
from pipeline.core.allocator import tune_allocator
from pipeline.core.arrow import numbers, strings, to_numpy
from pipeline.core.errors import StageError
from pipeline.core.executor import Background, run_ordered, runs_here
from pipeline.core.manifest import StageResult
from pipeline.core.parts import PARTS, iter_part, join, read_part, remove_parts, stage_parts, write_part
from pipeline.core.resources import Resources
from pipeline.ingest.parquet import RowGroupWriter, read_rows, write_table
from pipeline.ingest.stage import read_report
from pipeline.store import bands, compute, expected, sql
from pipeline.store.digest import ChunkedDigest, reader_digest
from pipeline.store.reader import KEYS, OPTIONAL, STORE_FILE, open_store, quiet


def _quantile(values: pl.Series, q: float) -> float:
    finite = values.drop_nulls().cast(pl.Float64).to_numpy()
    return round(float(np.quantile(np.sort(finite), q)), 4) if len(finite) else 0.0


def thresholds(aggregates: pl.DataFrame, quality: pl.DataFrame, cfg: StoreConfig) -> pl.DataFrame:
    """Quality thresholds: declared quantiles of weekly windows (and of whole streams), rounded to 4 dp, each clamped
    into its declared floor and ceiling (configs/build.toml) so that no corpus makes a band absurd."""
    weekly = aggregates.filter(pl.col("period") == "week")
    q, bounds = cfg.thresholds, cfg.threshold_bounds
    populations = {
        "coverage_abstain": (weekly["coverage"], "weekly windows"),
        "coverage_answer": (weekly["coverage"], "weekly windows"),
        "gap_ratio_answer": (weekly["gap_ratio"], "weekly windows"),
        "gap_ratio_abstain_window": (weekly["gap_ratio"], "weekly windows"),
        "gap_ratio_abstain_stream": (quality["gap_ratio"], "streams"),
    }
    rows = []
    for name, (values, population) in populations.items():
        quantile, bound = getattr(q, name), getattr(bounds, name)
        corpus = _quantile(values, quantile)
        rows.append((name, bound.clamp(corpus), quantile, population, corpus, bound.floor, bound.ceiling))
    return pl.DataFrame(
        rows,
        schema={
            "name": pl.String,
            "value": pl.Float64,
            "quantile": pl.Float64,
            "population": pl.String,
            "corpus_value": pl.Float64,
            "floor": pl.Float64,
            "ceiling": pl.Float64,
        },
        orient="row",
    ).sort("name")


def rounded(values: np.ndarray, digits: int = VALUE_DP) -> np.ndarray:
    """`round(x, digits) + 0.0` of every element, as Python rounds, without a Python call per element.

    k = rint(x * 10**digits) is Python's last digit unless x * 10**digits lies within rounding error of a half
    (or is too large for rint to be exact), where Python's round itself decides; k / 10**digits is then the double
    nearest to k / 10**digits, as Python's result is, since IEEE division of exact operands is correctly rounded."""
    scale = 10.0**digits
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = values * scale
        out = np.rint(scaled) / scale + 0.0  # NaN and infinities stay as they are, as with round
        half = np.abs(np.abs(scaled - np.floor(scaled)) - 0.5) <= 1e-9 * np.maximum(1.0, np.abs(scaled))
        unsure = np.isfinite(values) & (half | ~(np.abs(scaled) < 2.0**52))
    for i in np.flatnonzero(unsure).tolist():
        out[i] = round(float(values[i]), digits) + 0.0
    return out


def shown(column: str) -> pl.Expr:
    """A value as the tools show it (Python's round to VALUE_DP decimals): decisions use what an agent can see."""

    def batch(series: pl.Series) -> pl.Series:
        values = pl.Series(series.name, rounded(series.fill_null(0.0).cast(pl.Float64).to_numpy()), dtype=pl.Float64)
        return values.scatter(series.is_null().arg_true(), None) if series.null_count() else values

    return pl.col(column).map_batches(batch, return_dtype=pl.Float64)


def quality_band(limits: dict[str, float], gap_limit: str, clean: pl.Expr) -> pl.Expr:
    """The quality band (bands.py) of every row, on the rounded values; a condition that is null does not hold."""
    coverage, ratio = shown("coverage").fill_null(0.0), shown("gap_ratio")
    held = bands.conditions(coverage, ratio, ratio.is_null(), clean, limits, gap_limit)
    decided = pl.when(held[0]).then(pl.lit(QUALITY_BANDS[0]))
    for name, condition in zip(QUALITY_BANDS[1:], held[1:], strict=False):
        decided = decided.when(condition.fill_null(False)).then(pl.lit(name))
    return decided.otherwise(pl.lit(QUALITY_BANDS[-1]))


# Peak working set of a store unit per observation row (measured with `make bench-scale`); it sizes units.
BYTES_PER_ROW = 400
MIN_SHARED_ROWS = 4_000_000  # below this, one process is faster than starting workers
OBSERVATIONS_SCHEMA = pa.schema(
    [
        ("stream_id", pa.dictionary(pa.int32(), pa.string())),
        ("ts", pa.int64()),
        ("value", pa.float64()),
        ("step_us", pa.int64()),
    ]
)
PER_STREAM = ("aggregates", "profiles", "previews", "quality_parts", "expected_parts")


@dataclass(frozen=True)
class StoreUnit:
    """A run of whole streams, rows [start, start + rows) of the ingest observations: all a worker needs."""

    ingest_dir: str
    start: int
    streams: tuple[tuple[str, int], ...]  # (stream id, rows) in id order
    cfg: StoreConfig
    out: str
    kinds: tuple[int, ...] = ()  # compute.LEVEL, INTERVAL or COUNTER of each stream (all LEVEL when empty)
    rules: tuple = ()  # (stream id, rule) of the unit's streams declared silent by design (pipeline/store/expected.py)

    @property
    def rows(self) -> int:
        return sum(n for _, n in self.streams)


def stream_runs(path: Path) -> list[tuple[str, int]]:
    """(stream id, rows) of a file sorted by stream id, from the dictionary codes, one row group at a time."""
    file = pq.ParquetFile(path, read_dictionary=["stream_id"])
    runs: list[tuple[str, int]] = []
    for index in range(file.metadata.num_row_groups):
        column = file.read_row_group(index, columns=["stream_id"]).column(0).combine_chunks()
        codes = to_numpy(column.indices)
        names = column.dictionary.to_pylist()
        starts = np.flatnonzero(np.diff(codes, prepend=-1))
        for code, n in zip(codes[starts].tolist(), np.diff(np.append(starts, len(codes))).tolist(), strict=True):
            if runs and runs[-1][0] == names[code]:
                runs[-1] = (names[code], runs[-1][1] + n)
            else:
                runs.append((names[code], n))
    return runs


def stream_kinds(streams: pl.DataFrame, cfg: StoreConfig) -> dict[str, int]:
    """compute.LEVEL, INTERVAL or COUNTER of each stream of the ingest streams table: a stream whose unit is one of
    cfg.amount_units is a meter of amounts, differenced from a register when ingest marked it a counter."""
    return {
        sid: (compute.COUNTER if counter else compute.INTERVAL) if unit in cfg.amount_units else compute.LEVEL
        for sid, unit, counter in streams.select("stream_id", "unit", pl.col("is_counter").fill_null(False)).iter_rows()
    }


def with_rate_units(streams: pl.DataFrame, cfg: StoreConfig) -> pl.DataFrame:
    """The ingest streams table with `rate_unit`: the unit of a meter of amounts' rates per hour (null for levels)."""
    rate = pl.col("unit").replace_strict(cfg.amount_units, default=None, return_dtype=pl.String)
    return streams.with_columns(rate_unit=rate)


def plan_units(
    ingest_dir: Path,
    cfg: StoreConfig,
    parts: str,
    rows_per_unit: int,
    workers: int,
    kinds: dict[str, int] | None = None,
    rules: dict | None = None,
) -> list[StoreUnit]:
    """Whole streams in id order, cut into runs of about `rows_per_unit` rows (a longer stream is a run alone),
    and into at least two runs per worker when there is enough to share."""
    runs = stream_runs(ingest_dir / "observations.parquet")
    total = sum(n for _, n in runs)
    if workers > 1 and total > MIN_SHARED_ROWS:
        rows_per_unit = min(rows_per_unit, -(-total // (2 * workers)))
    units, start, current = [], 0, []
    for index, (sid, n) in enumerate(runs):
        current.append((sid, n))
        if sum(k for _, k in current) >= rows_per_unit or index == len(runs) - 1:
            declared = tuple((sid, rules[sid]) for sid, _ in current if rules and sid in rules)
            unit = StoreUnit(
                str(ingest_dir),
                start,
                tuple(current),
                cfg,
                join(parts, f"u{len(units):05d}"),
                tuple((kinds or {}).get(s, compute.LEVEL) for s, _ in current),
                declared,
            )
            units.append(unit)
            start, current = start + unit.rows, []
    return units


def compute_unit(unit: StoreUnit) -> dict[str, pa.Table]:
    """Everything per stream for one run of streams: observations (ts, value, step_us: the caller knows whose rows
    they are) and the per-stream tables with their stream ids.

    Streams are integer codes (ranks of the ids) while computing; the ids come back in the small per-stream tables."""
    ingest_dir = Path(unit.ingest_dir)
    ids = [sid for sid, _ in unit.streams]
    raw = pl.from_arrow(read_rows(ingest_dir / "observations.parquet", unit.start, unit.rows, columns=["ts", "value"]))
    codes = np.repeat(np.arange(len(ids), dtype=np.int32), [n for _, n in unit.streams])
    obs = compute.with_steps(raw.with_columns(stream_id=pl.Series(codes).set_sorted()), unit.cfg.step_window)
    code_of = {sid: i for i, sid in enumerate(ids)}
    timed_rejects = (
        pl.scan_parquet(ingest_dir / "rejects.parquet")
        .filter(pl.col("stream_id").is_between(pl.lit(ids[0]), pl.lit(ids[-1])) & pl.col("ts").is_not_null())
        .select("stream_id", "ts", "reason")
        .collect()
        .with_columns(stream_id=pl.col("stream_id").replace_strict(code_of, default=None, return_dtype=pl.Int32))
        .drop_nulls("stream_id")  # streams without observations (every cell rejected) have no windows
    )
    names = pl.Series(ids, dtype=pl.String)
    tables = {
        "aggregates": compute.aggregates(
            obs, unit.cfg.std_ddof, codes, timed_rejects, np.array(unit.kinds or [0] * len(ids), dtype=np.int8)
        ),
        "profiles": compute.profiles(obs, unit.cfg.std_ddof, codes),
        "previews": compute.previews(obs, unit.cfg.preview_points),
        "quality_parts": compute.quality_parts(obs),
    }
    tables["aggregates"], tables["expected_parts"] = expected.adjust_unit(
        obs, ids, tables["aggregates"], dict(unit.rules)
    )
    return {
        "observations": obs.select("ts", "value", "step_us").to_arrow(),
        **{
            name: frame.with_columns(stream_id=names.gather(frame["stream_id"])).to_arrow()
            for name, frame in tables.items()
        },
    }


def store_unit(unit: StoreUnit) -> dict[str, int]:
    """A worker's unit: computed, then written to the unit's folder (Arrow IPC) for the main process; row counts."""
    tables = compute_unit(unit)
    for name, table in tables.items():
        write_part(table, join(unit.out, f"{name}.arrow"))
    return {name: table.num_rows for name, table in tables.items()}


class _UnitTables:
    """A finished unit's tables: in memory when it ran in this process, else read from its folder when asked."""

    def __init__(self, unit: StoreUnit, tables: dict[str, pa.Table] | None) -> None:
        self.unit, self.tables = unit, tables

    def observation_batches(self):
        if self.tables is not None:
            return self.tables["observations"].to_batches(max_chunksize=1 << 20)
        return iter_part(join(self.unit.out, "observations.arrow"))

    def table(self, name: str) -> pa.Table:
        return self.tables[name] if self.tables is not None else read_part(join(self.unit.out, f"{name}.arrow"))


def _limits_and_bands(
    aggregates: pl.DataFrame, quality: pl.DataFrame, cfg: StoreConfig
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The corpus-wide step: thresholds from every stream's windows, then the quality bands they decide."""
    limits_frame = thresholds(aggregates, quality, cfg)
    limits = dict(limits_frame.select("name", "value").iter_rows())
    clean = (pl.col("duplicate_fraction") == 0) & (pl.col("nan_fraction") == 0)
    clean_window = (pl.col("duplicates") == 0) & (pl.col("non_finite") == 0)
    return (
        limits_frame,
        quality.with_columns(quality_band=quality_band(limits, "gap_ratio_abstain_stream", clean)),
        aggregates.with_columns(quality_band=quality_band(limits, "gap_ratio_abstain_window", clean_window)),
    )


def derive_tables(
    ingest_dir: Path,
    out: Path,
    cfg: StoreConfig,
    resources: Resources,
    con: duckdb.DuckDBPyConnection,
    silence: expected.Declared | None = None,
) -> tuple[dict[str, pa.Table], int, str]:
    """Every store table except the stream index, sorted by its full key. Observations go to
    out/observations.parquet and to the `observations` table of `con` unit by unit, while later
    units are still being computed (returned: row count and logical digest); the rest come back as Arrow."""
    read = lambda name: pl.read_parquet(ingest_dir / f"{name}.parquet")  # noqa: E731
    streams, rejects = read("streams"), read("rejects")
    rows_per_unit = max(1, resources.per_worker(resources.worker_count) // BYTES_PER_ROW)
    parts = stage_parts(out, resources.parts, "store")
    rules = silence.resolve(streams["stream_id"].to_list()) if silence else {}
    units = plan_units(ingest_dir, cfg, parts, rows_per_unit, resources.worker_count, stream_kinds(streams, cfg), rules)

    # Units are consecutive runs of streams in id order: appending them in order keeps every key order.
    # The Parquet export (with its digest) is written here while a second thread appends the same pieces
    # to DuckDB (both release the GIL) and the workers compute later units.
    ids = strings([sid for unit in units for sid, _ in unit.streams])
    # The stream of each observation is an ENUM of the stream ids: a code per row instead of a string (a third of the
    # insert's time); it reads, compares and digests as the id.
    con.execute("CREATE TYPE stream_key AS ENUM (SELECT unnest(?::VARCHAR[]))", [ids.to_pylist()])
    con.execute("CREATE TABLE observations (stream_id stream_key, ts BIGINT, value DOUBLE, step_us BIGINT)")
    digest = ChunkedDigest(OBSERVATIONS_SCHEMA)
    writer = RowGroupWriter(out / "observations.parquet", OBSERVATIONS_SCHEMA, on_group=digest.update)
    code = 0

    def append(piece: pa.Table) -> None:  # on the inserter's thread, which owns `con` until it is closed
        con.register("incoming", piece)
        con.execute("INSERT INTO observations SELECT stream_id, ts, value, step_us FROM incoming")
        con.unregister("incoming")

    inserter = Background(append, depth=4, name="duckdb-insert")
    # In this process (one worker, or one unit), a unit's tables stay in memory; workers hand them over as files.
    in_process = runs_here(resources, units)
    finished: list[_UnitTables] = []
    try:
        produced = run_ordered(compute_unit if in_process else store_unit, units, resources, "store")
        for unit, result in zip(units, produced, strict=True):
            done = _UnitTables(unit, result if in_process else None)
            finished.append(done)
            codes = np.repeat(np.arange(code, code + len(unit.streams), dtype=np.int32), [n for _, n in unit.streams])
            code += len(unit.streams)
            offset = 0
            for batch in done.observation_batches():
                stream = pa.DictionaryArray.from_arrays(numbers(codes[offset : offset + batch.num_rows]), ids)
                offset += batch.num_rows
                piece = pa.table(
                    {"stream_id": stream, "ts": batch["ts"], "value": batch["value"], "step_us": batch["step_us"]}
                )
                inserter.put(piece)
                writer.write(piece)
        observations = writer.close()
        inserter.close()
    except BaseException:
        writer.abort()
        inserter.close(check=False)
        raise
    parts = {name: [pl.from_arrow(done.table(name)) for done in finished] for name in PER_STREAM}
    joined = {name: pl.concat(frames) if frames else None for name, frames in parts.items()}
    if joined["aggregates"] is None:  # no observations at all
        empty = compute.with_steps(
            pl.DataFrame(schema={"stream_id": pl.String, "ts": pl.Int64, "value": pl.Float64}), cfg.step_window
        )
        joined = {
            "aggregates": compute.aggregates(empty, cfg.std_ddof),
            "profiles": compute.profiles(empty, cfg.std_ddof),
            "previews": compute.previews(empty, cfg.preview_points),
            "quality_parts": compute.quality_parts(empty),
            "expected_parts": None,
        }
    quality = compute.quality_table(streams, joined["quality_parts"], rejects)
    quality = expected.adjust_quality(quality, joined["expected_parts"])
    limits_frame, quality, aggregates = _limits_and_bands(joined["aggregates"], quality, cfg)
    timed_rejects = rejects.filter(pl.col("stream_id").is_not_null() & pl.col("ts").is_not_null())
    tables = {
        "sites": read("sites"),
        "entities": read("entities"),
        "relations": read("relations"),
        "streams_in": with_rate_units(streams, cfg),
        "quality": quality,
        "aggregates": aggregates,
        "profiles": joined["profiles"],
        "previews": joined["previews"],
        "thresholds": limits_frame,
        # The build settings the tools must share with the store: a custom window's std takes the store's ddof.
        "settings": pl.DataFrame(
            {"name": ["std_ddof"], "value": [cfg.std_ddof]}, schema={"name": pl.String, "value": pl.Int64}
        ),
        # Rejected cells that have a stream and a time: tools report defect fractions per window.
        "rejects": timed_rejects.select("stream_id", "ts", "reason", "raw").sort("stream_id", "ts", "reason", "raw"),
        # Only a corpus that declares streams absent by design has this table: the others' stores stay as they were.
        **({expected.TABLE: expected.table(rules)} if rules else {}),
    }
    return {name: frame.to_arrow() for name, frame in tables.items()}, observations, digest.hexdigest()


def _require_observations(ingest_dir: Path) -> None:
    """A corpus whose every cell was rejected has nothing to ask about: say why in one line (the rejects stay in
    ingest)."""
    report = read_report(ingest_dir)
    if report.observations:
        return
    if not report.raw_value_cells:
        raise StageError(
            f"corpus {report.corpus}: the raw files hold no value cell ({len(report.files)} files read, headers "
            "and no data rows?); restore the data, or fix values.files in the mapping"
        )
    reasons = ", ".join(
        f"{reason} {n:,}" for reason, n in sorted(report.rejects_by_reason.items(), key=lambda kv: -kv[1])
    )
    hint = (
        ' (values such as 12,5 need values.decimal = ","; other missing-value texts go in cleaning.missing_tokens)'
        if "unparseable" in report.rejects_by_reason
        else ""
    )
    raise StageError(
        f"corpus {report.corpus}: ingest kept no observation: all {report.raw_value_cells:,} raw value cells were "
        f"rejected ({reasons}); `telemetry-bench inspect ingest --corpus {report.corpus}` "
        f"and artifacts/{report.corpus}/ingest/rejects.parquet give each cell's reason; fix the mapping{hint}"
    )


def build_store(
    ingest_dir: Path,
    out: Path,
    cfg: StoreConfig,
    resources: Resources | None = None,
    silence: expected.Declared | None = None,
) -> StageResult:
    """Write store.duckdb (read-only afterwards) and one deterministic Parquet export per table."""
    _require_observations(ingest_dir)
    resources = resources or Resources()
    tune_allocator()
    path = out / STORE_FILE
    try:
        con = duckdb.connect(
            str(path),
            config={
                "memory_limit": f"{max(256 << 20, resources.memory_budget // 4) >> 20}MB",
                "temp_directory": str(out / PARTS / "duckdb"),
                **({"threads": int(resources.threads)} if resources.threads else {}),
            },
        )
        quiet(con)
        try:
            tables, observations, observations_digest = derive_tables(ingest_dir, out, cfg, resources, con, silence)
            for name, table in tables.items():
                con.register("incoming", table)
                # Arrow tables arrive sorted by their key; insertion order is kept (preserve_insertion_order).
                con.execute(f"CREATE {'TEMP ' if name == 'streams_in' else ''}TABLE {name} AS SELECT * FROM incoming")
                con.unregister("incoming")
            twins = [(sid, len(group) - 1) for group in read_report(ingest_dir).duplicate_streams for sid in group]
            con.execute("CREATE TEMP TABLE twins_in (stream_id VARCHAR, content_twins INTEGER)")
            if twins:
                con.executemany("INSERT INTO twins_in VALUES (?, ?)", twins)
            con.execute(sql.STREAM_INDEX)
            con.execute("DROP TABLE streams_in")
            con.execute("DROP TABLE twins_in")
            tables["streams"] = con.sql("SELECT * FROM streams ORDER BY stream_id").to_arrow_table()
            con.execute("CHECKPOINT")
        finally:
            con.close()
    finally:
        shutil.rmtree(out / PARTS, ignore_errors=True)  # DuckDB's spill folder (and the parts, by default)
        remove_parts(stage_parts(out, resources.parts, "store"))
    if Path(str(path) + ".wal").exists():
        raise StageError(f"{path}.wal left after CHECKPOINT and close; the store is not self-contained")
    os.chmod(path, 0o444)
    names = [*KEYS, *(name for name in OPTIONAL if name in tables)]
    for name in names:
        if name != "observations":
            write_table(tables[name], out / f"{name}.parquet")
    limits = {row["name"]: row["value"] for row in tables["thresholds"].to_pylist()}
    digests = {
        name: reader_digest(tables[name].to_batches(), tables[name].schema) for name in names if name != "observations"
    }
    return StageResult(
        outputs=[f"{name}.parquet" for name in names],
        row_counts={name: observations if name == "observations" else tables[name].num_rows for name in names},
        # Digests of the tables as inserted; `logical_digests(path)` re-reads the file (verify does).
        logical_digests={**digests, "observations": observations_digest},
        details={"thresholds": limits, "std_ddof": cfg.std_ddof},
        unhashed_outputs=[STORE_FILE],
    )


def logical_digests(path: Path) -> dict[str, str]:
    """Digest of every table read back from the store file in key order."""
    con = open_store(path)
    try:
        digests = {}
        present = {row[0] for row in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        for name, key in [*KEYS.items(), *((n, k) for n, k in OPTIONAL.items() if n in present)]:
            reader = con.sql(f"SELECT * FROM {name} ORDER BY {', '.join(key)}").to_arrow_reader(1 << 20)
            digests[name] = reader_digest(reader, reader.schema)
        return digests
    finally:
        con.close()
