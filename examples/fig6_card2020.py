"""Reproduce Card et al. (2020), Figure 6, with the `fast` tier.

Their simulations used the card2020 test (ML fit, significant iff t > 1.96),
+-1 coding and 200 simulated studies per cell; here every cell gets 4,000.
Effects are printed in both codings: ours (mean difference) = 2 x their diff.
Writes out/fig6_card2020-high.png and out/fig6_card2020-low.png and prints the
cells the paper quotes next to ours, with the Monte-Carlo standard errors.

Run: python examples/fig6_card2020.py   (about 5 seconds)
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from humaneval_power.params import get_preset
from humaneval_power.plots import plot_likert_power, save_figure
from humaneval_power.scenarios.likert import likert_power

PAPER = {  # (preset, workers, items, their diff) -> power read from the paper (200 sims)
    ("card2020-high", 3, 100, 0.05): 0.27, ("card2020-high", 3, 100, 0.10): 0.555,
    ("card2020-high", 3, 100, 0.15): 0.75, ("card2020-high", 3, 100, 0.20): 0.885,
    ("card2020-high", 10, 100, 0.05): 0.315, ("card2020-high", 10, 100, 0.10): 0.795,
    ("card2020-low", 3, 100, 0.05): 0.60, ("card2020-low", 3, 100, 0.10): 0.945,
}


def main(out_dir: str = "out", sims: int = 4000) -> None:
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    diffs = [0.05, 0.10, 0.15, 0.20]
    items = [25, 50, 100, 200, 400, 800]
    print(f"{'preset':14} {'W':>3} {'I':>4} {'diff(+-1)':>9} {'effect':>6} {'paper':>6} {'ours':>6} {'z':>5}")
    for preset in ("card2020-high", "card2020-low"):
        table = likert_power(get_preset(preset), [3, 10], items, [2 * d for d in diffs], test="card2020",
                             n_sims=sims, seed=2020)
        fig = plot_likert_power(table, title=f"{preset}, card2020 test (effect = 2 x Card et al.'s diff)")
        save_figure(fig, Path(out_dir) / f"fig6_{preset}.png")
        for (p, w, i, d), paper in PAPER.items():
            if p != preset:
                continue
            ours = float(table[(table.workers == w) & (table["items"] == i) & np.isclose(table.effect, 2 * d)].power.iloc[0])
            se = np.sqrt(ours * (1 - ours) / sims + paper * (1 - paper) / 200)
            print(f"{p:14} {w:>3} {i:>4} {d:>9.2f} {2 * d:>6.2f} {paper:>6.3f} {ours:>6.3f} {(ours - paper) / se:>5.1f}")
    print(f"plots written to {out_dir}/fig6_card2020-high.png and {out_dir}/fig6_card2020-low.png")


if __name__ == "__main__":
    main()
