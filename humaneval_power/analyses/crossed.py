"""The closed-form analysis of the fully crossed two-system cell (Card et al.'s slope model).

Every worker rates every item under both systems; the model is
``y ~ x + (1 + x || worker) + (1 + x || item)`` (:data:`FORMULA`), x = -1/2, +1/2.
Four tiers, which agree where they overlap:

``analytic``     noncentral t with the exact Satterthwaite df (Westfall, Kenny
                 & Judd 2014, with their mean squares corrected); instant.
``fast``         exact simulation: the sufficient statistics drawn directly
                 (:func:`~humaneval_power.fitting.balanced.draw_stats`) and fitted in closed
                 form; the same estimate, SE, df and p as lme4 + lmerTest.
``lme4``         full data sets refitted by lme4 (+ lmerTest) inside R.
``statsmodels``  full data sets refitted without R: statsmodels' MixedLM likelihood, exact-gradient
                 REML and lmerTest's Satterthwaite df (:mod:`humaneval_power.fitting.vc_reml`).

The ``fast`` tier cannot take its data from a process: it draws the statistics
of the model's sampling distribution, where the process and the model meet.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..designs import Design, Layout
from ..engine import StudyOutcomes
from ..errors import InputError
from ..fitting.balanced import (
    BalancedFit,
    expected_lambdas,
    fit_ml,
    fit_reml,
    satterthwaite_df,
    strata_df,
)
from ..significance.coef_test import (
    check_test,
    coefficient_test,
    critical_value,
    uses_reml,
)
from ..significance.t_test import t_power
from ..validation import check_alpha, check_choice
from .base import FamilyFit, fit_each

TIERS = ("fast", "analytic", "lme4", "statsmodels")
FORMULA = "y ~ x + (1 + x || worker) + (1 + x || item)"
_CHUNK = {"fast": 20_000, "analytic": 1, "lme4": 10, "statsmodels": 10}  # R/refit tiers: a chunk every few seconds


@dataclass(frozen=True)
class CrossedSlopes:
    """Tier, test and alpha of the closed-form crossed analysis (see the module docs)."""

    name: ClassVar[str] = "crossed-slopes"
    location_invariant: ClassVar[bool] = False  #: the cell draws its studies at the true effect

    tier: str = "fast"
    test: str = "satterthwaite"
    alpha: float = 0.05
    pair: ClassVar[tuple[int, int]] = (0, 1)

    def __post_init__(self) -> None:
        check_alpha(self.alpha)
        check_test(self.test)
        check_choice("method", self.tier, TIERS)
        if self.tier == "analytic" and self.test == "card2020":
            raise InputError("the analytic method has no closed form for the card2020 (ML) test; use --method fast")

    @property
    def chunk_size(self) -> int:
        return _CHUNK[self.tier]

    @property
    def statistics(self) -> bool:
        """Whether the fits take the sufficient statistics drawn directly (else full data sets)."""
        return self.tier == "fast"

    def check(self, systems: int, effect: float = 0.0) -> None:
        if systems != 2:
            raise InputError("the crossed slope model compares two systems")
        if self.test == "card2020" and effect < 0:
            raise InputError("the card2020 test counts only positive detections (B > A): give a positive effect")

    def record(self) -> dict[str, Any]:
        return {"method": self.tier, "test": self.test, "alpha": self.alpha}

    def closed_form(self, design: Design, process: Any, means: Any, sufficient: bool = True) -> None:
        return None

    def exact(self, sds: dict[str, float], workers: int, items: int,
              effect: float) -> tuple[float, float, float, float, dict[str, float]] | None:
        """The analytic tier's power, Type-S, Type-M, df and (ncp, se) of a W x I design; None for other tiers."""
        if self.tier != "analytic":
            return None
        lam = expected_lambdas(workers, items, **sds)
        v = (lam[1] + lam[2] - lam[0]) / (workers * items)
        ncp = effect / math.sqrt(v)
        if self.test == "satterthwaite":
            df = float(satterthwaite_df(lam[None], np.zeros((1, 4), bool), strata_df(workers, items))[0])
        else:
            df = math.inf
        crit = float(critical_value(self.test, self.alpha, df))
        if effect == 0:
            power, type_s, type_m = 2 * float(_tail(crit, df)), math.nan, math.nan
        else:
            power, type_s, type_m = t_power(ncp, df, crit)
        return power, type_s, type_m, df, {"ncp": ncp, "se": math.sqrt(v)}

    def prepare(self, layout: Layout, weights: np.ndarray | None = None) -> Any:
        return None

    def fit_statistics(self, stats: Any) -> FamilyFit:
        """The fast tier: closed-form REML (or ML) fits of sufficient statistics."""
        fit: BalancedFit = fit_reml(stats) if uses_reml(self.test) else fit_ml(stats)
        return FamilyFit(fit.estimate[:, None], fit.se[:, None], fit.df[:, None], fit.singular, ~fit.converged, None)

    def fit(self, layout: Layout | list[Layout], y: np.ndarray | list[np.ndarray], prepared: Any = None) -> FamilyFit:
        """The refit tiers: every column of ``y`` (ratings of the crossed ``layout``) refitted by lme4 or statsmodels."""
        if isinstance(layout, list):
            assert isinstance(y, list)
            return fit_each(self, layout, y)
        assert isinstance(y, np.ndarray)
        columns = {"worker": layout.worker + 1, "item": layout.item + 1, "x": np.where(layout.system == 1, 0.5, -0.5)}
        if self.tier == "lme4":
            from ..fitting.lme4 import refit_many

            res = refit_many(columns, y, FORMULA, "x", reml=uses_reml(self.test),
                             satterthwaite=self.test == "satterthwaite")
        elif self.tier == "statsmodels":
            from ..fitting.statsmodels_lmm import fit_crossed_many

            res = fit_crossed_many(columns, y, reml=uses_reml(self.test))
        else:
            raise InputError(f"the {self.tier} tier of the crossed cell fits no full data sets")
        df = res["df"].to_numpy()[:, None] if self.test == "satterthwaite" else None
        return FamilyFit(res["estimate"].to_numpy()[:, None], res["se"].to_numpy()[:, None], df,
                         res["singular"].to_numpy() > 0,
                         res["failed"].to_numpy() > 0, res["warned"].to_numpy() > 0)

    def decide(self, fit: FamilyFit, means: np.ndarray | None = None,
               fitted_means: np.ndarray | None = None) -> StudyOutcomes:
        """The test of the slope of x, per study (studies are drawn at the true effect: no shift)."""
        _, sig = coefficient_test(fit.estimate, fit.se, fit.df, self.test, self.alpha)
        return StudyOutcomes(fit.estimate[:, 0], sig[:, 0], fit.failed, fit.singular, fit.warned,
                             None if fit.df is None else fit.df[:, 0])


def _tail(crit: float, df: float) -> float:
    from scipy import stats

    tail: float = stats.norm.sf(crit) if math.isinf(df) else stats.t.sf(crit, df)
    return tail
