"""The Gaussian mixed models of Likert ratings applied to each simulated study.

* :class:`InvariantLMM` (``invariant``): ``y ~ system + (1 | worker) + (1 | worker:system)
  + (1 | item) + (1 | item:system)``, any number of systems;
* :class:`SlopesLMM` (``slopes``): Card et al.'s ``y ~ x + (1 + x || worker) + (1 + x || item)``,
  two systems.

Both share the options of :class:`GaussianLMM`: ``tier`` (``fast``: all studies of a
cell fitted at once without R, :mod:`humaneval_power.fitting.batched`; ``lme4``:
refits in R, the reference; ``analytic`` and ``statsmodels``: the closed-form
crossed cell, :mod:`.crossed`), ``test`` (``satterthwaite``: REML, lmerTest's df;
``z``; ``card2020``: ML, t > 1.96), ``compare`` (``pair``, ``baseline``, ``pairs``:
:mod:`humaneval_power.contrasts`) with ``adjust`` over that family
(:mod:`humaneval_power.multiplicity`) and the ``pair`` of interest. Each study's
record holds the pair of interest's estimate and decision (after adjustment) and
whether every true difference in the family was detected with the right sign.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..contrasts import COMPARISONS, family_pairs, treatment_rows
from ..designs import CrowdDesign, Design, Layout
from ..engine import StudyOutcomes
from ..errors import InputError
from ..multiplicity import PER_STUDY, adjust_pvalues
from ..significance.coef_test import check_test, coefficient_test, uses_reml
from ..validation import check_alpha, check_choice
from .base import FamilyFit, check_pair, fit_each
from .crossed import TIERS, CrossedSlopes  # TIERS: analytic, statsmodels through the closed-form crossed cell


@dataclass(frozen=True)
class GaussianLMM:
    """Tier, test and contrasts of a Gaussian mixed model (see the module docs); subclasses give the model."""

    name: ClassVar[str]
    location_invariant: ClassVar[bool] = True  #: REML/ML variance estimates ignore the fixed effects

    tier: str = "fast"
    test: str = "satterthwaite"
    alpha: float = 0.05
    compare: str = "pair"
    adjust: str = "holm"
    pair: tuple[int, int] = (0, 1)

    def __post_init__(self) -> None:
        check_choice("method", self.tier, TIERS)
        check_test(self.test)
        check_alpha(self.alpha)
        check_choice("comparison", self.compare, COMPARISONS)
        check_choice("adjustment", self.adjust, PER_STUDY)
        if self.compare != "pair" and self.test == "card2020":
            raise InputError("the card2020 test is one-sided for one pair; compare several systems with "
                             "--test satterthwaite or z")
        check_pair(self.pair)

    @property
    def chunk_size(self) -> int:
        return 10 if self.tier == "lme4" else 200

    def check(self, systems: int, effect: float = 0.0) -> None:
        check_pair(self.pair, systems)
        if self.tier == "lme4" and self.compare != "pair":
            raise InputError("the lme4 tier tests the pair of interest (--compare pair); use --method fast for "
                             "families of contrasts")
        if self.test == "card2020" and effect < 0:
            raise InputError("the card2020 test counts only positive detections (B > A): give a positive effect")

    def record(self) -> dict[str, Any]:
        rec = {"model": self.name, "method": self.tier, "test": self.test, "alpha": self.alpha}
        if self.compare != "pair":
            rec.update(compare=self.compare, adjust=self.adjust)
        return rec

    def closed_form(self, design: Design, process: Any, means: Any, sufficient: bool = True) -> CrossedSlopes | None:
        """The closed-form analysis of the same model on this design, where ``sufficient`` statistics are
        allowed (None: fit every study in full); refuses the closed-form-only tiers elsewhere."""
        if self.tier in ("analytic", "statsmodels"):
            raise InputError(f"the {self.tier} method covers fully crossed two-system designs with the slopes model; "
                             "use --method fast or lme4")
        return None

    def contrasts(self, systems: int) -> list[tuple[int, int]]:
        """The family: (a, b) pairs for B - A; the pair of interest first."""
        return family_pairs(self.compare, systems, first=self.pair)

    def contrast_rows(self, systems: int) -> np.ndarray:
        """The family's contrast rows over the model's fixed effects."""
        raise NotImplementedError

    def prepare(self, layout: Layout, weights: np.ndarray | None = None) -> Any:
        """The fast tier's component design for a layout (``weights``: per-study 0/1 row presence);
        None for the other tiers."""
        return self.component_design(layout, weights) if self.tier == "fast" else None

    def component_design(self, layout: Layout, weights: np.ndarray | None = None) -> Any:
        """The model's fixed effects and variance components on a layout (a batched ``ComponentDesign``)."""
        raise NotImplementedError

    def fit(self, layout: Layout | list[Layout], y: np.ndarray | list[np.ndarray], prepared: Any = None) -> FamilyFit:
        """Fit every column of ``y`` (N x n); estimates, SEs and df of the family's contrasts.

        REML and ML variance estimates do not change when the data move along the
        fixed effects, so a fit at one set of system means serves every other:
        :meth:`decide` shifts the estimates by the change in the true contrasts.
        A list of layouts (studies with their own rows: missing ratings) and their
        ``y`` (N_j x 1 each) are fitted together on one padded layout.
        """
        if isinstance(layout, list):
            assert isinstance(y, list)
            if self.tier != "fast":
                return fit_each(self, layout, y)
            layout, weights, y = pad_layouts(layout, y)
            prepared = self.component_design(layout, weights)
        assert isinstance(y, np.ndarray)
        if self.tier == "lme4":
            return self._lme4(layout, y)
        from ..fitting.batched import fit_many

        fit = fit_many(prepared if prepared is not None else self.component_design(layout), y,
                       self.contrast_rows(layout.n_systems), reml=uses_reml(self.test),
                       satterthwaite=self.test == "satterthwaite")
        return FamilyFit(fit.estimate, fit.se, fit.df if self.test == "satterthwaite" else None, fit.singular,
                         fit.failed, ~fit.converged & ~fit.failed)

    def decide(self, fit: FamilyFit, means: np.ndarray, fitted_means: np.ndarray) -> StudyOutcomes:
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

    def _lme4(self, layout: Layout, y: np.ndarray) -> FamilyFit:
        """lme4 + lmerTest refits of the pair of interest (any layout, per-study ones included)."""
        from ..fitting.batched import refit_lme4

        contrast = self.contrast_rows(layout.n_systems)[0]
        res = refit_lme4(self.component_design(layout), y, contrast, reml=uses_reml(self.test))
        df = res["df"][:, None] if self.test == "satterthwaite" else None
        return FamilyFit(res["estimate"][:, None], res["se"][:, None], df, res["singular"] > 0, res["failed"] > 0,
                         res["warned"] > 0)


@dataclass(frozen=True)
class InvariantLMM(GaussianLMM):
    """The coding-invariant model, any number of systems (treatment coding, system 1 the reference)."""

    name: ClassVar[str] = "invariant"

    def contrast_rows(self, systems: int) -> np.ndarray:
        """(intercept, treatment dummies of systems 2..S) per contrast of the family."""
        return treatment_rows(systems, self.contrasts(systems))

    def component_design(self, layout: Layout, weights: np.ndarray | None = None) -> Any:
        from ..fitting.batched import Component, ComponentDesign

        s, n = layout.system, layout.size
        x = np.column_stack([np.ones(n)] + [(s == k).astype(float) for k in range(1, layout.n_systems)])
        comps = (Component("worker", layout.worker),
                 Component("worker:system", layout.worker * layout.n_systems + s),
                 Component("item", layout.item), Component("item:system", layout.item * layout.n_systems + s))
        return ComponentDesign(x, comps, weights=weights)


@dataclass(frozen=True)
class SlopesLMM(GaussianLMM):
    """Card et al.'s slope model for two systems (x = -1/2, +1/2; uncorrelated intercepts and slopes)."""

    name: ClassVar[str] = "slopes"

    def check(self, systems: int, effect: float = 0.0) -> None:
        if systems != 2:
            raise InputError("the slopes model compares two systems; use --model invariant for more")
        super().check(systems, effect)

    def contrast_rows(self, systems: int) -> np.ndarray:
        """(intercept, x): the slope of x."""
        return np.array([[0.0, 1.0]])

    def component_design(self, layout: Layout, weights: np.ndarray | None = None) -> Any:
        from ..fitting.batched import Component, ComponentDesign

        x = layout.system - 0.5
        comps = (Component("worker", layout.worker), Component("worker:x", layout.worker, x),
                 Component("item", layout.item), Component("item:x", layout.item, x))
        return ComponentDesign(np.column_stack([np.ones(layout.size), x]), comps, weights=weights)

    def closed_form(self, design: Design, process: Any, means: Any, sufficient: bool = True) -> CrossedSlopes | None:
        """The closed-form crossed analysis when every worker rates every item under both systems and the
        data follow the slope process (sufficient statistics)."""
        from ..processes import SlopeProcess

        d = design
        if (sufficient and isinstance(process, SlopeProcess) and isinstance(d, CrowdDesign) and d.assignment == "crossed"
                and d.presentation == "within" and d.items_per_hit == 1 and d.missing == 0 and means is None):
            return CrossedSlopes(self.tier, self.test, self.alpha)
        return super().closed_form(design, process, means, sufficient)


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
