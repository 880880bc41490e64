"""Plots: power curves like Card et al. (2020), Figure 6."""
from __future__ import annotations

from pathlib import Path

import pandas as pd


def plot_power_curves(table: pd.DataFrame, path: str | Path, target: float = 0.8, title: str = "") -> None:
    """Power against items, a line per effect (with its 95% band), a panel per workers.

    ``table`` is the output of :func:`humaneval_power.scenarios.likert.likert_power`.
    The file is written atomically; the format follows the suffix.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .io import _atomic

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
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    suffix = Path(path).suffix.lstrip(".")
    _atomic(Path(path), lambda tmp: fig.savefig(tmp, format=suffix, dpi=120))
    plt.close(fig)
