"""Power curves as matplotlib Figures: Likert (Card et al. 2020, Fig. 6), accuracy (Figs. 3, 7, 8),
head-to-head and BLEU.

Every ``plot_*`` function takes a result table (one row per design cell, as the
planners return it) and returns a :class:`matplotlib.figure.Figure`. Nothing
here imports pyplot or selects a backend, so a notebook keeps its own; show the
figure by displaying it, or write it with :func:`save_figure`.

The layout is shared: power against a design size (x), a line per effect with
its 95% band, a panel per remaining design value, at most three panels a row
(more wrap onto further, balanced rows), optional Type-M / Type-S rows under
each power row, the target power drawn and named in the legend, the legend
outside the panels and its title giving the effect's unit. The y axis runs
slightly past 1 so curves at power 1 stay visible, and x tick labels are
thinned until they do not overlap.
"""
from __future__ import annotations

import itertools
import math
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, NullLocator

from .errors import InputError
from .io import PLOT_FORMATS, check_output_path, write_outputs
from .validation import check_target_power

#: characters per line of a panel title in :func:`plot_intervals` (a 4.2-inch panel at 9 pt)
TITLE_CHARS = 52

__all__ = [
    "check_dpi",
    "figure_writer",
    "plot_accuracy_power",
    "plot_bleu_power",
    "plot_cost_frontier",
    "plot_h2h_power",
    "plot_intervals",
    "plot_likert_power",
    "plot_power",
    "save_figure",
]

METRIC_LABELS = {"power": "power", "type_m": "Type-M (exaggeration)", "type_s": "Type-S (wrong sign)"}
PANEL_WIDTH, PANEL_HEIGHT, MAX_COLUMNS = 3.4, 2.6, 3
DEFAULT_DPI = 120


def plot_power(
    table: pd.DataFrame,
    x: str,
    line: str,
    panels: Sequence[str] = (),
    *,
    x_label: str,
    line_label: str,
    panel_title: Callable[[dict[str, Any]], str] | None = None,
    line_format: Callable[[Any], str] = "{:g}".format,
    metrics: Sequence[str] = ("power",),
    target: float = 0.8,
    title: str = "",
) -> Figure:
    """Curves of ``metrics`` (power, type_m, type_s) against column ``x``, a line per ``line`` value.

    A panel per combination of the ``panels`` columns; ``line_label`` titles the
    legend (say the effect's unit there). A metric absent from the table or all
    missing is left out. The scenario functions below are this with their columns.
    """
    _check_table(table, [x, line, *panels, "power", *metrics, "ci_low", "ci_high"])
    check_target_power(target)
    if table["power"].isna().all():
        raise InputError("the table has no power values to draw")
    metrics = [m for m in metrics if table[m].notna().any()]
    if table.duplicated([*panels, line, x]).any():
        raise InputError(f"several rows per point: one {x} x {line} x {' x '.join(panels) or 'panel'} cell each")
    keys = sorted(table[list(panels)].drop_duplicates().itertuples(index=False, name=None)) if panels else [()]
    rows = math.ceil(len(keys) / MAX_COLUMNS)
    columns = math.ceil(len(keys) / rows)
    fig = Figure(figsize=(PANEL_WIDTH * columns + 2.4, PANEL_HEIGHT * rows * len(metrics) + (0.4 if title else 0)),
                 layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(rows * len(metrics), columns)
    first: dict[str, Axes] = {}
    bottoms: list[Axes] = []
    handles: dict[str, Artist] = {}
    for p, key in enumerate(keys):
        sub = table[np.logical_and.reduce([table[c] == v for c, v in zip(panels, key)])] if panels else table
        for m, metric in enumerate(metrics):
            row = (p // columns) * len(metrics) + m
            ax = fig.add_subplot(grid[row, p % columns], sharex=first.get("x"), sharey=first.get(metric))
            first.setdefault("x", ax)
            first.setdefault(metric, ax)
            for value, g in sub.groupby(line, sort=True):
                g = g.sort_values(x)
                drawn = ax.plot(g[x], g[metric], marker="o", ms=3, label=line_format(value))[0]
                handles.setdefault(str(drawn.get_label()), drawn)
                if metric == "power" and (g["ci_high"] > g["ci_low"]).any():
                    ax.fill_between(g[x], g["ci_low"], g["ci_high"], color=drawn.get_color(), alpha=0.2, lw=0)
                if metric == "power" and "conditional_power" in g:  # an assurance table: power is the assurance
                    cond = ax.plot(g[x], g["conditional_power"], ls=":", lw=1.2, color=drawn.get_color(),
                                   label="dotted: conditional power (at the estimate)")[0]
                    handles.setdefault(str(cond.get_label()), cond)
            _reference_line(ax, metric, target, handles)
            ax.grid(alpha=0.3)
            if m == 0 and panel_title is not None:
                ax.set_title(panel_title(dict(zip(panels, key))), fontsize=10)
            if p % columns == 0:
                ax.set_ylabel("assurance" if metric == "power" and "assurance" in table else METRIC_LABELS[metric])
            else:
                ax.tick_params(labelleft=False)
            if m == len(metrics) - 1:
                ax.set_xlabel(x_label)
                bottoms.append(ax)
            else:
                ax.tick_params(labelbottom=False)
    if "power" in first:
        first["power"].set_ylim(-0.02, 1.04)
        first["power"].set_yticks(np.linspace(0, 1, 6))
    labels = [k for k in handles if not _is_reference(k)] + [k for k in handles if _is_reference(k)]
    legend = fig.legend([handles[k] for k in labels], labels, loc="outside right upper", title=line_label,
                        fontsize=8, title_fontsize=8, alignment="left")
    _fit_x_ticks(fig, first["x"], bottoms, np.sort(table[x].unique()))
    if title:
        _fit_title(fig, legend, title)
    return fig


def save_figure(fig: Figure, path: str | Path, dpi: float = DEFAULT_DPI) -> Path:
    """Write ``fig`` atomically (never half a file) in the format of the suffix: .png, .pdf or .svg."""
    p = check_output_path(path, PLOT_FORMATS, "the plot file")
    write_outputs([(p, figure_writer(fig, p, dpi))])
    return p


def figure_writer(fig: Figure, path: str | Path, dpi: float = DEFAULT_DPI) -> Callable[[Path], object]:
    """A function writing ``fig`` to a temporary file in the format of ``path``'s suffix
    (for :func:`humaneval_power.io.write_outputs`, which writes several outputs all or none)."""
    check_dpi(dpi)
    suffix = Path(path).suffix.lower()
    if suffix not in PLOT_FORMATS:
        raise InputError(f"a plot file must end in {', '.join(PLOT_FORMATS)}, got {Path(path).name!r}")
    return lambda tmp: fig.savefig(tmp, format=suffix.lstrip("."), dpi=dpi)


def check_dpi(dpi: Any) -> float:
    """A resolution in dots per inch, 10 to 2400 (.png; vector formats embed it only for bands)."""
    if isinstance(dpi, bool) or not isinstance(dpi, (int, float)) or not 10 <= dpi <= 2400:
        raise InputError(f"dpi must be a number from 10 to 2400, got {dpi!r}")
    return float(dpi)


def plot_likert_power(table: pd.DataFrame, *, scale: tuple[float, float] | None = (0.0, 1.0), target: float = 0.8,
                      type_m: bool = False, title: str = "") -> Figure:
    """Power against items, a line per effect, a panel per workers (Card et al. Fig. 6).

    With a single number of items and several of workers, power is drawn
    against workers instead. ``table`` is the output of
    :func:`humaneval_power.scenarios.likert.likert_power`; ``scale`` is the
    parameters' rating scale (``LikertParams.scale``), named in the legend
    since effects are mean-rating differences on it.
    """
    _check_table(table, ["items", "workers"])
    by_workers = table["items"].nunique() == 1 < table["workers"].nunique()
    x, panel = ("workers", "items") if by_workers else ("items", "workers")
    unit = f"{scale[0]:g}–{scale[1]:g} scale" if scale else "the parameters' scale"
    panels: tuple[str, ...] = (panel,)
    if "ratings_per_item" in table and table["ratings_per_item"].nunique() > 1:
        panels = (panel, "ratings_per_item")
    if "model" in table and table["model"].nunique() > 1:  # --model both: a panel per analysis
        panels = (*panels, "model")
    ordinal = "mean_difference" in table  # ordinal ratings: the effect is a latent shift

    def name(k: dict[str, Any]) -> str:
        per = f", {k['ratings_per_item']} per item" if "ratings_per_item" in k else ""
        model = f", {k['model']} model" if "model" in k else ""
        return f"{k[panel]} {panel}{per}{model}"

    label = "effect\n(latent shift)" if ordinal else f"effect\n(mean-rating difference,\n{unit})"
    return plot_power(table, x, "effect", panels, x_label=x, line_label=label,
                      panel_title=name, metrics=_metrics(type_m), target=target, title=title)


def plot_cost_frontier(table: pd.DataFrame, *, target: float = 0.8, title: str = "") -> Figure:
    """Power against cost of the designs a budget search evaluated (``likert_budget``), with their
    95% intervals, the target line and the cost-power frontier (the most power for the money so far)."""
    _check_table(table, ["cost", "power", "ci_low", "ci_high"])
    check_target_power(target)
    t = table.sort_values(["cost", "power"])
    fig = Figure(figsize=(6.4, 4.0), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    # --model both: each analysis's designs and frontier
    groups = list(t.groupby("model", sort=False)) if "model" in t and t["model"].nunique() > 1 else [("", t)]
    for (model, g), (dots, line, star) in zip(groups, (("C0", "C1", "C3"), ("C2", "C4", "C5"))):
        name = f"{model}: " if model else ""
        ax.errorbar(g["cost"], g["power"], yerr=[g["power"] - g["ci_low"], g["ci_high"] - g["power"]], fmt="o",
                    ms=4, alpha=0.6, color=dots, label=f"{name}designs evaluated (95% CI)")
        ax.step(g["cost"], g["power"].cummax(), where="post", color=line, label=f"{name}frontier: most power for "
                                                                               "the cost")
        reached = g[g["power"] >= target]
        if len(reached):
            r = reached.iloc[0]
            ax.plot([r["cost"]], [r["power"]], "*", ms=14, color=star,
                    label=f"{name}cheapest reaching it: {r['cost']:g}\n({int(r['items'])} items, "
                          f"{int(r['workers'])} workers, {int(r['ratings_per_item'])} per item)")
    ax.axhline(target, color="0.3", ls="--", lw=1, label=f"target power {target:g}")
    ax.set_xlabel("cost")
    ax.set_ylabel("power")
    ax.set_ylim(0, 1.02)
    ax.legend(loc="lower right", fontsize=8)
    if title:
        ax.set_title(title, loc="left")
    return fig


def plot_accuracy_power(table: pd.DataFrame, *, target: float = 0.8, type_m: bool = True, type_s: bool = True,
                        title: str = "") -> Figure:
    """Power (and Type-M, Type-S rows) against the accuracy difference (Card et al. Figs. 3, 7, 8).

    A panel per agreement, a line per test-set size n. ``table`` is
    ``results_table`` of McNemar cells (``hepower accuracy power``).
    """
    _check_table(table, ["delta"])
    return plot_power(table.assign(delta_points=100 * table["delta"]), "delta_points", "n", ("agreement",),
                      x_label="difference in accuracy (points)", line_label="test-set size",
                      line_format="n = {:,}".format,
                      panel_title=lambda k: f"agreement {k['agreement']:.4g}", metrics=_metrics(type_m, type_s),
                      target=target, title=title)


def plot_h2h_power(table: pd.DataFrame, *, target: float = 0.8, type_m: bool = False, title: str = "") -> Figure:
    """Head-to-head power curves, a line per effect.

    Independent judgments (:func:`~humaneval_power.scenarios.headtohead.h2h_power`):
    power against the number of judgments n, a line per P(B wins), a panel per
    P(tie). Repeated judgments (``h2h_mixed_power``, GLMM): power against items,
    a line per log-odds effect (with its P(win) for a typical worker and item),
    a panel per workers and judgments per item.
    """
    if "workers" in table:
        return plot_power(table, "items", "effect", ("workers", "judgments_per_item"), x_label="items",
                          line_label="effect\n(log-odds of B winning;\nP(win) for a typical\nworker and item)",
                          line_format=lambda lo: f"{lo:.3g} (P(win) {1 / (1 + math.exp(-lo)):.3g})",
                          panel_title=lambda k: f"{k['workers']} workers, {k['judgments_per_item']} judgments/item",
                          metrics=_metrics(type_m), target=target, title=title)
    return plot_power(table, "n", "p_win", ("p_tie", "ties"), x_label="judgments (n)",
                      line_label="effect\n(P(win): probability\na judgment prefers B)",
                      panel_title=lambda k: f"P(tie) {k['p_tie']:g}, ties: {k['ties']}" if k["p_tie"] else "no ties",
                      metrics=_metrics(type_m), target=target, title=title)


def plot_bleu_power(table: pd.DataFrame, *, x: str | None = None, target: float = 0.8, type_m: bool = False,
                    title: str = "") -> Figure:
    """BLEU randomization-test power against test-set size n or the difference delta (BLEU points).

    ``table`` is the output of :func:`humaneval_power.scenarios.bleu.bleu_power`.
    ``x`` is ``"n"`` or ``"delta"`` (default: whichever has more values; the
    other gives the lines); a panel per swap-effect setting (P0, b0).
    """
    _check_table(table, ["n", "delta"])
    if x is None:
        x = "delta" if table["delta"].nunique() > table["n"].nunique() else "n"
    if x not in ("n", "delta"):
        raise InputError(f"x must be 'n' or 'delta', got {x!r}")
    by_n = x == "n"
    return plot_power(table, x, "delta" if by_n else "n", ("p0", "b0"),
                      x_label="test-set size n (sentences)" if by_n else "difference in BLEU (points)",
                      line_label="difference\n(BLEU points)" if by_n else "test-set size\n(sentences)",
                      line_format="{:g}".format if by_n else "n = {:,}".format,
                      panel_title=lambda k: f"P0 {k['p0']:g}, b0 {k['b0']:g}", metrics=_metrics(type_m),
                      target=target, title=title)


def plot_intervals(panels: Sequence[tuple[pd.DataFrame, str, str, float | None]], *, title: str = "") -> Figure:
    """Point estimates with intervals, one row each, side by side: e.g. marginal means and a forest plot of
    contrasts (``hepower analyze --plot``).

    Each panel is ``(table, panel title, x label, reference)``: ``table`` has columns ``label``,
    ``estimate``, ``ci_low``, ``ci_high`` and optionally ``significant`` (drawn filled; others hollow) and
    ``annotation`` (text right of the panel on each row, e.g. compact letters);
    ``reference`` draws a vertical line there (e.g. 0 for differences), or None.
    """
    for table, *_ in panels:
        _check_table(table, ["label", "estimate", "ci_low", "ci_high"])
    rows = max(len(t) for t, *_ in panels)
    height = min(1.2 + 0.22 * rows, 40.0)
    fig = Figure(figsize=(4.2 * len(panels), height), layout="constrained")
    FigureCanvasAgg(fig)
    for ax, (table, name, x_label, ref) in zip(fig.subplots(1, len(panels), squeeze=False)[0], panels):
        y = np.arange(len(table))[::-1]
        est = table["estimate"].to_numpy(float)
        err = np.vstack([est - table["ci_low"].to_numpy(float), table["ci_high"].to_numpy(float) - est])
        sig = table["significant"].to_numpy(bool) if "significant" in table else np.ones(len(table), bool)
        ax.errorbar(est, y, xerr=err, fmt="none", ecolor="C0", elinewidth=1.2, capsize=2)
        ax.plot(est[sig], y[sig], "o", color="C0", ms=4)
        ax.plot(est[~sig], y[~sig], "o", mfc="white", mec="C0", ms=4)
        if ref is not None:
            ax.axvline(ref, color="0.5", lw=0.8, ls="--")
        ax.set_yticks(y, [str(v) for v in table["label"]], fontsize=8 if len(table) < 30 else 6)
        if "annotation" in table:
            for row, text in zip(y, table["annotation"]):
                ax.annotate(str(text), (1.02, row), xycoords=("axes fraction", "data"), va="center", ha="left",
                            fontsize=8 if len(table) < 30 else 6, family="monospace")
        ax.set_ylim(-0.7, len(table) - 0.3)
        ax.set_title(textwrap.fill(name, TITLE_CHARS), fontsize=9, loc="left")  # a long title wraps, never cut
        ax.set_xlabel(x_label, fontsize=9)
        ax.grid(axis="x", color="0.9")
    if title:
        fig.suptitle(title, x=0.01, ha="left", fontsize=10)
    return fig


def _metrics(type_m: bool, type_s: bool = False) -> tuple[str, ...]:
    return ("power",) + ("type_m",) * type_m + ("type_s",) * type_s


def _check_table(table: Any, columns: Sequence[str]) -> None:
    if not isinstance(table, pd.DataFrame) or table.empty:
        raise InputError("plots need a non-empty result table (a DataFrame, one row per design cell)")
    missing = [c for c in dict.fromkeys(columns) if c not in table]
    if missing:
        raise InputError(f"the table has no column {', '.join(map(repr, missing))}: is it the right planner's output?")


def _reference_line(ax: Axes, metric: str, target: float, handles: dict[str, Artist]) -> None:
    """The target power on power panels, Type-M = 1 (no exaggeration) on Type-M panels."""
    if metric == "power":
        line = ax.axhline(target, color="0.3", ls="--", lw=1, label=f"target power {target:g}")
    elif metric == "type_m":
        line = ax.axhline(1, color="0.3", ls=":", lw=1, label="Type-M 1 (no exaggeration)")
    else:
        return
    handles.setdefault(str(line.get_label()), line)


def _is_reference(label: str) -> bool:
    return label.startswith(("target power", "Type-M 1", "dotted: conditional"))


def _fit_x_ticks(fig: Figure, ax: Axes, labelled: Sequence[Axes], values: np.ndarray) -> None:
    """x ticks readable for any grid, on ``ax`` and the panels sharing its x axis.

    A wide grid that is not evenly spaced (25, 50, ..., 800) gets a log axis,
    ticked at design values (up to 12 of them) or at 1-2-5 steps; others a
    linear axis with round ticks (MaxNLocator). Ticks are dropped until no two
    labels of the ``labelled`` panels overlap.
    """
    values = np.asarray(values, dtype=float)
    steps = np.diff(values)
    wide = len(values) > 2 and values[0] > 0 and values[-1] / values[0] >= 8
    if wide and not np.allclose(steps, steps[0], rtol=0.05):
        ax.set_xscale("log")
        ax.xaxis.set_minor_locator(NullLocator())
        candidates = _log_ticks(values)
    elif len(values) > 1:
        lo, hi = ax.get_xlim()
        integer = bool(np.allclose(values, np.round(values)))
        rounded = (MaxNLocator(bins, integer=integer, steps=[1, 2, 2.5, 5, 10]).tick_values(values[0], values[-1])
                   for bins in range(9, 0, -1))
        candidates = [[t for t in ticks if lo <= t <= hi] for ticks in rounded]
    else:
        candidates = [list(values)]
    room = math.inf
    for ticks in candidates:
        if len(ticks) <= room:
            ax.set_xticks(ticks, [f"{t:.0f}" if float(t).is_integer() else f"{t:g}" for t in ticks])
            room = min(room, _label_room(fig, labelled))
            if len(ticks) <= room:
                return


def _log_ticks(values: np.ndarray) -> list[list[float]]:
    """Candidate ticks of a log axis, densest first: design values, then 1-2-5, 1-3, 1 per decade, fewer."""
    lo, hi = values[0], values[-1]
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    nice = [[m * 10.0 ** k for k in decades for m in subs if lo <= m * 10.0 ** k <= hi]
            for subs in ((1, 2, 5), (1, 3), (1,))]
    sparse = [nice[-1][::stride] for stride in range(2, len(nice[-1]) + 1)]
    design = [list(values[::stride]) for stride in range(1, len(values) + 1)] if len(values) <= 12 else []
    return design + [ticks for ticks in nice + sparse if len(ticks) >= 2]


def _label_room(fig: Figure, axes: Sequence[Axes]) -> float:
    """How many x tick labels fit: inf if the current ones do not overlap, else an estimate from their widths."""
    fig.draw_without_rendering()
    renderer = cast(FigureCanvasAgg, fig.canvas).get_renderer()
    gap = 3 * fig.dpi / 72
    room = math.inf
    for ax in axes:
        shown = [t for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]
        boxes = sorted((t.get_window_extent(renderer) for t in shown), key=lambda b: b.x0)
        if any(a.x1 + gap > b.x0 for a, b in itertools.pairwise(boxes)):
            widest = max(b.width for b in boxes) + gap
            room = min(room, max(1, math.floor((ax.get_window_extent(renderer).width + gap) / widest)), len(boxes) - 1)
    return room


def _fit_title(fig: Figure, legend: Artist, title: str) -> None:
    """The title top left, wrapped until it clears the legend (which sits top right)."""
    text = fig.suptitle(title, x=0.01, ha="left", fontsize=10)
    for width in range(len(title), 10, -5):
        text.set_text(textwrap.fill(title, width))
        fig.draw_without_rendering()
        renderer = cast(FigureCanvasAgg, fig.canvas).get_renderer()
        if not text.get_window_extent(renderer).overlaps(legend.get_window_extent(renderer)):
            return
