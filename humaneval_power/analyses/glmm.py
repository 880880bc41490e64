"""The logistic GLMM of head-to-head judgments applied to each simulated study.

``score ~ 1 + (1 | worker) + (1 | item)`` (logistic, Laplace): the intercept is the
log-odds that B is preferred for a typical worker and item. Tiers: ``fast`` (all
studies at once, glmer's fit without R: :mod:`humaneval_power.fitting.glmm_laplace`)
or ``lme4`` (glmer refits in R). Tests: glmer's Wald ``z``, ``lrt`` (against b0 = 0)
or ``t`` (z against t, Satterthwaite df capped at workers - 1; fast tier only).
Scores are 0/1, 1/2 for split ties, NaN for dropped ties (weight 0).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy import stats

from ..designs import Design, Layout
from ..engine import StudyOutcomes
from ..errors import InputError
from ..validation import check_alpha, check_choice
from .base import FamilyFit, fit_each

TESTS = ("z", "lrt", "t")
TIERS = ("fast", "lme4")  #: fast: fitting/glmm_laplace.py (glmer's fit without R); lme4: glmer refits


@dataclass(frozen=True)
class JudgmentGLMM:
    """Tier, test and alpha of the logistic GLMM of judgments (see the module docs)."""

    name: ClassVar[str] = "judgment-glmm"
    location_invariant: ClassVar[bool] = False  #: the logistic fit depends on the log-odds: fit at the truth
    pair: ClassVar[tuple[int, int]] = (0, 1)

    tier: str = "fast"
    test: str = "z"
    alpha: float = 0.05

    def __post_init__(self) -> None:
        if self.test not in TESTS:
            raise InputError(f"test must be one of {', '.join(TESTS)}")
        check_choice("method", self.tier, TIERS)
        if self.test == "t" and self.tier != "fast":
            raise InputError("the t test (Satterthwaite df) is computed by the fast tier: use --method fast")
        check_alpha(self.alpha)

    @property
    def chunk_size(self) -> int:  # a few seconds of refits: progress and Ctrl-C stay responsive
        return 10 if self.tier == "lme4" else 500

    def check(self, systems: int, effect: float = 0.0) -> None:
        if systems != 2:
            raise InputError("the judgment GLMM compares two systems (B against A)")

    def record(self) -> dict[str, Any]:
        return {"method": self.tier, "test": self.test, "alpha": self.alpha}

    def closed_form(self, design: Design, process: Any, means: Any, sufficient: bool = True) -> None:
        return None

    def prepare(self, layout: Layout, weights: np.ndarray | None = None) -> Any:
        return None

    def fit(self, layout: Layout | list[Layout], y: np.ndarray | list[np.ndarray], prepared: Any = None) -> FamilyFit:
        """Fit every column of ``y`` (judgments x studies; 1 = B preferred) on the layout's workers and items."""
        if isinstance(layout, list):
            assert isinstance(y, list)
            return fit_each(self, layout, y)
        assert isinstance(y, np.ndarray)
        lrt = self.test == "lrt"
        if self.tier == "fast":
            from ..fitting.glmm_laplace import fit_glmm_laplace

            scores = y.T
            dropped = np.isnan(scores)  # dropped ties: weight 0; split ties are scores of 1/2
            fit = fit_glmm_laplace(layout.worker, layout.item, np.where(dropped, 0.0, scores),
                                   weights=(~dropped).astype(float), lrt=lrt)
            p = {"z": fit.p, "t": fit.p_t}.get(self.test, fit.p_lrt)
            assert p is not None
            return FamilyFit(fit.estimate[:, None], fit.se[:, None], None, fit.singular, fit.failed, fit.fallback,
                             np.where(fit.failed, np.nan, p)[:, None])
        from ..fitting.lme4 import refit_glmm_many

        res = refit_glmm_many({"worker": layout.worker + 1, "item": layout.item + 1}, y, lrt=lrt)
        est, se = res["estimate"].to_numpy(), res["se"].to_numpy()
        p = res["p_lrt"].to_numpy() if lrt else 2 * stats.norm.sf(np.abs(est / se))
        return FamilyFit(est[:, None], se[:, None], None, res["singular"].to_numpy() > 0,
                         res["failed"].to_numpy() > 0, res["warned"].to_numpy() > 0, p[:, None])

    def decide(self, fit: FamilyFit, means: np.ndarray | None = None,
               fitted_means: np.ndarray | None = None) -> StudyOutcomes:
        """The test of the intercept per study (studies are drawn at the true log-odds: no shift)."""
        assert fit.p is not None
        return StudyOutcomes(fit.estimate[:, 0], fit.p[:, 0] <= self.alpha, fit.failed, fit.singular, fit.warned)
