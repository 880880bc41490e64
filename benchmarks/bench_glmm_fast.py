"""Benchmark the fast GLMM tier (``fitting/glmm_laplace.py``) against glmer refits of the same studies, in one run.

Head-to-head judgments simulated as the GLMM planner does (``MixedJudgments.responses``), logistic GLMM
``y ~ 1 + (1|worker) + (1|item)``, Wald z at alpha = 0.05. Per design: N studies fitted by the fast tier
(one batched call), the first M of them by glmer inside R (the lme4 tier's ``refit_glmm_many``); prints
per-study milliseconds of each and their ratio (wall time, and CPU time of this process, which also runs R:
the CPU ratio does not depend on the machine's load), the agreement on the common studies (estimate, SE, z,
decisions) and the power of each with its Monte-Carlo SE, one JSON record per design.
Run: python benchmarks/bench_glmm_fast.py [N=400] [M=200] [design ...]

Type-I error: ``python benchmarks/bench_glmm_fast.py typeI [N=20000] [M=1000] [null design ...]``: null
studies (log-odds 0), rejection rates at alpha = 0.05 of glmer's Wald z on the first M and, on the same M
and on all N, of the fast tier's z, LRT, `t` (z against t, Satterthwaite df at most workers - 1) and t(workers - 1).
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np

from humaneval_power.fitting.glmm_laplace import fit_glmm_laplace
from humaneval_power.fitting.lme4 import refit_glmm_many
from humaneval_power.params import H2HParams
from humaneval_power.scenarios.headtohead import MixedJudgments

DESIGNS = {  # workers, items, judgments per item, sd_worker, sd_item, log-odds
    "crossed": (10, 60, None, 0.5, 1.0, 0.3),
    "few_strong_workers": (4, 60, None, 1.2, 0.5, 0.6),
    "incomplete": (10, 40, 5, 0.5, 0.5, 0.4),
    "large": (10, 400, None, 0.3, 1.0, 0.15),
}


def run(name: str, n: int, m: int, seed: int = 1) -> dict:
    workers, items, per_item, sd_w, sd_i, b = DESIGNS[name]
    cell = MixedJudgments(H2HParams(sd_w, sd_i), workers, items, b, per_item)
    w, i = cell.design()
    y = cell.responses(n, np.random.default_rng(seed))
    refit_glmm_many({"worker": w + 1, "item": i + 1}, y[:1].T, lrt=False)  # R started and warm
    fit_glmm_laplace(w, i, y[:1])
    t0, c0 = time.perf_counter(), time.process_time()
    fast = fit_glmm_laplace(w, i, y)
    t_fast, c_fast = (time.perf_counter() - t0) / n, (time.process_time() - c0) / n
    t0, c0 = time.perf_counter(), time.process_time()
    ref = refit_glmm_many({"worker": w + 1, "item": i + 1}, y[:m].T, lrt=False)
    t_glmer, c_glmer = (time.perf_counter() - t0) / m, (time.process_time() - c0) / m
    est, se = ref.estimate.to_numpy(), ref.se.to_numpy()
    ok = ~fast.failed[:m] & (ref.failed.to_numpy() == 0)
    sig_f = (fast.p <= 0.05) & ~fast.failed
    sig_g = np.abs(est / se) >= 1.959963984540054
    q = lambda d: [float(np.median(d)), float(np.quantile(d, 0.99)), float(d.max())]
    pw = lambda s: [float(s.mean()), float(np.sqrt(s.mean() * (1 - s.mean()) / len(s)))]
    return {
        "design": name, "workers": workers, "items": items, "per_item": per_item or workers, "sd_worker": sd_w,
        "sd_item": sd_i, "log_odds": b, "n_fast": n, "n_glmer": m,
        "ms_per_study_fast": round(1000 * t_fast, 2), "ms_per_study_glmer": round(1000 * t_glmer, 1),
        "ratio": round(t_glmer / t_fast, 1), "cpu_ms_per_study_fast": round(1000 * c_fast, 2),
        "cpu_ms_per_study_glmer": round(1000 * c_glmer, 1), "cpu_ratio": round(c_glmer / c_fast, 1),
        "est_abs_diff_median_q99_max": q(np.abs(fast.estimate[:m] - est)[ok]),
        "se_rel_diff_median_q99_max": q(np.abs(fast.se[:m] / se - 1)[ok]),
        "z_abs_diff_median_q99_max": q(np.abs(fast.z[:m] - est / se)[ok]),
        "decisions_identical": float(np.mean(sig_f[:m] == sig_g)),
        "power_fast_common": pw(sig_f[:m]), "power_glmer": pw(sig_g), "power_fast_all": pw(sig_f),
        "failed_fast": int(fast.failed.sum()), "failed_glmer": int((ref.failed > 0).sum()),
        "singular_fast": int(fast.singular[:m].sum()), "singular_glmer": int((ref.singular > 0).sum()),
    }


NULL_DESIGNS = {  # workers, items, judgments per item, sd_worker, sd_item
    "docs": (10, 40, 5, 0.5, 0.5),  # docs/headtohead.md: glmer's z rejects 0.087 of 600
    "few_workers": (5, 40, None, 1.0, 0.5),
    "many_workers": (30, 60, 5, 0.5, 1.0),
}


def type_one(name: str, n: int, m: int, seed: int = 2) -> dict:
    from scipy import stats

    workers, items, per_item, sd_w, sd_i = NULL_DESIGNS[name]
    cell = MixedJudgments(H2HParams(sd_w, sd_i), workers, items, 0.0, per_item)
    w, i = cell.design()
    y = cell.responses(n, np.random.default_rng(seed))
    t0 = time.perf_counter()
    fast = fit_glmm_laplace(w, i, y, lrt=True)
    t_fast = (time.perf_counter() - t0) / n
    ref = refit_glmm_many({"worker": w + 1, "item": i + 1}, y[:m].T, lrt=False)
    ok = ~fast.failed
    tests = {"z": fast.p, "lrt": fast.p_lrt, "t": fast.p_t,
             "t_workers_minus_1": 2 * stats.t.sf(np.abs(fast.z), workers - 1)}

    def rate(sig: np.ndarray) -> list[float]:
        p = float(sig.mean())
        return [round(p, 4), round(float(np.sqrt(p * (1 - p) / len(sig))), 4)]

    g_ok = ref.failed.to_numpy() == 0
    out = {"design": name, "workers": workers, "items": items, "per_item": per_item or workers,
           "sd_worker": sd_w, "sd_item": sd_i, "n_fast": int(ok.sum()), "n_glmer": int(g_ok.sum()),
           "ms_per_study_fast_with_lrt": round(1000 * t_fast, 2),
           "glmer_z_first_m": rate((np.abs(ref.estimate / ref.se) >= 1.959963984540054).to_numpy()[g_ok])}
    common = ok[:m] & g_ok
    for k, p in tests.items():
        assert p is not None
        out[f"{k}_first_m"] = rate(p[:m][common] <= 0.05)
        out[f"{k}_all"] = rate(p[ok] <= 0.05)
    out["df_quartiles"] = [round(float(q), 2) for q in np.quantile(fast.df[ok], [0.25, 0.5, 0.75])]
    return out


def main(argv: list[str]) -> None:
    if argv and argv[0] == "typeI":
        n = int(argv[1]) if len(argv) > 1 else 20000
        m = int(argv[2]) if len(argv) > 2 else 1000
        for name in argv[3:] or list(NULL_DESIGNS):
            print(json.dumps(type_one(name, n, m)), flush=True)
        return
    n = int(argv[0]) if argv else 400
    m = int(argv[1]) if len(argv) > 1 else 200
    names = argv[2:] or ["crossed", "few_strong_workers", "incomplete"]
    for name in names:
        print(json.dumps(run(name, n, m)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
