"""Profiled (RE)ML for crossed linear mixed models with independent variance components, one study at a time.

``y = X b + sum_k Z_k u_k + e``, ``u_k ~ N(0, g_k s^2 I)``, ``e ~ N(0, s^2 I)``:
the worker/item model with uncorrelated intercepts and slopes. The criterion
is lme4's profiled deviance with its exact gradient in the relative variances
``g`` (:mod:`.criterion`, shared with the batched fits).

Everything lives in the q-dimensional random-effect space. The grouping
factor with the most random effects is block diagonal in ``M`` (one small
block per level), so ``M`` is factored through the Schur complement of the
other factor's effects: cheap when one factor is small (3 experts x 100
dialogues) and never worse than dense. The cross block ``B`` and ``LA^-1 B``
stay sparse (a rating touches one block level), so memory is that of the
data plus the dense ``q2 x q2`` Schur complement; products with dense
matrices are taken in row chunks. The traces come from ``diag(M^-1)``
(``lam_j^2 (Z'H^-1Z)_jj = 1 - (M^-1)_jj``), with an exact (sparse) column
solve where that difference would lose digits. Beyond ``SPARSE_ABOVE`` effects
outside the largest factor ``M`` is instead factored sparse, supernodal, on CHOLMOD's fill-reducing
order and supernodes (found once per design) with the dense kernels on numpy's BLAS, and ``diag(M^-1)``
comes exactly from the supernodal Takahashi recursions (:mod:`.sparse_inverse`): memory of the factor, no dense limit;
the same deviance, gradient and Satterthwaite calculus (tests/test_sparse_reml.py).
Optimising ``g >= 0`` with bounds (rather than SDs) keeps the gradient informative at the boundary.
"""
from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy import linalg, optimize

from . import sparse_inverse
from .criterion import (
    EIGEN_TOL,
    fixed_sigma_deviance,
    fixed_sigma_gradient,
    profiled_deviance,
    profiled_gradient,
    projected_gradient,
)

#: beyond this many random effects outside the largest factor, M is factored sparse (supernodal, CHOLMOD's order)
#: instead of through a dense q2 x q2 Schur complement. CPU per gradient evaluation on the 20-system crowd
#: studies of benchmarks/bench_analyze.py, dense vs sparse (CHOLMOD's numeric factor): q2 = 750 (3,000 ratings)
#: 0.036 vs 0.032 s; 1,875 (7,500) 0.21 vs 0.098 s; 3,450 (15,000) 0.99 vs 0.31 s (0.125 s with the own supernodal
#: factor); the dense path grows as q2^3
SPARSE_ABOVE = 1_000
#: seconds between progress reports of a long optimisation
PROGRESS_SECONDS = 5.0
#: an optimisation run ends once an iteration lowers the deviance by less than this share of (1 + |deviance|)
STOP_GAIN = 1e-12
#: converged when the quasi-Newton decrease still to gain is below this (deviance units)
DECREMENT_TOL = 1e-6
#: entries of a dense row chunk in products of sparse rows with dense matrices (32 MB)
CHUNK = 1 << 22
#: relative variances below this are polished by Newton steps to a zero gradient (near the boundary lmerTest's
#: Satterthwaite df moves by about half the relative error of such a component: see :meth:`~CrossedComponentsModel._polish`)
POLISH_BELOW = 1e-2
#: a component at zero whose gradient is below minus this has its optimum inside (it is freed and polished)
BOUNDARY_TOL = 1e-7
#: evaluated points a model keeps (by gamma): the optimiser's last point is asked for again by the fit's summary,
#: and the optimum four times by the Satterthwaite calculus (gradient, two sigma differences, Cov(b) factors)
KEPT_POINTS = 4


def _row_sq_norms(r: sp.csr_matrix, m: np.ndarray) -> np.ndarray:
    """Squared row norms of ``r @ m`` (``r`` sparse), a chunk of rows at a time."""
    out = np.empty(r.shape[0])
    step = max(1, CHUNK // max(m.shape[1], 1))
    for i in range(0, r.shape[0], step):
        part = np.asarray(r[i:i + step] @ m)
        out[i:i + step] = np.einsum("ij,ij->i", part, part)
    return out


def _lbfgsb(fun, x0: np.ndarray, bounds: list, max_iter: int = 5_000, callback=None) -> optimize.OptimizeResult:
    """L-BFGS-B on (value, gradient) with tolerances tight enough for a deviance (stops on no progress)."""
    return optimize.minimize(fun, x0, jac=True, method="L-BFGS-B", bounds=bounds, callback=callback,
                             options={"maxiter": max_iter, "ftol": 1e-15, "gtol": 1e-10, "maxcor": 30})


class TooManyEffectsError(ValueError):
    """The design needs the sparse path and scikit-sparse (CHOLMOD) is not installed."""


@dataclass(frozen=True)
class ComponentsFit:
    """The optimum; ``gamma`` are variances relative to ``sigma2`` in the order of ``components``."""

    components: tuple[tuple[str, str], ...]
    gamma: np.ndarray
    beta: np.ndarray
    beta_cov: np.ndarray
    sigma2: float
    deviance: float
    converged: bool
    iterations: int
    message: str

    @property
    def theta(self) -> np.ndarray:
        """Relative SDs (lme4's theta)."""
        return np.sqrt(self.gamma)

    @property
    def sds(self) -> np.ndarray:
        return np.sqrt(self.gamma * self.sigma2)


@dataclass(frozen=True)
class Satterthwaite:
    """lmerTest's quantities: ``vcov_varpar`` of (theta..., sigma) and each fixed effect's df."""

    vcov_varpar: np.ndarray
    df: np.ndarray
    notes: tuple[str, ...]
    #: dCov(b)/dvarpar, (k + 1, p, p): lmerTest's Jacobian, for the df of any contrast
    jacobian: np.ndarray


@dataclass(frozen=True)
class _Point:
    """The criterion and its by-products at one ``gamma`` (gradient parts only when asked for)."""

    deviance: float
    logdet: float  # log|M| (+ log|X' H^-1 X| under REML): the deviance without its residual terms
    beta: np.ndarray
    s: np.ndarray  # [X y]' H^-1 [X y]
    r2: float
    trace: np.ndarray | None = None  # tr(Z_k' P Z_k) per component (H^-1 for ML)
    score: np.ndarray | None = None  # |Z_k' P y|^2 per component
    zhx: np.ndarray | None = None    # Z' H^-1 X


@dataclass(frozen=True)
class _Factor:
    """Cholesky factor of M = [[A, B], [B', C]] with A block diagonal: L = [[LA, 0], [E', LS]]."""

    la_inv: np.ndarray  # (levels, t, t) inverses of the lower blocks of A
    e: sp.csr_matrix    # LA^-1 B, (q1, q2), sparse like B
    ls: np.ndarray      # lower Cholesky factor of C - E'E
    logdet: float


class CrossedComponentsModel:
    """Cross-products of a crossed design and the profiled deviance with its gradient.

    ``factors``: integer (or any hashable) level codes per grouping factor;
    ``terms``: covariate per term name (``"(Intercept)"`` means 1);
    ``components``: the (factor, term) variance components.
    """

    def __init__(self, x: np.ndarray, y: np.ndarray, factors: dict[str, np.ndarray],
                 terms: dict[str, np.ndarray], components: list[tuple[str, str]], reml: bool = True) -> None:
        x, y = np.asarray(x, float), np.asarray(y, float)
        self.n, self.p = x.shape
        self.reml = reml
        self.nu = self.n - self.p if reml else self.n
        values = {t: np.ones(self.n) if t == "(Intercept)" else np.asarray(terms[t], float)
                  for _, t in components}
        codes = {g: np.unique(np.asarray(factors[g]), return_inverse=True)[1] for g, _ in components}
        sizes = {g: int(c.max()) + 1 for g, c in codes.items()}
        width = {g: sizes[g] * sum(1 for h, _ in components if h == g) for g in sizes}
        block = max(width, key=lambda g: width[g])
        inner = [k for k, (g, _) in enumerate(components) if g == block]
        outer = [k for k, (g, _) in enumerate(components) if g != block]
        self.components = tuple(components)
        self.k, self.t = len(components), len(inner)
        self.levels = sizes[block]
        # block columns level-major (level l, then its t components); then the other components level by level
        rows = np.arange(self.n)
        za = sp.csc_matrix((np.concatenate([values[components[k][1]] for k in inner]),
                            (np.tile(rows, self.t), (codes[block][None, :] * self.t
                                                     + np.arange(self.t)[:, None]).ravel())),
                           shape=(self.n, self.levels * self.t))
        zc = [sp.csc_matrix((values[components[k][1]], (rows, codes[components[k][0]])),
                            shape=(self.n, sizes[components[k][0]])) for k in outer]
        z = sp.hstack([za] + zc, format="csc")
        self.component = np.concatenate([np.tile(inner, self.levels)]
                                        + [np.full(sizes[components[k][0]], k) for k in outer]).astype(int)
        self.q1 = za.shape[1]
        self.q2 = z.shape[1] - self.q1
        self.g = (z.T @ z).tocsc()
        self.sparse = self.q2 > SPARSE_ABOVE
        if self.sparse:
            try:
                sparse_inverse.cholmod()
            except ImportError as exc:
                raise TooManyEffectsError(f"{self.q2} random effects outside the largest factor: {exc}") from exc
            pattern = (self.g + sp.identity(self.g.shape[0], format="csc")).tocsc()  # M's pattern, whatever gamma
            pattern.sort_indices()
            self.m_rows = np.repeat(np.arange(pattern.shape[0]), np.diff(pattern.indptr))  # columns, in fact
            self.m_eye = (pattern.indices == self.m_rows).astype(float)
            self.m_g = pattern.data - self.m_eye
            self.m_pattern = pattern
            self.supernodal = sparse_inverse.Supernodal(pattern)  # the fill-reducing order and supernodes, once
        self.g_diag = self.g.diagonal()
        va = np.stack([values[components[k][1]] for k in inner])  # (t, n)
        self.g_aa = np.stack([np.bincount(codes[block], va[a] * va[b], self.levels)
                              for a in range(self.t) for b in range(self.t)], axis=1).reshape(-1, self.t, self.t)
        self.g_ac = self.g[:self.q1, self.q1:].tocsr()  # sparse: never q1 x q2 dense
        self.g_ac.sort_indices()
        self.ac_rows = np.repeat(np.arange(self.q1), np.diff(self.g_ac.indptr))
        self.g_cc = self.g[self.q1:, self.q1:].tocoo()
        self.x, self.z = x, z
        self._set_response(y)

    def _set_response(self, y: np.ndarray) -> None:
        xy = np.column_stack([self.x, y])
        self.zxy = np.asarray(self.z.T @ xy)
        self.xyxy = xy.T @ xy
        self._kept: dict[bytes, _Point] = {}

    def with_response(self, y: np.ndarray) -> CrossedComponentsModel:
        """The same design and components with another response (only y's cross-products are recomputed)."""
        other = copy.copy(self)
        other._set_response(np.asarray(y, float))
        return other

    def as_ml(self) -> CrossedComponentsModel:
        """The same model with the ML criterion (lme4 profiles the ML deviance, refitting REML fits by ML)."""
        other = copy.copy(self)
        other.reml, other.nu, other._kept = False, self.n, {}
        return other

    def simulate(self, fit: ComponentsFit, rng: np.random.Generator) -> np.ndarray:
        """One response drawn from the fitted model (for the parametric bootstrap)."""
        sigma = math.sqrt(fit.sigma2)
        effects = rng.standard_normal(self.z.shape[1]) * (sigma * fit.theta[self.component])
        return self.x @ fit.beta + self.z @ effects + sigma * rng.standard_normal(self.n)

    # -- the factor of M and solves with it -------------------------------------------------------

    def _factor(self, lam: np.ndarray) -> _Factor:
        la, lc = lam[:self.q1].reshape(self.levels, self.t), lam[self.q1:]
        a = la[:, :, None] * self.g_aa * la[:, None, :] + np.eye(self.t)
        la_chol = np.linalg.cholesky(a)
        la_inv = np.linalg.inv(la_chol)
        b = sp.csr_matrix((self.g_ac.data * lam[self.ac_rows] * lc[self.g_ac.indices], self.g_ac.indices,
                           self.g_ac.indptr), shape=self.g_ac.shape)
        e = (self._block_diag(la_inv) @ b).tocsr()
        s = -(e.T @ e).toarray()
        s[self.g_cc.row, self.g_cc.col] += self.g_cc.data * lc[self.g_cc.row] * lc[self.g_cc.col]
        s[np.diag_indices_from(s)] += 1.0
        ls = linalg.cholesky(s, lower=True, overwrite_a=True, check_finite=False) if self.q2 else s
        logdet = 2 * (np.log(np.diagonal(la_chol, axis1=1, axis2=2)).sum() + np.log(np.diag(ls)).sum())
        return _Factor(la_inv, e, ls, float(logdet))

    def _block_diag(self, mats: np.ndarray) -> sp.csr_matrix:
        """The q1 x q1 block-diagonal matrix of the (levels, t, t) blocks ``mats``, sparse."""
        return sp.bsr_matrix((mats, np.arange(self.levels), np.arange(self.levels + 1)),
                             shape=(self.q1, self.q1)).tocsr()

    def _blocks(self, mats: np.ndarray, r: np.ndarray) -> np.ndarray:
        m = r.shape[1]
        return np.matmul(mats, r.reshape(self.levels, self.t, m)).reshape(self.q1, m)

    def _lsolve(self, f: _Factor, r: np.ndarray) -> np.ndarray:
        """L^-1 r."""
        v1 = self._blocks(f.la_inv, r[:self.q1])
        v2 = linalg.solve_triangular(f.ls, r[self.q1:] - np.asarray(f.e.T @ v1), lower=True, check_finite=False) \
            if self.q2 else r[self.q1:]
        return np.vstack([v1, v2])

    def _ltsolve(self, f: _Factor, v: np.ndarray) -> np.ndarray:
        """L^-T v."""
        w2 = linalg.solve_triangular(f.ls, v[self.q1:], lower=True, trans="T", check_finite=False) \
            if self.q2 else v[self.q1:]
        w1 = self._blocks(f.la_inv.transpose(0, 2, 1), v[:self.q1] - np.asarray(f.e @ w2))
        return np.vstack([w1, w2])

    def _ls_inv_t(self, f: _Factor) -> np.ndarray:
        """LS^-T (dense, q2 x q2)."""
        ls_inv, info = linalg.lapack.dtrtri(f.ls, lower=1)
        if info:
            raise np.linalg.LinAlgError("triangular inverse failed")
        return ls_inv.T

    def _diag_m_inv(self, f: _Factor, ls_inv_t: np.ndarray) -> np.ndarray:
        """diag(M^-1): squared column norms of L^-1 = [[LA^-1, 0], [-LS^-1 E' LA^-1, LS^-1]]."""
        first = np.einsum("lij,lij->lj", f.la_inv, f.la_inv).ravel()
        if not self.q2:
            return first
        k = self._block_diag(f.la_inv.transpose(0, 2, 1)) @ f.e  # rows of LA^-T E; times LS^-T: (LS^-1 E' LA^-1)'
        return np.concatenate([first + _row_sq_norms(k.tocsr(), ls_inv_t), np.einsum("ij,ij->i", ls_inv_t, ls_inv_t)])

    def _diag_zhz(self, f: _Factor, lam: np.ndarray) -> np.ndarray:
        """diag(Z' H^-1 Z): (1 - (M^-1)_jj) / lam_j^2, or G_jj - |L^-1 lam G_j|^2 where that loses digits.

        The exact columns are solved sparse (``lam G_j`` has a few nonzeros): never a dense q x q copy.
        """
        ls_inv_t = self._ls_inv_t(f) if self.q2 else np.zeros((0, 0))
        one_minus = 1.0 - self._diag_m_inv(f, ls_inv_t)
        exact = one_minus <= 1e-6
        diag = np.divide(one_minus, lam**2, out=np.zeros_like(lam), where=~exact)
        if exact.any():
            r = sp.csr_matrix(self.g[:, exact].multiply(lam[:, None]))  # q x n_exact, sparse
            v1 = self._block_diag(f.la_inv) @ r[:self.q1]
            norms = np.asarray(v1.multiply(v1).sum(axis=0)).ravel()
            if self.q2:
                w = (r[self.q1:] - f.e.T @ v1).T.tocsr()  # (r2 - E' v1)', n_exact x q2
                norms += _row_sq_norms(w, ls_inv_t)
            diag[exact] = self.g_diag[exact] - norms
        return diag

    # -- criterion ---------------------------------------------------------------------------------

    def _evaluate(self, gamma: np.ndarray, gradient: bool) -> _Point:
        """The criterion at ``gamma`` (with its gradient parts if ``gradient``): the same point again is
        not recomputed (the last ``KEPT_POINTS`` are kept; a point with gradient parts serves both)."""
        gamma = np.maximum(np.asarray(gamma, float), 0.0)
        key = gamma.tobytes()
        pt = self._kept.get(key)
        if pt is None or (gradient and pt.trace is None):
            pt = self._compute(gamma, gradient)
            self._kept.pop(key, None)
            self._kept[key] = pt
            if len(self._kept) > KEPT_POINTS:
                del self._kept[next(iter(self._kept))]
        return pt

    def _compute(self, gamma: np.ndarray, gradient: bool) -> _Point:
        lam = np.sqrt(gamma)[self.component]
        if self.sparse:
            return self._evaluate_sparse(lam, gradient)
        f = self._factor(lam)
        v = self._lsolve(f, lam[:, None] * self.zxy)
        s = self.xyxy - v.T @ v
        dev, logdet, beta, r2, rx = self._criterion(s, f.logdet)
        if not gradient:
            return _Point(dev, logdet, beta, s, r2)
        zhx = self.zxy - self.g @ (lam[:, None] * self._ltsolve(f, v))  # Z' H^-1 [X y]
        return self._point(lam, dev, logdet, beta, s, r2, rx, zhx, self._diag_zhz(f, lam))

    def _criterion(self, s: np.ndarray, logdet_m: float) -> tuple[float, float, np.ndarray, float, tuple]:
        """(deviance, logdet, b, r^2, Cholesky of X'H^-1X) from ``S = [X y]' H^-1 [X y]`` and ``log|M|``."""
        p = self.p
        rx = linalg.cho_factor(s[:p, :p], lower=True)
        beta = linalg.cho_solve(rx, s[:p, p])
        r2 = float(s[p, p] - s[:p, p] @ beta)
        logdet = logdet_m + (2 * float(np.log(np.diag(rx[0])).sum()) if self.reml else 0.0)
        return float(profiled_deviance(logdet, r2, self.nu)), logdet, beta, r2, rx

    def _point(self, lam: np.ndarray, dev: float, logdet: float, beta: np.ndarray, s: np.ndarray, r2: float,
               rx: tuple, zhx: np.ndarray, diag: np.ndarray) -> _Point:
        """The point with its gradient parts, from ``Z' H^-1 [X y]`` and ``diag(Z' H^-1 Z)``."""
        p = self.p
        zpy = zhx[:, p] - zhx[:, :p] @ beta
        if self.reml:
            diag = diag - np.einsum("ij,ij->i", zhx[:, :p], linalg.cho_solve(rx, zhx[:, :p].T).T)
        return _Point(float(dev), logdet, beta, s, r2, np.bincount(self.component, diag, self.k),
                      np.bincount(self.component, zpy**2, self.k), zhx[:, :p])

    def _evaluate_sparse(self, lam: np.ndarray, gradient: bool) -> _Point:
        """:meth:`_evaluate` with M factored sparse (:class:`~.sparse_inverse.Supernodal`); ``diag(M^-1)`` by the
        Takahashi recursions."""
        f = self.supernodal.factor(self.m_g * lam[self.m_rows] * lam[self.m_pattern.indices] + self.m_eye)
        r = lam[:, None] * self.zxy
        w = f.solve(r)  # M^-1 L Z'[X y]
        s = self.xyxy - r.T @ w
        s = (s + s.T) / 2
        dev, logdet, beta, r2, rx = self._criterion(s, f.logdet)
        if not gradient:
            return _Point(dev, logdet, beta, s, r2)
        zhx = self.zxy - self.g @ (lam[:, None] * w)
        m_inv, zbuf = f.selected_inverse()
        one_minus = 1.0 - m_inv
        exact = one_minus <= 1e-6
        diag = np.divide(one_minus, lam**2, out=np.zeros_like(lam), where=~exact)
        cols = np.flatnonzero(exact & (lam > 0))
        zero = np.flatnonzero(exact & (lam == 0))
        if cols.size:
            # 1 - (M^-1)_jj = (M^-1 L G L)_jj = sum_l (M^-1)_jl lam_l G_lj lam_j without cancellation: every
            # (j, l) with G_lj != 0 is on M's pattern, so in the selected inverse
            sub = self.g[:, cols].tocoo()
            vals = f.entries(zbuf, sub.row, cols[sub.col]) * sub.data * lam[sub.row]
            diag[cols] = np.bincount(sub.col, vals, len(cols)) / lam[cols]
        if zero.size:
            # G_jj - a' M^-1 a, a = lam G_j: from the selected inverse where the nonzeros of a are a clique of
            # L's pattern (j eliminated before them), else solved
            quad = f.quadratic(zbuf, self.g[:, zero].multiply(lam[:, None]))
            missing = np.isnan(quad)
            if missing.any():
                cols_missing = zero[missing]
                step = max(1, CHUNK // (4 * len(lam)))  # (8 MB a chunk: the solve holds three)
                quad[missing] = np.concatenate([  # a chunk of dense columns at a time
                    (rhs * f.solve(rhs)).sum(axis=0) for rhs in
                    (self.g[:, cols_missing[i:i + step]].multiply(lam[:, None]).toarray()
                     for i in range(0, len(cols_missing), step))])
            diag[zero] = self.g_diag[zero] - quad
        return self._point(lam, dev, logdet, beta, s, r2, rx, zhx, diag)

    def deviance(self, gamma: np.ndarray, gradient: bool = True) -> tuple[float, np.ndarray | None, np.ndarray, np.ndarray]:
        """(deviance, its gradient or None, GLS fixed effects b, S) at ``gamma``.

        ``S = [X y]' H^-1 [X y]``: the residual variance is
        ``(S_yy - S_yx b) / nu`` and ``Cov(b) = s^2 S_xx^-1``.
        """
        pt = self._evaluate(gamma, gradient)
        return pt.deviance, None if pt.trace is None else self._gradient(pt), pt.beta, pt.s

    def _grad(self, gamma: np.ndarray) -> np.ndarray:
        """The gradient of the profiled deviance at ``gamma``."""
        return self._gradient(self._evaluate(gamma, gradient=True))

    def _gradient(self, pt: _Point) -> np.ndarray:
        """Gradient of the profiled deviance in gamma."""
        assert pt.trace is not None and pt.score is not None  # evaluated with gradient=True
        return profiled_gradient(pt.trace, pt.score, pt.r2, self.nu)

    def at(self, gamma: np.ndarray) -> ComponentsFit:
        """The estimates at given relative variances: GLS b, Cov(b), profiled sigma^2 and the deviance."""
        gamma = np.maximum(np.asarray(gamma, float), 0.0)
        return self._summary(gamma, self._evaluate(gamma, gradient=False))

    def _summary(self, gamma: np.ndarray, pt: _Point, converged: bool = True, iterations: int = 0,
                 message: str = "evaluated, not optimised") -> ComponentsFit:
        sigma2 = pt.r2 / self.nu
        return ComponentsFit(self.components, gamma, pt.beta, sigma2 * np.linalg.inv(pt.s[:self.p, :self.p]),
                             sigma2, pt.deviance, converged, iterations, message)

    # -- lmerTest's variance-parameter calculus: varpar = (theta, sigma), theta = sqrt(gamma) ---------

    def _sigma_hessian(self, gamma: np.ndarray, sigma: float, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Hessian of the fixed-sigma deviance in (gamma, sigma): the columns ``cols`` of gamma and sigma's column.

        Differences of the exact gradient: central, or forward where gamma is too close to 0 for a step down.
        """
        def grad(g: np.ndarray, s: float) -> np.ndarray:
            _, d_gamma, d_sigma = self._fixed_sigma(g, s)
            return np.append(d_gamma, d_sigma)

        out = np.zeros((self.k + 1, len(cols)))
        for n, i in enumerate(cols):
            h = 1e-4 * max(gamma[i], 1e-5)
            e = np.zeros(self.k)
            e[i] = h
            low = gamma - e if gamma[i] >= h else gamma
            out[:, n] = (grad(gamma + e, sigma) - grad(low, sigma)) / (h + (h if gamma[i] >= h else 0.0))
        h = 1e-5 * sigma
        return out, (grad(gamma, sigma + h) - grad(gamma, sigma - h)) / (2 * h)

    def varpar_hessian(self, fit: ComponentsFit) -> np.ndarray:
        """Hessian of the deviance in lmerTest's varpar = (theta..., sigma) (sigma not profiled out: ``devfun_vp``).

        By the chain rule from the Hessian in (gamma, sigma), gamma = theta^2:
        ``H_jk = 4 theta_j theta_k d2D/dgamma_j dgamma_k + 2 delta_jk dD/dgamma_k`` and
        ``H_k,sigma = 2 theta_k d2D/dgamma_k dsigma``: the matrix lmerTest differences numerically in theta,
        without the cancellation of differences in theta near zero. A component at zero keeps only
        ``2 dD/dgamma_k`` (positive at a boundary optimum) and drops out of the df, as in lmerTest.
        """
        theta, sigma = fit.theta, math.sqrt(fit.sigma2)
        d_gamma = self._fixed_sigma(fit.gamma, sigma)[1]
        free = np.flatnonzero(theta > 0)
        cols, sig = self._sigma_hessian(fit.gamma, sigma, free)
        hess = np.zeros((self.k + 1, self.k + 1))
        chain = np.append(2 * theta, 1.0)
        hess[:, free] = chain[:, None] * cols * (2 * theta[free])[None, :]
        hess[:, self.k] = chain * sig
        hess[np.arange(self.k), np.arange(self.k)] += 2 * d_gamma
        return (hess + hess.T) / 2

    def _fixed_sigma(self, gamma: np.ndarray, sigma: float) -> tuple[float, np.ndarray, float]:
        """Deviance with sigma fixed, its gradient in gamma, and its derivative in sigma."""
        pt = self._evaluate(gamma, gradient=True)
        dev = fixed_sigma_deviance(pt.logdet, pt.r2, self.nu, sigma)
        assert pt.trace is not None and pt.score is not None
        return dev, fixed_sigma_gradient(pt.trace, pt.score, sigma**2), 2 * self.nu / sigma - 2 * pt.r2 / sigma**3

    def profile_deviance(self, fit: ComponentsFit, index: int, value: float) -> float:
        """Smallest deviance with one SD held at ``value``: component ``index``, or sigma for ``index == k``.

        The others (relative variances, and log sigma) are optimised from the fit.
        """
        k = self.k
        bounds: list[tuple[float | None, float | None]] = [(0.0, None)] * k
        if index == k:
            def fun(z: np.ndarray) -> tuple[float, np.ndarray]:
                return self._fixed_sigma(z, value)[:2]
            x = fit.gamma
        else:
            others = [j for j in range(k) if j != index]

            def fun(z: np.ndarray) -> tuple[float, np.ndarray]:
                sigma = math.exp(z[-1])
                gamma = np.empty(k)
                gamma[others], gamma[index] = z[:-1], (value / sigma) ** 2
                dev, g, d_sigma = self._fixed_sigma(gamma, sigma)
                return dev, np.append(g[others], sigma * (d_sigma - 2 * g[index] * value**2 / sigma**3))
            x, bounds = np.append(fit.gamma[others], 0.5 * math.log(fit.sigma2)), bounds[:-1] + [(None, None)]
        res = _lbfgsb(fun, x, bounds)
        return float(_lbfgsb(fun, res.x, bounds).fun)  # a restart after a failed line search

    def profile_interval(self, fit: ComponentsFit, index: int, level: float = 0.95) -> tuple[float, float]:
        """Likelihood-profile interval of one SD (``index == k``: sigma), as lme4's ``confint(method="profile")``.

        The ends are where the profiled deviance exceeds the minimum by the
        chi-square(1) quantile; the lower end is 0 when the deviance at 0 does not.
        """
        from scipy import stats

        crit = float(stats.chi2.ppf(level, 1))
        est = math.sqrt(fit.sigma2) if index == self.k else float(fit.sds[index])

        def excess(value: float) -> float:
            return self.profile_deviance(fit, index, value) - fit.deviance - crit

        if index == self.k:
            low_end = est / 2
            while excess(low_end) < 0:
                low_end /= 2
            lower = optimize.brentq(excess, low_end, est, xtol=1e-7 * est)
        else:
            lower = 0.0 if est == 0 or excess(0.0) <= 0 else optimize.brentq(excess, 0.0, est, xtol=1e-7 * est)
        high_end = 2 * est if est > 0 else math.sqrt(fit.sigma2)
        while excess(high_end) < 0:
            high_end *= 2
        upper = optimize.brentq(excess, est, high_end, xtol=1e-7 * high_end)
        return float(lower), float(upper)

    def satterthwaite(self, fit: ComponentsFit) -> Satterthwaite:
        """Covariance of (theta, sigma) and Satterthwaite df of each fixed effect, as lmerTest computes them.

        ``vcov_varpar = 2 H^-1`` over the positive eigenvalues of the Hessian
        ``H`` (:meth:`varpar_hessian`), and
        ``df_j = 2 V_jj^2 / (g_j' vcov_varpar g_j)``, ``g_j`` the exact derivative
        of ``V_jj = Var(b_j)`` in (theta, sigma).
        """
        hess = self.varpar_hessian(fit)
        values, vectors = np.linalg.eigh(hess)
        pos = values > EIGEN_TOL
        vcov = 2 * (vectors[:, pos] / values[pos]) @ vectors[:, pos].T
        notes = []
        if (values < -EIGEN_TOL).any():
            notes.append("Hessian of the deviance has negative eigenvalues: "
                         + " ".join(f"{v:.1e}" for v in values[values < -EIGEN_TOL]))
        if (np.abs(values) <= EIGEN_TOL).any():
            notes.append("Hessian of the deviance has eigenvalues close to zero: "
                         + " ".join(f"{v:.1e}" for v in values[np.abs(values) <= EIGEN_TOL]))
        c, czx = self._cov_factors(fit)
        d_var = np.stack([np.bincount(self.component, czx[:, j] ** 2, self.k) for j in range(self.p)], axis=1)
        grads = np.vstack([2 * fit.theta[:, None] * fit.sigma2 * d_var, 2 * math.sqrt(fit.sigma2) * np.diag(c)])
        var = np.diag(fit.beta_cov)
        denom = np.einsum("ij,ik,kj->j", grads, vcov, grads)
        df = np.divide(2 * var**2, denom, out=np.full(self.p, np.inf), where=denom > 0)
        return Satterthwaite(vcov, df, tuple(notes), self.beta_jacobian(fit, (c, czx)))

    def _cov_factors(self, fit: ComponentsFit) -> tuple[np.ndarray, np.ndarray]:
        """``C = (X'H^-1 X)^-1`` and the rows ``C X'H^-1 z_j`` (one evaluation with the gradient)."""
        pt = self._evaluate(fit.gamma, gradient=True)
        c = np.linalg.inv(pt.s[:self.p, :self.p])
        return c, pt.zhx @ c

    def beta_jacobian(self, fit: ComponentsFit, factors: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """``dCov(b)/dvarpar`` (k + 1, p, p), varpar = (theta..., sigma), exactly.

        ``dV/dgamma_k = s^2 C X'H^-1 Z_k Z_k' H^-1 X C`` (``C = (X'H^-1 X)^-1``),
        ``dV/dtheta_k = 2 theta_k dV/dgamma_k``, ``dV/dsigma = 2 s C``; ``factors``: :meth:`_cov_factors`' if known.
        """
        c, czx = factors if factors is not None else self._cov_factors(fit)
        jac = np.empty((self.k + 1, self.p, self.p))
        for k in range(self.k):
            rows = czx[self.component == k]
            jac[k] = 2 * fit.theta[k] * fit.sigma2 * rows.T @ rows
        jac[self.k] = 2 * math.sqrt(fit.sigma2) * c
        return jac

    def fit(self, start: np.ndarray | None = None, max_iter: int = 5_000, gtol: float = 1e-4,
            restarts: int = 5, progress: Callable[[str], None] | None = None) -> ComponentsFit:
        """Minimise the deviance over ``gamma >= 0`` (L-BFGS-B with the exact gradient).

        Converged when the projected gradient is below ``gtol`` (in ``gamma``
        at the boundary, and there or in the relative SD ``sqrt(gamma)``,
        whichever is smaller, inside), or when the quasi-Newton decrease still
        to gain, ``g' H^-1 g / 2`` over the free coordinates, is below ``DECREMENT_TOL``
        (lme4's scaled-gradient test: with 15,000 ratings the deviance's rounding
        leaves gradients of ~1e-3 at the optimum). An iteration that gains under
        ``STOP_GAIN`` (relative) ends the run (the deviance is flat to rounding there, where
        L-BFGS-B's line searches fail after ~20 evaluations each). A run that ends
        short of convergence is restarted from where it stopped (with a fresh
        curvature memory), up to ``restarts`` times. ``progress`` hears of the
        criterion every ``PROGRESS_SECONDS``.
        """
        gamma = np.ones(self.k) if start is None else np.maximum(np.asarray(start, float), 0.0)
        iterations, evaluations, shown = 0, 0, time.monotonic()
        grads: dict[bytes, np.ndarray] = {}  # the gradient at each evaluated point

        def criterion(g: np.ndarray) -> tuple[float, np.ndarray]:
            nonlocal evaluations, shown
            dev, grad = self.deviance(g)[:2]
            assert grad is not None  # deviance() computes the gradient by default
            evaluations += 1
            grads[g.tobytes()] = grad
            if progress is not None and time.monotonic() - shown > PROGRESS_SECONDS:
                progress(f"{'REML' if self.reml else 'ML'} optimisation: {evaluations} evaluations, criterion {dev:.10g}")
                shown = time.monotonic()
            return dev, grad

        best = [math.inf]

        def stop(intermediate_result: optimize.OptimizeResult) -> None:
            gain, best[0] = best[0] - intermediate_result.fun, intermediate_result.fun
            if gain < STOP_GAIN * (1 + abs(intermediate_result.fun)):
                raise StopIteration

        for _ in range(1 + restarts):
            res = _lbfgsb(criterion, gamma, [(0.0, None)] * self.k, max_iter, stop)
            gamma, iterations = res.x, iterations + int(res.nit)
            pt = self._evaluate(gamma, gradient=False)
            grad = grads.get(gamma.tobytes())
            if grad is None:
                grad = self._grad(gamma)
            projected, decrement = float(projected_gradient(gamma, grad)), _decrement(res, gamma, grad)
            if projected <= gtol or decrement <= DECREMENT_TOL:
                break
            best[0] = math.inf
        converged = projected <= gtol or decrement <= DECREMENT_TOL
        if converged and grad is not None:  # (never None here: for the type checker)
            polished = self._polish(gamma, grad)
            if polished is not gamma:
                gamma, pt = polished, self._evaluate(polished, gradient=False)
        message = str(res.message) if converged else (f"{res.message}; largest projected gradient {projected:.2g}, "
                                                      f"predicted further decrease {decrement:.2g}")
        return self._summary(gamma, pt, converged, iterations, message)

    def _polish(self, gamma: np.ndarray, grad: np.ndarray, max_steps: int = 20) -> np.ndarray:
        """Newton steps on the relative variances below ``POLISH_BELOW`` (the others held) to a zero gradient.

        L-BFGS-B stops once the deviance is flat to rounding, which near zero leaves such a component's
        gamma a few per cent off: harmless for the estimates, but lmerTest's df depends on the Hessian in
        theta there (``4 gamma D'' + 2 D'``), whose first term is then wrong by as much. A component at
        zero with a gradient below ``-BOUNDARY_TOL`` has its optimum inside and is freed. Returns ``gamma``
        itself when nothing needs polishing.
        """
        for _ in range(max_steps):
            near = np.flatnonzero(((gamma > 0) & (gamma < POLISH_BELOW)) | ((gamma == 0) & (grad < -BOUNDARY_TOL)))
            if not near.size:
                break
            hess = np.empty((len(near), len(near)))  # of the profiled deviance, by differences of its gradient
            for n, i in enumerate(near):
                h = 1e-4 * max(gamma[i], 1e-5)
                e = np.zeros(self.k)
                e[i] = h
                central = gamma[i] >= h
                hess[:, n] = (self._grad(gamma + e)[near] - (self._grad(gamma - e)[near] if central
                                                                    else grad[near])) / (2 * h if central else h)
            try:
                step = np.linalg.solve((hess + hess.T) / 2, grad[near])
            except np.linalg.LinAlgError:
                break
            new = gamma.copy()
            new[near] = np.maximum(gamma[near] - step, 0.0)
            new_grad = self._grad(new)
            if _projected_abs(new[near], new_grad[near]) >= _projected_abs(gamma[near], grad[near]):
                break
            done = np.all(np.abs(new[near] - gamma[near]) <= 1e-10 * np.maximum(new[near], 1e-12))
            gamma, grad = new, new_grad
            if done:
                break
        return gamma


def _projected_abs(gamma: np.ndarray, grad: np.ndarray) -> float:
    """Largest |gradient| over coordinates inside, and of its descent part over those at zero."""
    return float(np.where(gamma > 0, np.abs(grad), np.maximum(-grad, 0.0)).max())


def _decrement(res: optimize.OptimizeResult, gamma: np.ndarray, grad: np.ndarray) -> float:
    """``g' H^-1 g / 2`` with L-BFGS-B's inverse-Hessian estimate, over the coordinates not held at 0."""
    g = np.where((gamma > 0) | (grad < 0), grad, 0.0)
    try:
        return float(g @ res.hess_inv.matvec(g)) / 2
    except AttributeError:
        return math.inf
