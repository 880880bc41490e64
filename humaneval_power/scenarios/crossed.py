"""The fully crossed cell: two systems, every worker rates every item under both (closed-form tiers).

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
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..engine import PowerResult, StudyOutcomes
from ..errors import InputError
from ..params import LikertParams
from ..validation import check_alpha, check_choice, check_count, check_number
from ..significance.coef_test import check_test, coefficient_test, critical_value, uses_reml
from ..significance.t_test import t_power
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
