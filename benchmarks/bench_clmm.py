"""Benchmark the batched no-R CLMM (``clmm.fit_clmm_many``) against ``ordinal::clmm`` refits of the same studies.

Design: 3 of 15 workers per item (``CrowdDesign``, random assignment drawn once), 100 items, 2 systems, every
worker of an item rates both systems (600 ratings per study); ratings 1..5 from the CLMM
(``ordinal_process.OrdinalProcess``) with thresholds (-2, -0.7, 0.5, 1.8), latent SDs worker 0.8, item 1.0,
worker:system 0.3, item:system 0.5 and a latent shift ``delta`` of system 1.
Model: ``y ~ system + (1|worker) + (1|item) + (1|worker:system) + (1|item:system)``, logit.

Times (wall and CPU), per study: the fast tier with the default test ``t`` (one fit, its Wald statistic against
t with the latent Satterthwaite df, ``study_dfs``), with Wald z alone, and with ``--test bartlett`` (full and
null fits plus one parametric-bootstrap data set per study drawn from its fitted null model and fitted twice,
as the planner does in chunks of 200 studies) on N studies, and clmm refits (rpy2, one call per fit: with and
without the system term for the LR) of the first M: the clmm tier's ``t`` is one refit and the same df
computation, its Bartlett factor comes from the same bootstrap draws refitted by the fast path. Prints the
ratios, and on the common studies the largest |estimate|, |z| and |LR| differences and the agreement of the
decisions at alpha = 0.05, as one JSON record. ``--budget`` also times a 20-cell ordinal budget search
(``likert_budget``, 5 item counts x 4 worker pools, 3 ratings per item, a cost per worker so that the 20
designs differ in cost) with ``n_sims`` studies per full run.
Run: python benchmarks/bench_clmm.py [N=40] [M=4] [delta=0.3] [--budget N_SIMS]
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import replace

import numpy as np
from scipy import stats

from humaneval_power.designs import CrowdDesign, Layout
from humaneval_power.fitting import clmm, clmm_r
from humaneval_power.ordinal_process import OrdinalProcess, ordinal_decision, study_dfs

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
    df = study_dfs(wald.sds, groups, X)
    t_df = clock.per(n)  # the t test's df, the same computation in either tier
    t_fast_t = {k: t_wald[k] + t_df[k] for k in t_wald}
    fast = clmm.fit_clmm_many(Y, X, groups, scale=(1, 5), lrt=True, bootstrap=1, seed=1)
    t_fast = clock.per(n)
    clmm_r.available()
    ref = {k: np.full(m, np.nan) for k in ("est", "z", "lr")}
    null = np.full((m, fast.null_params.shape[1]), np.nan)
    sds_r = np.full((m, len(groups)), np.nan)
    clock = Clock()
    for j in range(m):
        f1 = clmm_r.fit_clmm_r(Y[:, j], X, groups, scale=(1, 5))
        f0 = clmm_r.fit_clmm_r(Y[:, j], None, groups, scale=(1, 5))
        ref["est"][j], ref["z"][j] = f1.beta[0], f1.beta[0] / f1.se_beta[0]
        sds_r[j] = f1.sds
        ref["lr"][j] = max(0.0, 2 * (f1.loglik - f0.loglik))
        null[j] = np.concatenate([f0.thresholds, np.abs(f0.sds)])
    t_r = clock.per(m)
    df_r = study_dfs(sds_r, groups, X)  # the clmm tier's t: its own fits' df
    clmm_t = {k: t_r[k] / 2 + t_df[k] for k in t_r}  # one refit and the df
    clock.per(m)
    boot_r = clmm.bootstrap_lr(replace(fast, null_params=null), X, groups, coef=0, scale=(1, 5), draws=1, seed=1)
    t_boot = clock.per(m)  # the clmm tier's bootstrap draws (one per study), refitted by the fast path
    clmm_default = {k: t_r[k] + t_boot[k] for k in t_r}
    dec_fast = ordinal_decision(fast, "bartlett")[:m]
    # the clmm tier's decisions: its LRs, its draws for its m studies and the fast path's for the rest of the chunk
    batch_r = replace(fast, lr=np.concatenate([ref["lr"], fast.lr[m:]]), lr_boot=np.concatenate([boot_r, fast.lr_boot[m:]]))
    dec_r = ordinal_decision(batch_r, "bartlett")[:m]
    crit = 1.959963984540054
    return {
        "design": "3 of 15 workers x 100 items x 2 systems (600 ratings), 4 random terms, logit",
        "studies": n, "clmm_studies": m, "delta": delta,
        "s_per_study_fast_default_t": t_fast_t, "s_per_study_clmm_default_t": clmm_t,
        "ratio_default_t": {k: round(clmm_t[k] / t_fast_t[k], 1) for k in t_r},
        "t_decisions_agree": int(np.sum(ordinal_decision(wald, "t", df=df)[:m]
                                        == (2 * stats.t.sf(np.abs(ref["z"]), df_r) < 0.05))),
        "power_t_fast": float(np.mean(ordinal_decision(wald, "t", df=df))),
        "s_per_study_fast_bartlett": t_fast, "s_per_study_fast_wald": t_wald,
        "s_per_study_clmm_two_refits": t_r, "s_per_study_clmm_bartlett": clmm_default,
        "ratio_bartlett": {k: round(clmm_default[k] / t_fast[k], 1) for k in t_r},
        "ratio_default_clmm_bootstrap_too": {k: round(2 * t_r[k] / t_fast[k], 1) for k in t_r},
        "ratio_wald": {k: round(t_r[k] / 2 / t_wald[k], 1) for k in t_r},
        "max_abs_diff_estimate": float(np.max(np.abs(wald.estimate[:m] - ref["est"]))),
        "max_abs_diff_z": float(np.max(np.abs(wald.z[:m] - ref["z"]))),
        "max_abs_diff_lr": float(np.max(np.abs(fast.lr[:m] - ref["lr"]))),
        "wald_decisions_agree": int(np.sum((np.abs(wald.z[:m]) > crit) == (np.abs(ref["z"]) > crit))),
        "bartlett_decisions_agree": int(np.sum(dec_fast == dec_r)),
        "power_bartlett_fast": float(np.mean(ordinal_decision(fast, "bartlett"))),
        "failed": int(fast.failed.sum()), "not_converged": int((~fast.converged & ~fast.failed).sum()),
    }


def budget(n_sims: int) -> dict:
    """Wall and CPU seconds of a 20-cell ordinal budget search (default test, fast tier, 2 processes; CPU of
    this process only: the workers' is not counted)."""
    from humaneval_power.designs import Costs
    from humaneval_power.scenarios.likert import likert_budget

    clock = Clock()
    table, answer = likert_budget(PROCESS, 0.4, items=(40, 60, 80, 100, 140), workers=(9, 12, 15, 20),
                                  ratings_per_item=(3,), costs=Costs(per_rating=1.0, per_worker=5.0), n_sims=n_sims,
                                  jobs=2)
    t = clock.per(1)
    return {"budget_search": {"cells": 20, "evaluated": len(table), "n_sims": n_sims, "wall_s": t["wall"],
                              "cpu_s_this_process": t["cpu"], "answer_cost": answer.value}}


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--budget":
        print(json.dumps(budget(int(args[1]) if len(args) > 1 else 200)))
    else:
        print(json.dumps(main(int(args[0]) if args else 40, int(args[1]) if len(args) > 1 else 4,
                              float(args[2]) if len(args) > 2 else 0.3)))
