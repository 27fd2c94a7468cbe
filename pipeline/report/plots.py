"""The report's plots: matplotlib figures rendered to inline SVG, byte-identical for identical data.

Determinism: the Agg backend, no date in the SVG metadata, text kept as text (no glyph outlines), and a
hash salt per plot so that the ids inside each SVG are stable and distinct between the SVGs of one page.
"""

from __future__ import annotations

import io
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
import numpy as np  # noqa: E402
from matplotlib.colors import LinearSegmentedColormap  # noqa: E402
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402

STYLE = {
    "text.parse_math": False,  # labels carry user text (agent names, site labels): a "$" is a dollar, never TeX
    "svg.fonttype": "none",
    "font.family": "sans-serif",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 10,
    "axes.titleweight": "bold",
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.axisbelow": True,
}
PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"]
BAND_COLORS = {"healthy": "#59a14f", "marginal": "#edc948", "low_coverage": "#f28e2b", "long_gap": "#e15759"}
COVERAGE = LinearSegmentedColormap.from_list("coverage", ["#f7f7f7", "#c6dbef", "#4292c6", "#08306b"])
WIDTH = 7.2
METADATA = re.compile(r"\s*<metadata>.*?</metadata>", re.S)
ID = re.compile(r'(\sid)="([^"]+)"')
REF = re.compile(r'(url\(|href=")#([^)"]+)')
SIZE = re.compile(r'<svg([^>]*?) width="([\d.]+)pt" height="([\d.]+)pt"')


def _svg(fig: plt.Figure, plot_id: str) -> str:
    """The figure as an <svg> element to inline in HTML: ids made unique to this plot, no XML prolog or RDF metadata."""
    buffer = io.StringIO()
    with plt.rc_context({"svg.hashsalt": plot_id}):
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight", pad_inches=0.2)
    plt.close(fig)
    text = buffer.getvalue()
    svg = METADATA.sub("", text[text.index("<svg") :])
    # matplotlib numbers its ids per figure (figure_1, patch_1, ...): prefix them so that the SVGs of one page never
    # clash.
    svg = ID.sub(lambda m: f'{m[1]}="{plot_id}-{m[2]}"', svg)
    svg = REF.sub(lambda m: f"{m[1]}#{plot_id}-{m[2]}", svg)
    # Fixed pixel sizes would overflow narrow screens: scale with the page instead.
    return SIZE.sub(
        lambda m: (
            f'<svg{m[1]} width="{m[2]}pt" height="{m[3]}pt" style="max-width:100%;height:auto" role="img" '
            f'aria-labelledby="plot-{plot_id}-caption"'
        ),
        svg,
        count=1,
    )


def _plain_numbers(axis: matplotlib.axis.Axis) -> None:
    """Log-axis ticks as plain numbers (1, 10, 1,000): the default formatter writes TeX, which stays literal text when
    math parsing is off (as it is here, for user text)."""
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def value_label(value: float, whole: bool) -> str:
    """A bar's value as printed at its end: "0" for an empty bar (which has no height to see), whole numbers with
    thousands separators, other values with two decimals."""
    if value == 0:
        return "0"
    return f"{value:,.0f}" if whole else f"{value:.2f}"


def _figure(height: float) -> tuple[plt.Figure, plt.Axes]:
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(WIDTH, height))
    return fig, ax


def barh(
    plot_id: str, title: str, counts: dict[str, float], xlabel: str, log: bool = False, color: str = PALETTE[0]
) -> str:
    """Horizontal bars, one per key, largest on top, with the value printed at the bar's end."""
    with plt.rc_context(STYLE):
        labels = list(counts)[::-1]
        values = [counts[k] for k in labels]
        fig, ax = _figure(0.6 + 0.28 * max(1, len(labels)))
        bars = ax.barh(labels, values, color=color)
        ax.bar_label(bars, labels=[value_label(v, float(v).is_integer()) for v in values], padding=3, fontsize=8)
        positive = [v for v in values if v > 0]
        if log and positive and max(positive) > 100 * min(positive):  # log only where counts span orders of magnitude
            ax.set_xscale("log")
            _plain_numbers(ax.xaxis)
            xlabel += " (log scale)"
        ax.set_xlabel(xlabel)
        ax.set_title(title, loc="left")
        ax.grid(axis="y", visible=False)
        ax.margins(x=0.12)
        return _svg(fig, plot_id)


def stacked(
    plot_id: str,
    title: str,
    rows: dict[str, dict[str, float]],
    order: list[str],
    xlabel: str,
    colors: dict[str, str] | None = None,
    share: bool = False,
) -> str:
    """One horizontal bar per row, stacked by `order`; as shares of the row total when `share`."""
    with plt.rc_context(STYLE):
        labels = list(rows)[::-1]
        fig, ax = _figure(0.9 + 0.3 * max(1, len(labels)))
        left = np.zeros(len(labels))
        for index, key in enumerate(order):
            values = np.array([float(rows[r].get(key, 0)) for r in labels])
            if share:
                totals = np.array([max(1.0, float(sum(rows[r].values()))) for r in labels])
                values = values / totals
            color = (colors or {}).get(key, PALETTE[index % len(PALETTE)])
            ax.barh(labels, values, left=left, color=color, label=key)
            left += values
        ax.set_xlabel(xlabel)
        ax.set_title(title, loc="left")
        ax.grid(axis="y", visible=False)
        ax.legend(
            ncols=min(4, len(order)),
            fontsize=8,
            loc="upper left",
            bbox_to_anchor=(0, -0.18 - 0.5 / max(1, len(labels))),
            frameon=False,
        )
        return _svg(fig, plot_id)


def grouped(
    plot_id: str,
    title: str,
    groups: list[str],
    series: dict[str, list[float]],
    ylabel: str,
    ymax: float | None = 1.0,
    colors: list[str] | None = None,
) -> str:
    """Vertical bars: one group per entry of `groups`, one bar per series (e.g. per agent) inside a group; `colors`
    gives each series its colour (in order), so that an agent keeps its colour from plot to plot and corpus to corpus,
    else the palette in order."""
    with plt.rc_context(STYLE):
        fig, ax = _figure(3.0)
        n = max(1, len(series))
        width = 0.8 / n
        x = np.arange(len(groups))
        counts = ymax is None and all(float(v).is_integer() for values in series.values() for v in values)
        every = len(groups) * n <= 15  # room for every bar's value; else only the empty bars', which show nothing else
        for index, (name, values) in enumerate(series.items()):
            bars = ax.bar(
                x - 0.4 + width * (index + 0.5),
                values,
                width,
                label=name,
                color=colors[index] if colors else PALETTE[index % len(PALETTE)],
            )
            labels = [value_label(v, counts) if every or v == 0 else "" for v in values]
            ax.bar_label(bars, labels=labels, padding=2, fontsize=7)
        ax.set_xticks(x, groups, rotation=30 if max((len(g) for g in groups), default=0) > 8 else 0, ha="right")
        if ymax is not None:
            ax.set_ylim(0, ymax * 1.12)
        ax.set_ylabel(ylabel)
        ax.set_title(title, loc="left")
        ax.grid(axis="x", visible=False)
        if n > 1 or list(series) != [""]:
            ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return _svg(fig, plot_id)


def heatmap(
    plot_id: str, title: str, rows: list[str], columns: list[str], matrix: list[list[float]], label: str
) -> str:
    """Rows x columns of values in [0, 1] as coloured cells (vector rectangles), with a colour bar."""
    with plt.rc_context(STYLE):
        fig, ax = _figure(0.9 + 0.32 * max(1, len(rows)))
        data = np.array(matrix, dtype=float) if rows and columns else np.zeros((1, 1))
        mesh = ax.pcolormesh(data, cmap=COVERAGE, vmin=0.0, vmax=1.0, edgecolors="white", linewidth=0.3)
        ax.set_yticks(np.arange(len(rows)) + 0.5, rows)
        ax.invert_yaxis()
        step = max(1, len(columns) // 12)
        ticks = list(range(0, len(columns), step))
        ax.set_xticks([t + 0.5 for t in ticks], [columns[t] for t in ticks], rotation=45, ha="right")
        ax.grid(False)
        ax.set_title(title, loc="left")
        fig.colorbar(mesh, ax=ax, label=label, fraction=0.03, pad=0.02)
        return _svg(fig, plot_id)
