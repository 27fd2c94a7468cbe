"""The tasks stage: candidates -> splits -> selection under caps -> tasks with tool-derived gold."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from contracts.answers import AnswersConfig
from contracts.tasks import SPLITS, FamiliesConfig, Family, SplitKind, SplitOverrides, Task
from pipeline.core.errors import StageError
from pipeline.core.executor import run_ordered
from pipeline.core.manifest import StageResult, write_splits
from pipeline.core.resources import Resources
from pipeline.store.reader import STORE_FILE, open_store
from pipeline.tasks import candidates, forms, gold, grading, render
from pipeline.tasks.fit import Span, corpus_rule, fit, whole_weeks
from pipeline.tasks.splits import Block, SplitPlan, group_count, plan
from pipeline.tools.access import ToolStore


@dataclass
class FamilyReport:
    pool: int = 0
    predicates: list[dict] = field(default_factory=list)
    eligible: int = 0
    selected: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SPLITS, 0))
    available: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SPLITS, 0))
    skipped: Counter = field(default_factory=Counter)
    dropped_by_split_rule: Counter = field(default_factory=Counter)
    emptied_by: str | None = None
    streams_left_out: dict[str, int] = field(
        default_factory=dict
    )  # by the step that drops them (candidates.POOL_QUERY first)
    eligible_streams: set[str] = field(default_factory=set)

    def as_dict(self) -> dict:
        return {
            "pool": self.pool,
            "predicates": self.predicates,
            "eligible": self.eligible,
            "selected": self.selected,
            "streams_left_out": self.streams_left_out,
            "eligible_streams": len(self.eligible_streams),
            "available_per_split": self.available,
            "skipped": dict(sorted(self.skipped.items())),
            "dropped_by_split_rule": dict(sorted(self.dropped_by_split_rule.items())),
            "emptied_by": self.emptied_by,
            "empty_splits": [s for s in SPLITS if not self.selected[s]],
        }


def _provenance(row: dict, family: Family, streams: dict[str, dict], raw_sha: dict[str, str], slots: dict) -> dict:
    files = sorted({f for s in row[family.streams_column] for f in (streams[s]["source_file"] or "").split(";") if f})
    keys = {k: slots[k] for k in ("window_start_iso", "window_end_iso", "anchor_iso", "timestamp_iso") if k in slots}
    return {"raw_files": {f: raw_sha.get(f) for f in files}, "stream_ids": sorted(row[family.streams_column]), **keys}


def _used_slots(family: Family) -> set[str]:
    """Slots the query texts and call templates read: only these are stored (never pool statistics)."""
    text = json.dumps(
        [family.templates, [c.model_dump() for cs in (family.canonical, *family.alternatives) for c in cs.calls]]
    )
    names = {m.group(1).split(".")[0] for m in render.ANY.finditer(text)}
    return {n for n in names if n != "item"} | {
        c.for_each for cs in (family.canonical, *family.alternatives) for c in cs.calls if c.for_each
    }


def build_task(
    store: ToolStore,
    corpus: str,
    name: str,
    family: Family,
    split: str,
    key: str,
    row: dict,
    raw_sha: dict[str, str],
    answers: AnswersConfig,
    block: Block,
) -> Task:
    slots = render.derive(row, store.streams, store.sites)
    canonical = render.calls(family.canonical, slots)
    outputs = gold.execute(store, canonical)
    answer = gold.extract(family.canonical.gold, outputs)
    verifier = forms.form(
        family.answer_fields, answers, forms.field_units(store, family.canonical.gold, outputs), family.tolerances
    )
    alternatives = []
    for alternative in family.alternatives:
        alt_calls = render.calls(alternative, slots)
        alt_answer = gold.extract(alternative.gold, gold.execute(store, alt_calls))
        if not grading.passes(verifier, answer, alt_answer):
            raise gold.GoldError(f"alternative call set gives {alt_answer}, canonical gives {answer}")
        alternatives.append(alt_calls)
    if family.distinct_from is not None:
        other = gold.extract(family.distinct_from.gold, gold.execute(store, render.calls(family.distinct_from, slots)))
        if grading.passes(verifier, answer, other):
            raise gold.GoldError(f"not distinct: the distinct_from call set gives {other} as well")
    template = int(key[:8], 16) % len(family.templates)
    touched = sorted(row[family.streams_column])
    ambiguity = max(
        store.ready_per_class[store.streams[t]["site_id"], store.streams[t]["point_class"]] for t in touched
    )
    return Task(
        task_id=f"{corpus}.{name}.{key[:16]}",
        corpus=corpus,
        family=name,
        split=split,
        query=render.query(family.templates, template, slots),
        template=template,
        slots={k: slots[k] for k in sorted(_used_slots(family) | set(family.key)) if k in slots},
        canonical_calls=canonical,
        alternative_calls=alternatives,
        gold=answer,
        verifier=verifier,
        evidence_stream_ids=touched,
        site_ids=sorted(row[family.sites_column]),
        difficulty={"tool_calls": len(canonical), "ambiguity_candidates": ambiguity, **family.difficulty},
        provenance=_provenance(row, family, store.streams, raw_sha, slots),
        selection_key=key,
        time_block=[block.start, block.end],
    )


@dataclass(frozen=True)
class FamilyUnit:
    """One family's selection, all a worker needs: families are independent (their own pools, caps and order)."""

    store_path: Path
    corpus: str
    name: str
    family: Family
    cfg: FamiliesConfig
    splits: SplitPlan
    raw_sha: dict[str, str]
    answers: AnswersConfig
    keep_open: bool  # keep this process's store open for the build's next family (local workers and this process)


def select_family(store: ToolStore, con, unit: FamilyUnit) -> tuple[list[Task], FamilyReport]:
    """Evaluate the family's pool (a temporary table of `con`), order and place its rows, and select under the caps,
    building each task's gold through `store`'s tools."""
    held_out = sorted(unit.splits.held_out)
    if any(candidates.PAIRS.search(sql) for sql in candidates.sql_texts(unit.family)):
        candidates.check_store_order(con, unit.store_path)
    pool = candidates.evaluate(con, unit.name, unit.family, store.thresholds, held_out, unit.cfg.grid_minutes)
    try:
        return _select(pool, store, unit)
    finally:
        pool.close()


def _select(pool: candidates.Pool, store: ToolStore, unit: FamilyUnit) -> tuple[list[Task], FamilyReport]:
    corpus, name, family, cfg, splits = unit.corpus, unit.name, unit.family, unit.cfg, unit.splits
    raw_sha, answers = unit.raw_sha, unit.answers
    report = FamilyReport()
    report.pool, report.eligible = pool.size, pool.eligible
    report.predicates = [{"name": n, "passed": k} for n, k in pool.passed]
    report.emptied_by = pool.emptied_by
    report.streams_left_out, report.eligible_streams = pool.left_out, pool.eligible_streams
    idents = candidates.identities(pool, family.key)
    columns = [*family.time_columns, family.sites_column] + [family.streams_column] * (splits.grouping is not None)
    placed = splits.place(pool.frame(columns), family, idents, cfg.seed, name)
    order = candidates.ordered(cfg.seed, name, pool, idents)
    order = order.with_columns(split=placed.gather(order.get_column("number")))
    dropped = order.filter(~pl.col("split").is_in(SPLITS)).get_column("split").value_counts()
    report.dropped_by_split_rule.update(dict(dropped.iter_rows()))
    by_split = {s: order.filter(pl.col("split") == s) for s in SPLITS}
    tasks = []
    for split in SPLITS:
        report.available[split] = by_split[split].height
        target = math.ceil(family.target(cfg.targets, split) * cfg.oversupply)
        cap = max(1, math.ceil(target * family.cap_fraction))
        per_key, per_stream, flagged = Counter(), Counter(), Counter()
        keys = by_split[split].get_column("key").to_list()
        block = splits.blocks[split]
        for key, row in zip(keys, pool.walk(by_split[split].get_column("number").to_list()), strict=False):
            if report.selected[split] >= target:
                break
            over = [
                c
                for c, share in family.share_caps.items()
                if row[c] and flagged[c] + 1 > share * (report.selected[split] + 1)
            ]
            if over:
                report.skipped[f"cap_share_{over[0]}"] += 1
                continue
            balance = tuple(str(row[k]) for k in family.balance_key)
            if per_key[balance] >= cap:
                report.skipped["cap_balance"] += 1
                continue
            if any(per_stream[s] >= family.cap_per_stream for s in row[family.streams_column]):
                report.skipped["cap_stream"] += 1
                continue
            try:
                task = build_task(store, corpus, name, family, split, key, row, raw_sha, answers, block)
            except (gold.GoldError, render.RenderError) as exc:
                report.skipped[f"gold_failed: {str(exc).split(':')[0]}"] += 1
                continue
            per_key[balance] += 1
            per_stream.update(row[family.streams_column])
            flagged.update(c for c in family.share_caps if row[c])
            report.selected[split] += 1
            tasks.append(task)
    return tasks, report


ORPHANS_NAMED = 40  # streams in no family named in the build output (inspect tasks --json lists every one)


def _plan_words(splits: SplitPlan) -> str:
    found = splits.as_dict()
    for unit in ("sites", "groups"):
        if unit in found:
            return f"{unit} " + "; ".join(f"{s}: {', '.join(v)}" for s, v in found[unit].items())
    return f"time blocks {found['blocks']}"


def _exclusion_notes(reports: dict[str, dict], orphans: list[str], corpus: str) -> list[str]:
    """The build output's lines: streams each family's steps left out (by step), and the streams in no family."""
    left = {name: {step: n for step, n in r["streams_left_out"].items() if n} for name, r in sorted(reports.items())}
    notes = (
        [
            "streams left out: "
            + "; ".join(
                f"{name} ({', '.join(f'{s} {n}' for s, n in steps.items())})" for name, steps in left.items() if steps
            )
        ]
        if any(left.values())
        else []
    )
    if orphans:
        named = ", ".join(orphans[:ORPHANS_NAMED]) + (
            f" and {len(orphans) - ORPHANS_NAMED} more" if len(orphans) > ORPHANS_NAMED else ""
        )
        notes.append(
            f"{len(orphans)} streams in no family: {named}; `telemetry-bench inspect tasks --corpus {corpus}` shows "
            "which predicate left them out of each family"
        )
    return notes


def _why_empty(reports: dict[str, dict], orphans: list[str], every_stream: list[str]) -> str:
    """When a split is empty: how many streams each step left out, summed over families, the largest first."""
    totals: Counter = Counter()
    for report in reports.values():
        totals.update({step: n for step, n in report["streams_left_out"].items() if n})
    steps = ", ".join(f"{step} {n}" for step, n in totals.most_common(4))
    return (
        (
            f"{len(orphans)} of {len(every_stream)} streams are in no family (streams left out, summed over families: "
            f"{steps}; the mapping's metadata may lack what those predicates need); "
        )
        if orphans
        else ""
    )


_OPEN: dict[Path, tuple[tuple[int, int, int], ToolStore]] = {}  # this process's open store, by path
_OPEN_LOCK = threading.Lock()


def _store(path: Path) -> ToolStore:
    """The store this process opened for an earlier family of the same build (its caches warm), or a new one. A
    store file that changed since (another build at the same path) is opened again. Stores open with the readers'
    one configuration (DuckDB refuses a second connection to a file under another one)."""
    stat = path.stat()
    identity = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
    with _OPEN_LOCK:
        kept = _OPEN.get(path)
        if kept is not None and kept[0] == identity:
            return kept[1]
    release_stores(path)
    store = ToolStore(path, remember_results=True)
    with _OPEN_LOCK:
        _OPEN[path] = (identity, store)
    return store


def release_stores(path: Path | None = None) -> None:
    """Close the stores this process keeps open for family units (one path, or all)."""
    with _OPEN_LOCK:
        closing = [_OPEN.pop(key)[1] for key in list(_OPEN) if path is None or key == path]
    for store in closing:
        store.close()


def select_unit(unit: FamilyUnit) -> tuple[list[Task], FamilyReport]:
    """A family's tasks and report, read through this process's store for the build (in a worker or here). A Ray
    worker outlives the build, so there a unit closes what it opened."""
    store = _store(unit.store_path) if unit.keep_open else ToolStore(unit.store_path, remember_results=True)
    con = open_store(unit.store_path)
    try:
        return select_family(store, con, unit)
    finally:
        con.close()
        if not unit.keep_open:
            store.close()


READS_OBSERVATIONS = re.compile(r"\bobservations\b|\bobservation_pairs\(")
UNIT_OBSERVATIONS = 2_000_000  # below this many observations, families are selected in this process (no spawn)


def _start_order(name: str, family: Family) -> tuple:
    """The longest units start first, so that none ends last on one worker (results are merged by family name
    whatever the order): families whose candidate query reads `observations` (the largest table, by far), then those
    whose calls repeat for every member of a group (`for_each`: each member's data is read), then the rest; by name."""
    calls = [c for cs in (family.canonical, *family.alternatives) for c in cs.calls]
    reads = any(READS_OBSERVATIONS.search(sql) for sql in candidates.sql_texts(family))
    return (not reads, not any(c.for_each for c in calls), name)


def compile_tasks(
    store_dir: Path,
    ingest_dir: Path,
    cfg: FamiliesConfig,
    answers: AnswersConfig,
    corpus: str,
    held_out: list[str],
    out: Path,
    resources: Resources | None = None,
    split: SplitKind = "auto",
    overrides: SplitOverrides | None = None,
    weekly_commitments: frozenset[str] = frozenset(),
) -> StageResult:
    """Write {train,dev,test}.jsonl (canonical JSON) and report every family's pool, predicates and selection.

    Families are units on the executor (local processes or Ray); their tasks and reports are merged in family order,
    so the outputs are the same on any executor and any number of workers."""
    resources = resources or Resources()
    path = store_dir / STORE_FILE
    raw_sha = json.loads((ingest_dir / "report.json").read_text(encoding="utf-8"))["raw_sha256"]
    con = open_store(path)
    try:
        first, last, sites = con.execute(
            "SELECT min(first_ts), max(last_ts), count(DISTINCT site_id) FROM streams WHERE n_obs > 0"
        ).fetchone()
        if first is None:
            raise StageError(f"corpus {corpus}: the store holds no observation, so no task; check the ingest report")
        spans = con.execute("SELECT first_ts, last_ts FROM streams WHERE n_obs > 0").fetchall()
        longest = max(whole_weeks(a, b) for a, b in spans)
        grouped = group_count(con, corpus_rule(cfg, overrides, corpus).min_sites)
        fitted = fit(cfg, split, overrides, Span(first, last, sites, longest, grouped), corpus, weekly_commitments)
        splits = plan(con, fitted, held_out, corpus, cfg.seed)
        every_stream = [s for (s,) in con.execute("SELECT stream_id FROM streams ORDER BY stream_id").fetchall()]
        observations = con.execute("SELECT count(*) FROM observations").fetchone()[0]
    finally:
        con.close()
    names = sorted(fitted.kept, key=lambda n: _start_order(n, cfg.families[n]))
    if observations < UNIT_OBSERVATIONS:
        resources = dataclasses.replace(resources, executor="local", workers=1)
    keep = resources.executor == "local"  # spawned workers end with the stage; Ray's live on
    units = [FamilyUnit(path, corpus, n, cfg.families[n], cfg, splits, raw_sha, answers, keep) for n in names]
    tasks, reports, eligible = [], {}, set()
    try:
        for unit, (selected, report) in zip(units, run_ordered(select_unit, units, resources, "tasks"), strict=True):
            tasks += selected
            reports[unit.name] = report.as_dict()
            eligible |= report.eligible_streams
    finally:
        release_stores(path)  # units that ran in this process
    reports = dict(sorted(reports.items()))
    orphans = [s for s in every_stream if s not in eligible]
    empty = [s for s in SPLITS if not any(t.split == s for t in tasks)]
    if empty:
        raise StageError(
            f"corpus {corpus}: no task in the {', '.join(empty)} split; {_why_empty(reports, orphans, every_stream)}"
            f"its split plan: {_plan_words(splits)}; change [splits] shares in configs/corpora/{corpus}.toml, or "
            f"held_out_sites there so that held-out sites have data in the test split"
        )
    counts = write_splits(out, tasks, sort_key=lambda t: (t.family, t.selection_key))
    missing = {
        n: r["emptied_by"] or "no candidate survived selection"
        for n, r in reports.items()
        if sum(r["selected"].values()) == 0
    }
    return StageResult(
        outputs=[f"{s}.jsonl" for s in SPLITS],
        row_counts=counts,
        details={
            "families": reports,
            "missing_families": missing,
            "seed": cfg.seed,
            "split_rule": splits.as_dict(),
            "streams_in_no_family": orphans,
            "notes": [*fitted.notes(), *_exclusion_notes(reports, orphans, corpus)],
        },
    )
