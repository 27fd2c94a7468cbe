"""Splits without memory: time blocks per split with buffers between them, held-out sites in test only.

The corpus's stream-weeks (weekly aggregate windows) are counted per Monday; the blocks are cut where the cumulative
count reaches each split's share, with `buffer_days` left out between consecutive blocks. A row belongs to the block
that holds its whole reach: its time columns widened by one window (a revision moves to the previous or next window)
and by `reach_days` (the commitment asks about a week starting within 14 days). Rows that straddle a buffer, and
rows of held-out sites in a train or dev block, are dropped and counted. Rows without time go by their sites:
held-out sites to test, the others by a hash in proportion to the shares.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import polars as pl

from contracts.tasks import PERIOD_DAYS, Family, SplitRule
from pipeline.core.canonical import digest
from pipeline.core.errors import StageError
from pipeline.tools.timeutil import format_us

DAY = 86_400_000_000
WEEK = 7 * DAY


@dataclass(frozen=True)
class Block:
    split: str
    start: int  # epoch us, inclusive (a Monday 00:00 UTC)
    end: int  # epoch us, exclusive

    def holds(self, lo: int, hi: int) -> bool:
        return self.start <= lo and hi <= self.end

    def as_dict(self) -> dict:
        return {"split": self.split, "start": format_us(self.start), "end": format_us(self.end)}


@dataclass(frozen=True)
class SplitPlan:
    """The blocks of one corpus, and how rows are placed in them."""

    rule: SplitRule
    blocks: dict[str, Block]
    held_out: frozenset[str]
    by: str  # "time and site" or "time" (fewer than 2 sites)

    def place(self, frame: pl.DataFrame, family: Family, idents: list[str], seed: str, name: str) -> pl.Series:
        """Each candidate row's split, or the reason it is dropped (a name not in SPLITS), by row number. `frame` holds
        the family's time and sites columns of every row."""
        sites = frame.get_column(family.sites_column)
        if missing := sites.null_count():
            raise StageError(
                f"configs/families.toml: family {name}: {missing} candidate rows have no {family.sites_column} list; "
                "the candidate query must give every row the sites it touches (an empty list for none)"
            )
        held_out = sorted(self.held_out)
        inner = sites.dtype.inner if isinstance(sites.dtype, pl.List) else None
        textual = inner is not None and (inner in (pl.String, pl.Categorical) or isinstance(inner, pl.Enum))
        touches = (  # only text can be a held-out site's id (a list of numbers touches none, as in Python)
            sites.list.eval(pl.element().cast(pl.String).is_in(held_out)).list.any().fill_null(False)
            if held_out and frame.height and textual
            else pl.Series([False] * frame.height, dtype=pl.Boolean)
        )
        if not family.time_columns:
            return pl.Series(
                "placed",
                [
                    "test" if touched else self._by_hash(int(digest(f"{seed}|split|{name}|{ident}")[:12], 16) / 16**12)
                    for ident, touched in zip(idents, touches.to_list(), strict=True)
                ],
                dtype=pl.String,
            )
        times = [pl.col(c).cast(pl.Int64) for c in family.time_columns]
        nulls = frame.select(pl.any_horizontal(t.is_null() for t in times).sum()).item()
        if nulls:
            raise StageError(
                f"configs/families.toml: family {name}: {nulls} candidate rows have no value in a time column "
                f"({', '.join(family.time_columns)}); the candidate query must give every row its times"
            )
        margin = (PERIOD_DAYS[family.period] + self.rule.reach_days) * DAY
        lo, hi = pl.min_horizontal(times) - margin, pl.max_horizontal(times) + margin
        found = pl.lit("straddles_split_buffer")
        for block in reversed(self.blocks.values()):  # the first block (in the rule's order) that holds the reach
            found = pl.when((lo >= block.start) & (hi <= block.end)).then(pl.lit(block.split)).otherwise(found)
        placed = frame.select(found.alias("placed")).get_column("placed")
        outside = placed.is_in(list(self.blocks)) & (placed != "test") & touches
        return placed.set(outside, "held_out_site_outside_test_block")

    def _by_hash(self, x: float) -> str:
        """A time-less row's split: the first whose cumulative share exceeds x in [0, 1)."""
        total = 0.0
        for split in self.rule.order:
            total += self.rule.shares[split]
            if x < total:
                return split
        return self.rule.order[-1]

    def as_dict(self) -> dict:
        return {
            "by": self.by,
            "blocks": [b.as_dict() for b in sorted(self.blocks.values(), key=lambda b: b.start)],
            "shares": dict(self.rule.shares),
            "buffer_days": self.rule.buffer_days,
            "reach_days": self.rule.reach_days,
            "held_out_sites": sorted(self.held_out),
        }


def plan(con: duckdb.DuckDBPyConnection, rule: SplitRule, held_out: list[str], corpus: str) -> SplitPlan:
    """Cut the corpus's time into the rule's blocks by its stream-weeks."""
    counted = dict(
        con.execute("SELECT window_start, count(*) FROM aggregates WHERE period = 'week' GROUP BY 1").fetchall()
    )
    sites = con.execute("SELECT count(DISTINCT site_id) FROM streams").fetchone()[0]
    buffer_weeks = -(-rule.buffer_days // 7)
    if not counted:
        raise StageError(f"corpus {corpus}: no weekly windows in the store, so no time blocks for the splits")
    first, last = min(counted), max(counted) + WEEK
    calendar = list(range(first, last, WEEK))  # every Monday, weeks without data included: buffers are time
    if len(calendar) < 3 + 2 * buffer_weeks:
        raise StageError(
            f"corpus {corpus}: its data spans {len(calendar)} weeks, too few for time-blocked splits "
            f"(3 blocks and 2 buffers of {rule.buffer_days} days); add data or lower buffer_days in "
            "configs/families.toml [splits]"
        )
    counts = [counted.get(week, 0) for week in calendar]
    total = sum(counts) * (1 - 2 * buffer_weeks / len(calendar))  # the buffers' share is left out
    bounds, cumulative, share, index = [], 0, 0.0, 0
    for split in rule.order[:-1]:
        begin = index
        share += rule.shares[split]
        while index < len(calendar) and cumulative + counts[index] <= share * total:
            cumulative += counts[index]
            index += 1
        bounds.append((begin, index))
        index += buffer_weeks  # the buffer's weeks belong to no block
    bounds.append((index, len(calendar)))
    blocks = {}
    for split, (begin, stop) in zip(rule.order, bounds, strict=True):
        if stop <= begin:
            raise StageError(
                f"corpus {corpus}: the {split} block is empty; change the shares or buffer_days in "
                "configs/families.toml [splits]"
            )
        blocks[split] = Block(split, calendar[begin], calendar[stop - 1] + WEEK)
    single = sites < 2
    return SplitPlan(
        rule=rule,
        blocks=blocks,
        held_out=frozenset() if single else frozenset(held_out),
        by="time" if single else "time and site",
    )
