"""Declared cleaning rules, applied column-wise; every raw value cell ends as a value or a reason.

Reasons, in the order they are decided (the first that applies wins):
  malformed_row and oversized_cell (the reader sets the record aside), missing_site, missing_timestamp, bad_timestamp,
  timestamp_out_of_span, nonexistent_local_time, ambiguous_local_time, unmapped_column, dropout_row, missing,
  unparseable, non_finite, sentinel, zero_dropout, out_of_range, duplicate_timestamp, counter_first, counter_decrease,
  counter_jump.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from contracts.corpus import Cleaning
from contracts.corpus_metadata import CounterRule
from pipeline.core.timeunits import HOUR_US

NULL_STR = pl.lit(None, dtype=pl.String)
# The raw text of a valid cell: kept for text files; written from the number for numeric ones.
RAW_TEXT = pl.coalesce("raw", pl.col("value").cast(pl.String))


def _row_rejects(cells: pl.DataFrame, reason: pl.Expr) -> pl.DataFrame:
    """Valid-looking cells rejected by a rule over several cells (duplicates, counters), as reject rows."""
    return cells.select(
        "file", "row", column=pl.lit(None, dtype=pl.String), sid="sid", ts="ts", raw=RAW_TEXT, reason=reason
    )


OBS_SCHEMA = {"sid": pl.Int32, "ts": pl.Int64, "value": pl.Float64, "raw": pl.String, "file": pl.Int32, "row": pl.Int64}
REJECT_SCHEMA = {
    "file": pl.Int32,
    "row": pl.Int64,
    "column": pl.String,
    "sid": pl.Int32,
    "ts": pl.Int64,
    "raw": pl.String,
    "reason": pl.String,
}


@dataclass(frozen=True)
class StreamRules:
    """What the cleaning rules need to know about each stream, by stream code."""

    point_class: dict[int, str]
    counters: dict[int, CounterRule]

    def zero_dropout(self, rules: Cleaning) -> set[int]:
        classes = set(rules.zero_dropout_classes)
        codes = {code for code, cls in self.point_class.items() if cls in classes}
        return codes | {code for code, rule in self.counters.items() if rule.zero_is_dropout}


@dataclass(frozen=True)
class Slice:
    """One value column of a read file: where its raw text is and which stream it feeds."""

    column: str  # frame column with the raw text
    label: str  # column name recorded in rejects
    sid: int | None = None  # the stream code, or None when the frame's `codes` column holds one per row
    unmapped: bool = False  # no metadata maps it: every cell is rejected as unmapped_column
    codes: str = "sid"  # the frame column of per-row stream codes (sid None): a wide file with a site column has one
    # per value column


def _first_reason(*conditions: tuple[pl.Expr, str]) -> pl.Expr:
    expr = NULL_STR
    for condition, reason in reversed(conditions):
        expr = pl.when(condition).then(pl.lit(reason)).otherwise(expr)
    return expr


def _per_stream(sl: Slice, mapping: dict[int, object], dtype: pl.DataType) -> pl.Expr:
    if sl.sid is not None:
        return pl.lit(mapping.get(sl.sid), dtype=dtype)
    return pl.col(sl.codes).replace_strict(mapping, default=None, return_dtype=dtype)


def _token_numbers(tokens: list[str]) -> tuple[list[float], bool, bool, bool]:
    """The numbers whose text (as polars writes a float) is a missing token: finite ones, NaN, inf, -inf."""
    texts = pl.Series([float("nan"), float("inf"), float("-inf")]).cast(pl.String).to_list()
    finite = []
    for token in tokens:
        try:
            number = float(token)
        except ValueError:
            continue
        if np.isfinite(number) and pl.Series([number]).cast(pl.String)[0] == token:
            finite.append(number)
    return finite, texts[0] in tokens, texts[1] in tokens, texts[2] in tokens


def _parse(sl: Slice, index: int, rules: Cleaning, numeric: bool = False, decimal: str = ".") -> list[pl.Expr]:
    """The number and the missing flag of a slice's cells, computed once as columns _v<i>, _m<i>.

    A numeric column (pickled floats) is judged as its text would be, without writing the text. With a decimal
    comma, "12,5" reads as 12.5 (a cell holding a "." as well is unparseable, never guessed)."""
    if numeric:
        value = pl.col(sl.column)
        finite, nan, inf, ninf = _token_numbers(rules.missing_tokens)
        missing = value.is_null() | value.is_in(finite)
        missing = missing | (value.is_nan() & nan) | ((value == float("inf")) & inf) | ((value == float("-inf")) & ninf)
        return [(value + 0.0).alias(f"_v{index}"), missing.fill_null(True).alias(f"_m{index}")]
    text = pl.col(f"_t{index}")  # the cell's text, stripped (split_cells strips each column once)
    number = (
        text
        if decimal == "."
        else pl.when(text.str.contains(".", literal=True))
        .then(None)
        .otherwise(text.str.replace(decimal, ".", literal=True))
    )
    parsed = number.cast(pl.Float64, strict=False)
    if rules.states:  # On/Off, Occupied/UnOccupied: the number the mapping gives each state, in any case
        states = {k.lower(): float(v) for k, v in rules.states.items()}
        parsed = pl.coalesce(
            text.str.to_lowercase().replace_strict(states, default=None, return_dtype=pl.Float64), parsed
        )
    return [
        (parsed + 0.0).alias(f"_v{index}"),  # + 0.0 turns -0.0 into 0.0
        (text.is_null() | text.is_in(rules.missing_tokens)).alias(f"_m{index}"),
    ]


def dropout_rows(count: int, rules: Cleaning) -> pl.Expr:
    """A row whose value cells all read 0 or are missing, at least one of them 0."""
    if not rules.dropout_rows or not count:
        return pl.lit(False)
    zero = [(pl.col(f"_v{i}") == 0).fill_null(False) for i in range(count)]
    zero_or_missing = [pl.col(f"_m{i}") | z for i, z in enumerate(zero)]
    return pl.all_horizontal(zero_or_missing) & pl.any_horizontal(zero)


def cell_reason(sl: Slice, index: int, rules: Cleaning, streams: StreamRules, zero_codes: set[int]) -> pl.Expr:
    """The reason a cell is rejected by the rules that look at one cell (or its row), else null."""
    value, missing = pl.col(f"_v{index}"), pl.col(f"_m{index}")
    low = _per_stream(
        sl, {c: rules.ranges[k][0] for c, k in streams.point_class.items() if k in rules.ranges}, pl.Float64
    )
    high = _per_stream(
        sl, {c: rules.ranges[k][1] for c, k in streams.point_class.items() if k in rules.ranges}, pl.Float64
    )
    is_counter = _per_stream(sl, dict.fromkeys(streams.counters, True), pl.Boolean).fill_null(False)
    zero = _per_stream(sl, dict.fromkeys(zero_codes, True), pl.Boolean).fill_null(False)
    row_level = pl.col("ts_reason")
    if sl.unmapped:
        row_level = pl.coalesce(row_level, pl.lit("unmapped_column"))
    elif sl.sid is None:  # one stream per row (long files, site columns): rows whose key no metadata maps
        row_level = pl.coalesce(row_level, pl.when(pl.col(sl.codes).is_null()).then(pl.lit("unmapped_column")))
    return pl.coalesce(
        row_level,
        _first_reason(
            (pl.col("_dropout"), "dropout_row"),
            (missing, "missing"),
            (value.is_null(), "unparseable"),
            (~value.is_finite(), "non_finite"),
            (value.is_in(rules.sentinels), "sentinel"),
            (zero & (value == 0), "zero_dropout"),
            (~is_counter & ((value < low) | (value > high)).fill_null(False), "out_of_range"),
        ),
    )


def split_cells(
    frame: pl.DataFrame, file: int, slices: list[Slice], rules: Cleaning, streams: StreamRules, decimal: str = "."
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One read file -> (valid cells as observations-to-be, rejected cells), column by column."""
    zero_codes = streams.zero_dropout(rules)
    numeric = {s.column for s in slices if frame.schema[s.column].is_float()}
    frame = frame.with_columns(
        pl.col(s.column).str.strip_chars().alias(f"_t{i}") for i, s in enumerate(slices) if s.column not in numeric
    )
    frame = frame.with_columns(
        [e for i, s in enumerate(slices) for e in _parse(s, i, rules, s.column in numeric, decimal)]
    )
    frame = frame.with_columns(_dropout=dropout_rows(len(slices), rules))
    frame = frame.with_columns(
        [cell_reason(s, i, rules, streams, zero_codes).alias(f"_r{i}") for i, s in enumerate(slices)]
    )
    if not slices:
        return pl.DataFrame(schema=OBS_SCHEMA), pl.DataFrame(schema=REJECT_SCHEMA)
    # Every cell as a row of one long frame (slice after slice, rows in file order), then one filter each for the
    # valid and the rejected cells: the wide frame is never filtered, so its many columns are never copied.
    cells = pl.concat(
        [
            frame.select(
                sid=(
                    pl.lit(None, dtype=pl.Int32)
                    if sl.unmapped
                    else pl.lit(sl.sid, dtype=pl.Int32)
                    if sl.sid is not None
                    else pl.col(sl.codes).cast(pl.Int32)
                ),
                ts="ts",
                value=f"_v{i}",
                raw=NULL_STR if sl.column in numeric else pl.col(sl.column),
                row="row",
                reason=f"_r{i}",
                # A numeric cell's text is written only when it is rejected (later rejects take it from the value).
                number=pl.col(sl.column) if sl.column in numeric else pl.lit(None, dtype=pl.Float64),
                slice=pl.lit(i, dtype=pl.Int32),
            )
            for i, sl in enumerate(slices)
        ]
    )
    file_number = pl.lit(file, dtype=pl.Int32)
    valid = cells.filter(pl.col("reason").is_null()).select("sid", "ts", "value", "raw", file=file_number, row="row")
    labels = {i: sl.label for i, sl in enumerate(slices)}
    rejected = cells.filter(pl.col("reason").is_not_null()).select(
        file=file_number,
        row="row",
        column=pl.col("slice").replace_strict(labels, return_dtype=pl.String),
        sid="sid",
        ts="ts",
        raw=pl.coalesce("raw", pl.col("number").cast(pl.String)),
        reason="reason",
    )
    return valid, rejected


def resolve_duplicates(obs: pl.DataFrame, rule: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Among valid cells sharing (stream, ts), keep one by the declared rule (file order: file, row).

    `obs` must be sorted by (sid, ts), file order kept among equal keys; returns (kept, rejected)."""
    same_prev = (pl.col("sid") == pl.col("sid").shift(1)) & (pl.col("ts") == pl.col("ts").shift(1))
    same_next = (pl.col("sid") == pl.col("sid").shift(-1)) & (pl.col("ts") == pl.col("ts").shift(-1))
    if rule == "reject_all":
        loser = same_prev.fill_null(False) | same_next.fill_null(False)
    elif rule == "keep_first_row":
        loser = same_prev.fill_null(False)
    else:
        loser = same_next.fill_null(False)
    flagged = obs.with_columns(_loser=loser)
    if not flagged["_loser"].any():
        return obs, pl.DataFrame(schema=REJECT_SCHEMA)
    rejected = _row_rejects(flagged.filter("_loser"), pl.lit("duplicate_timestamp"))
    return flagged.filter(~pl.col("_loser")).drop("_loser"), rejected


def difference_counters(obs: pl.DataFrame, counters: dict[int, CounterRule]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Cumulative readings -> the amount recorded since the reading before each (the register difference).

    `obs` sorted by (sid, ts). A reading after a gap keeps the amount recorded across the gap: a gap changes the
    quality of the windows around it, never what the meter recorded. Returns (observations, rejected); the result
    keeps the order of `obs`."""
    if not counters:
        return obs, pl.DataFrame(schema=REJECT_SCHEMA)
    readings = obs.with_row_index("_i").filter(pl.col("sid").is_in(list(counters)))
    values = obs["value"].to_numpy().copy()
    keep = np.ones(obs.height, dtype=bool)
    rejected = []
    for rule in sorted(set(counters.values()), key=lambda r: r.model_dump_json()):
        codes = [c for c, r in counters.items() if r == rule]
        mine = readings.filter(pl.col("sid").is_in(codes)).with_columns(
            _prev=pl.col("value").shift(1).over("sid"),
            _hours=(pl.col("ts") - pl.col("ts").shift(1).over("sid")) / HOUR_US,
        )
        increment = _counter_increment(rule)
        jump = (increment > rule.max_rate * pl.col("_hours")) if rule.max_rate is not None else pl.lit(False)
        mine = mine.with_columns(
            _reason=_first_reason(
                (pl.col("_prev").is_null(), "counter_first"),
                (increment < 0, "counter_decrease"),
                (jump, "counter_jump"),
            ),
            _increment=increment + 0.0,
        )
        good = mine.filter(pl.col("_reason").is_null())
        values[good["_i"].to_numpy()] = good["_increment"].to_numpy()
        bad = mine.filter(pl.col("_reason").is_not_null())
        keep[bad["_i"].to_numpy()] = False
        rejected.append(_row_rejects(bad, pl.col("_reason")))
    return obs.with_columns(value=pl.Series(values)).filter(pl.Series(keep)), pl.concat(rejected)


def _counter_increment(rule: CounterRule) -> pl.Expr:
    """The increment since the previous valid reading: the difference, or across a decrease a rollover (from above half
    of `rollover`: value + rollover - previous) or a reset (`resets`: the new reading, counted from 0); any other
    decrease stays negative (counter_decrease)."""
    value, prev = pl.col("value"), pl.col("_prev")
    difference = value - prev
    across = difference
    if rule.resets:
        across = value
    if rule.rollover is not None:
        across = pl.when(prev > rule.rollover / 2).then(value + rule.rollover - prev).otherwise(across)
    return pl.when(difference < 0).then(across).otherwise(difference)
