"""Likert ratings of two systems in a fully crossed worker x item design.

Every worker rates every item under both systems (W * I * 2 ratings). The
model is Card et al. eq. 5 with x = -1/2, +1/2 (see :mod:`humaneval_power.params`).
Four ways to compute power, which agree where they overlap:

``analytic``     noncentral t with the exact Satterthwaite df (Westfall, Kenny
                 & Judd 2014, with their mean squares corrected); instant.
``fast``         exact simulation: sufficient statistics drawn directly and fitted
                 in closed form; the same estimate, SE, df and p as lme4+lmerTest.
``lme4``         full data sets refitted by lme4 (+ lmerTest) inside R.
``statsmodels``  full data sets refitted without R: statsmodels' MixedLM likelihood, exact-gradient
                 REML and lmerTest's Satterthwaite df (see :mod:`humaneval_power.fitting.vc_reml`).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..engine import Progress, PowerResult, StudyOutcomes, run_cells, t_power
from ..planning import SolveResult, as_list, power_grid, solve
from ..errors import InputError
from ..params import LikertParams, as_params
from ..validation import check_alpha, check_choice, check_count, check_number
from ..significance.coef_test import check_test, coefficient_test, critical_value, uses_reml
from ..fitting.balanced import (
    draw_stats,
    expected_lambdas,
    fit_ml,
    fit_reml,
    satterthwaite_df,
    strata_df,
)

METHODS = ("fast", "analytic", "lme4", "statsmodels")
FORMULA = "y ~ x + (1 + x || worker) + (1 + x || item)"
_CHUNK = {"fast": 20_000, "analytic": 1, "lme4": 10, "statsmodels": 10}  # R/refit tiers: a chunk every few seconds


def simulate_ratings(
    params: LikertParams, workers: int, items: int, effect: float, n: int, rng: np.random.Generator
) -> np.ndarray:
    """Full data sets from the model: shape (n, W, I, 2), last axis system A then B."""
    x = np.array([-0.5, 0.5])
    u = rng.normal(0.0, params.sd_worker_intercept, (n, workers, 1, 1))
    a = rng.normal(0.0, params.sd_worker_slope, (n, workers, 1, 1))
    v = rng.normal(0.0, params.sd_item_intercept, (n, 1, items, 1))
    b = rng.normal(0.0, params.sd_item_slope, (n, 1, items, 1))
    e = rng.normal(0.0, params.sd_residual, (n, workers, items, 2))
    return params.intercept + u + v + (effect + a + b) * x + e


def long_design(workers: int, items: int) -> dict[str, np.ndarray]:
    """Design columns of the long format matching ``ratings.reshape(n, -1)``."""
    w, i, s = np.meshgrid(np.arange(workers), np.arange(items), np.arange(2), indexing="ij")
    return {"worker": w.ravel() + 1, "item": i.ravel() + 1, "x": np.where(s.ravel() == 1, 0.5, -0.5)}


@dataclass(frozen=True)
class LikertScenario:
    """One design cell: parameters, W workers x I items, the true effect, method and test.

    >>> from humaneval_power.params import get_preset
    >>> cell = LikertScenario(get_preset("card2020-high"), 3, 100, 0.4, method="analytic")
    >>> round(cell.exact().power, 3)
    0.428
    """

    params: LikertParams
    workers: int
    items: int
    effect: float
    method: str = "fast"
    test: str = "satterthwaite"
    alpha: float = 0.05

    def __post_init__(self) -> None:
        check_count("workers", self.workers, 2)
        check_count("items", self.items, 2)
        check_number("effect", self.effect)
        check_alpha(self.alpha)
        check_test(self.test)
        check_choice("method", self.method, METHODS)
        if self.test == "card2020" and self.effect < 0:
            raise InputError("the card2020 test counts only positive detections (B > A): give a positive effect")
        if self.method == "analytic" and self.test == "card2020":
            raise InputError("the analytic method has no closed form for the card2020 (ML) test; use --method fast")

    @property
    def chunk_size(self) -> int:
        return _CHUNK[self.method]

    def study_bytes(self) -> int:
        """Memory one simulated study needs: none to speak of for the fast tiers; the
        refitting tiers hold each data set (W x I x 2 ratings) in several copies."""
        return 0 if self.method in ("fast", "analytic") else 2 * self.workers * self.items * 8 * 20

    def cell(self) -> dict[str, Any]:
        return {
            "workers": self.workers,
            "items": self.items,
            "effect": self.effect,
            "method": self.method,
            "test": self.test,
            "alpha": self.alpha,
        }

    def stream_key(self) -> str:
        source = "statistics" if self.method == "fast" else "ratings"
        p = self.params
        return json.dumps(
            ["likert-crossed", source, self.workers, self.items, p.intercept, sorted(p.sds.items())]
        )

    def _lambdas(self) -> np.ndarray:
        return expected_lambdas(self.workers, self.items, **self.params.sds)

    def exact(self) -> PowerResult | None:
        if self.method != "analytic":
            return None
        lam = self._lambdas()
        v = (lam[1] + lam[2] - lam[0]) / (self.workers * self.items)
        ncp = self.effect / math.sqrt(v)
        if self.test == "satterthwaite":
            df = float(satterthwaite_df(lam[None], np.zeros((1, 4), bool), strata_df(self.workers, self.items))[0])
        else:
            df = math.inf
        crit = float(critical_value(self.test, self.alpha, df))
        if self.effect == 0:
            power, type_s, type_m = 2 * float(_tail(crit, df)), math.nan, math.nan
        else:
            power, type_s, type_m = t_power(ncp, df, crit)
        return PowerResult.closed_form(self.cell(), power, type_s, type_m, df=df,
                                       extra={"ncp": ncp, "se": math.sqrt(v)})

    def simulate(self, n: int, rng: np.random.Generator) -> StudyOutcomes:
        if self.method == "fast":
            stats = draw_stats(self._lambdas(), self.workers, self.items, self.effect, n, rng)
            fit = fit_reml(stats) if uses_reml(self.test) else fit_ml(stats)
            _, sig = coefficient_test(fit.estimate, fit.se, fit.df, self.test, self.alpha)
            return StudyOutcomes(fit.estimate, sig, ~fit.converged, fit.singular, df=fit.df)
        ratings = simulate_ratings(self.params, self.workers, self.items, self.effect, n, rng)
        if self.method == "lme4":
            from ..fitting.lme4 import refit_many

            res = refit_many(
                long_design(self.workers, self.items),
                ratings.reshape(n, -1).T,
                FORMULA,
                "x",
                reml=uses_reml(self.test),
                satterthwaite=self.test == "satterthwaite",
            )
        else:
            from ..fitting.statsmodels_lmm import fit_crossed_many

            res = fit_crossed_many(long_design(self.workers, self.items), ratings.reshape(n, -1).T, reml=uses_reml(self.test))
        failed = res["failed"].to_numpy() > 0
        est, se = res["estimate"].to_numpy(), res["se"].to_numpy()
        df = res["df"].to_numpy() if self.test == "satterthwaite" else None
        _, sig = coefficient_test(est, se, df, self.test, self.alpha)
        return StudyOutcomes(est, sig, failed, res["singular"].to_numpy() > 0, res["warned"].to_numpy() > 0, df)


def _tail(crit: float, df: float) -> float:
    from scipy import stats

    return stats.norm.sf(crit) if math.isinf(df) else stats.t.sf(crit, df)


def likert_power(
    params: LikertParams,
    workers: Sequence[int] | int,
    items: Sequence[int] | int,
    effect: Sequence[float] | float,
    method: str = "fast",
    test: str = "satterthwaite",
    alpha: float = 0.05,
    n_sims: int = 1000,
    seed: int = 0,
    jobs: int | None = None,
    progress: Progress | None = None,
    checkpoint: str | None = None,
) -> pd.DataFrame:
    """Power over the grid workers x items x effect: one row per design cell.

    ``params`` is a :class:`LikertParams` or a preset name; single values are
    accepted for the grid axes. Columns: workers, items, effect, method, test,
    alpha, power, ci_low, ci_high, power_excluding_failures, type_s, type_m,
    mean_estimate, n_sims, n_failed, n_singular, n_warnings, df (and ncp, se for
    ``analytic``).

    >>> t = likert_power("card2020-high", 3, 100, 0.4, test="card2020", n_sims=2000, seed=1)
    >>> t[["workers", "items", "effect", "power", "ci_low", "ci_high"]].round(3).to_dict("records")
    [{'workers': 3, 'items': 100, 'effect': 0.4, 'power': 0.896, 'ci_low': 0.882, 'ci_high': 0.91}]
    """
    params = as_params(params)

    def make(workers: int, items: int, effect: float) -> LikertScenario:
        return LikertScenario(params, workers, items, effect, method, test, alpha)

    axes = {"workers": as_list(workers), "items": as_list(items), "effect": as_list(effect)}
    return power_grid(make, axes, n_sims, seed=seed, jobs=jobs, progress=progress, checkpoint=checkpoint)


def likert_sample_size(
    params: LikertParams,
    effect: float,
    target_power: float = 0.8,
    workers: int | None = None,
    items: int | None = None,
    vary: str = "items",
    method: str = "fast",
    test: str = "satterthwaite",
    alpha: float = 0.05,
    n_sims: int = 2000,
    seed: int = 0,
    jobs: int | None = 1,
    progress: Progress | None = None,
) -> SolveResult:
    """Smallest number of items (or workers) reaching ``target_power``, the other fixed.

    When the slope variance of the fixed factor caps the power below the
    target (few workers with a worker-slope SD > 0), the result says so.

    >>> r = likert_sample_size("card2020-low", 0.1, workers=10, method="analytic")
    >>> r.value, round(r.at.power, 3)
    (135, 0.801)
    """
    params = as_params(params)
    check_choice("vary", vary, ("items", "workers"))
    fixed_name = "workers" if vary == "items" else "items"
    fixed = workers if vary == "items" else items
    if fixed is None:
        raise InputError(f"give the number of {fixed_name} to hold fixed while varying {vary}")
    if check_number("effect", effect) == 0:
        raise InputError("the sample size for a zero effect is undefined; give a non-zero effect")
    big = 10**6 if method in ("fast", "analytic") else 1000

    def make(n: int) -> LikertScenario:
        w, i = (fixed, n) if vary == "items" else (n, fixed)
        return LikertScenario(params, w, i, effect, method, test, alpha)

    base = make(2)
    limit_method = "analytic" if method == "analytic" else "fast"
    limit = replace(base, method=limit_method, **{vary: 10**8 if limit_method == "analytic" else 10**6})
    max_power = run_cells([limit], n_sims, seed=seed)[0].power
    sd_name = "sd_worker_slope" if vary == "items" else "sd_item_slope"
    reason = (
        f"as {vary} grow, power tends to {max_power:.3f}: with {fixed} {fixed_name} the {sd_name} "
        f"({getattr(params, sd_name):.3g}) keeps the variance of the effect estimate above "
        f"{sd_name}^2/{fixed_name}; add {fixed_name} instead"
    )
    return solve(make, vary, 2, big, target_power, n_sims=n_sims, seed=seed, jobs=jobs, progress=progress,
                 limit=(max_power, reason))


def likert_mde(
    params: LikertParams,
    workers: int,
    items: int,
    target_power: float = 0.8,
    method: str = "fast",
    test: str = "satterthwaite",
    alpha: float = 0.05,
    n_sims: int = 2000,
    seed: int = 0,
    jobs: int | None = 1,
    progress: Progress | None = None,
) -> SolveResult:
    """Minimum detectable effect (difference in mean rating, B - A) of a W x I design.

    Every effect tried reuses the same simulated studies (common random numbers).

    >>> round(likert_mde("card2020-low", 10, 135, method="analytic").value, 5)
    0.09991
    """
    params = as_params(params)
    sd = math.sqrt(LikertScenario(params, workers, items, 1.0, "analytic").exact().extra["se"] ** 2)

    def make(effect: float) -> LikertScenario:
        return LikertScenario(params, workers, items, effect, method, test, alpha)

    return solve(make, "effect", 1e-6 * sd, 4 * sd, target_power, integer=False, n_sims=n_sims, seed=seed,
                 jobs=jobs, progress=progress, grow=True)


def simulate_long(
    params: LikertParams, pairs: pd.DataFrame, effect: float, rng: np.random.Generator, baseline: str = "A",
    other: str = "B",
) -> pd.DataFrame:
    """One simulated study in long format for any design: each (worker, item) row of ``pairs``
    rates the item under both systems. Columns worker, item, system, score."""
    workers = pd.factorize(pairs["worker"])[0]
    items = pd.factorize(pairs["item"])[0]
    n_w, n_i = workers.max() + 1, items.max() + 1
    u, a = rng.normal(0, params.sd_worker_intercept, n_w), rng.normal(0, params.sd_worker_slope, n_w)
    v, b = rng.normal(0, params.sd_item_intercept, n_i), rng.normal(0, params.sd_item_slope, n_i)
    rows = []
    for x, system in ((-0.5, baseline), (0.5, other)):
        mean = params.intercept + u[workers] + v[items] + (effect + a[workers] + b[items]) * x
        rows.append(pd.DataFrame({
            "worker": pairs["worker"].astype(str).to_numpy(), "item": pairs["item"].astype(str).to_numpy(),
            "system": system, "score": mean + rng.normal(0, params.sd_residual, len(pairs)),
        }))
    return pd.concat(rows, ignore_index=True)
