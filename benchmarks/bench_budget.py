"""A 20-cell budget search over crowd designs: its wall time with the fast tier, and the time the same
search would take with lme4 refits (lme4 timed on a few of the same studies, in the same run).

    python benchmarks/bench_budget.py [--sims N] [--lme4-studies K]

Prints one JSON record: cells evaluated, studies simulated, seconds, seconds per study of each tier
and their ratio, and the projected lme4 time of the whole search.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=1000)
    ap.add_argument("--lme4-studies", type=int, default=10)
    args = ap.parse_args()
    from humaneval_power.designs import Costs
    from humaneval_power.processes import InvariantProcess
    from humaneval_power.scenarios.likert import likert_budget

    params = InvariantProcess(0.3, 0.15, 0.3, 0.15, 0.8)
    grid = dict(items=[50, 100, 200, 400, 800], workers=[10, 40], ratings_per_item=[1, 3])  # 20 candidates
    start = time.perf_counter()
    table, best = likert_budget(params, 0.15, **grid, costs=Costs(per_rating=0.1, fee=0.2), target_power=0.99,
                                n_sims=args.sims, seed=1, jobs=1)
    fast_s = time.perf_counter() - start
    studies = len(table) * args.sims
    out = {"cells_evaluated": len(table), "studies": studies, "seconds": round(fast_s, 1),
           "fast_ms_per_study": round(1000 * fast_s / studies, 2), "answer": str(best),
           "load_average": os.getloadavg()[0]}
    from humaneval_power.fitting import lme4

    if lme4.available()[0]:
        from humaneval_power.analyses import MixedModelAnalysis
        from humaneval_power.designs import CrowdDesign
        from humaneval_power.processes import system_means

        design = CrowdDesign(items=200, workers=40, ratings_per_item=3)
        layout = design.draw(np.random.default_rng(0), 1)
        y = params.simulate(layout, system_means(2, 0.15, (0, 1), None), args.lme4_studies, np.random.default_rng(1))
        analysis = MixedModelAnalysis("invariant", "lme4")
        analysis.fit(layout, y[:, :1])  # R start-up outside the timing
        t = time.perf_counter()
        analysis.fit(layout, y)
        lme4_s = (time.perf_counter() - t) / args.lme4_studies
        fast = MixedModelAnalysis("invariant", "fast")
        t = time.perf_counter()
        fast.fit(layout, y)
        fast_same = (time.perf_counter() - t) / args.lme4_studies
        out.update(lme4_ms_per_study_200x40x3=round(1000 * lme4_s, 1),
                   fast_ms_per_study_same_studies=round(1000 * fast_same, 2),
                   ratio_same_studies=round(lme4_s / fast_same, 1),
                   projected_lme4_minutes_for_the_search=round(studies * lme4_s / 60, 1))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
