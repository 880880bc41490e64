"""Ordinal ratings: the cumulative-link data-generating process, δ ↔ mean rating, and the calibrated test.

The process (DESIGN.md, "Ordinal ratings"): ratings 1..K (``lowest``..``lowest + K - 1``) with
P(Y <= k) = F(theta_k - eta), eta = delta[s] + u[w] + uw[w, s] + v[i] + vi[i, s], the random effects
normal with the coding-invariant SDs of :class:`~humaneval_power.processes.InvariantProcess` (on the
latent scale; the latent residual is logistic or standard normal, so there is no ``sd_residual``).
Simulated as Y = lowest + #{k: theta_k < eta + e}, e ~ F, which has exactly these probabilities.
Random effects are drawn from the stream first and the system effects added last (common random numbers).

A latent shift delta between two systems maps to a difference in expected mean rating through the
thresholds and the distribution of the summed random effects b ~ N(0, tau^2), tau^2 the sum of the four
variances: E[Y | eta] = lowest + sum_k E_b[1 - F(theta_k - eta - b)], in closed form for probit
(Phi((eta - theta_k) / sqrt(1 + tau^2))) and by Gauss-Hermite quadrature for logit.

:func:`ordinal_decision` is the significance decision of a batch of CLMM fits
(:func:`~humaneval_power.fitting.clmm.fit_clmm_many`) by ``test``: ``t`` (the default, chosen by the Type-I
simulations of ``examples/ordinal_type1.py``, docs/ordinal.md: the Wald statistic against t with the
Satterthwaite df of the latent working model, :func:`latent_satterthwaite_df`), ``bartlett`` (the likelihood
ratio divided by its mean over parametric-bootstrap data sets from the fitted null models, against chi-square
1), ``lrt`` (likelihood ratio, chi-square 1) or ``z`` (clmm's Wald z, liberal with few workers).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize, special, stats

from .designs import Layout
from .errors import InputError
from .fitting.clmm import check_link
from .params import ORDINAL_SD_NAMES
from .processes import _effects
from .validation import check_number

ORDINAL_SDS = ORDINAL_SD_NAMES  #: the latent SDs, as a parameter file names them
ORDINAL_TESTS = ("t", "lrt", "z", "bartlett")
DEFAULT_TEST = "t"  #: calibrated or conservative on all three designs of docs/ordinal.md (Bartlett: liberal on one)
_GH_NODES = 80


def _cdf(z: np.ndarray, link: str) -> np.ndarray:
    return special.expit(z) if link == "logit" else special.ndtr(z)


@dataclass(frozen=True)
class OrdinalProcess:
    """K-category ratings from a cumulative-link model with the coding-invariant random effects (latent SDs)."""

    thresholds: tuple[float, ...]
    link: str = "logit"
    sd_worker: float = 0.0
    sd_worker_system: float = 0.0
    sd_item: float = 0.0
    sd_item_system: float = 0.0
    lowest: int = 1
    name: str = "ordinal"
    systems: int = 2  #: the number of systems (the planner's ``Process`` protocol)

    @classmethod
    def from_params(cls, params: Any) -> OrdinalProcess:
        """The process of a fitted or typed :class:`~humaneval_power.params.OrdinalParams`."""
        sd = {k: float(params.sds[k]) for k in ORDINAL_SDS}
        return cls(tuple(params.thresholds), params.link, sd["sd_worker"], sd["sd_worker_system"], sd["sd_item"],
                   sd["sd_item_system"], lowest=params.scale[0], name=params.name)

    def __post_init__(self) -> None:
        check_link(self.link)
        th = np.asarray(self.thresholds, float)
        if th.ndim != 1 or th.size < 2 or not np.all(np.isfinite(th)):
            raise InputError(f"give at least two finite thresholds (three categories), got {list(self.thresholds)}")
        if np.any(np.diff(th) <= 0):
            raise InputError(f"thresholds must be strictly increasing, got {list(self.thresholds)}")
        if not isinstance(self.systems, int) or self.systems < 2:
            raise InputError(f"systems must be an integer >= 2, got {self.systems}")
        for k in ORDINAL_SDS:
            if check_number(k, getattr(self, k)) < 0:
                raise InputError(f"{k} must be >= 0, got {getattr(self, k)}")

    @property
    def categories(self) -> int:
        return len(self.thresholds) + 1

    @property
    def scale(self) -> tuple[int, int]:
        """(lowest, highest) rating."""
        return self.lowest, self.lowest + len(self.thresholds)

    @property
    def sds(self) -> dict[str, float]:
        return {k: float(getattr(self, k)) for k in ORDINAL_SDS}

    @property
    def tau(self) -> float:
        """SD of the summed random effects of one rating."""
        return math.sqrt(sum(v * v for v in self.sds.values()))

    def key(self) -> list[Any]:
        return ["ordinal", self.link, list(self.thresholds), self.lowest, sorted(self.sds.items())]

    def record(self) -> dict[str, Any]:
        return {"params": self.name}

    def latent(self, layout: Layout, effects: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        """Latent values eta + e (n, N) of n studies; ``effects``: latent effect of each system."""
        s = layout.system
        eff = np.asarray(effects, float)
        if eff.shape != (layout.n_systems,) or not np.all(np.isfinite(eff)):
            raise InputError(f"give {layout.n_systems} finite latent system effects, got {list(np.ravel(effects))}")
        S = layout.n_systems
        eta = (_effects(layout, self.sd_worker, layout.worker, layout.n_workers, n, rng)
               + _effects(layout, self.sd_worker_system, layout.worker * S + s, layout.n_workers * S, n, rng)
               + _effects(layout, self.sd_item, layout.item, layout.n_items, n, rng)
               + _effects(layout, self.sd_item_system, layout.item * S + s, layout.n_items * S, n, rng))
        noise = rng.logistic(size=eta.shape) if self.link == "logit" else rng.standard_normal(eta.shape)
        return eta + noise + eff[s]

    def simulate(self, layout: Layout, effects: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        """Integer ratings (N, n) of n studies on one layout (worker may be (n, N))."""
        z = self.latent(layout, effects, n, rng)
        return (self.lowest + np.searchsorted(np.asarray(self.thresholds, float), z, side="left")).T

    # ------------------------------------------------------------------ marginal (population) quantities

    def cumulative(self, location: np.ndarray | float) -> np.ndarray:
        """P(Y <= k), k = 1..K-1 (last axis), of a rating at latent ``location``, averaged over the random effects."""
        eta = np.asarray(location, float)[..., None]
        th = np.asarray(self.thresholds, float)
        tau = self.tau
        if self.link == "probit":
            return special.ndtr((th - eta) / math.sqrt(1 + tau * tau))
        x, w = np.polynomial.hermite_e.hermegauss(_GH_NODES)  # weight exp(-x^2/2)
        w = w / w.sum()
        return np.tensordot(_cdf(th[..., None] - eta[..., None] - tau * x, "logit"), w, axes=([-1], [0]))

    def probabilities(self, location: np.ndarray | float) -> np.ndarray:
        """Marginal category probabilities (last axis K) at latent ``location``."""
        c = self.cumulative(location)
        ones = np.ones(c.shape[:-1] + (1,))
        return np.diff(np.concatenate([0 * ones, c, ones], axis=-1), axis=-1)

    def mean_rating(self, location: np.ndarray | float) -> np.ndarray:
        """Expected rating at latent ``location``: lowest + sum_k P(Y > k)."""
        return self.lowest + (1 - self.cumulative(location)).sum(axis=-1)

    def mean_difference(self, delta: float, base: float = 0.0) -> float:
        """Difference in expected mean rating of a latent shift ``delta`` from a system at latent ``base``."""
        return float(self.mean_rating(base + delta) - self.mean_rating(base))

    def latent_shift(self, difference: float, base: float = 0.0) -> float:
        """The latent shift whose difference in expected mean rating from ``base`` is ``difference``."""
        check_number("mean-rating difference", difference)
        lo, hi = self.scale
        top = float(self.mean_rating(base))
        if not lo - top < difference < hi - top:
            raise InputError(f"a mean-rating difference of {difference} is not reachable from a mean of {top:.4g} "
                             f"on the {lo}..{hi} scale")
        if difference == 0:
            return 0.0
        span = 1.0
        while (self.mean_difference(math.copysign(span, difference), base) - difference) * math.copysign(1, difference) < 0:
            span *= 2
        return float(optimize.brentq(lambda d: self.mean_difference(d, base) - difference,
                                     *sorted((0.0, math.copysign(span, difference))), xtol=1e-12, rtol=1e-12))


#: ordinal presets (``--preset``): CLMMs fitted to the DialSummEval relevance ratings of systems A, F, H (1..5, all
#: 100 items) by the no-R backend, thresholds of system A (the baseline, at latent 0), four significant digits
#: (docs/ordinal.md, "Ordinal presets": ``hepower fit ... --family ordinal --where dimension=relevance --systems A F
#: H --backend laplace``). expert: 3 experts rate every output (900 ratings); amt: 5 crowd workers per output
#: (1,500 ratings, 213 workers), where the worker SD is large and every other SD is at the boundary.
ORDINAL_PRESETS: dict[str, OrdinalProcess] = {
    "dialsummeval-expert": OrdinalProcess((-6.030, -4.245, -1.799, 0.2346), "logit", sd_worker=1.343,
                                          sd_worker_system=0.0, sd_item=0.7664, sd_item_system=0.8497,
                                          name="dialsummeval-expert"),
    "dialsummeval-amt": OrdinalProcess((-6.199, -2.918, -0.09712, 3.238), "logit", sd_worker=2.238,
                                       sd_worker_system=0.0, sd_item=0.02804, sd_item_system=0.0,
                                       name="dialsummeval-amt"),
}


# ---------------------------------------------------------------------- the calibrated test


def latent_satterthwaite_df(groups: dict[str, np.ndarray], X: np.ndarray, coef: int, sds: np.ndarray,
                            link: str = "logit") -> float:
    """Satterthwaite df of coefficient ``coef`` in the latent working model of a CLMM fit
    (:func:`contrast_satterthwaite_df` of the unit vector of ``coef``)."""
    return contrast_satterthwaite_df(groups, X, np.eye(np.asarray(X).reshape(len(X), -1).shape[1])[coef], sds, link)


@dataclass(frozen=True)
class LatentDesign:
    """What the latent working model's df take from the layout alone (shared by every study of it): the fixed
    effects' design with the intercept, the random effects' group sizes and the cross products of Z and X."""

    sizes: tuple[int, ...]
    G: np.ndarray  #: Z'Z
    ZX: np.ndarray  #: Z'X (the intercept first)
    XX: np.ndarray  #: X'X

    @classmethod
    def of(cls, groups: dict[str, np.ndarray], X: np.ndarray) -> LatentDesign:
        N = len(X)
        Xw = np.column_stack([np.ones(N), np.asarray(X, float).reshape(N, -1)])
        codes = [np.unique(np.asarray(g).astype(str), return_inverse=True)[1] for g in groups.values()]
        sizes = tuple(int(c.max()) + 1 for c in codes)
        edges = np.cumsum((0, *sizes))
        Z = np.zeros((N, edges[-1]))
        for c, e in zip(codes, edges):
            Z[np.arange(N), e + c] = 1.0
        return cls(sizes, Z.T @ Z, Z.T @ Xw, Xw.T @ Xw)

    def df(self, contrast: np.ndarray, sds: np.ndarray, link: str = "logit") -> float:
        """:func:`contrast_satterthwaite_df` on this layout."""
        check_link(link)
        G, ZX = self.G, self.ZX
        d = np.repeat(np.abs(np.asarray(sds, float)), self.sizes)
        s2 = math.pi**2 / 3 if link == "logit" else 1.0
        # V = s2 I + B B', B = Z diag(d): every product through the q x q Woodbury core A = s2 I + B'B
        A = s2 * np.eye(len(d)) + d[:, None] * G * d[None, :]
        Ainv = np.linalg.inv(A)
        GdA = (G * d[None, :]) @ Ainv * d[None, :]  # G d A^-1 d
        ZViZ = (G - GdA @ G) / s2
        ZViX = (ZX - GdA @ ZX) / s2
        XViX = (self.XX - (ZX.T * d) @ Ainv @ (d[:, None] * ZX)) / s2
        C = np.linalg.inv(XViX)
        Lw = np.concatenate([[0.0], np.asarray(contrast, float)])  # the intercept is not in the contrast
        var = float(Lw @ C @ Lw)
        zh = ZViX @ (C @ Lw)  # Z' V^-1 X C L
        edges = np.cumsum((0, *self.sizes))
        blocks = [slice(a, b) for a, b in itertools.pairwise(edges)]
        g = np.array([-np.sum(zh[b] ** 2) for b in blocks])
        M = ZViZ - ZViX @ C @ ZViX.T  # Z' P Z
        info = np.array([[0.5 * np.sum(M[a, b] ** 2) for b in blocks] for a in blocks])
        denom = float(g @ np.linalg.pinv(info) @ g)
        return 2 * var * var / denom if denom > 0 else math.inf


def contrast_satterthwaite_df(groups: dict[str, np.ndarray], X: np.ndarray, contrast: np.ndarray, sds: np.ndarray,
                              link: str = "logit") -> float:
    """Satterthwaite df of the contrast ``contrast @ b`` (a vector over the columns of ``X``) in the latent working
    model of a CLMM fit.

    The working model is the linear mixed model of the latent scale: y* = 1 b0 + X b + sum_k Z_k u_k + e
    with the fitted SDs ``sds`` (in the order of ``groups``) and Var(e) fixed at the link's variance
    (pi^2 / 3 logit, 1 probit). df = 2 V^2 / (g' I^-1 g), V the GLS variance of L'b, g its gradient in the
    variances and I their expected REML information (tr(P Z_k Z_k' P Z_l Z_l') / 2). Components with a
    zero SD stay in (their information is finite at 0).
    """
    return LatentDesign.of(groups, X).df(contrast, sds, link)


def study_dfs(sds: np.ndarray, groups: dict[str, np.ndarray], X: np.ndarray, coef: int = 0,
              link: str = "logit") -> np.ndarray:
    """:func:`latent_satterthwaite_df` of every study (rows of ``sds``, e.g. ``ClmmBatch.sds``; NaN where failed);
    the layout's part computed once."""
    from threadpoolctl import threadpool_limits

    check_link(link)
    design = LatentDesign.of(groups, X)
    unit = np.eye(design.XX.shape[0] - 1)[coef]
    with threadpool_limits(1):
        return np.array([design.df(unit, s, link) if np.all(np.isfinite(s)) else np.nan for s in np.atleast_2d(sds)])


def ordinal_decision(batch: Any, test: str = DEFAULT_TEST, alpha: float = 0.05,
                     df: np.ndarray | float | None = None) -> np.ndarray:
    """Whether each study of a :class:`~humaneval_power.fitting.clmm.ClmmBatch` rejects the null at ``alpha``.

    ``lrt`` needs the batch fitted with ``lrt=True``, ``bartlett`` with ``lrt=True, bootstrap=B``
    (:func:`~humaneval_power.fitting.clmm.bartlett_p`); ``t`` needs ``df`` (e.g. :func:`latent_satterthwaite_df`
    per study, :func:`study_dfs`). Failed studies (NaN) never reject.
    """
    if test not in ORDINAL_TESTS:
        raise InputError(f"unknown ordinal test {test!r}; known: {', '.join(ORDINAL_TESTS)}")
    if test == "lrt":
        p = np.asarray(batch.p_lr, float)
        if np.all(np.isnan(p)) and p.size:
            raise InputError("the likelihood-ratio test needs the batch fitted with lrt=True")
    elif test == "z":
        p = np.asarray(batch.p_wald, float)
    elif test == "bartlett":
        p = np.asarray(batch.p_bartlett, float)
    else:
        if df is None:
            raise InputError("the t test needs degrees of freedom: df=study_dfs(batch.sds, groups, X)")
        p = 2 * stats.t.sf(np.abs(np.asarray(batch.z, float)), np.asarray(df, float))
    return np.nan_to_num(p, nan=1.0) < alpha
