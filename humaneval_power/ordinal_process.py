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
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

import numpy as np
from scipy import linalg, optimize, sparse, special, stats

from .designs import Layout
from .errors import InputError
from .fitting.blas import one_blas_thread
from .fitting.clmm import check_link
from .params import ORDINAL_SD_NAMES
from .processes import _effects
from .validation import check_number

ORDINAL_SDS = ORDINAL_SD_NAMES  #: the latent SDs, as a parameter file names them
ORDINAL_TESTS = ("t", "lrt", "z", "bartlett")
DEFAULT_TEST = "t"  #: calibrated or conservative on all three designs of docs/ordinal.md (Bartlett: liberal on one)
_GH_NODES = 80

#: singular values of the variances' information below this fraction of the largest count as zero (a component
#: confounded with another or with X): the numerical rank of the pseudo-inverse in the Satterthwaite df
RANK_TOLERANCE = 1e-10
#: a factor is absorbed in closed form only while its product terms number at most this many times the entries
#: of its dense rows (``LatentDesign``): memory stays within a small multiple of the dense path's
ELIMINATION_BUDGET = 8.0


@lru_cache(maxsize=1)
def _gauss_hermite() -> tuple[np.ndarray, np.ndarray]:
    """The :data:`_GH_NODES`-point Gauss-Hermite rule for weight exp(-x^2/2), weights summing to 1 (read-only arrays).
    Computed once: each ``hermegauss`` call solves an 80 x 80 eigenproblem (1-5 ms), and the planner converts
    latent shifts to mean ratings for every cell."""
    x, w = np.polynomial.hermite_e.hermegauss(_GH_NODES)
    w = w / w.sum()
    x.setflags(write=False)
    w.setflags(write=False)
    return x, w


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
        x, w = _gauss_hermite()
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
class _Elimination:
    """One factor absorbed in closed form (its block of the working model's ``s2 I + D E D`` is diagonal):
    ``E -= E[:, f] W E[f, :]``, ``W = d_f^2 / (s2 + d_f^2 diag(E_ff))``, as index arrays into the pattern."""

    factor: int
    members: np.ndarray  #: the factor's random effects
    diagonal: np.ndarray  #: pattern positions of their diagonal
    target: np.ndarray  #: per product term: the position it updates,
    left: np.ndarray  #: the positions of its two factors (i, g) and (g, j),
    right: np.ndarray
    group: np.ndarray  #: and its group g (0-based within the factor)
    column: np.ndarray  #: the pattern's entries (i, g) of the factor's columns: their positions,
    row: np.ndarray  #: their rows i
    column_group: np.ndarray  #: and their groups


@dataclass(frozen=True)
class LatentDesign:
    """What the latent working model's df take from the layout alone (shared by every study of it).

    ``G = Z'Z`` on a sparse pattern that already holds the fill of the eliminations, ``Z'X`` and ``X'X``
    (the intercept first), and the order in which factors are absorbed in closed form: a factor whose block of
    the working model is diagonal (the largest first, then any that stays diagonal, e.g. the items after
    item x system) is eliminated exactly (Woodbury on a diagonal block); only the factors left (``rest``)
    take a dense Cholesky factor. So a fit's df cost O(r^2 q) for r remaining effects, not O(q^3).
    """

    sizes: tuple[int, ...]
    rows: np.ndarray  #: the pattern (row-major, rows and columns of the q x q matrix)
    cols: np.ndarray
    indptr: np.ndarray  #: its CSR row pointers
    gram: np.ndarray  #: Z'Z on the pattern
    ZX: np.ndarray  #: Z'X (the intercept first)
    XX: np.ndarray  #: X'X
    steps: tuple[_Elimination, ...]
    rest: np.ndarray  #: the random effects not eliminated
    rest_entries: np.ndarray  #: the pattern's entries in the rows of ``rest``,
    rest_flat: np.ndarray  #: and their flat positions in an r x q array

    @classmethod
    def of(cls, groups: dict[str, np.ndarray], X: np.ndarray) -> LatentDesign:
        N = len(X)
        Xw = np.column_stack([np.ones(N), np.asarray(X, float).reshape(N, -1)])
        codes = [np.unique(np.asarray(g).astype(str), return_inverse=True)[1] for g in groups.values()]
        sizes = tuple(int(c.max()) + 1 for c in codes)
        edges = np.cumsum((0, *sizes))
        q = int(edges[-1])
        cols = np.concatenate([e + c for c, e in zip(codes, edges)])
        Z = sparse.csr_matrix((np.ones(len(cols)), (np.tile(np.arange(N), len(codes)), cols)), shape=(N, q))
        G = (Z.T @ Z).tocsr()
        order, patterns = _elimination_order(G, edges)
        final = patterns[-1]
        pattern = final.tocoo()
        key = pattern.row.astype(np.int64) * q + pattern.col
        assert np.all(np.diff(key) > 0)  # canonical CSR: row-major, sorted

        def where(i: np.ndarray, j: np.ndarray) -> np.ndarray:  # positions of entries (i, j) in the pattern
            return np.searchsorted(key, np.asarray(i, np.int64) * q + j)

        gram = np.zeros(len(key))
        Gc = G.tocoo()
        gram[where(Gc.row, Gc.col)] = Gc.data
        steps = tuple(_step(f, edges, patterns[k].tocsc(), where) for k, f in enumerate(order))
        gone = np.zeros(q, bool)
        for st in steps:
            gone[st.members] = True
        rest = np.flatnonzero(~gone)
        rank = np.full(q, -1)
        rank[rest] = np.arange(len(rest))
        entries = np.flatnonzero(rank[pattern.row] >= 0)
        return cls(sizes, pattern.row, pattern.col, final.indptr, gram, np.asarray(Z.T @ Xw), Xw.T @ Xw, steps,
                   rest, entries, rank[pattern.row[entries]] * q + pattern.col[entries])

    @property
    def edges(self) -> np.ndarray:
        return np.cumsum((0, *self.sizes))

    def at(self, sds: np.ndarray, link: str = "logit") -> LatentFit:
        """The working model at the fitted SDs ``sds`` (in the order of the groups): everything the df of any
        contrast needs."""
        check_link(link)
        s2 = math.pi**2 / 3 if link == "logit" else 1.0
        sd = np.abs(np.asarray(sds, float))
        q = int(self.edges[-1])
        vals, EX, EXX = self.gram.copy(), self.ZX.copy(), self.XX.copy()
        for st in self.steps:  # E -= E_.f W E_f., Z'X and X'X likewise
            dd = sd[st.factor] ** 2
            W = dd / (s2 + dd * vals[st.diagonal])
            EXf = EX[st.members]
            upd = (vals[st.column] * W[st.column_group])[:, None] * EXf[st.column_group]
            EX -= np.column_stack([np.bincount(st.row, u, q) for u in upd.T])
            EXX -= EXf.T @ (W[:, None] * EXf)
            vals -= np.bincount(st.target, vals[st.left] * vals[st.right] * W[st.group], len(vals))
        rest, r = self.rest, len(self.rest)
        flat = np.zeros(r * q)
        flat[self.rest_flat] = vals[self.rest_entries]
        E2 = flat.reshape(r, q)  # the rows of the factors left, dense
        d2 = np.repeat(sd, self.sizes)[rest]
        if r:
            chol = linalg.cholesky(s2 * np.eye(r) + d2[:, None] * E2[:, rest] * d2[None, :], lower=True)
            T = linalg.solve_triangular(chol, d2[:, None] * E2, lower=True)  # F = Z'V^-1 Z = (E - T'T) / s2
            Tx = linalg.solve_triangular(chol, d2[:, None] * EX[rest], lower=True)
        else:
            T, Tx = np.zeros((0, q)), np.zeros((0, EX.shape[1]))
        C = np.linalg.inv((EXX - Tx.T @ Tx) / s2)  # (X'V^-1 X)^-1
        R = (EX - T.T @ Tx) / s2  # Z'V^-1 X
        return LatentFit(self, R, C, self._information(vals, E2, T, R, C, s2))

    def _information(self, vals: np.ndarray, E2: np.ndarray, T: np.ndarray, R: np.ndarray, C: np.ndarray,
                     s2: float) -> np.ndarray:
        """The expected REML information of the variances, I_ab = ||(Z'PZ)_ab||^2 / 2, Z'PZ = E / s2 - Y'Y with
        Y = [T / sqrt(s2); (R H)'], C = H H'. The rows of the factors left (dense ``E2``) are formed and squared
        entry by entry; a pair of absorbed factors takes the expansion ||E_ab||^2 / s2^2 - 2 <E_ab, Y_a'Y_b> / s2
        + ||Y_a'Y_b||^2 from the sparse E (values ``vals``) and Gram matrices, never forming a q x q matrix (the
        expansion cancels where a factor is nearly confounded: its terms' rounding is zeroed there)."""
        edges = self.edges
        m, q = len(self.sizes), int(edges[-1])
        blocks = [slice(a, b) for a, b in itertools.pairwise(edges)]
        Y = np.vstack([T / math.sqrt(s2), (R @ np.linalg.cholesky(C)).T])
        which = np.repeat(np.arange(m), self.sizes)
        left = np.unique(which[self.rest])
        ee = np.bincount(which[self.rows] * m + which[self.cols], vals**2, m * m).reshape(m, m)
        cross = np.zeros((m, m))  # the columns of the factors left are not needed: their rows are formed below
        for k, (a, b) in enumerate(itertools.pairwise(edges)):  # E symmetric: E_{:,b} = (E_{b,:})'
            if k in left:
                continue
            lo, hi = self.indptr[a], self.indptr[b]
            Eb = sparse.csr_matrix((vals[lo:hi], self.cols[lo:hi], self.indptr[a:b + 1] - lo), shape=(b - a, q))
            cross[:, k] = np.add.reduceat(np.einsum("ij,ji->i", Eb.T @ Y[:, a:b].T, Y), edges[:-1])
        grams = [Y[:, b] @ Y[:, b].T for b in blocks]
        yy = np.array([[np.sum(ga * gb) for gb in grams] for ga in grams])
        info = 0.5 * (ee / s2**2 - 2 * cross / s2 + yy)
        # the three terms cancel where P Z_a = 0 (a factor confounded with X): what is left is rounding of their
        # size, not information; zero it so that the pseudo-inverse drops that component as it would an exact 0
        info[np.abs(info) <= 1e-10 * (ee / s2**2 + yy)] = 0.0
        if left.size:  # the factors left: their rows of Z'PZ explicitly (no cancellation however large the SDs)
            P = Y[:, self.rest].T @ Y
            rows = np.add.reduceat((E2 / s2 - P) ** 2, edges[:-1], axis=1)  # r x m
            size = np.add.reduceat((np.abs(E2) / s2 + np.abs(P)) ** 2, edges[:-1], axis=1)
            exact, bound = (0.5 * np.stack([x[which[self.rest] == f].sum(axis=0) for f in left]) for x in (rows, size))
            exact[exact <= 1e-20 * bound] = 0.0  # entries' rounding only (P Z_a = 0): exactly 0
            info[left, :] = exact
            info[:, left] = exact.T
        return info

    def df(self, contrast: np.ndarray, sds: np.ndarray, link: str = "logit") -> float:
        """:func:`contrast_satterthwaite_df` on this layout."""
        return self.at(sds, link).df(contrast)


def _elimination_order(G: sparse.csr_matrix, edges: np.ndarray) -> tuple[list[int], list[sparse.csr_matrix]]:
    """Which factors to absorb, in order (the largest whose block of the current pattern is diagonal, while
    any is), and the pattern before each step and after the last (fill included). A factor whose product terms
    (sum over its groups of their neighbours squared) would outnumber :data:`ELIMINATION_BUDGET` entries of its
    dense rows (groups x q) stays dense: absorbing it would cost more memory than keeping it (many raters per
    item)."""
    P = (G != 0).astype(np.int64).tocsr()
    patterns, order = [P], []
    left = set(range(len(edges) - 1))
    q = int(edges[-1])

    def cheap(f: int) -> bool:
        a, b = edges[f], edges[f + 1]
        terms = float(np.sum(np.diff(P[:, a:b].tocsc().indptr).astype(float) ** 2))
        return terms <= ELIMINATION_BUDGET * (b - a) * q

    while left:
        diagonal = [f for f in left if P[edges[f]:edges[f + 1], edges[f]:edges[f + 1]].nnz == edges[f + 1] - edges[f]
                    and cheap(f)]
        if not diagonal:
            break
        f = max(diagonal, key=lambda k: (edges[k + 1] - edges[k], -k))
        Pf = P[:, edges[f]:edges[f + 1]]
        P = ((P + Pf @ Pf.T) != 0).astype(np.int64).tocsr()
        P.sort_indices()
        order.append(f)
        left.discard(f)
        patterns.append(P)
    return order, patterns


def _step(f: int, edges: np.ndarray, P: sparse.csc_matrix,
          where: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> _Elimination:
    """The index arrays of eliminating factor ``f`` from the pattern ``P`` it meets (CSC)."""
    a, b = int(edges[f]), int(edges[f + 1])
    sub = P[:, a:b].tocsc()
    sub.sort_indices()
    rows = sub.indices
    grp = np.repeat(np.arange(b - a), np.diff(sub.indptr))  # the group of each entry (i, g)
    count = np.diff(sub.indptr)[grp]  # every pair of entries of one group: a product term
    first = np.repeat(np.arange(len(rows)), count)
    start = np.repeat(sub.indptr[grp], count)
    second = start + np.arange(len(first)) - np.repeat(np.cumsum(count) - count, count)
    i, j, g = rows[first], rows[second], grp[first]
    members = np.arange(a, b)
    return _Elimination(f, members, where(members, members), where(i, j), where(i, a + g), where(a + g, j), g,
                        where(rows, a + grp), rows, grp)


@dataclass(frozen=True)
class LatentFit:
    """The latent working model of one fit (:meth:`LatentDesign.at`): ``R = Z'V^-1 X``, ``C = (X'V^-1 X)^-1``
    and the variances' expected REML information; the df of any contrast follow in O(q)."""

    design: LatentDesign
    R: np.ndarray
    C: np.ndarray
    information: np.ndarray

    def df(self, contrast: np.ndarray) -> float:
        """Satterthwaite df of ``contrast @ b`` (see :func:`contrast_satterthwaite_df`)."""
        Lw = np.concatenate([[0.0], np.asarray(contrast, float)])  # the intercept is not in the contrast
        var = float(Lw @ self.C @ Lw)
        zh = self.R @ (self.C @ Lw)  # Z' V^-1 X C L
        g = -np.add.reduceat(zh**2, self.design.edges[:-1]) / self._scale
        denom = float(g @ self._scaled_inverse @ g)
        return 2 * var * var / denom if denom > 0 else math.inf

    @cached_property
    def _scale(self) -> np.ndarray:
        """The information's diagonal's square roots (1 where 0): the rank is judged on the unit-diagonal scale."""
        scale = np.sqrt(np.diag(self.information))
        scale[scale == 0] = 1.0
        return scale

    @cached_property
    def _scaled_inverse(self) -> np.ndarray:
        """The pseudo-inverse of the information on the unit-diagonal scale, once per fit (every contrast's df)."""
        return np.linalg.pinv(self.information / np.outer(self._scale, self._scale), rcond=RANK_TOLERANCE)


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
    check_link(link)
    design = LatentDesign.of(groups, X)
    unit = np.eye(design.XX.shape[0] - 1)[coef]
    with one_blas_thread():
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
