"""Candidate pools in SQL, eligibility predicates counted one by one, and the selection order."""

from __future__ import annotations

import re
from dataclasses import dataclass

import duckdb

from contracts.tasks import Family
from pipeline.core.canonical import canonical_json, digest
from pipeline.core.errors import StageError

PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


def _sql_list(values: list[str]) -> str:
    return "[" + ", ".join("'" + v.replace("'", "''") + "'" for v in values) + "]::VARCHAR[]"


def fill(sql: str, values: dict[str, str]) -> str:
    """Replace {name} for the names given (thresholds, held_out, previous); other braces stay."""
    return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), sql)


POOL_QUERY = "candidate query"  # what leaves a stream out before any predicate: the family's query never yields it


@dataclass
class Pool:
    size: int
    passed: list[tuple[str, int]]  # (predicate, rows passing it and every predicate before it)
    rows: list[dict]
    left_out: dict[str, int]  # streams left out, by the first step that drops their last row (POOL_QUERY, predicates)
    eligible_streams: set[str]  # streams with at least one row that passes every predicate

    @property
    def emptied_by(self) -> str | None:
        """The first predicate that left no candidate (None when candidates remain)."""
        if self.size == 0:
            return "candidate query (no rows)"
        return next((name for name, n in self.passed if n == 0), None)


def evaluate(
    con: duckdb.DuckDBPyConnection,
    name: str,
    family: Family,
    thresholds: dict[str, float],
    held_out: list[str],
    grid_minutes: list[int],
) -> Pool:
    values = {k: repr(float(v)) for k, v in thresholds.items()} | {"held_out": _sql_list(held_out)}
    values["grid_us"] = "[" + ", ".join(str(m * 60_000_000) for m in grid_minutes) + "]::BIGINT[]"
    base = f"WITH pool AS ({fill(family.candidates, values)})"
    conditions: list[str] = []
    for predicate in family.predicates:
        previous = " AND ".join(f"({c})" for c in conditions) or "TRUE"
        conditions.append(fill(predicate.sql, values | {"previous": previous}))
    counts = ", ".join(
        f"count(*) FILTER (WHERE {' AND '.join(f'({c})' for c in conditions[: i + 1])})" for i in range(len(conditions))
    )
    stream_counts = ", ".join(
        f"count(DISTINCT _stream) FILTER (WHERE {' AND '.join(f'({c})' for c in conditions[: i + 1])})"
        for i in range(len(conditions))
    )
    try:
        size, *passed = con.execute(f"{base} SELECT count(*){', ' + counts if counts else ''} FROM pool").fetchone()
        where = " AND ".join(f"({c})" for c in conditions) or "TRUE"
        result = con.execute(f"{base} SELECT * FROM pool WHERE {where}")
        names = [d[0] for d in result.description]
        rows = [dict(zip(names, row, strict=True)) for row in result.fetchall()]
        total = con.execute("SELECT count(*) FROM streams").fetchone()[0]
        exploded = f"{base}, exploded AS (SELECT *, unnest({family.streams_column}) AS _stream FROM pool)"
        alive = con.execute(
            f"{exploded} SELECT count(DISTINCT _stream){', ' + stream_counts if stream_counts else ''} FROM exploded"
        ).fetchone()
    except duckdb.Error as exc:
        raise StageError(f"configs/families.toml: family {name}: candidate SQL failed: {exc}") from exc
    steps = [POOL_QUERY, *(p.name for p in family.predicates)]
    before = [total, *alive]
    left_out = {step: before[i] - before[i + 1] for i, step in enumerate(steps)}
    eligible = {s for row in rows for s in row[family.streams_column]}
    return Pool(
        size=size,
        passed=list(zip([p.name for p in family.predicates], passed, strict=True)),
        rows=rows,
        left_out=left_out,
        eligible_streams=eligible,
    )


def identity(row: dict, key: list[str]) -> str:
    """The candidate's identity: canonical JSON of its key columns."""
    return canonical_json([row[k] for k in key])


def selection_key(seed: str, family: str, ident: str) -> str:
    """xxh3-128 of the seed, the family and the candidate's identity: the declared total order."""
    return digest(f"{canonical_json([seed, family])}|{ident}")


def ordered(seed: str, family: str, rows: list[dict], key: list[str]) -> list[tuple[str, str, dict]]:
    """(selection key, identity, row) by selection key; ties (never expected) by the identity itself."""
    keyed = []
    for row in rows:
        ident = identity(row, key)
        keyed.append((selection_key(seed, family, ident), ident, row))
    keyed.sort(key=lambda item: (item[0], item[1]))
    return keyed
