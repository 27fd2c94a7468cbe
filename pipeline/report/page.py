"""`telemetry-bench report`: one self-contained static HTML file (plots inline as SVG, no network) over corpora and
traces."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from contracts.episodes import OUTCOMES
from contracts.leaderboard import LeaderboardRow
from pipeline.core.canonical import atomic_write_bytes
from pipeline.core.config import corpus_names
from pipeline.core.errors import ReportError
from pipeline.core.progress import bar
from pipeline.core.workspace import Workspace
from pipeline.report import plots
from pipeline.report.collect import PARTS, CorpusReport, built_corpora, corpus_report, read_traces, results_table
from pipeline.report.failures import failure_examples
from pipeline.runtime.identity import display_name

# The page's sections, in order: id -> heading (also the navigation's link text; no two alike)
SECTIONS = {
    "results-table": "Results table",
    "corpus-overview": "Corpus overview",
    "benchmark-overview": "Benchmark overview",
    "results": "Results per trace",
    "episodes": "Episodes",
}
BAND_ORDER = ["healthy", "marginal", "low_coverage", "long_gap"]
TOP = 10


@dataclass(frozen=True)
class Plot:
    id: str
    caption: str
    svg: Markup


def _plot(name: str, caption: str, draw: Callable[..., str], *args: Any, **kwargs: Any) -> Plot:
    """A figure of the page: `draw(name, *args)` renders the SVG; the figure's id is plot-<name>."""
    return Plot(f"plot-{name}", caption, Markup(draw(name, *args, **kwargs)))


def agent_colors(reports: list[CorpusReport]) -> dict[str, str]:
    """One colour per agent for the whole report, by the order its traces were given: the same agent has the same
    colour in every corpus's plots, whichever agents a corpus has."""
    labels = dict.fromkeys(t.label for r in reports for t in r.traces)
    return {label: plots.PALETTE[index % len(plots.PALETTE)] for index, label in enumerate(labels)}


def corpus_plots(report: CorpusReport, colors: dict[str, str] | None = None) -> dict[str, list[Plot]]:
    """Plots per section of one corpus; `colors` the agents' (agent_colors), else the palette in trace order."""
    c, o, b = report.name, report.overview, report.benchmark
    overview = [
        _plot(
            f"{c}-point-classes",
            "Streams per point class",
            plots.barh,
            "Streams per point class",
            o["point_classes"],
            "streams",
        ),
        _plot(
            f"{c}-rejects",
            "Rejected raw cells by reason",
            plots.barh,
            "Rejected cells by reason",
            o["rejects_by_reason"] or {"(none)": 0},
            "cells",
            log=True,
            color=plots.PALETTE[3],
        ),
        _plot(
            f"{c}-coverage",
            "Coverage over time per site: mean month coverage of the site's streams (no data = 0)",
            plots.heatmap,
            "Coverage per site and month",
            o["coverage"]["sites"],
            o["coverage"]["months"],
            o["coverage"]["matrix"],
            "coverage",
        ),
        _plot(
            f"{c}-quality",
            "Quality bands of streams and of day, week and month windows (shares)",
            plots.stacked,
            "Quality distribution",
            o["quality"],
            BAND_ORDER,
            "share",
            plots.BAND_COLORS,
            share=True,
        ),
    ]
    benchmark = [
        _plot(
            f"{c}-family-split",
            "Released episodes per family and split",
            plots.stacked,
            "Released episodes per family and split",
            b["family_split"],
            ["train", "dev", "test"],
            "episodes",
        ),
        _plot(
            f"{c}-interaction-modes",
            "Released episodes per interaction mode (all splits)",
            plots.barh,
            "Interaction modes",
            b["interaction_modes"],
            "episodes",
        ),
        _plot(
            f"{c}-commitment",
            "Commitment outcomes: candidates (episodes stage) and released (after the audit)",
            plots.stacked,
            "Commitment mix",
            {"candidates": b["commitment_outcomes"], "released": b["commitment_released"]},
            list(OUTCOMES),
            "share",
            share=True,
        ),
        _plot(
            f"{c}-policies",
            "Shortcut policies: candidates each accomplishes, and how many it excluded",
            plots.grouped,
            "Shortcut policies on the candidates",
            list(b["policies"]),
            {
                "accomplished": [b["completions_on_candidates"][p] for p in b["policies"]],
                "excluded": [b["excluded_by_policy"][p] for p in b["policies"]],
            },
            "episodes",
            ymax=None,
        ),
    ]
    results = []
    scored = [t for t in report.traces if t.summary["runs"]]  # a trace of an empty split has nothing to plot
    colors = colors or agent_colors([report])
    agent_colours = {"colors": [colors[t.label] for t in scored]}
    if scored:
        families = sorted({f for t in scored for f in t.summary["per_family"]})
        splits = sorted({s for t in scored for s in t.summary["per_split"]})
        results = [
            _plot(
                f"{c}-accomplishment-family",
                "Accomplishment rate per family",
                plots.grouped,
                "Accomplished per family",
                families,
                {t.series: [t.summary["per_family"].get(f, 0.0) for f in families] for t in scored},
                "accomplished rate",
                **agent_colours,
            ),
            _plot(
                f"{c}-accomplishment-split",
                "Accomplishment rate per split",
                plots.grouped,
                "Accomplished per split",
                splits,
                {t.series: [t.summary["per_split"].get(s, 0.0) for s in splits] for t in scored},
                "accomplished rate",
                **agent_colours,
            ),
            _plot(
                f"{c}-part-scores",
                "The five part scores (task = final, evidence, phase and temporal together)",
                plots.grouped,
                "Part scores",
                list(PARTS),
                {t.series: [t.summary[p] for p in PARTS] for t in scored},
                "rate",
                **agent_colours,
            ),
        ]
    return {"corpus-overview": overview, "benchmark-overview": benchmark, "results": results}


def most_common(counts: list[dict[str, int]], limit: int = TOP) -> list[str]:
    """Keys by their total over all agents, most common first (ties by name), at most `limit`."""
    totals: dict[str, int] = {}
    for found in counts:
        for key, n in found.items():
            totals[key] = totals.get(key, 0) + n
    return sorted(totals, key=lambda k: (-totals[k], k))[:limit]


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("pipeline.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["num"] = lambda v: f"{v:,}" if isinstance(v, int) else (f"{v:.4g}" if isinstance(v, float) else v)
    env.filters["pct"] = lambda v: "–" if v is None else f"{100 * v:.1f}%"  # None: nothing to measure
    env.globals["display_name"] = display_name
    env.globals["failure_examples"] = failure_examples
    return env


def render(reports: list[CorpusReport], missing: list[str], table: list[LeaderboardRow]) -> str:
    families = sorted({e.episode.family for r in reports for e in r.episodes})
    agents = list(dict.fromkeys(t.label for r in reports for t in r.traces))  # in the order the traces were given
    env = _environment()
    script = env.loader.get_source(env, "browser.js")[0]
    colors, drawn = agent_colors(reports), {}
    with bar("report: plots per corpus", len(reports)) as progress:  # seconds a corpus: a bar on a terminal
        for r in reports:
            drawn[r.name] = corpus_plots(r, colors)
            progress.advance()
    return env.get_template("report.html.j2").render(
        script=Markup(script),
        script_hash=base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii"),
        reports=reports,
        plots=drawn,
        parts=PARTS,
        sections=SECTIONS,
        top=TOP,
        issues={r.name: most_common([t.summary["issues"] for t in r.traces]) for r in reports},
        modes={r.name: most_common([t.failure_modes for t in r.traces]) for r in reports},
        families=families,
        agents=agents,
        failure_modes=sorted({m for r in reports for t in r.traces for m in t.failure_modes}),
        table=table,
        missing=missing,
        version=metadata.version("telemetry-bench"),
        episode_count=sum(len(r.episodes) for r in reports),
    )


def build_report(ws: Workspace, corpora: list[str], traces: list[Path], out: Path) -> dict:
    """Write the report; return what it holds (for the CLI's summary line)."""
    names = built_corpora(ws, corpora)
    missing = [] if corpora else [n for n in corpus_names(ws) if n not in names]
    grouped = read_traces(ws, traces, names)
    reports = [corpus_report(ws, name, grouped.get(name, [])) for name in names]
    text = render(reports, missing, results_table([t for name in names for t in grouped.get(name, [])]))
    data = text.encode("utf-8")
    try:
        atomic_write_bytes(out, data)
    except OSError as exc:
        raise ReportError(f"{out}: cannot write the report ({exc.strerror or exc}); choose another --out") from exc
    return {
        "out": str(out),
        "bytes": len(data),
        "corpora": names,
        "not_built": missing,
        "traces": [str(p) for p in traces],
        "episodes": sum(len(r.episodes) for r in reports),
        "plots": text.count('<figure class="plot"'),
    }
