"""Benchmark the batched no-R CLMM (``clmm.fit_clmm_many``) against ``ordinal::clmm`` refits of the same studies.

Design: 3 of 15 workers per item (``CrowdDesign``, random assignment drawn once), 100 items, 2 systems, every
worker of an item rates both systems (600 ratings per study); ratings 1..5 from the CLMM
(``ordinal_process.OrdinalProcess``) with thresholds (-2, -0.7, 0.5, 1.8), latent SDs worker 0.8, item 1.0,
worker:system 0.3, item:system 0.5 and a latent shift ``delta`` of system 1.
Model: ``y ~ system + (1|worker) + (1|item) + (1|worker:system) + (1|item:system)``, logit.

Times (wall and CPU) ``fit_clmm_many`` (Wald z, and with the LRT: two fits per study) on N studies and clmm (rpy2,
one call per study) on the first M; prints per-study seconds, the ratios and, on the common studies,
the largest |estimate| and |z| differences and the agreement of the Wald decisions at alpha = 0.05,
as one JSON record.
Run: python benchmarks/bench_clmm.py [N=40] [M=4] [delta=0.3]
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np

from humaneval_power.designs import CrowdDesign, Layout
from humaneval_power.fitting import clmm, clmm_r
from humaneval_power.ordinal_process import OrdinalProcess

PROCESS = OrdinalProcess(thresholds=(-2.0, -0.7, 0.5, 1.8), sd_worker=0.8, sd_item=1.0, sd_worker_system=0.3,
                         sd_item_system=0.5)
DESIGN = CrowdDesign(items=100, workers=15, ratings_per_item=3, assignment="random")


class Clock:
    """Wall and CPU seconds per study since the last reading (CPU: this process, embedded R included;
    on a shared machine the CPU ratio is the steadier one)."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def per(self, n: int) -> dict[str, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        out = {"wall": round((wall - self.wall) / n, 4), "cpu": round((cpu - self.cpu) / n, 4)}
        self.wall, self.cpu = wall, cpu
        return out


def main(n: int = 40, m: int = 4, delta: float = 0.3) -> dict:
    rng = np.random.default_rng(2026)
    drawn = DESIGN.draw(rng, 1)  # one random assignment, used by every study
    lay = Layout(drawn.worker[0], drawn.item, drawn.system, DESIGN.workers, DESIGN.items, DESIGN.systems)
    groups = clmm.crossed_groups(lay.worker, lay.item, lay.system)
    X = lay.system[:, None].astype(float)
    Y = PROCESS.simulate(lay, np.array([0.0, delta]), n, rng)
    clmm.fit_clmm_many(Y[:, :1], X, groups, scale=(1, 5))  # warm-up (imports), as clmm_r.available() for R
    clock = Clock()
    wald = clmm.fit_clmm_many(Y, X, groups, scale=(1, 5))
    t_wald = clock.per(n)
    both = clmm.fit_clmm_many(Y, X, groups, scale=(1, 5), lrt=True)
    t_lrt = clock.per(n)
    clmm_r.available()
    ref_est, ref_z = [], []
    clock = Clock()
    for j in range(m):
        fit = clmm_r.fit_clmm_r(Y[:, j], X, groups, scale=(1, 5))
        ref_est.append(fit.beta[0])
        ref_z.append(fit.beta[0] / fit.se_beta[0])
    t_r = clock.per(m)
    ref_est, ref_z = np.array(ref_est), np.array(ref_z)
    crit = 1.959963984540054
    return {
        "design": "3 of 15 workers x 100 items x 2 systems (600 ratings), 4 random terms, logit",
        "studies": n, "clmm_studies": m, "delta": delta,
        "s_per_study_fast_wald": t_wald, "s_per_study_fast_wald_lrt": t_lrt, "s_per_study_clmm": t_r,
        "ratio_wald": {k: round(t_r[k] / t_wald[k], 1) for k in t_r},
        "ratio_wald_lrt": {k: round(t_r[k] / t_lrt[k], 1) for k in t_r},
        "max_abs_diff_estimate": float(np.max(np.abs(wald.estimate[:m] - ref_est))),
        "max_abs_diff_z": float(np.max(np.abs(wald.z[:m] - ref_z))),
        "wald_decisions_agree": int(np.sum((np.abs(wald.z[:m]) > crit) == (np.abs(ref_z) > crit))),
        "power_wald_fast": float(np.mean(wald.p_wald < 0.05)), "power_lrt_fast": float(np.mean(both.p_lr < 0.05)),
        "failed": int(wald.failed.sum()), "not_converged": int((~wald.converged & ~wald.failed).sum()),
    }


if __name__ == "__main__":
    args = sys.argv[1:]
    print(json.dumps(main(int(args[0]) if args else 40, int(args[1]) if len(args) > 1 else 4,
                          float(args[2]) if len(args) > 2 else 0.3)))
