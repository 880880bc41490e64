"""Plots: power curves like Card et al. (2020), Figure 6 (Likert) and Figures 3, 7, 8 (accuracy)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd


def plot_power_curves(table: pd.DataFrame, path: str | Path, target: float = 0.8, title: str = "") -> None:
    """Power against items, a line per effect (with its 95% band), a panel per workers.

    ``table`` is the output of :func:`humaneval_power.scenarios.likert.likert_power`.
    The file is written atomically; the format follows the suffix.
    """
    plt = _pyplot()
    workers = sorted(table["workers"].unique())
    fig, axes = plt.subplots(1, len(workers), figsize=(4.2 * len(workers), 3.6), sharey=True, squeeze=False)
    for ax, w in zip(axes[0], workers):
        sub = table[table.workers == w]
        for effect, g in sub.groupby("effect", sort=True):
            g = g.sort_values("items")
            line = ax.plot(g["items"], g["power"], marker="o", ms=3, label=f"{effect:g}")[0]
            ax.fill_between(g["items"], g["ci_low"], g["ci_high"], color=line.get_color(), alpha=0.2, lw=0)
        ax.axhline(target, color="grey", ls="--", lw=1)
        ax.set_title(f"{w} workers")
        ax.set_xlabel("items")
        ticks = sorted(sub["items"].unique())
        if len(ticks) > 1 and ticks[-1] / ticks[0] >= 8:
            ax.set_xscale("log")
        if len(ticks) <= 10:
            ax.set_xticks(ticks, [str(t) for t in ticks])
            ax.minorticks_off()
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("power")
    axes[0][-1].legend(title="effect", fontsize=8, title_fontsize=8, loc="lower right")
    _save(fig, path, title)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: str | Path, title: str) -> None:
    """Write the figure atomically in the format of the suffix."""
    from .io import _atomic

    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    suffix = Path(path).suffix.lstrip(".")
    _atomic(Path(path), lambda tmp: fig.savefig(tmp, format=suffix, dpi=120))
    fig.clf()
    _pyplot().close(fig)


def plot_accuracy_curves(table: pd.DataFrame, path: str | Path, target: float = 0.8, title: str = "") -> None:
    """Power, Type-M and Type-S against the accuracy difference (Card et al. Figs. 3, 7, 8).

    A column per agreement, a line per test-set size n. ``table`` is
    ``results_table`` of McNemar cells (``hepower accuracy power``); Type-M/S
    rows are drawn when the method gives them.
    """
    plt = _pyplot()
    agreements = sorted(table["agreement"].unique())
    metrics = [m for m in ("power", "type_m", "type_s") if m in table and table[m].notna().any()]
    labels = {"power": "power", "type_m": "Type-M (exaggeration)", "type_s": "Type-S (wrong sign)"}
    fig, axes = plt.subplots(len(metrics), len(agreements), figsize=(3.8 * len(agreements), 2.9 * len(metrics)),
                             sharex=True, sharey="row", squeeze=False)
    for j, pa in enumerate(agreements):
        sub = table[table.agreement == pa]
        for i, metric in enumerate(metrics):
            ax = axes[i][j]
            for n, g in sub.groupby("n", sort=True):
                g = g.sort_values("delta")
                line = ax.plot(100 * g["delta"], g[metric], marker="o", ms=3, label=f"n = {n:,}")[0]
                if metric == "power" and "ci_low" in g and g["ci_low"].notna().any():
                    ax.fill_between(100 * g["delta"], g["ci_low"], g["ci_high"], color=line.get_color(),
                                    alpha=0.2, lw=0)
            if metric == "power":
                ax.axhline(target, color="grey", ls="--", lw=1)
                ax.set_ylim(0, 1)
                ax.set_title(f"agreement {pa:g}")
            if metric == "type_m":
                ax.axhline(1, color="grey", ls=":", lw=1)
            ax.grid(alpha=0.3)
            if j == 0:
                ax.set_ylabel(labels[metric])
            if i == len(metrics) - 1:
                ax.set_xlabel("difference in accuracy (points)")
    axes[0][-1].legend(fontsize=8, loc="lower right")
    _save(fig, path, title)
