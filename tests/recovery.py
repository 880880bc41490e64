"""Parameter recovery of `hepower fit` (lme4 backend, or statsmodels): bias and interval coverage.

Simulates studies with known parameters — a fully crossed design and a sparse
crowd design (each item rated, under both systems, by a few of many workers) —
(and a fully crossed design whose item-intercept SD is truly zero, to show the
boundary) fits each with the chosen backend and reports, per parameter, the mean estimate
against the truth (with its Monte-Carlo SE), how often the 95% interval
covers the truth, and how often the estimate sits at the boundary (zero).

Run: python -m tests.recovery [--reps 100] [--intervals wald|profile] [--backend lme4|statsmodels]
"""
from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
from scipy import stats

from humaneval_power.fitting.model import fit_pilot
from humaneval_power.fitting.ratings import read_ratings
from humaneval_power.params import SD_NAMES, LikertParams
from humaneval_power.processes import simulate_long

TRUTH = LikertParams(0.5, sd_worker_intercept=0.15, sd_worker_slope=0.12, sd_item_intercept=0.10,
                     sd_item_slope=0.15, sd_residual=0.20)
#: the "boundary" design: fully crossed, but the item intercept SD is truly zero
BOUNDARY_TRUTH = TRUTH.with_sds(sd_item_intercept=0.0)
EFFECT = 0.1


def crossed_pairs(workers: int = 20, items: int = 30) -> pd.DataFrame:
    w, i = np.meshgrid(np.arange(workers), np.arange(items), indexing="ij")
    return pd.DataFrame({"worker": w.ravel(), "item": i.ravel()})


def sparse_pairs(rng: np.random.Generator, workers: int = 60, items: int = 60, per_item: int = 6) -> pd.DataFrame:
    rows = [(w, i) for i in range(items) for w in rng.choice(workers, per_item, replace=False)]
    return pd.DataFrame(rows, columns=["worker", "item"])


def recovery(design: str, reps: int, intervals: str, seed: int = 2026, backend: str = "lme4") -> pd.DataFrame:
    """One row per parameter: truth, mean estimate, its MC SE, coverage, boundary share."""
    rng = np.random.default_rng(seed)
    truth_params = BOUNDARY_TRUTH if design == "boundary" else TRUTH
    est, low, high = [], [], []
    for _ in range(reps):
        pairs = sparse_pairs(rng) if design == "sparse" else crossed_pairs()
        data = read_ratings(simulate_long(truth_params, pairs, EFFECT, rng), baseline="A")
        rec = fit_pilot(data, backend, intervals=intervals).records[0]
        est.append([rec["effect"]] + [rec[k] for k in SD_NAMES])
        ci = rec["intervals"]
        half = stats.t.isf(0.025, rec["df"]) * rec["effect_se"]  # Satterthwaite t interval
        low.append([rec["effect"] - half] + [ci[k][0] for k in SD_NAMES])
        high.append([rec["effect"] + half] + [ci[k][1] for k in SD_NAMES])
    est, low, high = np.array(est), np.array(low), np.array(high)
    names = ["effect"] + list(SD_NAMES)
    truth = np.array([EFFECT] + [getattr(truth_params, k) for k in SD_NAMES])
    at_zero = est[:, 1:] <= 1e-4 * est[:, -1:]
    return pd.DataFrame({
        "design": design,
        "parameter": names,
        "truth": truth,
        "mean_estimate": est.mean(0),
        "mc_se": est.std(0, ddof=1) / np.sqrt(reps),
        "mean_variance": np.r_[np.nan, (est[:, 1:] ** 2).mean(0)],
        "variance_mc_se": np.r_[np.nan, (est[:, 1:] ** 2).std(0, ddof=1) / np.sqrt(reps)],
        # an unknown bound (NaN: Wald at the boundary) counts as not covering
        "coverage": ((low <= truth) & (truth <= high)).mean(0),
        "at_boundary": np.r_[0.0, at_zero.mean(0)],
        "reps": reps,
    })


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--intervals", default="wald", choices=("wald", "profile"))
    ap.add_argument("--backend", default="lme4", choices=("lme4", "statsmodels"))
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--designs", nargs="+", default=["crossed", "sparse"], choices=("crossed", "sparse", "boundary"))
    args = ap.parse_args()
    table = pd.concat([recovery(d, args.reps, args.intervals, args.seed, args.backend) for d in args.designs])
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4f}"))


if __name__ == "__main__":
    main()
