"""Benchmark: the 48-cell Figure-6 grid with `fast`, and lme4 refits of the same studies.

Prints one JSON record. The speed-up is a ratio measured in this run: seconds
per simulated study under lme4 (refits of full data sets, through rpy2, the
loop inside R) over seconds per simulated study under `fast`. On a subset of
cells the *same* simulated data sets are fitted both ways and their decisions
compared. Run: `make bench` (or python benchmarks/bench_likert.py --sims N).
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from humaneval_power.engine import run_cells
from humaneval_power.params import get_preset
from humaneval_power.scenarios.likert import FORMULA, LikertScenario, long_design, simulate_ratings
from humaneval_power.significance.coef_test import coefficient_test
from humaneval_power.fitting.balanced import fit_ml, fit_reml, stats_from_ratings

GRID = dict(presets=("card2020-high", "card2020-low"), workers=(3, 10), items=(50, 100, 200),
            effects=(0.1, 0.2, 0.3, 0.4))


def grid_cells(test: str) -> list[LikertScenario]:
    return [LikertScenario(get_preset(p), w, i, e, "fast", test)
            for p in GRID["presets"] for w in GRID["workers"] for i in GRID["items"] for e in GRID["effects"]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sims", type=int, default=10_000, help="simulations per cell for the fast grid")
    ap.add_argument("--lme4-studies", type=int, default=40, help="full data sets refitted by lme4 per subset cell")
    ap.add_argument("--jobs", type=int, default=None)
    args = ap.parse_args()
    out: dict[str, object] = {"cores": os.cpu_count(), "cells": 48, "sims_per_cell": args.sims}
    for test in ("card2020", "satterthwaite"):
        cells = grid_cells(test)
        t0 = time.perf_counter()
        run_cells(cells, args.sims, seed=1, jobs=args.jobs)
        elapsed = time.perf_counter() - t0
        out[f"fast_grid_seconds_{test}"] = round(elapsed, 3)
        out[f"fast_seconds_per_study_{test}"] = elapsed / (len(cells) * args.sims)

    from humaneval_power.fitting import lme4

    ok, why = lme4.available()
    if not ok:
        out["lme4"] = f"unavailable: {why}"
        print(json.dumps(out, indent=1))
        return
    lme4.versions()  # start R outside the timed region
    subset = [("card2020-high", 3, 100, 0.4), ("card2020-high", 10, 100, 0.2), ("card2020-low", 3, 200, 0.2)]
    rng = np.random.default_rng(2)
    lme4_time, n_fits, same_decisions, compared = 0.0, 0, 0, 0
    fast_time = 0.0
    for test in ("card2020", "satterthwaite"):
        for preset, w, i, e in subset:
            ratings = simulate_ratings(get_preset(preset), w, i, e, args.lme4_studies, rng)
            t0 = time.perf_counter()
            ref = lme4.refit_many(long_design(w, i), ratings.reshape(len(ratings), -1).T, FORMULA, "x",
                                  reml=test != "card2020", satterthwaite=test == "satterthwaite")
            lme4_time += time.perf_counter() - t0
            n_fits += len(ratings)
            t0 = time.perf_counter()
            stats = stats_from_ratings(ratings)
            fit = fit_reml(stats) if test != "card2020" else fit_ml(stats)
            _, sig_fast = coefficient_test(fit.estimate, fit.se, fit.df, test, 0.05)
            fast_time += time.perf_counter() - t0
            _, sig_ref = coefficient_test(ref.estimate.to_numpy(), ref.se.to_numpy(),
                                          ref["df"].to_numpy() if test == "satterthwaite" else None, test, 0.05)
            same_decisions += int((sig_fast == sig_ref).sum())
            compared += len(ratings)
    per_lme4 = lme4_time / n_fits
    out.update({
        "lme4_fits": n_fits,
        "lme4_seconds_per_study": per_lme4,
        "speedup_per_study": per_lme4 / float(out["fast_seconds_per_study_card2020"]),  # type: ignore[arg-type]
        "speedup_per_study_satterthwaite": per_lme4 / float(out["fast_seconds_per_study_satterthwaite"]),  # type: ignore[arg-type]
        "same_data_identical_decisions": f"{same_decisions}/{compared}",
        "fast_seconds_on_the_same_data": fast_time,
        "lme4_grid_estimate_hours": per_lme4 * 48 * args.sims / 3600,
    })
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
