"""What the report shows, gathered from stage outputs and traces into plain data (no rendering here)."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from contracts.episodes import Episode
from contracts.leaderboard import LeaderboardRow
from contracts.runtime import TraceHeader
from pipeline.audit.gates import figures, gate_of
from pipeline.core.config import load_episodes_config, load_mapping, select_corpora
from pipeline.core.errors import ReportError
from pipeline.core.manifest import read_manifest
from pipeline.core.progress import bar
from pipeline.core.workspace import Workspace
from pipeline.harness.episodes import episodes_summary
from pipeline.harness.leaderboard import leaderboard_rows
from pipeline.harness.play import audit_summary
from pipeline.harness.traces import (
    Played,
    Scored,
    agent_name,
    load_episodes,
    scored_trace,
    trace_header,
    trace_summaries,
)
from pipeline.ingest.paths import natural_key
from pipeline.report.conversation import (
    Conversation,
    failure_modes_of,
    gold_conversation,
    gold_records,
    played_conversation,
)
from pipeline.runtime.simulator import Lexicon, slot_keywords
from pipeline.store.inspect import store_summary
from pipeline.store.reader import STORE_FILE, open_store
from pipeline.tasks.inspect import tasks_summary
from pipeline.tools.access import ToolStore

PARTS = ("final", "evidence", "phase", "temporal", "protocol")  # the five part scores (task = the first four together)
NEEDED_STAGES = (
    "ingest",
    "store",
    "tasks",
    "episodes",
    "audit",
    "release",
)  # every stage whose output the report reads


@dataclass
class TraceResult:
    """One trace scored: summary rates (its own, as `score` gives them: partial when it covers fewer episodes than its
    split), issue and failure-mode counts, and every run of every episode as a conversation."""

    path: Path
    label: str
    header: TraceHeader
    summary: dict[str, Any]
    failure_modes: dict[str, int]
    k: int  # runs per episode: the summary's pass^k is pass^{k}
    played: list[Played] = field(repr=False)
    modes_of: dict[tuple[str, int], tuple[str, ...]] = field(repr=False)  # failure modes per (episode id, run)

    @property
    def pass_k(self) -> float | None:
        return self.summary.get(f"pass^{self.k}")

    @property
    def series(self) -> str:
        """The trace's name in the plots' legends, marked when partial (its rates are over fewer episodes)."""
        return f"{self.label} (partial)" if self.summary["partial"] else self.label


@dataclass
class EpisodeEntry:
    episode: Episode
    gold: Conversation
    agents: list[Conversation]


@dataclass
class CorpusReport:
    name: str
    title: str
    overview: dict[str, Any]
    benchmark: dict[str, Any]
    traces: list[TraceResult]
    episodes: list[EpisodeEntry]


def built_corpora(ws: Workspace, requested: list[str] | tuple[str, ...]) -> list[str]:
    """The corpora to report: those asked for (each must be built), else every corpus built through every stage."""

    def missing_stage(name: str) -> str | None:
        return next((s for s in NEEDED_STAGES if read_manifest(ws.stage_dir(name, s)) is None), None)

    names = select_corpora(ws, list(requested))
    if not requested:
        built = [n for n in names if missing_stage(n) is None]
        if not built:
            raise ReportError(
                f"{ws.artifacts_dir}: no corpus is built; run `make build` (or `telemetry-bench build`) first"
            )
        return built
    for name in names:
        stage = missing_stage(name)
        if stage is not None:
            raise ReportError(
                f"{ws.stage_dir(name, stage)}: corpus {name} has no {stage} stage; "
                f"run `telemetry-bench build --corpus {name}` first"
            )
    return names


def _month(us: int) -> str:
    return datetime.fromtimestamp(us / 1_000_000, tz=UTC).strftime("%Y-%m")


def _month_range(first_us: int, last_us: int) -> list[str]:
    """Every calendar month from the first to the last, gaps included, so that the heatmap's time axis is linear."""
    first = datetime.fromtimestamp(first_us / 1_000_000, tz=UTC)
    last = datetime.fromtimestamp(last_us / 1_000_000, tz=UTC)
    return [
        f"{m // 12:04d}-{m % 12 + 1:02d}" for m in range(first.year * 12 + first.month - 1, last.year * 12 + last.month)
    ]


def corpus_overview(ws: Workspace, corpus: str) -> dict[str, Any]:
    summary = store_summary(ws, corpus)
    con = open_store(ws.stage_dir(corpus, "store") / STORE_FILE)
    try:
        rows = con.execute(
            "SELECT s.site_id, s.label, s.held_out, count(t.stream_id), coalesce(sum(t.n_obs), 0), min(t.first_ts), "
            "max(t.last_ts) "
            "FROM sites s LEFT JOIN streams t USING (site_id) GROUP BY ALL"
        ).fetchall()
        sites = sorted(rows, key=lambda row: natural_key(row[0]))  # b2 before b10
        classes = con.execute(
            "SELECT coalesce(point_class, '(unclassified)'), count(*) FROM streams GROUP BY 1 ORDER BY 2 DESC, 1"
        ).fetchall()
        # Coverage of a site in a month: the mean over the site's streams of their month coverage (no data = 0).
        cells = con.execute(
            "SELECT t.site_id, a.window_start, sum(least(a.coverage, 1.0)) FROM aggregates a JOIN streams t USING "
            "(stream_id) "
            "WHERE a.period = 'month' GROUP BY ALL ORDER BY 1, 2"
        ).fetchall()
    finally:
        con.close()
    streams_per_site = {row[0]: row[3] for row in sites}
    months = _month_range(min(s for _, s, _ in cells), max(s for _, s, _ in cells)) if cells else []
    column = {label: i for i, label in enumerate(months)}
    site_ids = [row[0] for row in sites]
    row_of = {site: i for i, site in enumerate(site_ids)}
    matrix = [[0.0] * len(months) for _ in site_ids]
    for site, start, total in cells:
        matrix[row_of[site]][column[_month(start)]] = round(total / max(1, streams_per_site[site]), 4)
    return {
        "counts": {k: summary[k] for k in ("sites", "streams", "observations", "rejects", "raw_value_cells")},
        "rejects_by_reason": dict(sorted(summary["rejects_by_reason"].items(), key=lambda kv: (-kv[1], kv[0]))),
        "sites": [
            {
                "site_id": s,
                "label": label,
                "held_out": bool(held),
                "streams": n,
                "observations": int(obs),
                "first": _month(first) if first is not None else "-",
                "last": _month(last) if last is not None else "-",
            }
            for s, label, held, n, obs, first, last in sites
        ],
        "point_classes": dict(classes),
        "coverage": {"sites": site_ids, "months": months, "matrix": matrix},
        "quality": summary["quality"],
        "thresholds": summary["thresholds"],
        "weekly_coverage_p10_p50_p90": summary["weekly_coverage_p10_p50_p90"],
        "duplicate_streams": summary.get("duplicate_streams", []),
    }


def benchmark_overview(ws: Workspace, corpus: str) -> dict[str, Any]:
    """The released benchmark (release.json's counts) beside the stages that made it: tasks, episodes, audit."""
    tasks = tasks_summary(ws, corpus)
    episodes = episodes_summary(ws, corpus)
    audit = audit_summary(ws, corpus)
    dropped = read_manifest(ws.stage_dir(corpus, "episodes")).details.get("dropped", {})
    released = json.loads((ws.stage_dir(corpus, "release") / "release.json").read_text(encoding="utf-8"))["counts"]
    families = sorted(tasks["counts"])
    return {
        "families": families,
        "family_split": {f: released["family_x_split"].get(f, {}) for f in families},
        "tasks_family_split": {f: tasks["counts"][f] for f in families},
        "released_split": released["split"],
        "pools": [
            {
                "family": f,
                "pool": tasks["pools"][f],
                "predicates": tasks["predicates"][f],
                "eligible": tasks["eligible"][f],
                "selected": sum(tasks["counts"][f].values()),
                "streams_left_out": {k: v for k, v in tasks["streams_left_out"][f].items() if v},
            }
            for f in families
        ],
        "streams_in_no_family": tasks["streams_in_no_family"],
        "missing_families": tasks["missing_families"],
        "interaction_modes": dict(sorted(released["interaction_mode"].items(), key=lambda kv: (-kv[1], kv[0]))),
        "commitment_outcomes": episodes["commitment_outcomes"],
        "commitment_released": released["commitment_outcome"],
        "dropped_at_episodes": dropped,
        "candidates": audit["candidates"],
        "released": audit["released"],
        "excluded_by_policy": audit["excluded_by_policy"],
        "completions_on_candidates": audit["completions_on_candidates"],
        "policies": audit["policies"],
        "controls": audit["controls"],
        "artifact_probe": audit.get("artifact_probe"),
        "gates": [
            {
                "name": name,
                "status": status,
                "figures": figures(gate_of(name, audit)),
                "rule": gate_of(name, audit)["rule"],
            }
            for name, status in audit.get("gates", {}).items()
        ],
    }


def _label(header: TraceHeader, path: Path, taken: set[str]) -> str:
    """A name for the trace's agent (its kind and model), unique within the report (the same agent twice is told apart
    by file)."""
    name = agent_name(header)
    base = name if header.repeat == 1 else f"{name} x{header.repeat}"
    label, n = base, 1
    while label in taken:
        n += 1
        label = f"{base} ({path.stem})" if n == 2 else f"{base} ({path.stem} #{n - 1})"
    taken.add(label)
    return label


def trace_result(path: Path, label: str, scored: Scored, store: ToolStore, keywords: Lexicon) -> TraceResult:
    (summary,) = trace_summaries([(path, scored)])  # one trace: one identity
    played = scored.played
    modes_of = {(p.episode.id, p.run): failure_modes_of(p.episode, p.turns, store, keywords) for p in played}
    modes = Counter(m for found in modes_of.values() for m in found)
    k = next((int(key.removeprefix("pass^")) for key in summary if key.startswith("pass^")), 0)
    return TraceResult(
        path=path,
        label=label,
        header=scored.header,
        summary=summary,
        failure_modes=dict(sorted(modes.items(), key=lambda kv: (-kv[1], kv[0]))),
        k=k,
        played=played,
        modes_of=modes_of,
    )


def read_traces(ws: Workspace, paths: list[Path], corpora: list[str]) -> dict[str, list[tuple[Path, Scored]]]:
    """Traces scored, grouped by corpus; a trace of a corpus not in the report is an error naming it (checked before
    scoring)."""
    for path in paths:
        corpus = trace_header(path).corpus
        if corpus not in corpora:
            raise ReportError(
                f"{path}: a trace of corpus {corpus}, which this report does not cover "
                f"(it covers {', '.join(corpora) or 'no corpus'}); add --corpus {corpus}"
            )
    grouped: dict[str, list] = defaultdict(list)
    for path in paths:
        scored = scored_trace(ws, path)
        grouped[scored.header.corpus].append((path, scored))
    return grouped


def results_table(traces: list[tuple[Path, Scored]]) -> list[LeaderboardRow]:
    """One row per agent identity, corpus and split, as the leaderboard ranks them (partial rows never ranked)."""
    return leaderboard_rows(trace_summaries(traces))


def _runs_by_episode(played: list[Played]) -> dict[str, list[Played]]:
    """Every scored run of a trace per episode, in run order."""
    runs: dict[str, list[Played]] = defaultdict(list)
    for p in sorted(played, key=lambda p: p.run):
        runs[p.episode.id].append(p)
    return runs


def corpus_report(ws: Workspace, corpus: str, traces: list[tuple[Path, Scored]]) -> CorpusReport:
    keywords = slot_keywords(load_episodes_config(ws))
    release_test = ws.stage_dir(corpus, "release") / "test.jsonl"
    store = ToolStore.for_corpus(ws, corpus)
    try:
        taken: set[str] = set()
        episodes = load_episodes(release_test)
        # the report's longest wait (every run of every trace replayed): a bar on a terminal, nothing in CI logs
        with bar(f"report {corpus}: traces, then test episodes", len(traces) + len(episodes)) as progress:
            results = []
            for path, scored in traces:
                results.append(trace_result(path, _label(scored.header, path, taken), scored, store, keywords))
                progress.advance()
            runs_of = [(r, _runs_by_episode(r.played)) for r in results]
            entries = []
            for episode in episodes:
                entries.append(_entry(episode, runs_of, store, keywords))
                progress.advance()
    finally:
        store.close()
    mapping = load_mapping(ws.corpus_config(corpus))
    return CorpusReport(
        name=corpus,
        title=mapping.title,
        overview=corpus_overview(ws, corpus),
        benchmark=benchmark_overview(ws, corpus),
        traces=results,
        episodes=entries,
    )


def _entry(episode, runs_of: list, store: ToolStore, keywords: dict) -> EpisodeEntry:
    """One test episode of the report: its gold path and every run of every trace, side by side."""
    gold = gold_records(episode, store, keywords)
    agents = [
        played_conversation(
            result.label,
            p,
            gold,
            keywords,
            result.modes_of[(episode.id, p.run)],
            run=p.run if result.header.repeat > 1 else None,
        )
        for result, runs in runs_of
        for p in runs.get(episode.id, [])
    ]
    return EpisodeEntry(episode, gold_conversation(episode, gold), agents)
