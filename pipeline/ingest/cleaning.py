"""Declared cleaning rules applied column-wise to raw cells; every cell ends as a value or a reason.

Reasons, in the order they are decided (the first that applies wins):
  malformed_row, missing_timestamp, bad_timestamp, nonexistent_local_time, ambiguous_local_time,
  unmapped_column, dropout_row, missing, unparseable, non_finite, sentinel, zero_dropout,
  out_of_range, duplicate_timestamp, counter_first, counter_gap, counter_decrease, counter_jump.
"""

from __future__ import annotations

import polars as pl

from contracts.corpus import Cleaning, CounterRule

NULL_STR = pl.lit(None, dtype=pl.String)
# File order of a cell: source name, then record number, as one sortable integer.
FILE_ORDER = pl.col("source").rank("dense").cast(pl.Int64) * (1 << 40) + pl.col("row")


def _first_reason(*conditions: tuple[pl.Expr, str]) -> pl.Expr:
    expr = NULL_STR
    for condition, reason in reversed(conditions):
        expr = pl.when(condition).then(pl.lit(reason)).otherwise(expr)
    return expr


def cell_reasons(cells: pl.DataFrame, rules: Cleaning, point_class: dict[str, str], counters: dict[str, CounterRule]) -> pl.DataFrame:
    """Add `value` and `reason` from the rules that look at one cell (or one row) at a time."""
    text = pl.col("raw").str.strip_chars()
    value = text.cast(pl.Float64, strict=False)
    zero_classes = set(rules.zero_dropout_classes)
    zero_streams = [s for s, c in point_class.items() if c in zero_classes]
    zero_streams += [s for s, rule in counters.items() if rule.zero_is_dropout]
    cells = cells.with_columns(
        _rid=FILE_ORDER,
        value=value + 0.0,  # -0.0 -> 0.0, so equal readings have equal bytes
        _missing=text.is_in(rules.missing_tokens) | text.is_null(),
        _class=pl.col("_sid").replace_strict(
            {code: point_class[s] for code, s in enumerate(sorted(point_class))}, default=None, return_dtype=pl.String
        ),
    )
    missing, val = pl.col("_missing"), pl.col("value")
    has_row_reason = pl.col("pre_reason").is_not_null()
    if rules.dropout_rows:
        zero_or_missing = (missing | (val == 0)) & ~has_row_reason
        flags = cells.select(_rid=pl.col("_rid"), _zm=zero_or_missing, _z=(val == 0).fill_null(False))
        per_row = flags.group_by("_rid").agg(_dropout=pl.col("_zm").all() & pl.col("_z").any()).filter("_dropout")
        cells = cells.with_columns(_dropout=pl.col("_rid").is_in(per_row["_rid"].implode()))
    else:
        cells = cells.with_columns(_dropout=pl.lit(False))
    low = pl.col("_class").replace_strict({k: v[0] for k, v in rules.ranges.items()}, default=None, return_dtype=pl.Float64)
    high = pl.col("_class").replace_strict({k: v[1] for k, v in rules.ranges.items()}, default=None, return_dtype=pl.Float64)
    is_counter = pl.col("stream_id").is_in(list(counters))
    reason = pl.coalesce(
        pl.col("pre_reason"),
        _first_reason(
            (pl.col("_dropout"), "dropout_row"),
            (missing, "missing"),
            (val.is_null(), "unparseable"),
            (~val.is_finite(), "non_finite"),
            (val.is_in(rules.sentinels), "sentinel"),
            (pl.col("stream_id").is_in(zero_streams) & (val == 0), "zero_dropout"),
            (~is_counter & ((val < low) | (val > high)).fill_null(False), "out_of_range"),
        ),
    )
    return cells.with_columns(reason=reason).drop("_missing", "_class", "_dropout", "_rid")



def resolve_duplicates(cells: pl.DataFrame, rule: str) -> pl.DataFrame:
    """Among valid cells sharing (stream_id, ts), keep one by the declared rule (file order: source, row)."""
    valid = cells.with_row_index("_i").filter(pl.col("reason").is_null()).select("_i", "_sid", "ts", "source", "row")
    repeated = valid.select(pl.struct("_sid", "ts").is_duplicated()).to_series()
    if not repeated.any():
        return cells
    dup = valid.filter(repeated).with_columns(_ord=FILE_ORDER)
    if rule == "reject_all":
        losers = dup["_i"]
    else:
        keep = pl.col("_ord").min() if rule == "keep_first_row" else pl.col("_ord").max()
        losers = dup.filter(pl.col("_ord") != keep.over("_sid", "ts"))["_i"]
    loser = pl.int_range(pl.len(), dtype=pl.UInt32).is_in(losers.implode())
    return cells.with_columns(reason=pl.when(loser).then(pl.lit("duplicate_timestamp")).otherwise(pl.col("reason")))


def difference_counters(cells: pl.DataFrame, counters: dict[str, CounterRule]) -> pl.DataFrame:
    """Turn cumulative readings into per-interval increments between consecutive valid readings."""
    if not counters:
        return cells
    by_rule: dict[CounterRule, list[str]] = {}
    for stream, rule in sorted(counters.items()):
        by_rule.setdefault(rule, []).append(stream)
    cells = cells.with_row_index("_i")
    updates = []
    for rule, streams in by_rule.items():
        mine = cells.filter(pl.col("stream_id").is_in(streams) & pl.col("ts").is_not_null())
        window = 2 * rule.step_window + 1
        steps = (
            mine.select("stream_id", "ts").unique().sort("stream_id", "ts")
            .with_columns(_gap=pl.col("ts").diff().over("stream_id"))
            .with_columns(_step=pl.col("_gap").cast(pl.Float64).rolling_median(window, center=True, min_samples=1).over("stream_id"))
        )
        readings = (
            mine.filter(pl.col("reason").is_null()).sort("stream_id", "ts")
            .join(steps.select("stream_id", "ts", "_step"), on=["stream_id", "ts"], how="left")
            .with_columns(
                _prev_ts=pl.col("ts").shift(1).over("stream_id"),
                _prev=pl.col("value").shift(1).over("stream_id"),
            )
        )
        increment = pl.col("value") - pl.col("_prev")
        gap = (pl.col("ts") - pl.col("_prev_ts")).cast(pl.Float64)
        jump = (increment > rule.max_increment) if rule.max_increment is not None else pl.lit(False)
        updates.append(
            readings.select(
                "_i",
                reason=_first_reason(
                    (pl.col("_prev").is_null(), "counter_first"),
                    (gap > pl.col("_step") * rule.max_gap_steps * (1 + 1e-9), "counter_gap"),
                    (increment < 0, "counter_decrease"),
                    (jump, "counter_jump"),
                ),
                value=increment + 0.0,
            )
        )
    update = pl.concat(updates)
    merged = cells.join(update, on="_i", how="left", suffix="_new")
    return merged.with_columns(
        reason=pl.coalesce("reason_new", "reason"),
        value=pl.when(pl.col("_i").is_in(update["_i"].implode())).then(pl.col("value_new")).otherwise(pl.col("value")),
    ).drop("_i", "reason_new", "value_new")


def clean(cells: pl.DataFrame, rules: Cleaning, point_class: dict[str, str], counters: dict[str, CounterRule]) -> pl.DataFrame:
    """All rules, in their declared order; returns the cells with `value` and `reason` set."""
    codes = {stream: code for code, stream in enumerate(sorted(point_class))}
    cells = cells.with_columns(_sid=pl.col("stream_id").replace_strict(codes, default=None, return_dtype=pl.Int32))
    cells = cell_reasons(cells, rules, point_class, counters)
    cells = resolve_duplicates(cells, rules.duplicates)
    return difference_counters(cells, counters).drop("_sid")
