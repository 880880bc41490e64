"""Plan a crowd study from a real crowd pilot: DialSummEval's Mechanical Turk ratings.

The pilot is a sparse *between* crowd design: every (dialogue, system) summary
was one HIT rated by its own 5 workers, out of 283 workers with very skewed
workloads (1 to 192 assignments). For one dimension and one pair of systems:

1. fit the crossed worker/item model to the pilot (lme4 when R is there, else
   the no-R backend) and export its parameters;
2. the pilot's own design, scaled to its 100 items: the effect it had 80% power
   to detect (its *sensitivity*) and the Type-I error of its test on that design;
3. a new study: the cheapest *between* design (items x k, a pool of 40) reaching
   80% power for a 0.05 difference (0.2 points on 1-5) at $0.10 per rating plus a
   20% platform fee, drawing workers with the pilot's skewed workloads; the
   cost-power frontier is drawn to out/crowd_frontier.png.

Run: python examples/plan_crowd_amt.py [DATA_DIR] [--sims N] [--jobs J]   (default ../shared/data, 300 sims,
the sensitivity search in this process, J processes with --jobs J; a few minutes)
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

from humaneval_power.designs import Costs, PilotDesign
from humaneval_power.fitting.model import fit_pilot
from humaneval_power.fitting.ratings import read_ratings
from humaneval_power.io import apply_filters, read_table
from humaneval_power.params import LikertParams
from humaneval_power.plots import plot_cost_frontier, save_figure
from humaneval_power.scenarios.likert import likert_budget, likert_mde, likert_power

DIMENSION, SYSTEMS = "coherence", ["A", "F"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data_dir", nargs="?", default=os.environ.get("HEPOWER_DATA", "../shared/data"))
    ap.add_argument("--sims", type=int, default=300)
    ap.add_argument("--jobs", type=int, default=1, help="processes for the sensitivity search (default 1: in this process)")
    args = ap.parse_args()
    path = Path(args.data_dir) / "dialsummeval_amt" / "ratings.csv"
    pilot = read_ratings(path, where={"dimension": DIMENSION}, systems=SYSTEMS, baseline="A", scale=(1, 5))
    from humaneval_power.fitting import lme4

    backend = "lme4" if lme4.available()[0] else "statsmodels"
    fit = fit_pilot(pilot, backend)
    print(f"== pilot: DialSummEval AMT, {DIMENSION}, {SYSTEMS[1]} vs {SYSTEMS[0]} ({backend}) ==")
    print(fit.summary())
    params = LikertParams.from_json(fit.to_params_doc())

    frame = apply_filters(read_table(path)[0], {"dimension": DIMENSION})
    design = PilotDesign.from_ratings(frame, systems=SYSTEMS, source="DialSummEval AMT")
    print(f"\n== the pilot's own design ({design.record()}) ==")
    mde = likert_mde(params, 0, design.items, design_from=design, n_sims=args.sims, seed=1, jobs=args.jobs)
    print(f"sensitivity: {mde}")
    null = likert_power(params, 0, design.items, 0.0, design_from=design, n_sims=args.sims, seed=1, jobs=1)
    print(f"Type-I error of the Satterthwaite test on this design: {null.power[0]:.3f} "
          f"[{null.ci_low[0]:.3f}, {null.ci_high[0]:.3f}] at alpha 0.05")

    counts = frame[frame.system.isin(SYSTEMS)].worker.value_counts().to_numpy(float)
    pool = 40
    workload = tuple(np.quantile(counts, np.linspace(0, 1, pool)))  # the pilot's skew, for a pool of 40
    print(f"\n== a new between-output study: {pool} workers drawn with the pilot's skewed workloads "
          f"(the busiest does {workload[-1] / workload[0]:.0f}x the least busy) ==")
    costs = Costs(per_rating=0.10, fee=0.20)
    table, best = likert_budget(params, 0.05, [100, 200, 400, 800], [pool], [1, 3, 5, 8], costs=costs,
                                presentation="between", workload=workload, n_sims=args.sims, seed=1, jobs=1)
    print(table[["items", "workers", "ratings_per_item", "cost", "power", "ci_low", "ci_high", "type_m"]]
          .to_string(index=False))
    if best.attainable:
        d = best.at.cell
        print(f"cheapest reaching 80% power: {d['items']} items x {d['ratings_per_item']} ratings per output, "
              f"${best.value:,.2f} (power {best.at.power:.3f} [{best.at.ci_low:.3f}, {best.at.ci_high:.3f}])")
    else:
        print(best)
    Path("out").mkdir(exist_ok=True)
    fig = plot_cost_frontier(table, title=f"DialSummEval AMT pilot, {DIMENSION}: 0.05 difference")
    print(f"wrote {save_figure(fig, Path('out') / 'crowd_frontier.png')}")


if __name__ == "__main__":
    main()
