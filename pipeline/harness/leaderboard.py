"""The leaderboard: scored traces as one row per agent identity, corpus and split, with a bootstrap interval, ranked
only among complete rows scored on the same episode set, written as JSON (contracts/leaderboard.py), CSV or
Markdown."""

from __future__ import annotations

import csv
import html
import io
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from contracts.episodes import OUTCOMES
from contracts.leaderboard import Leaderboard, LeaderboardRow, RefusedTrace
from pipeline.core.canonical import atomic_write_bytes, write_json
from pipeline.core.errors import RunError
from pipeline.core.workspace import Workspace
from pipeline.harness.binding import digest_warnings
from pipeline.harness.traces import score_traces

if TYPE_CHECKING:
    from pipeline.release.playable import Release

PARTS = ("final", "evidence", "phase", "temporal", "task", "protocol")
FORMATS = (".json", ".csv", ".md")


def build_leaderboard(
    ws: Workspace,
    paths: list[Path],
    release: Release | None = None,
    prices: dict | None = None,
    resamples: int = 1000,
    seed: int = 0,
    expect: str | None = None,
) -> Leaderboard:
    """Score the traces and rank them; a trace that cannot be scored (or, with `expect`, was played on another
    release than that digest) is listed under `refused` with its reason; what the release digests say, under
    `warnings`."""
    refused: list[tuple[Path, str]] = []
    summaries = score_traces(ws, paths, release, prices, refused, expect)
    return Leaderboard(
        rows=leaderboard_rows(summaries, resamples, seed),
        refused=[RefusedTrace(trace=p.name, reason=r) for p, r in sorted(refused, key=lambda x: x[0].name)],
        warnings=digest_warnings(ws, summaries),
    )


def leaderboard_rows(summaries: list[dict], resamples: int = 1000, seed: int = 0) -> list[LeaderboardRow]:
    """Score summaries (`score_traces`, `trace_summaries`) as ranked rows, each with its bootstrap interval."""
    return _ranked([_row(s, resamples, seed) for s in summaries])


def _row(summary: dict, resamples: int, seed: int) -> dict:
    per_episode: dict[str, list[bool]] = defaultdict(list)
    for row in summary["rows"]:
        per_episode[row["episode_id"]].append(row["accomplished"])
    values = np.array([np.mean(v) for _, v in sorted(per_episode.items())], dtype=float)
    return {
        "identity": summary["identity"],
        "corpus": summary["corpus"],
        "split": summary["split"],
        "episodes_digest": summary["episodes_digest"],
        "release_digest": summary["release_digest"],
        "rank": None,
        "partial": summary["partial"],
        "episodes": summary["episodes"],
        "episodes_in_split": summary["episodes_in_split"],
        "least_covered": summary["least_covered"],
        "runs": summary["runs"],
        "accomplished_rate": summary["accomplished_rate"],
        "interval": bootstrap_interval(values, resamples, seed),
        "balanced_commitment_accuracy": summary["balanced_commitment_accuracy"],
        "commitment_accuracy": summary["commitment_accuracy"],
        "commitment_runs": summary["commitment_runs"],
        "pass_k": {k: v for k, v in summary.items() if k.startswith("pass^") and k != "pass^1"},
        "parts": {p: summary[p] for p in PARTS},
        "per_family": summary["per_family"],
        "failure_modes": dict(sorted({**summary["issues"], **summary["rejections"]}.items())),
        "usage": summary["usage"],
        "per_episode": summary["per_episode"],
        "traces": sorted(Path(t).name for t in summary["traces"]),
    }


def bootstrap_interval(values: np.ndarray, resamples: int, seed: int) -> dict:
    """The 95% percentile bootstrap interval of the mean over episodes: `resamples` draws of as many episodes, with
    replacement, from a generator seeded with `seed` (the same interval on every run)."""
    if len(values) == 0:
        return {"low": 0.0, "high": 0.0, "resamples": resamples, "seed": seed}
    draws = np.random.default_rng(seed).integers(0, len(values), size=(resamples, len(values)))
    means = values[draws].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {"low": round(float(low), 4), "high": round(float(high), 4), "resamples": resamples, "seed": seed}


def _ranked(rows: list[dict]) -> list[LeaderboardRow]:
    """Rank complete rows within their corpus, split and episodes digest (ties share a rank); partial rows stay
    unranked. Rows are ordered by corpus, split, digest, rank (unranked last), then label."""
    boards: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        if not row["partial"]:
            boards[(row["corpus"], row["split"], row["episodes_digest"])].append(row)
    for board in boards.values():
        for row in board:
            row["rank"] = 1 + sum(other["accomplished_rate"] > row["accomplished_rate"] for other in board)
    order = sorted(
        rows,
        key=lambda r: (
            r["corpus"],
            r["split"],
            r["episodes_digest"],
            r["rank"] is None,
            r["rank"] or 0,
            r["identity"]["label"],
        ),
    )
    return [LeaderboardRow.model_validate(r) for r in order]


def write_leaderboard(board: Leaderboard, out: Path) -> None:
    """Write the board in the format the file's suffix names (.json, .csv or .md), atomically."""
    suffix = out.suffix.lower()
    if suffix not in FORMATS:
        raise RunError(f"--out {out}: unknown format {out.suffix or '(none)'!r}; name a .json, .csv or .md file")
    if suffix == ".json":
        write_json(out, board.model_dump(mode="json"))
    elif suffix == ".csv":
        atomic_write_bytes(out, _csv(board).encode("utf-8"))
    else:
        atomic_write_bytes(out, _markdown(board).encode("utf-8"))


CSV_COLUMNS = (
    "corpus",
    "split",
    "rank",
    "agent",
    "model",
    "identity",
    "partial",
    "episodes",
    "episodes_in_split",
    "runs",
    "accomplished_rate",
    "ci_low",
    "ci_high",
    "balanced_commitment_accuracy",
    *(f"commitment_accuracy_{o}" for o in OUTCOMES),
    *PARTS,
    "tokens_in",
    "tokens_out",
    "cost_usd",
    "turns_per_episode",
    "tool_calls_per_episode",
    "episodes_digest",
    "release_digest",
)


def _flat(row: LeaderboardRow) -> dict:
    return {
        "corpus": row.corpus,
        "split": row.split,
        "rank": "" if row.rank is None else row.rank,
        "agent": row.identity.agent,
        "model": row.identity.model or "",
        "identity": row.identity.label,
        "partial": str(row.partial).lower(),
        "episodes": row.episodes,
        "episodes_in_split": row.episodes_in_split,
        "runs": row.runs,
        "accomplished_rate": row.accomplished_rate,
        "ci_low": row.interval.low,
        "ci_high": row.interval.high,
        "balanced_commitment_accuracy": _blank(row.balanced_commitment_accuracy),
        **{f"commitment_accuracy_{o}": _blank(row.commitment_accuracy.get(o)) for o in OUTCOMES},
        **row.parts,
        "tokens_in": row.usage.tokens_in,
        "tokens_out": row.usage.tokens_out,
        "cost_usd": "" if row.usage.cost_usd is None else row.usage.cost_usd,
        "turns_per_episode": row.per_episode["turns"],
        "tool_calls_per_episode": row.per_episode["tool_calls"],
        "episodes_digest": row.episodes_digest,
        "release_digest": row.release_digest or "",
    }


def _blank(value: float | None) -> float | str:
    """A figure as a CSV cell: empty when there is none."""
    return "" if value is None else value


def _csv(board: Leaderboard) -> str:
    return csv_text(CSV_COLUMNS, [_flat(row) for row in board.rows])


def csv_text(columns: tuple[str, ...], rows: list[dict]) -> str:
    """Rows as CSV, every text cell quoted (the writer quotes only cells holding a \\n, its line end, and a \\r in a
    name would otherwise split the row in a reader) and none starting a formula."""
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n", quoting=csv.QUOTE_NONNUMERIC)
    writer.writeheader()
    writer.writerows({k: _csv_cell(v) for k, v in row.items()} for row in rows)
    return buffer.getvalue()


# A spreadsheet runs a cell that starts with one of these as a formula (OWASP CSV injection): names come from traces.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(value: object) -> object:
    """A text cell a spreadsheet would run as a formula gets a leading quote; figures are written as they are."""
    return f"'{value}" if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value


def _md(text: object) -> str:
    """Text from a trace as one Markdown table cell: HTML escaped, pipes as entities and line breaks as spaces, so a
    name can neither add rows or cells nor inject markup."""
    escaped = html.escape(str(text), quote=True).replace("|", "&#124;")
    return " ".join(escaped.splitlines())


def _ranked_modes(modes: dict[str, int]) -> str:
    """Every failure mode, the most frequent first (a tie by name): the cell a reader scans for a model's root cause,
    which a cut after the first few could drop."""
    return ", ".join(f"{_md(k)} {v}" for k, v in sorted(modes.items(), key=lambda kv: (-kv[1], kv[0])))


def _short(digest: str | None) -> str:
    """A release digest as a table cell: its first 12 hex digits (in full under "Releases played"), or none."""
    return f"sha256:{_md(digest[:12])}" if digest else "none"


def _markdown(board: Leaderboard) -> str:
    lines = ["# Leaderboard", ""]
    boards: dict[tuple, list[LeaderboardRow]] = defaultdict(list)
    for row in board.rows:
        boards[(row.corpus, row.split, row.episodes_digest)].append(row)
    for (corpus, split, digest), rows in boards.items():
        lines += [
            f"## {_md(corpus)} {_md(split)} (episodes {_md(digest[:8])})",
            "",
            "| rank | agent | accomplished | 95% interval | balanced commitment | commitment by gold outcome "
            "| episodes | runs | tokens in / out | cost (USD) | failure modes | release |",
            "|---:|---|---:|---|---:|---|---:|---:|---|---:|---|---|",
        ]
        for row in rows:
            rank = (
                str(row.rank) if row.rank is not None else f"partial ({row.least_covered} of {row.episodes_in_split})"
            )
            modes = _ranked_modes(row.failure_modes)
            cost = "" if row.usage.cost_usd is None else f"{row.usage.cost_usd:.4f}"
            balanced = "-" if row.balanced_commitment_accuracy is None else f"{row.balanced_commitment_accuracy:.4f}"
            per_outcome = ", ".join(f"{o} {v:.4f}" for o, v in row.commitment_accuracy.items())
            lines.append(
                f"| {rank} | {_md(row.identity.label)} | {row.accomplished_rate:.4f} | "
                f"[{row.interval.low:.4f}, {row.interval.high:.4f}] | {balanced} | {per_outcome or '-'} | "
                f"{row.episodes} | {row.runs} | "
                f"{row.usage.tokens_in} / {row.usage.tokens_out} | {cost} | {modes or '-'} | "
                f"{_short(row.release_digest)} |"
            )
        lines.append("")
    played = sorted({row.release_digest for row in board.rows if row.release_digest})
    if played:  # the table's release cells are short; a results file names each release in full
        lines += ["## Releases played", ""] + [f"- {_short(d)}: sha256:{_md(d)}" for d in played] + [""]
    if board.warnings:
        lines += ["## Warnings", ""] + [f"- {_md(w)}" for w in board.warnings] + [""]
    if board.refused:
        lines += ["## Not ranked", ""] + [f"- {_md(r.trace)}: {_md(r.reason)}" for r in board.refused] + [""]
    return "\n".join(lines)
