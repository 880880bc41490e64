"""Benchmark: the 48-cell Figure-6 grid with `fast`, and lme4 refits of the same studies.

Prints one JSON record. The card2020 (ML) fast tier is timed against its own
"before" (the projected-Newton solver it replaced, kept in ``ml_before.py``)
in the same run, on one process (``grid_jobs1``: wall and CPU seconds), with the
REML/Satterthwaite grid as the reference; the same studies' fits are compared
(largest relative SE difference, whether the new optimum is ever worse, and
whether any decision changes). Measured 2026-11-23 on the shared 2-core
machine (load average 7, wall ~3x CPU), CPU seconds on one process:
Satterthwaite 0.34, card2020 before 2.81, after 0.45 (6.3x; 1.3x the REML
grid instead of 8.3x), the 48 powers identical, the new optimum never worse
on 480,000 studies. On an idle machine before this change: Satterthwaite
0.24 s and card2020 2.5 s wall.
The speed-up over lme4 is also a ratio measured in this run: seconds
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
from collections.abc import Callable

import numpy as np
from ml_before import fit_ml_before

from humaneval_power.analyses.crossed import FORMULA
from humaneval_power.engine import run_cells
from humaneval_power.fitting.balanced import BalancedFit, BalancedStats, draw_stats, fit_ml, fit_reml, stats_from_ratings, strata_df
from humaneval_power.params import get_preset
from humaneval_power.processes import long_design, simulate_ratings
from humaneval_power.scenarios import likert as likert_module
from humaneval_power.scenarios.crossed import CrossedLikertScenario
from humaneval_power.significance.coef_test import coefficient_test

GRID = {"presets": ("card2020-high", "card2020-low"), "workers": (3, 10), "items": (50, 100, 200),
        "effects": (0.1, 0.2, 0.3, 0.4)}


def grid_cells(test: str) -> list[CrossedLikertScenario]:
    return [CrossedLikertScenario(get_preset(p), w, i, e, "fast", test)
            for p in GRID["presets"] for w in GRID["workers"] for i in GRID["items"] for e in GRID["effects"]]


def time_grid(test: str, sims: int, ml: Callable[[BalancedStats], BalancedFit]) -> tuple[float, float, list[float]]:
    """Wall and CPU seconds of the grid on one process with ``ml`` as the ML fitter, and the powers."""
    saved, likert_module.fit_ml = likert_module.fit_ml, ml
    try:
        w0, c0 = time.perf_counter(), time.process_time()
        res = run_cells(grid_cells(test), sims, seed=1, jobs=1)
        return time.perf_counter() - w0, time.process_time() - c0, [r.power for r in res]
    finally:
        likert_module.fit_ml = saved


def compare_ml(sims: int) -> dict[str, object]:
    """The new ML fits against the old solver's on the grid's studies (one draw per cell)."""
    rng = np.random.default_rng(3)
    worst_se, worse_dev, n = 0.0, 0, 0
    for cell in grid_cells("card2020"):
        stats = draw_stats(cell._lambdas(), cell.workers, cell.items, cell.effect, sims, rng)
        new, old = fit_ml(stats), fit_ml_before(stats)
        worst_se = max(worst_se, float(np.max(np.abs(new.se / old.se - 1))))
        worse_dev += int((ml_deviance(new, stats) > ml_deviance(old, stats) + 1e-9).sum())
        n += len(stats)
    return {"ml_studies_compared": n, "ml_max_rel_se_difference_vs_before": worst_se,
            "ml_studies_where_new_optimum_is_worse": worse_dev}


def ml_deviance(fit: BalancedFit, stats: BalancedStats) -> np.ndarray:
    """ML deviance (up to a constant) at a fit's stratum variances."""
    lam, ss = fit.lam, stats.ss
    dfs = strata_df(stats.workers, stats.items)
    m = lam[:, [1, 3]] + lam[:, [2, 4]] - lam[:, :1]
    return (dfs * np.log(lam) + ss / lam).sum(1) + np.log(m).sum(1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sims", type=int, default=10_000, help="simulations per cell for the fast grid")
    ap.add_argument("--lme4-studies", type=int, default=40, help="full data sets refitted by lme4 per subset cell")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--no-lme4", action="store_true", help="skip the lme4 comparison")
    args = ap.parse_args()
    out: dict[str, object] = {"cores": os.cpu_count(), "cells": 48, "sims_per_cell": args.sims,
                              "load_average_1min": os.getloadavg()[0]}
    grid = {name: time_grid(test, args.sims, ml) for name, test, ml in (
        ("satterthwaite", "satterthwaite", fit_ml), ("card2020_before", "card2020", fit_ml_before),
        ("card2020_after", "card2020", fit_ml))}
    out["grid_jobs1"] = {name: {"seconds": round(w, 3), "cpu_seconds": round(c, 3)} for name, (w, c, _) in grid.items()}
    cpu = {name: c for name, (_, c, _) in grid.items()}
    out.update({
        "card2020_cpu_speedup": round(cpu["card2020_before"] / cpu["card2020_after"], 2),
        "card2020_cpu_over_satterthwaite": {"before": round(cpu["card2020_before"] / cpu["satterthwaite"], 2),
                                            "after": round(cpu["card2020_after"] / cpu["satterthwaite"], 2)},
        "card2020_grid_power_max_abs_difference_before_after":
            max(abs(a - b) for a, b in zip(grid["card2020_after"][2], grid["card2020_before"][2])),
    })
    out.update(compare_ml(args.sims))
    for test in ("card2020", "satterthwaite"):
        cells = grid_cells(test)
        t0 = time.perf_counter()
        run_cells(cells, args.sims, seed=1, jobs=args.jobs)
        elapsed = time.perf_counter() - t0
        out[f"fast_grid_seconds_{test}"] = round(elapsed, 3)
        out[f"fast_seconds_per_study_{test}"] = elapsed / (len(cells) * args.sims)
    if args.no_lme4:
        print(json.dumps(out, indent=1))
        return

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
