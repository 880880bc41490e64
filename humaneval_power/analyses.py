"""The analysis applied to each simulated study: mixed model, tier, test, contrasts and adjustment.

:class:`MixedModelAnalysis` fits the model the user will fit to the finished
study and tests the contrasts they will test:

* ``model``: ``slopes`` (Card et al., two systems: ``y ~ x + (1 + x || worker) +
  (1 + x || item)``) or ``invariant`` (``y ~ system + (1 | worker) +
  (1 | worker:system) + (1 | item) + (1 | item:system)``, any number of systems);
* ``tier``: ``fast`` (all studies of a cell fitted at once, no R:
  :mod:`humaneval_power.fitting.batched`) or ``lme4`` (refits in R; the reference);
* ``test``: ``satterthwaite`` (REML, lmerTest's df), ``z`` or ``card2020`` (ML, t > 1.96);
* ``compare``: ``pair`` (the pair of interest only), ``baseline`` (every system
  against the first) or ``pairs`` (all pairs), with ``adjust`` (``holm``,
  ``bonferroni`` or ``none``) over that family.

It reports, per study, the pair of interest's estimate and decision (after
adjustment) and whether every true difference in the family was detected
with the right sign.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .contrasts import COMPARISONS, family_pairs, treatment_rows
from .designs import Layout
from .engine import StudyOutcomes
from .errors import InputError
from .multiplicity import adjust_pvalues
from .significance.coef_test import check_test, coefficient_test, uses_reml
from .validation import check_alpha, check_choice

MODELS = ("invariant", "slopes")
TIERS = ("fast", "analytic", "lme4", "statsmodels")  #: analytic, statsmodels: fully crossed designs only
#: the adjustments the planner applies to each simulated study's family of tests
ADJUSTMENTS = ("holm", "bonferroni", "none")


@dataclass(frozen=True)
class FamilyFit:
    """Per study (rows) and contrast (columns): estimate, SE, df (None for z-type tests); per study flags."""

    estimate: np.ndarray
    se: np.ndarray
    df: np.ndarray | None
    singular: np.ndarray
    failed: np.ndarray
    warned: np.ndarray


@dataclass(frozen=True)
class MixedModelAnalysis:
    """Model, tier, test and contrasts applied to every simulated study (see the module docs)."""

    model: str = "invariant"
    tier: str = "fast"
    test: str = "satterthwaite"
    alpha: float = 0.05
    compare: str = "pair"
    adjust: str = "holm"
    pair: tuple[int, int] = (0, 1)

    def __post_init__(self) -> None:
        check_choice("model", self.model, MODELS)
        check_choice("method", self.tier, TIERS)
        check_test(self.test)
        check_alpha(self.alpha)
        check_choice("comparison", self.compare, COMPARISONS)
        check_choice("adjustment", self.adjust, ADJUSTMENTS)
        if self.compare != "pair" and self.test == "card2020":
            raise InputError("the card2020 test is one-sided for one pair; compare several systems with "
                             "--test satterthwaite or z")
        if self.pair[0] == self.pair[1]:
            raise InputError("the pair of interest must name two different systems")

    def check(self, systems: int) -> None:
        """Refuse what this analysis cannot do with ``systems`` systems."""
        if self.model == "slopes" and systems != 2:
            raise InputError("the slopes model compares two systems; use --model invariant for more")
        if max(self.pair) >= systems or min(self.pair) < 0:
            raise InputError(f"the pair of interest {self.pair} is not among the {systems} systems")
        if self.tier == "lme4" and self.compare != "pair":
            raise InputError("the lme4 tier tests the pair of interest (--compare pair); use --method fast for "
                             "families of contrasts")

    def record(self) -> dict[str, Any]:
        rec = {"model": self.model, "method": self.tier, "test": self.test, "alpha": self.alpha}
        if self.compare != "pair":
            rec.update(compare=self.compare, adjust=self.adjust)
        return rec

    def contrasts(self, systems: int) -> list[tuple[int, int]]:
        """The family: (a, b) pairs for B - A; the pair of interest first."""
        return family_pairs(self.compare, systems, first=self.pair)

    def _contrast_rows(self, systems: int) -> np.ndarray:
        """The family's contrast rows over the fixed effects: (intercept, x) for the slopes model,
        (intercept, treatment dummies of systems 2..S) for the invariant model."""
        if self.model == "slopes":
            return np.array([[0.0, 1.0]])
        return treatment_rows(systems, self.contrasts(systems))

    def design(self, layout: Layout, weights: np.ndarray | None = None) -> Any:
        """The fast tier's component design for a layout (``weights``: per-study 0/1 row presence)."""
        from .fitting.batched import Component, ComponentDesign

        s, n = layout.system, layout.size
        if self.model == "slopes":
            x = np.column_stack([np.ones(n), s - 0.5])
            comps = (Component("worker", layout.worker), Component("worker:x", layout.worker, s - 0.5),
                     Component("item", layout.item), Component("item:x", layout.item, s - 0.5))
        else:
            x = np.column_stack([np.ones(n)] + [(s == k).astype(float) for k in range(1, layout.n_systems)])
            comps = (Component("worker", layout.worker),
                     Component("worker:system", layout.worker * layout.n_systems + s),
                     Component("item", layout.item), Component("item:system", layout.item * layout.n_systems + s))
        return ComponentDesign(x, comps, weights=weights)

    def fit(self, layout: Layout | list[Layout], y: np.ndarray | list[np.ndarray], design: Any = None) -> FamilyFit:
        """Fit every column of ``y`` (N x n); estimates, SEs and df of the family's contrasts.

        REML and ML variance estimates do not change when the data move along the
        fixed effects, so a fit at one set of system means serves every other:
        :meth:`decide` shifts the estimates by the change in the true contrasts.
        A list of layouts (studies with their own rows: missing ratings) and their
        ``y`` (N_j x 1 each) are fitted together on one padded layout.
        """
        if isinstance(layout, list):
            if self.tier != "fast":
                fits = [self.fit(lay, yj) for lay, yj in zip(layout, y)]
                return FamilyFit(*(None if getattr(fits[0], f) is None else
                                   np.concatenate([getattr(r, f) for r in fits])
                                   for f in ("estimate", "se", "df", "singular", "failed", "warned")))
            layout, weights, y = pad_layouts(layout, y)
            design = self.design(layout, weights)
        if self.tier == "lme4":
            est, se, df, singular, failed, warned = self._lme4(layout, y)
            return FamilyFit(est[:, None], se[:, None], None if df is None else df[:, None], singular, failed, warned)
        from .fitting.batched import fit_many

        fit = fit_many(design if design is not None else self.design(layout), y, self._contrast_rows(layout.n_systems),
                       reml=uses_reml(self.test), satterthwaite=self.test == "satterthwaite")
        return FamilyFit(fit.estimate, fit.se, fit.df if self.test == "satterthwaite" else None, fit.singular,
                         fit.failed, ~fit.converged & ~fit.failed)

    def decide(self, fit: FamilyFit, means: np.ndarray, fitted_means: np.ndarray) -> StudyOutcomes:
        """Decisions at the true system ``means`` from a fit of data simulated at ``fitted_means``."""
        family = self.contrasts(len(means))
        true = np.array([means[b] - means[a] for a, b in family])
        shift = true - np.array([fitted_means[b] - fitted_means[a] for a, b in family])
        est = fit.estimate + shift
        p, sig = coefficient_test(est, fit.se, fit.df, self.test, self.alpha)
        if len(family) > 1:
            p = adjust_pvalues(np.where(np.isfinite(p), p, 1.0), self.adjust)
            sig = p <= self.alpha
        differs = true != 0
        right = sig & (np.sign(est) == np.sign(true))
        all_found = np.all(right[:, differs], axis=1) if differs.any() else np.zeros(len(est), bool)
        return StudyOutcomes(est[:, 0], sig[:, 0], np.asarray(fit.failed, bool), np.asarray(fit.singular, bool),
                             np.asarray(fit.warned, bool), None if fit.df is None else fit.df[:, 0], all_found)

    def _lme4(self, layout: Layout, y: np.ndarray) -> tuple[np.ndarray, ...]:
        """lme4 + lmerTest refits of the pair of interest (any layout, per-study ones included)."""
        from .fitting.batched import refit_lme4

        contrast = self._contrast_rows(layout.n_systems)[0]
        res = refit_lme4(self.design(layout), y, contrast, reml=uses_reml(self.test))
        df = res["df"] if self.test == "satterthwaite" else None
        return res["estimate"], res["se"], df, res["singular"] > 0, res["failed"] > 0, res["warned"] > 0


def pad_layouts(layouts: list[Layout], ys: list[np.ndarray]) -> tuple[Layout, np.ndarray, np.ndarray]:
    """Studies with their own rows as one padded layout: every (item, system) output gets as many rows as
    it has in the study that rates it most, each study's ratings of it first; returns the layout (worker
    per study: (n, N)), row weights (n, N; 0: no rating) and y (N, n; 0 where absent)."""
    first = layouts[0]
    s = first.n_systems
    n = len(layouts)
    study = np.concatenate([np.full(lay.size, j) for j, lay in enumerate(layouts)])
    out = np.concatenate([lay.item * s + lay.system for lay in layouts])
    worker = np.concatenate([lay.worker for lay in layouts])
    vals = np.concatenate([np.asarray(yj, float).ravel() for yj in ys])
    order = np.lexsort((out, study))
    study, out, worker, vals = study[order], out[order], worker[order], vals[order]
    group = study * (first.n_items * s) + out
    start = np.searchsorted(group, group, side="left")
    rank = np.arange(group.size) - start
    per_out = np.zeros(first.n_items * s, int)
    np.maximum.at(per_out, out, rank + 1)
    offset = np.concatenate([[0], np.cumsum(per_out)])
    size = int(offset[-1])
    pos = offset[out] + rank
    weights = np.zeros((n, size))
    weights[study, pos] = 1.0
    workers = np.zeros((n, size), int)
    workers[study, pos] = worker
    y = np.zeros((size, n))
    y[pos, study] = vals
    cell = np.repeat(np.arange(first.n_items * s), per_out)
    return (Layout(workers, cell // s, cell % s, first.n_workers, first.n_items, s), weights, y)
