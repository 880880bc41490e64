"""The cumulative-link mixed model (CLMM) of ordinal ratings applied to each simulated study.

``rating ~ system + (1 | worker) + (1 | item) + (1 | worker:system) + (1 | item:system)``, cumulative
logit or probit with flexible thresholds (Laplace), fitted to the ratings of an
:class:`~humaneval_power.ordinal_process.OrdinalProcess` with the process's link and scale. The effect
is the latent shift of system B over A of the pair of interest (treatment coding against A).
Tiers: ``fast`` (all studies of a layout at once without R:
:func:`~humaneval_power.fitting.clmm.fit_clmm_many`) or ``clmm`` (``ordinal::clmm`` refits in R, one
study at a time: :func:`~humaneval_power.fitting.clmm_r.fit_clmm_r`). Tests
(:func:`~humaneval_power.ordinal_process.ordinal_decision`): ``t`` (the default, the planner's default name
``satterthwaite`` means it: the Wald statistic against t with the Satterthwaite df of the latent working
model), ``bartlett`` (LR / mean LR of parametric-bootstrap data sets from the studies' fitted null models, one
factor per chunk of 200 studies, the draws refitted by the fast path in either tier), ``lrt`` (likelihood
ratio, chi-square 1) or ``z`` (clmm's Wald z, liberal with few workers).
A cumulative-link fit moves with the location, so studies are fitted at the true means. A study whose
ratings leave a category of the scale unused cannot estimate its thresholds and counts as failed.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np
from scipy import stats

from ..designs import Design, Layout
from ..engine import StudyOutcomes
from ..errors import InputError
from ..fitting.clmm import BARTLETT_DRAWS, bartlett_draws, bootstrap_lr, check_link, concat_batches, crossed_groups, data_seed
from ..ordinal_process import DEFAULT_TEST, ORDINAL_TESTS, OrdinalProcess, ordinal_decision, study_dfs
from ..validation import check_alpha, check_choice
from .base import FamilyFit, check_pair, fit_each

TIERS = ("fast", "clmm")  #: fast: fitting/clmm.py (batched Laplace, no R); clmm: ordinal::clmm refits in R
SINGULAR_SD = 1e-4  #: a fitted random-effect SD below this counts as a singular fit


@dataclass(frozen=True)
class Prepared:
    """What the fits of one layout share: the grouping arrays, the treatment design and the tested column."""

    groups: dict[str, np.ndarray]
    X: np.ndarray
    coef: int


@dataclass(frozen=True)
class OrdinalCLMM:
    """Tier, test, alpha, pair of interest, link and scale of the CLMM analysis (see the module docs)."""

    name: ClassVar[str] = "ordinal"
    location_invariant: ClassVar[bool] = False  #: the thresholds move with the location: fit at the truth
    ordinal: ClassVar[bool] = True  #: analyses ordinal ratings (an OrdinalProcess's)

    tier: str = "fast"
    test: str = DEFAULT_TEST
    alpha: float = 0.05
    compare: str = "pair"
    adjust: str = "holm"
    pair: tuple[int, int] = (0, 1)
    link: str = "logit"
    scale: tuple[int, int] | None = None  #: (lowest, highest) rating; None: the process's

    def __post_init__(self) -> None:
        if self.test == "satterthwaite":  # the planner's default name: the default ordinal test
            object.__setattr__(self, "test", DEFAULT_TEST)
        check_choice("ordinal test", self.test, ORDINAL_TESTS)
        check_choice("method", self.tier, TIERS)
        check_link(self.link)
        check_alpha(self.alpha)
        if self.compare != "pair":
            raise InputError("the ordinal analysis tests the pair of interest (--compare pair)")
        check_pair(self.pair)

    @classmethod
    def of(cls, process: OrdinalProcess, **options: Any) -> OrdinalCLMM:
        """The analysis of ``process``'s ratings (its link and scale) with ``options``."""
        return cls(link=process.link, scale=process.scale, **options)

    @property
    def chunk_size(self) -> int:
        if self.test == "bartlett":  # one Bartlett factor per chunk (either tier: the same studies, the same factor)
            return BARTLETT_DRAWS
        return 5 if self.tier == "clmm" else 50

    def check(self, systems: int, effect: float = 0.0) -> None:
        check_pair(self.pair, systems)

    def record(self) -> dict[str, Any]:
        return {"model": self.name, "method": self.tier, "test": self.test, "alpha": self.alpha, "link": self.link}

    def closed_form(self, design: Design, process: Any, means: Any, sufficient: bool = True) -> None:
        """None (every study is fitted); refuses a process that is not the ordinal one this analysis fits."""
        if not isinstance(process, OrdinalProcess):
            raise InputError("the ordinal analysis needs ordinal parameters (hepower fit --family ordinal)")
        if (process.link, process.scale) != (self.link, self.scale or process.scale):
            raise InputError(f"the analysis fits the {self.link} link on {self.scale}, the process simulates "
                             f"the {process.link} link on {process.scale}")

    def prepare(self, layout: Layout, weights: np.ndarray | None = None) -> Prepared | None:
        """The groups and design of a layout shared by its studies (None when workers vary by study)."""
        if np.ndim(layout.worker) != 1:
            return None
        return self._design(layout.worker, layout)

    def _design(self, worker: np.ndarray, layout: Layout) -> Prepared:
        a, b = self.pair
        keep = [s for s in range(layout.n_systems) if s != a]
        X = (layout.system[:, None] == np.asarray(keep)[None, :]).astype(float)
        return Prepared(crossed_groups(worker, layout.item, layout.system), X, keep.index(b))

    def fit(self, layout: Layout | list[Layout], y: np.ndarray | list[np.ndarray], prepared: Any = None) -> FamilyFit:
        """Fit every column of ``y`` (integer ratings x studies): the latent shift of B over A, its SE, the
        t test's df and each study's p-value of ``test``."""
        if isinstance(layout, list):
            assert isinstance(y, list)
            return fit_each(self, layout, y)
        assert isinstance(y, np.ndarray)
        if np.ndim(layout.worker) == 2:  # workers drawn per study: each study its own groups
            layouts = [replace(layout, worker=w) for w in layout.worker]
            if self.test == "bartlett":  # one Bartlett factor per chunk: its bootstrap draws spread over the studies
                draws = bartlett_draws(y.shape[1])
                return self._decide(concat_batches([self._batch(self._design(lay.worker, lay), y[:, [j]], draws)
                                                    for j, lay in enumerate(layouts)]))
            return fit_each(self, layouts, [y[:, [j]] for j in range(y.shape[1])])
        return self._fit(prepared if prepared is not None else self._design(layout.worker, layout), y)

    def _batch(self, prep: Prepared, y: np.ndarray, draws: int) -> Any:
        """The tier's fits of the columns of ``y`` with the LR (and ``draws`` bootstrap LRs per study) the test needs."""
        scale = self.scale or (int(np.nanmin(y)), int(np.nanmax(y)))
        batch = (_fast_batch if self.tier == "fast" else _clmm_batch)(y, prep, scale, self.link,
                                                                      self.test in ("lrt", "bartlett"))
        if self.test == "bartlett":  # the clmm tier's null fits too: the draws are refitted by the fast path
            batch = replace(batch, lr_boot=bootstrap_lr(batch, prep.X, prep.groups, coef=prep.coef, scale=scale,
                                                        link=self.link, draws=draws, seed=data_seed(y)))
        return batch

    def _fit(self, prep: Prepared, y: np.ndarray) -> FamilyFit:
        batch = self._batch(prep, y, bartlett_draws(y.shape[1]))
        df = None
        if self.test == "t":
            df = study_dfs(batch.sds, prep.groups, prep.X, prep.coef, self.link)
        return self._decide(batch, df)

    def _decide(self, batch: Any, df: np.ndarray | None = None) -> FamilyFit:
        # ordinal_decision decides at alpha; p holds 0 (reject) or 1 so that decide's p <= alpha repeats it
        p = np.where(ordinal_decision(batch, self.test, self.alpha, df), 0.0, 1.0)
        singular = np.nan_to_num(np.min(batch.sds, axis=1), nan=1.0) < SINGULAR_SD
        return FamilyFit(batch.estimate[:, None], batch.se[:, None], None if df is None else df[:, None], singular,
                         np.asarray(batch.failed, bool), ~np.asarray(batch.converged, bool) & ~batch.failed, p[:, None])

    def decide(self, fit: FamilyFit, means: np.ndarray | None = None,
               fitted_means: np.ndarray | None = None) -> StudyOutcomes:
        """The test of the pair per study (studies are drawn at the true means: no shift)."""
        assert fit.p is not None
        return StudyOutcomes(fit.estimate[:, 0], fit.p[:, 0] <= self.alpha, fit.failed, fit.singular, fit.warned,
                             None if fit.df is None else fit.df[:, 0])


def _fast_batch(y: np.ndarray, prep: Prepared, scale: tuple[int, int], link: str, lrt: bool) -> Any:
    from ..fitting.clmm import fit_clmm_many

    return fit_clmm_many(y, prep.X, prep.groups, coef=prep.coef, scale=scale, link=link, lrt=lrt)


def _clmm_batch(y: np.ndarray, prep: Prepared, scale: tuple[int, int], link: str, lrt: bool) -> Any:
    """``ordinal::clmm`` refits of every column, as a :class:`~humaneval_power.fitting.clmm.ClmmBatch`."""
    from ..fitting.clmm import ClmmBatch
    from ..fitting.clmm_r import fit_clmm_r

    S = y.shape[1]
    est, se, loglik, lr = (np.full(S, np.nan) for _ in range(4))
    sds = np.full((S, len(prep.groups)), np.nan)
    converged, failed = np.zeros(S, bool), np.zeros(S, bool)
    reasons: list[str] = []
    X0 = np.delete(prep.X, prep.coef, axis=1)
    null = np.full((S, scale[1] - scale[0] + X0.shape[1] + len(prep.groups) if lrt else 0), np.nan)  # ClmmBatch.null_params
    for j in range(S):
        try:
            f1 = fit_clmm_r(y[:, j], prep.X, prep.groups, link=link, scale=scale)
            f0 = fit_clmm_r(y[:, j], X0 if X0.shape[1] else None, prep.groups, link=link, scale=scale,
                            hessian=False) if lrt else None  # its likelihood and estimates only
        except Exception as exc:  # noqa: BLE001  (an R error or a refused study: the study fails)
            failed[j] = True
            reasons.append(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            continue
        est[j], se[j], loglik[j] = f1.beta[prep.coef], f1.se_beta[prep.coef], f1.loglik
        sds[j] = np.abs(f1.sds)
        converged[j] = f1.converged and (f0 is None or f0.converged)
        if f0 is not None:
            lr[j] = max(0.0, 2 * (f1.loglik - f0.loglik))
            null[j] = np.concatenate([f0.thresholds, f0.beta, np.abs(f0.sds)])
    z = est / se
    return ClmmBatch(est, se, z, 2 * stats.norm.sf(np.abs(z)), loglik, lr, stats.chi2.sf(lr, 1), converged, failed,
                     tuple(reasons), sds, null)


__all__ = ["TIERS", "OrdinalCLMM", "Prepared"]
