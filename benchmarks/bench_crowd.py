"""Benchmark the batched no-R tier against lme4 refits on a crowd design, in one run.

Design: 3 of 15 workers per item (balanced, cyclic), 300 items, 2 systems, `within`
presentation (each item's 3 workers rate both outputs: 1,800 ratings), the coding-invariant
model ``y ~ system + (1|worker) + (1|worker:system) + (1|item) + (1|item:system)``, REML,
Satterthwaite df for the system contrast. Times ``fit_many`` on N simulated studies and
lme4 + lmerTest (looping inside R) on the first M of the same studies; prints per-study
milliseconds, the ratio, and the agreement on the common studies, as one JSON record.
Run: python benchmarks/bench_crowd.py [N=10000] [M=30]
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np

from humaneval_power.fitting import batched, lme4


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    m = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    design = batched.crowd_design(systems=2, items=300, workers=15, ratings_per_item=3,
                                  presentation="within", assignment="balanced")
    rng = np.random.default_rng(2024)
    # SDs of worker, worker:system, item, item:system, residual (Likert 1-5 like scale)
    y = batched.simulate(design, np.array([3.0, 0.1]), np.array([0.4, 0.1, 0.5, 0.15, 0.9]), n, rng)
    contrast = np.array([0.0, 1.0])
    t0 = time.perf_counter()
    fit = batched.fit_many(design, y, contrast)
    fast = time.perf_counter() - t0
    out: dict[str, object] = {
        "design": "within, balanced, 3 of 15 workers, 300 items, 2 systems",
        "ratings": design.n, "fast_studies": n, "fast_ms_per_study": 1e3 * fast / n,
        "fast_converged": int(fit.converged.sum()), "fast_singular": int(fit.singular.sum()),
        "fast_failed": int(fit.failed.sum()), "fast_mean_iterations": float(fit.iterations.mean()),
    }
    ok, why = lme4.available()
    if not ok:
        out["lme4"] = f"unavailable: {why}"
    else:
        batched.refit_lme4(design, y[:, :1], contrast)  # load the R side outside the timing
        t0 = time.perf_counter()
        ref = batched.refit_lme4(design, y[:, :m], contrast)
        slow = time.perf_counter() - t0
        sub = slice(0, m)
        out.update({
            "lme4_studies": m, "lme4_ms_per_study": 1e3 * slow / m,
            "ratio_lme4_over_fast": (slow / m) / (fast / n),
            "max_abs_estimate_diff": float(np.abs(ref["estimate"] - fit.estimate[sub, 0]).max()),
            "max_rel_se_diff": float(np.abs(ref["se"] / fit.se[sub, 0] - 1).max()),
            "max_rel_df_diff": float(np.abs(ref["df"] / fit.df[sub, 0] - 1).max()),
            "max_criterion_lme4_minus_fast": float((ref["criterion"] - fit.deviance[sub]).max()),
            "min_criterion_lme4_minus_fast": float((ref["criterion"] - fit.deviance[sub]).min()),
            "same_singular": int((ref["singular"].astype(bool) == fit.singular[sub]).sum()),
        })
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
