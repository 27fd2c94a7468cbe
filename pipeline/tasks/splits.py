"""Splits without memory, by the corpus's plan (pipeline/tasks/fit.py chooses it): time blocks, or whole sites.

time: the corpus's stream-weeks (weekly aggregate windows) are counted per Monday; the blocks are cut where the
cumulative count reaches each split's share, with the rule's buffer left out between consecutive blocks. A short
time plan (a span too short for whole-week buffers, pipeline/tasks/fit.py) counts stream-days and cuts in days.
A row belongs to the block that holds its whole reach: its time columns widened by one window (a revision moves to
the previous or next window) and by `reach_days` (the commitment asks about a week starting within 14 days). Rows
that straddle a buffer, and rows of held-out sites in a train or dev block, are dropped and counted.

site: every split's block is the corpus's whole time; each site goes to one split, held-out sites to test, the others
in an order stratified by the point classes they have, each to the split furthest below its share of the stream-weeks.
A row goes to the split of its sites; a row whose sites are in two splits is dropped and counted.

group (one building, or fewer sites than a site plan needs): as site, with zones, rooms or stream groups in place of
whole sites. A stream's group is its location, else its equipment (the first of the two that names `min_sites`
groups), else the stream itself; a stream without that key is a group of its own. A held-out site's groups go to
test. A row goes to the split of its streams' groups; a row whose streams are in two splits is dropped and counted.
Weeks are shared across splits, as in a site plan (the week cap of the episodes stage keeps each week's mix).

Rows without time (or, in a site plan, without sites; in a group plan, without streams) go by a hash in proportion
to the shares, held-out sites to test.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import polars as pl

from contracts.tasks import PERIOD_DAYS, SPLITS, Family, SplitRule
from pipeline.core.canonical import digest
from pipeline.core.errors import StageError
from pipeline.store.compute import DAY, MONDAY
from pipeline.tasks.fit import WEEK, Fit, whole_weeks
from pipeline.tools.timeutil import format_us


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
class Grouping:
    """A group plan's groups: what a group is (location, equipment or stream), each group's split and each stream's."""

    by: str
    splits: dict[str, str]  # group -> split
    stream_splits: dict[str, str]  # stream -> split


def _place_by(lists: pl.Series, splits: dict[str, str], by_hash: pl.Series, unknown: str, two: str) -> pl.Series:
    """The split of a row's sites (or streams); a row whose sites are in two splits is dropped (reason `two`); a row
    without any goes by hash."""
    found = lists.cast(pl.List(pl.String)).list.eval(pl.element().replace_strict(splits, default=unknown))
    frame = pl.DataFrame({"splits": found.list.unique(), "hashed": by_hash})
    return frame.select(
        pl.when(pl.col("splits").list.len() == 0)
        .then(pl.col("hashed"))
        .when(pl.col("splits").list.len() == 1)
        .then(pl.col("splits").list.first())
        .otherwise(pl.lit(two))
        .alias("placed")
    ).get_column("placed")


@dataclass(frozen=True)
class SplitPlan:
    """The blocks of one corpus, and how rows are placed in them."""

    rule: SplitRule
    blocks: dict[str, Block]
    held_out: frozenset[str]
    by: str  # "time and site", "time" (fewer than 2 sites), "site" or "group"
    site_splits: dict[str, str] | None = None  # site -> split, in a site plan
    left_out: dict[str, str] | None = None  # families that do not fit the corpus's span, with the reason
    grouping: Grouping | None = None  # in a group plan: what a group is, and each stream's split
    step_days: int = 7  # a time plan's unit: weeks, or days in a short time plan

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

        def by_hash() -> pl.Series:  # a row's split by hash (touching a held-out site: test), when the plan needs it
            return pl.Series(
                "placed",
                [
                    "test" if touched else self._by_hash(int(digest(f"{seed}|split|{name}|{ident}")[:12], 16) / 16**12)
                    for ident, touched in zip(idents, touches.to_list(), strict=True)
                ],
                dtype=pl.String,
            )

        if self.site_splits is not None:
            return _place_by(sites, self.site_splits, by_hash(), "site_not_in_store", "sites_in_two_splits")
        if self.grouping is not None:
            return _place_by(
                frame.get_column(family.streams_column),
                self.grouping.stream_splits,
                by_hash(),
                "stream_not_in_store",
                "streams_in_two_splits",
            )
        if not family.time_columns:
            return by_hash()
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
        found = {
            "by": self.by,
            "blocks": [b.as_dict() for b in sorted(self.blocks.values(), key=lambda b: (b.start, b.split))],
            "shares": dict(self.rule.shares),
            "buffer_days": self.rule.buffer_days,
            "reach_days": self.rule.reach_days,
            "held_out_sites": sorted(self.held_out),
        }
        if self.site_splits is not None:
            found["sites"] = {s: sorted(k for k, v in self.site_splits.items() if v == s) for s in SPLITS}
        if self.grouping is not None:
            found["grouped_by"] = self.grouping.by
            found["groups"] = {s: sorted(k for k, v in self.grouping.splits.items() if v == s) for s in SPLITS}
        if self.left_out:
            found["families_left_out"] = dict(sorted(self.left_out.items()))
        if self.step_days != 7:  # a short time plan (written only then: the whole-week plans' manifests unchanged)
            found["step_days"] = self.step_days
        return found


def plan(con: duckdb.DuckDBPyConnection, fit: Fit, held_out: list[str], corpus: str, seed: str) -> SplitPlan:
    """The corpus's split plan: time blocks, or whole sites per split."""
    counted = per_window(con, "week")
    if not counted:
        raise StageError(f"corpus {corpus}: no weekly windows in the store, so no split plan")
    if fit.plan in ("site", "group"):
        return _unit_plan(con, fit, held_out, corpus, seed, Block("", min(counted), max(counted) + WEEK))
    step = fit.step_days * DAY
    plan_ = time_blocks(fit.rule, counted if step == WEEK else per_window(con, "day"), corpus, step)
    sites = con.execute("SELECT count(DISTINCT site_id) FROM streams").fetchone()[0]
    single = sites < 2
    return SplitPlan(
        rule=fit.rule,
        blocks=plan_,
        held_out=frozenset() if single else frozenset(held_out),
        by="time" if single else "time and site",
        left_out=fit.left_out,
        step_days=fit.step_days,
    )


def per_window(con: duckdb.DuckDBPyConnection, period: str) -> dict[int, int]:
    """The store's stream-windows of a period (week or day) counted per window start (epoch us)."""
    return dict(
        con.execute("SELECT window_start, count(*) FROM aggregates WHERE period = ? GROUP BY 1", [period]).fetchall()
    )


def time_blocks(rule: SplitRule, counted: dict[int, int], corpus: str, step: int = WEEK) -> dict[str, Block]:
    """The time plan's blocks from the stream-windows counted per window start (epoch us; Mondays, or days in a
    short time plan, `step` apart): every window from the first to the last counted is in the calendar, those without
    data included (buffers are time)."""
    first, last = min(counted), max(counted) + step
    calendar = list(range(first, last, step))
    return _time_plan(rule, calendar, [counted.get(start, 0) for start in calendar], corpus, step)


def blocks_without_data(blocks: dict[str, Block], counted: dict[int, int], margin: int, step: int = WEEK) -> list[str]:
    """The splits whose block holds no window (a week, or a day `step`) with data at least `margin` (epoch us) inside
    both its edges: no row's reach fits there, so the split would have no task."""
    return [
        split
        for split, block in blocks.items()
        if not any(
            n and block.start + margin <= start and start + step + margin <= block.end for start, n in counted.items()
        )
    ]


def _time_plan(rule: SplitRule, calendar: list[int], counts: list[int], corpus: str, step: int) -> dict[str, Block]:
    """Cut the calendar into the rule's blocks by its stream-windows."""
    buffer_steps = -(-rule.buffer_days * DAY // step)  # the buffer in whole steps (weeks, or days)
    total = sum(counts) * (1 - 2 * buffer_steps / len(calendar))  # the buffers' share is left out
    bounds, cumulative, share, index = [], 0, 0.0, 0
    for split in rule.order[:-1]:
        begin = index
        share += rule.shares[split]
        while index < len(calendar) and cumulative + counts[index] <= share * total:
            cumulative += counts[index]
            index += 1
        bounds.append((begin, index))
        index += buffer_steps  # the buffer's steps belong to no block
    bounds.append((index, len(calendar)))
    blocks = {}
    for split, (begin, stop) in zip(rule.order, bounds, strict=True):
        if stop <= begin:
            raise StageError(
                f"corpus {corpus}: the {split} block is empty; change the shares or buffer_days in "
                f"configs/families.toml [splits], or [splits] in configs/corpora/{corpus}.toml"
            )
        blocks[split] = Block(split, calendar[begin], calendar[stop - 1] + step)
    return blocks


GROUPED_BY = ("location", "equipment")  # what a group is, the first that names enough groups; else the stream


def group_of(stream: dict, by: str) -> str:
    """A stream's group in a group plan: `<site>/<its location or equipment>`, or `<site>/<stream>` without one."""
    return f"{stream['site_id']}/{(stream[by] if by != 'stream' else None) or stream['stream_id']}"


def groups(con: duckdb.DuckDBPyConnection, min_groups: int) -> tuple[str, dict[str, str]]:
    """What a group plan splits: the first of GROUPED_BY whose values name `min_groups` groups (per site) among the
    streams with data, else each stream; and each stream's group (group_of)."""
    by = "stream"
    for column in GROUPED_BY:
        named = con.execute(
            f"SELECT count(DISTINCT (site_id, {column})) FROM streams WHERE n_obs > 0 AND {column} IS NOT NULL"
        ).fetchone()[0]
        if named >= min_groups:
            by = column
            break
    rows = con.execute("SELECT stream_id, site_id, location, equipment FROM streams ORDER BY stream_id").fetchall()
    keys = ("stream_id", "site_id", "location", "equipment")
    return by, {row[0]: group_of(dict(zip(keys, row, strict=True)), by) for row in rows}


def stream_splits(split_rule: dict, streams: dict[str, dict]) -> dict[str, str] | None:
    """Each stream's split in a group plan, from the tasks manifest's `split_rule` and the store's streams: where a
    conversation may go (a revision to another point of the class stays in its split's groups). None otherwise."""
    if split_rule.get("by") != "group":
        return None
    split_of = {group: split for split, names in split_rule["groups"].items() for group in names}
    return {s: split_of.get(group_of(row, split_rule["grouped_by"]), "") for s, row in streams.items()}


def group_count(con: duckdb.DuckDBPyConnection, min_groups: int) -> int:
    """How many groups a group plan would split: those of the streams with data."""
    _, grouped = groups(con, min_groups)
    with_data = {s for (s,) in con.execute("SELECT stream_id FROM streams WHERE n_obs > 0").fetchall()}
    return len({g for s, g in grouped.items() if s in with_data})


def _unit_plan(
    con: duckdb.DuckDBPyConnection, fit: Fit, held_out: list[str], corpus: str, seed: str, span: Block
) -> SplitPlan:
    """A site plan (whole sites per split) or a group plan (whole groups per split), over the corpus's whole time."""
    sites = {site for (site,) in con.execute("SELECT DISTINCT site_id FROM streams").fetchall()}
    unknown = sorted(set(held_out) - sites)
    if unknown:
        raise StageError(
            f"corpus {corpus}: held_out_sites {', '.join(unknown)} are not sites of the store; fix held_out_sites in "
            f"configs/corpora/{corpus}.toml"
        )
    blocks = {s: Block(s, span.start, span.end) for s in fit.rule.order}
    common = {"rule": fit.rule, "blocks": blocks, "held_out": frozenset(held_out), "left_out": fit.left_out}
    if fit.plan == "site":
        rows = con.execute(
            "SELECT s.site_id, list(DISTINCT s.point_class ORDER BY s.point_class), "
            "count(a.window_start) FROM streams s LEFT JOIN aggregates a ON a.stream_id = s.stream_id "
            "AND a.period = 'week' GROUP BY s.site_id ORDER BY s.site_id"
        ).fetchall()
        assigned = _assign(rows, {site: "test" for site in held_out}, fit.rule, seed, "site")
        _check_every_split(assigned, "site", fit, len(rows), held_out, corpus)
        return SplitPlan(**common, by="site", site_splits=dict(sorted(assigned.items())))
    whole = _whole_weeks(con, span)
    common["blocks"] = {s: Block(s, whole.start, whole.end) for s in fit.rule.order}
    by, grouped = groups(con, fit.rule.min_sites)
    con.register("grouped", pl.DataFrame({"stream_id": list(grouped), "group_id": list(grouped.values())}))
    rows = con.execute(
        "SELECT g.group_id, list(DISTINCT s.point_class ORDER BY s.point_class), count(a.window_start) "
        "FROM streams s JOIN grouped g USING (stream_id) LEFT JOIN aggregates a ON a.stream_id = s.stream_id "
        "AND a.period = 'week' GROUP BY g.group_id ORDER BY g.group_id"
    ).fetchall()
    con.unregister("grouped")
    held = {g: "test" for g, _, _ in rows if g.split("/", 1)[0] in held_out}
    assigned = _assign(rows, held, fit.rule, seed, "group")
    _check_every_split(assigned, "group", fit, len(rows), held_out, corpus)
    by_stream = {stream: assigned[group] for stream, group in grouped.items() if group in assigned}
    return SplitPlan(
        **common, by="group", grouping=Grouping(by, dict(sorted(assigned.items())), dict(sorted(by_stream.items())))
    )


def _whole_weeks(con: duckdb.DuckDBPyConnection, span: Block) -> Block:
    """A group plan's block: the corpus's whole calendar weeks (Monday to Sunday). One building's partial first and
    last weeks are partial for every room, so a commitment about either would be an abstention whatever the room:
    the week would tell the outcome across splits that share it. The span itself when it has no whole week."""
    first, last = con.execute("SELECT min(first_ts), max(last_ts) FROM streams WHERE n_obs > 0").fetchone()
    weeks = whole_weeks(first, last)
    start = first + (-(first - MONDAY)) % WEEK
    return Block("", start, start + weeks * WEEK) if weeks else span


def _check_every_split(
    assigned: dict[str, str], unit: str, fit: Fit, units: int, held_out: list[str], corpus: str
) -> None:
    empty = [s for s in fit.rule.order if s not in assigned.values()]
    if empty:
        raise StageError(
            f"corpus {corpus}: the {unit} split leaves {', '.join(empty)} without a {unit} ({units} {unit}s, "
            f"{len(held_out)} held out); hold out fewer sites in configs/corpora/{corpus}.toml or add {unit}s"
        )


def _assign(rows: list, assigned: dict[str, str], rule: SplitRule, seed: str, unit: str) -> dict[str, str]:
    """Whole units (sites or groups) per split: those already `assigned` (held out, to test), the others in an order
    stratified by their point classes (a hash within a stratum), each to the split furthest below its share of the
    stream-weeks (the first split in the rule's order on a tie); the last units go to splits still without one."""
    assigned = dict(assigned)
    weight = dict.fromkeys(rule.order, 0)
    for key, _, weeks in rows:
        if key in assigned:
            weight["test"] += weeks
    order = sorted(
        (classes, digest(f"{seed}|{unit}|{key}"), key, weeks) for key, classes, weeks in rows if key not in assigned
    )
    for position, (_, _, key, weeks) in enumerate(order):
        empty = [s for s in rule.order if s not in assigned.values()]
        total = sum(weight.values()) + weeks
        if len(order) - position <= len(empty):  # as many units left as splits without one
            choice = max(empty, key=lambda s: rule.shares[s])
        else:
            choice = max(rule.order, key=lambda s: (rule.shares[s] * total - weight[s], -rule.order.index(s)))
        assigned[key] = choice
        weight[choice] += weeks
    return assigned
