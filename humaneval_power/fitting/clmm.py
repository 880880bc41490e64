"""Cumulative-link mixed models (CLMM) by the Laplace approximation, without R.

The model (the same as R ``ordinal::clmm``): ratings in K ordered categories, thresholds
theta_1 < ... < theta_{K-1} and P(Y <= k) = F(theta_k - eta), eta = x'beta + sum_t s_t u_t[g_t],
u ~ N(0, I) (spherical random effects, one scalar term per grouping array, SD s_t on the latent
scale), F logistic (``logit``) or normal (``probit``).

The Laplace log-likelihood is -[f(u^) + 1/2 log|H|] with f(u) = -sum log P(y_i | u) + u'u/2
and H = I + A'WA its Hessian (A = Z Lambda, W the observed second derivative of -log P
per rating): clmm's objective. The conditional modes u^ come from an inner Newton iteration
on H: the largest term's (diagonal) block is eliminated and the Schur complement of the other
terms factorised densely, or, when that complement is large, SuperLU on the sparse H (memory
proportional to the ratings; N x q is never formed). The outer optimisation is
BFGS over (theta_1, log theta increments, beta, s) with the analytic gradient (implicit
derivative of u^, selected entries of H^-1), then Newton polishing with the observed
information (central differences of the analytic gradient), whose inverse gives the
covariance of (thresholds, beta). The Laplace objective is even in each s_t, so s is
optimised unconstrained and reported as |s|. :func:`fit_clmm_many` is the fast path for many
simulated studies on one layout (docs/ordinal.md).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp
from scipy import linalg, optimize, special, stats
from scipy.sparse.linalg import splu

from ..errors import InputError
from .blas import one_blas_thread

LINKS = ("logit", "probit")
_BIG = 1e3  # stands for an infinite threshold (F, f, f', f'' are exactly 0/1 there)
BOUNDARY_SD = 1e-3  # SDs below this are left out of the observed information, as clmm does
DENSE_MAX = 1500  # Schur complement S factorised densely up to this size, sparse LU of H beyond


class _Factor:
    """A factorisation of the SPD matrix H = I + A'WA (sparse LU, no pivoting): solves, log-determinant and
    the entries of H^-1 that the gradient needs."""

    def __init__(self, H: sp.csc_matrix) -> None:
        self.q = H.shape[0]
        self.lu = splu(H, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0, options={"SymmetricMode": True})
        self.logdet = float(np.sum(np.log(np.abs(self.lu.U.diagonal()))))

    def solve(self, b: np.ndarray) -> np.ndarray:
        """H^-1 b."""
        return self.lu.solve(b)

    def selected(self, cols: np.ndarray) -> np.ndarray:
        """B[i, t, t'] = (H^-1)[cols[i, t], cols[i, t']], from blocks of columns of H^-1."""
        N, m = cols.shape
        out = np.zeros((N, m, m))
        block = max(1, min(self.q, 4_000_000 // max(self.q, 1)))
        for j0 in range(0, self.q, block):
            j1 = min(self.q, j0 + block)
            E = np.zeros((self.q, j1 - j0))
            E[np.arange(j0, j1), np.arange(j1 - j0)] = 1.0
            inv = self.solve(E)
            for t2 in range(m):
                sel = (cols[:, t2] >= j0) & (cols[:, t2] < j1)
                for t in range(m):
                    out[sel, t, t2] = inv[cols[sel, t], cols[sel, t2] - j0]
        return out


class _SchurFactor(_Factor):
    """H = [[D, B'], [B, C]] with D the (diagonal) block of one term, eliminated first; the Schur
    complement S = C - B D^-1 B' is factorised densely (Cholesky). The cost is that of the other
    terms' columns, not of q. B is kept as its nonzeros (a few per column) in the plan's pattern."""

    def __init__(self, D: np.ndarray, bdata: np.ndarray, C: np.ndarray, plan: _SchurPlan) -> None:
        if not np.all(D > 0):  # rounding far out (P(y) without digits): the objective does not exist there
            raise np.linalg.LinAlgError("H is not positive definite")
        self.D, self.bdata, self.plan = D, bdata, plan
        self.bdi = bdata / D[plan.nz_col]  # B D^-1
        self.nd, nc = len(D), plan.nc
        self.chol = None
        logdet_s = 0.0
        if nc:
            corr = np.bincount(plan.pair_target, self.bdi[plan.pair_a] * bdata[plan.pair_b], minlength=nc * nc)
            self.chol = linalg.cho_factor(C - corr.reshape(nc, nc), lower=True, check_finite=False)
            logdet_s = 2.0 * float(np.sum(np.log(np.diag(self.chol[0]))))
        self.logdet = float(np.sum(np.log(D))) + logdet_s

    def solve(self, b: np.ndarray) -> np.ndarray:
        """H^-1 b (b a vector or a matrix of columns)."""
        plan = self.plan
        bp = np.empty(b.shape)
        bp[plan.perm] = b
        bd, bc = bp[:self.nd], bp[self.nd:]
        Dv = self.D if b.ndim == 1 else self.D[:, None]
        if self.chol is None:
            return (bd / Dv)[plan.perm]
        if b.ndim == 1:
            rhs = bc - np.bincount(plan.nz_row, self.bdi * bd[plan.nz_col], minlength=plan.nc)
        else:
            Bd = np.zeros((plan.nc, self.nd))
            Bd[plan.nz_row, plan.nz_col] = self.bdata
            rhs = bc - (Bd / self.D[None, :]) @ bd
        xc = linalg.cho_solve(self.chol, rhs, check_finite=False)
        if b.ndim == 1:
            xd = (bd - np.bincount(plan.nz_col, self.bdata * xc[plan.nz_row], minlength=self.nd)) / self.D
        else:
            xd = (bd - Bd.T @ xc) / Dv
        return np.concatenate([xd, xc])[plan.perm]

    def selected(self, cols: np.ndarray) -> np.ndarray:
        """As :meth:`_Factor.selected` (``cols`` is the layout's: the plan holds the same in its order)."""
        plan = self.plan
        c_cols = plan.cols
        N, m = c_cols.shape
        out = np.zeros((N, m, m))
        d = c_cols[:, 0]
        out[:, 0, 0] = 1.0 / self.D[d]
        if self.chol is not None:
            Sinv = linalg.lapack.dpotri(self.chol[0], lower=1)[0]
            Sinv = np.tril(Sinv) + np.tril(Sinv, -1).T
            # (H^-1)[d, c] = -G[d, c], G = D^-1 B' S^-1, needed only on B's pattern: pairs of nonzeros of a column
            G = np.bincount(plan.pair_b, self.bdi[plan.pair_a] * Sinv[plan.nz_row[plan.pair_a], plan.nz_row[plan.pair_b]],
                            minlength=len(self.bdi))
            out[:, 0, 0] += np.bincount(plan.nz_col, G * self.bdi, minlength=self.nd)[d]
            c = c_cols[:, 1:] - self.nd
            out[:, 1:, 1:] = Sinv[c[:, :, None], c[:, None, :]]
            out[:, 0, 1:] = -G[plan.bpos.T]
            out[:, 1:, 0] = out[:, 0, 1:]
        back = np.argsort(plan.order)
        return out[:, back][:, :, back]


@dataclass(frozen=True)
class _SchurPlan:
    """Where each rating's contributions go in D, B (nonzeros by column of D) and dense C; the largest
    term is eliminated. Built once per layout."""

    order: np.ndarray  # the terms, the eliminated one first
    perm: np.ndarray  # position of each column of u in the (D, C) order
    cols: np.ndarray  # N x m: the ratings' columns in the (D, C) order, terms in ``order``
    bpos: np.ndarray  # (m-1, N): each rating's nonzero of B, per other term
    nz_row: np.ndarray  # row (C index) and column (D index) of each nonzero of B, sorted by column
    nz_col: np.ndarray
    pair_a: np.ndarray  # pairs of nonzeros in one column, and their flat index in C: B D^-1 B'
    pair_b: np.ndarray
    pair_target: np.ndarray
    cidx: np.ndarray  # ((m-1)^2, N): flat index into C (n_c x n_c)
    nd: int
    nc: int

    @classmethod
    def build(cls, layout: Layout) -> _SchurPlan | None:
        """The plan, or None where S would be too large to factorise densely."""
        n = np.asarray(layout.n_levels)
        if not len(n):
            return None
        e = int(np.argmax(n))
        nd, nc = int(n[e]), layout.q - int(n[e])
        if nc > DENSE_MAX:
            return None
        d0 = int(n[:e].sum())
        perm = np.empty(layout.q, np.intp)
        perm[d0:d0 + nd] = np.arange(nd)
        perm[np.r_[0:d0, d0 + nd:layout.q]] = nd + np.arange(nc)
        order = np.array([e] + [t for t in range(len(n)) if t != e])
        C = perm[layout.cols[:, order]]
        c = C[:, 1:] - nd
        k, N = c.shape[1], len(C)
        keys = np.array([C[:, 0].astype(np.int64) * nc + c[:, j] for j in range(k)], dtype=np.int64).reshape(k, N)
        uniq, inv = np.unique(keys, return_inverse=True)
        nz_col, nz_row = (uniq // max(nc, 1)).astype(np.intp), (uniq % max(nc, 1)).astype(np.intp)
        starts = np.searchsorted(nz_col, np.arange(nd))
        ends = np.append(starts[1:], len(uniq))
        pa, pb = [], []
        for s0, s1 in zip(starts, ends):
            idx = np.arange(s0, s1)
            pa.append(np.repeat(idx, len(idx)))
            pb.append(np.tile(idx, len(idx)))
        pair_a = np.concatenate(pa) if pa else np.zeros(0, np.intp)
        pair_b = np.concatenate(pb) if pb else np.zeros(0, np.intp)
        cidx = np.array([c[:, j] * nc + c[:, j2] for j in range(k) for j2 in range(k)], dtype=np.intp).reshape(k * k, N)
        return cls(order, perm, C, inv.reshape(k, N), nz_row, nz_col, pair_a, pair_b,
                   nz_row[pair_a] * nc + nz_row[pair_b], cidx, nd, nc)

    def factor(self, w: np.ndarray, s: np.ndarray) -> _SchurFactor:
        """The factorisation of H = I + A'WA for weights w and SDs s."""
        so = s[self.order]
        D = 1.0 + so[0] ** 2 * np.bincount(self.cols[:, 0], w, minlength=self.nd)
        bdata = np.bincount(self.bpos.ravel(), ((so[1:, None] * so[0]) * w[None, :]).ravel(),
                            minlength=len(self.nz_row)).astype(float)
        ss = np.outer(so[1:], so[1:]).ravel()
        C = np.bincount(self.cidx.ravel(), (ss[:, None] * w[None, :]).ravel(),
                        minlength=self.nc * self.nc).astype(float).reshape(self.nc, self.nc)
        C[np.diag_indices(self.nc)] += 1.0
        return _SchurFactor(D, bdata, C, self)


@dataclass(frozen=True)
class ClmmFit:
    """A fitted CLMM. ``cov`` is the covariance of (thresholds, beta), in that order."""

    thresholds: np.ndarray
    threshold_names: tuple[str, ...]
    beta: np.ndarray
    beta_names: tuple[str, ...]
    sds: np.ndarray
    sd_names: tuple[str, ...]
    loglik: float
    cov: np.ndarray
    link: str
    levels: tuple[int, ...]
    n_obs: int
    converged: bool
    message: str
    n_iter: int
    max_grad: float
    backend: str
    warnings: tuple[str, ...] = field(default=())
    #: standard errors of the SDs (observed information in (thresholds, beta, SDs), clmm's parametrisation);
    #: NaN for an SD below ``BOUNDARY_SD`` (left out of the information) or when not computed
    sd_se: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: posterior draws (the bambi backend): ``thresholds`` (S x K-1), ``beta`` (S x p), ``sds`` (S x m); None for a
    #: maximum-likelihood fit (then the estimates are the optimum and ``cov``, ``sd_se`` the observed information's)
    draws: dict[str, np.ndarray] | None = None

    @property
    def se(self) -> np.ndarray:
        """Standard errors of (thresholds, beta)."""
        return np.sqrt(np.diag(self.cov))

    @property
    def se_beta(self) -> np.ndarray:
        """Standard errors of beta."""
        return self.se[len(self.thresholds):]

    @property
    def sd(self) -> dict[str, float]:
        """Random-effect SDs by term name."""
        return dict(zip(self.sd_names, map(float, self.sds)))


# --------------------------------------------------------------------------- input


def ordinal_codes(ratings: np.ndarray | Sequence[float], scale: tuple[int, int] | None = None
                  ) -> tuple[np.ndarray, tuple[int, ...]]:
    """0-based category codes of integer ratings and the scale's levels, or an InputError.

    ``scale`` = (lowest, highest) rating; by default the observed range. Refused: non-integer or
    missing values, ratings outside the scale, fewer than three categories, an unused category
    (its threshold cannot be estimated).
    """
    y = np.asarray(ratings, dtype=float).ravel()
    if y.size == 0:
        raise InputError("ordinal ratings: no ratings")
    bad = ~np.isfinite(y) | (y != np.round(y))
    if bad.any():
        raise InputError(f"ordinal ratings must be integers: {int(bad.sum())} are not (e.g. {float(y[bad][0])!r})")
    lo, hi = (int(y.min()), int(y.max())) if scale is None else (int(scale[0]), int(scale[1]))
    out = (y < lo) | (y > hi)
    if out.any():
        raise InputError(f"ordinal ratings must lie in {lo}..{hi}: {int(out.sum())} do not (e.g. {int(y[out][0])})")
    levels = tuple(range(lo, hi + 1))
    codes = (y - lo).astype(np.intp)
    counts = np.bincount(codes, minlength=len(levels))
    if np.count_nonzero(counts) < 3:
        raise InputError(f"an ordinal model needs at least three categories observed; found {np.count_nonzero(counts)} "
                         f"({', '.join(str(v) for v, c in zip(levels, counts) if c)})")
    unused = [v for v, c in zip(levels, counts) if c == 0]
    if unused:
        v = unused[0]
        which = ([f"{v}|{v + 1}"] if v == lo else [f"{v - 1}|{v}"] if v == hi else [f"{v - 1}|{v}", f"{v}|{v + 1}"])
        raise InputError(f"rating {v} is never used on the {lo}..{hi} scale, so the threshold"
                         f"{'s ' + ' and '.join(which) + ' cannot both' if len(which) > 1 else ' ' + which[0] + ' cannot'}"
                         " be estimated; merge it with a neighbour or narrow the scale")
    return codes, levels


def check_link(link: str) -> str:
    """The link name, or an InputError listing the known ones."""
    if link not in LINKS:
        raise InputError(f"unknown link {link!r}; known: {', '.join(LINKS)}")
    return link


def treatment_design(labels: Sequence[object] | np.ndarray, baseline: object | None = None
                     ) -> tuple[np.ndarray, tuple[str, ...]]:
    """Treatment-coded dummies (no intercept: the thresholds hold it) of a label array, and their names."""
    values, codes = np.unique(np.asarray(labels).astype(str), return_inverse=True)
    base = 0 if baseline is None else int(np.flatnonzero(values == str(baseline))[0])
    keep = [j for j in range(len(values)) if j != base]
    X = (codes[:, None] == np.asarray(keep)[None, :]).astype(float)
    return X, tuple(str(values[j]) for j in keep)


TERMS = ("worker", "item", "worker:system", "item:system")


def crossed_groups(worker: Sequence[object] | np.ndarray, item: Sequence[object] | np.ndarray,
                   system: Sequence[object] | np.ndarray, terms: Sequence[str] = TERMS) -> dict[str, np.ndarray]:
    """Grouping arrays of the crossed random terms (any subset of ``TERMS``) from the rating columns."""
    cols = {"worker": np.asarray(worker).astype(str), "item": np.asarray(item).astype(str),
            "system": np.asarray(system).astype(str)}
    unknown = [t for t in terms if t not in TERMS]
    if unknown:
        raise InputError(f"unknown random term {unknown[0]!r}; known: {', '.join(TERMS)}")
    out = {}
    for term in terms:
        parts = [cols[p] for p in term.split(":")]
        out[term] = parts[0] if len(parts) == 1 else np.char.add(np.char.add(parts[0], "\x1f"), parts[1])
    return out


# --------------------------------------------------------------------------- layout


@dataclass(frozen=True)
class Layout:
    """Who rated what: the random-effect columns of every rating and the sparsity pattern of H.

    ``cols[i, t]`` is rating i's column of term t in u (terms stacked); H = I + A'WA has a fixed
    pattern (CSC ``indices``/``indptr``), filled by ``np.bincount(pos, ...)``.
    """

    names: tuple[str, ...]
    cols: np.ndarray  # N x m
    n_levels: tuple[int, ...]
    q: int
    indptr: np.ndarray
    indices: np.ndarray
    pos: np.ndarray  # (m*m, N) positions of rating i's (t, t') entry in H.data
    diag: np.ndarray  # positions of H's diagonal in H.data

    @classmethod
    def build(cls, groups: Mapping[str, Sequence[object] | np.ndarray], n_obs: int) -> Layout:
        names = tuple(groups)
        cols, n_levels, offset = [], [], 0
        for name in names:
            g = np.asarray(groups[name])
            if g.shape != (n_obs,):
                raise InputError(f"random-effect grouping {name!r} has {g.size} entries for {n_obs} ratings")
            _, codes = np.unique(g.astype(str) if g.dtype.kind == "O" else g, return_inverse=True)
            cols.append(codes + offset)
            n_levels.append(int(codes.max()) + 1)
            offset += n_levels[-1]
        q = offset
        C = np.stack(cols, axis=1) if cols else np.zeros((n_obs, 0), np.intp)
        m = C.shape[1]
        rows = np.concatenate([C[:, t] for t in range(m) for _ in range(m)] + [np.arange(q)])
        colj = np.concatenate([C[:, t2] for _ in range(m) for t2 in range(m)] + [np.arange(q)])
        keys = colj.astype(np.int64) * q + rows
        uniq, inv = np.unique(keys, return_inverse=True)
        indices = (uniq % q).astype(np.int32) if q else np.zeros(0, np.int32)
        indptr = np.searchsorted(uniq // max(q, 1), np.arange(q + 1)).astype(np.int32)
        n_pairs = m * m * n_obs
        return cls(names, C, tuple(n_levels), q, indptr, indices, inv[:n_pairs].reshape(m * m, n_obs), inv[n_pairs:])


# --------------------------------------------------------------------------- link derivatives


def _dens(z: np.ndarray, link: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """F, f, f', f'' at z (z clipped to +-_BIG)."""
    z = np.clip(z, -_BIG, _BIG)
    if link == "logit":
        F = special.expit(z)
        f = F * (1 - F)
        return F, f, f * (1 - 2 * F), f * (1 - 6 * F + 6 * F * F)
    f = np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi)
    return special.ndtr(z), f, -z * f, (z * z - 1) * f


def _prob(z1: np.ndarray, z2: np.ndarray, link: str) -> np.ndarray:
    """F(z1) - F(z2), computed on the upper tail where that is more accurate (F symmetric)."""
    cdf = special.expit if link == "logit" else special.ndtr
    z1c, z2c = np.clip(z1, -_BIG, _BIG), np.clip(z2, -_BIG, _BIG)
    upper = z2c > 0
    return np.where(upper, cdf(-z2c) - cdf(-z1c), cdf(z1c) - cdf(z2c))


@dataclass
class _Pieces:
    """Per-rating derivatives of -log P with respect to eta and to the two thresholds."""

    nll: float
    d: np.ndarray
    w: np.ndarray
    a: np.ndarray
    b: np.ndarray
    c1: np.ndarray
    c2: np.ndarray
    e1: np.ndarray
    e2: np.ndarray


def _pieces(y: np.ndarray, alpha_ext: np.ndarray, eta: np.ndarray, link: str, third: bool) -> _Pieces:
    z1 = alpha_ext[y + 1] - eta
    z2 = alpha_ext[y] - eta
    P = _prob(z1, z2, link)
    if np.any(P <= 0):
        P = np.maximum(P, 1e-300)
    _, f1, g1, h1 = _dens(z1, link)
    _, f2, g2, h2 = _dens(z2, link)
    a, b = f1 / P, f2 / P
    c1, c2 = g1 / P, g2 / P
    e1, e2 = (h1 / P, h2 / P) if third else (c1, c2)
    return _Pieces(float(-np.log(P).sum()), a - b, (a - b) ** 2 - (c1 - c2), a, b, c1, c2, e1, e2)


# --------------------------------------------------------------------------- the model on one layout


class _Model:
    """Laplace objective and gradient for one data set (ratings, design, layout)."""

    def __init__(self, y: np.ndarray, X: np.ndarray, layout: Layout, K: int, link: str) -> None:
        self.y, self.X, self.L, self.K, self.link = y, X, layout, K, link
        self.p, self.m = X.shape[1], len(layout.names)
        self.u = np.zeros(layout.q)
        self.u_dot: np.ndarray | None = None  # d u^ / d (alpha, beta, s) at phi_last
        self.phi_last = np.zeros(0)
        self.plan = _SchurPlan.build(layout)
        self.inner_tol = 1e-10

    # --- pieces
    def _alpha_ext(self, alpha: np.ndarray) -> np.ndarray:
        return np.concatenate([[-np.inf], alpha, [np.inf]])

    def _eta_re(self, u: np.ndarray, s: np.ndarray) -> np.ndarray:
        C = self.L.cols
        return (u[C] * s[None, :]).sum(axis=1) if self.m else np.zeros(len(self.y))

    def _At(self, v: np.ndarray, s: np.ndarray) -> np.ndarray:
        """A'v for an N-vector v."""
        out = np.zeros(self.L.q)
        for t in range(self.m):
            out += s[t] * np.bincount(self.L.cols[:, t], v, minlength=self.L.q)
        return out

    def _H(self, w: np.ndarray, s: np.ndarray) -> sp.csc_matrix:
        L = self.L
        ss = np.outer(s, s).ravel()
        data = np.bincount(L.pos.ravel(), (ss[:, None] * w[None, :]).ravel(), minlength=len(L.indices))
        data[L.diag] += 1.0
        return sp.csc_matrix((data, L.indices, L.indptr), shape=(L.q, L.q))

    # --- inner Newton
    def modes(self, alpha: np.ndarray, beta: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, _Pieces, _Factor | None, int]:
        """Conditional modes u^, the pieces at u^, the LU of H(u^) and the iterations used."""
        ae = self._alpha_ext(alpha)
        eta_fix = self.X @ beta
        u = self.u.copy()
        pc = _pieces(self.y, ae, eta_fix + self._eta_re(u, s), self.link, False)
        obj = pc.nll + 0.5 * u @ u
        if self.L.q == 0:
            return u, pc, None, 0
        if self.u_dot is not None:  # first-order prediction of the modes from the last evaluation
            u_pred = u + self.u_dot @ (np.concatenate([alpha, beta, s]) - self.phi_last)
            pc_pred = _pieces(self.y, ae, eta_fix + self._eta_re(u_pred, s), self.link, False)
            obj_pred = pc_pred.nll + 0.5 * u_pred @ u_pred
            if obj_pred < obj:
                u, pc, obj = u_pred, pc_pred, obj_pred
        for it in range(100):  # noqa: B007 (the count is returned)
            grad = self._At(pc.d, s) + u
            lu = self.plan.factor(pc.w, s) if self.plan is not None else _Factor(self._H(pc.w, s))
            if np.max(np.abs(grad), initial=0.0) < self.inner_tol:
                break
            step = lu.solve(grad)
            fac = 1.0
            for _ in range(60):
                u_new = u - fac * step
                pc_new = _pieces(self.y, ae, eta_fix + self._eta_re(u_new, s), self.link, False)
                obj_new = pc_new.nll + 0.5 * u_new @ u_new
                if obj_new <= obj + 1e-12 * abs(obj):
                    break
                fac /= 2
            else:
                break  # no descent possible: at the optimum to rounding
            u, pc, obj = u_new, pc_new, obj_new
        self.u = u
        return u, pc, lu, it

    # --- Laplace objective and gradient
    def objective(self, alpha: np.ndarray, beta: np.ndarray, s: np.ndarray, grad: bool = True
                  ) -> tuple[float, np.ndarray | None]:
        """-log L (Laplace) and its gradient in (alpha, beta, s)."""
        if np.any(np.diff(alpha) <= 0):
            return np.inf, None
        try:
            u, _, lu, _ = self.modes(alpha, beta, s)
        except np.linalg.LinAlgError:  # H not numerically positive definite: far out (SDs ~50, |eta| ~100,
            return np.inf, None  # where P(y) loses its digits), so the optimiser steps back
        self.beta_last = beta
        ae = self._alpha_ext(alpha)
        pc = _pieces(self.y, ae, self.X @ beta + self._eta_re(u, s), self.link, True)
        logdet = 0.0 if lu is None else lu.logdet
        value = pc.nll + 0.5 * u @ u + 0.5 * logdet
        if not grad:
            return value, None
        return value, self._gradient(pc, u, lu, alpha, s)

    def _gradient(self, pc: _Pieces, u: np.ndarray, lu: _Factor | None, alpha: np.ndarray, s: np.ndarray) -> np.ndarray:
        y, X, K, C, m = self.y, self.X, self.K, self.L.cols, self.m
        a, b, c1, c2, e1, e2 = pc.a, pc.b, pc.c1, pc.c2, pc.e1, pc.e2
        g11, g12, g22 = a * a - c1, -a * b, c2 + b * b
        g111 = 3 * a * c1 - 2 * a ** 3 - e1
        g112 = 2 * a * a * b - b * c1
        g122 = -a * c2 - 2 * a * b * b
        g222 = e2 + 3 * b * c2 + 2 * b ** 3
        w3 = -(g111 + 3 * g112 + 3 * g122 + g222)
        wa1, wa2 = g111 + 2 * g112 + g122, g112 + 2 * g122 + g222
        da1, da2 = -(g11 + g12), -(g12 + g22)
        if lu is not None:
            B = lu.selected(self.L.cols)
            Bs = B @ s  # N x m
            h = Bs @ s
            v = lu.solve(0.5 * self._At(h * w3, s))
            r = self._eta_re(v, s)
        else:
            Bs, h, v, r = np.zeros((len(y), 0)), np.zeros(len(y)), np.zeros(0), np.zeros(len(y))
        upper, lower = y, y - 1  # threshold index of z1 and z2 (valid where 0 <= . < K-1)
        gu = -a + 0.5 * h * wa1 - r * da1
        gl = b + 0.5 * h * wa2 - r * da2
        ok_u, ok_l = upper < K - 1, lower >= 0
        g_alpha = (np.bincount(upper[ok_u], gu[ok_u], minlength=K - 1)
                   + np.bincount(lower[ok_l], gl[ok_l], minlength=K - 1))
        g_beta = X.T @ (pc.d + 0.5 * h * w3 - r * pc.w)
        g_s = np.zeros(m)
        for t in range(m):
            ut = u[C[:, t]]
            g_s[t] = (pc.d * ut).sum() + (0.5 * h * w3 * ut).sum() + (pc.w * Bs[:, t]).sum() \
                - (r * pc.w * ut).sum() - (v[C[:, t]] * pc.d).sum()
        if lu is not None:  # d u^/d phi = -H^-1 d(grad_u f)/d phi: the next evaluation's starting modes
            cross = [self._At(np.where(ok_u & (upper == k), da1, 0.0) + np.where(ok_l & (lower == k), da2, 0.0), s)
                     for k in range(K - 1)]
            cross += [self._At(pc.w * X[:, j], s) for j in range(self.p)]
            cross += [self._At(pc.w * u[C[:, t]], s) + np.bincount(C[:, t], pc.d, minlength=self.L.q) for t in range(m)]
            self.u_dot = -lu.solve(np.column_stack(cross))
            self.phi_last = np.concatenate([alpha, self.beta_last, s])
        return np.concatenate([g_alpha, g_beta, g_s])


# --------------------------------------------------------------------------- fitting


def _to_natural(psi: np.ndarray, K: int) -> np.ndarray:
    """(theta_1, log increments, beta, s) -> (thresholds, beta, s)."""
    alpha = psi[0] + np.concatenate([[0.0], np.cumsum(np.exp(psi[1:K - 1]))])
    return np.concatenate([alpha, psi[K - 1:]])


def _jacobian(psi: np.ndarray, K: int) -> np.ndarray:
    """d natural / d psi (lower-triangular in the threshold block, identity elsewhere)."""
    J = np.eye(len(psi))
    J[:K - 1, 0] = 1.0
    inc = np.exp(psi[1:K - 1])
    for k in range(1, K - 1):
        J[k, 1:k + 1] = inc[:k]
    return J


def _hessian(fun_grad, phi: np.ndarray, free: np.ndarray, g0: np.ndarray | None = None) -> np.ndarray:
    """Central (or, given the gradient ``g0`` at phi, forward) differences of the analytic gradient over
    the ``free`` parameters, symmetrised."""
    idx = np.flatnonzero(free)
    Hm = np.zeros((len(idx), len(idx)))
    for col, j in enumerate(idx):
        h = 1e-4 * max(1.0, abs(phi[j]))
        up, dn = phi.copy(), phi.copy()
        up[j] += h
        dn[j] -= h
        if g0 is None:
            Hm[:, col] = (fun_grad(up)[1][idx] - fun_grad(dn)[1][idx]) / (2 * h)
        else:
            Hm[:, col] = (fun_grad(up)[1][idx] - g0[idx]) / h
    return 0.5 * (Hm + Hm.T)


def _design(X: np.ndarray | None, N: int) -> np.ndarray:
    """The fixed-effect design as an N x p float matrix (no intercept), or an InputError."""
    Xm = np.zeros((N, 0)) if X is None else np.asarray(X, dtype=float).reshape(N, -1)
    if not np.all(np.isfinite(Xm)):
        raise InputError("the fixed-effect design has missing or infinite values")
    if np.linalg.matrix_rank(np.column_stack([np.ones(N), Xm])) < Xm.shape[1] + 1:
        raise InputError("the fixed-effect design is rank-deficient or holds an intercept (the thresholds are the intercept)")
    return Xm


def laplace_loglik(
    ratings: np.ndarray | Sequence[float],
    X: np.ndarray | None,
    groups: Mapping[str, Sequence[object] | np.ndarray] | None,
    thresholds: np.ndarray | Sequence[float],
    beta: np.ndarray | Sequence[float],
    sds: np.ndarray | Sequence[float],
    *,
    link: str = "logit",
    scale: tuple[int, int] | None = None,
) -> float:
    """The Laplace log-likelihood at given parameters (clmm's ``logLik`` at its estimates)."""
    check_link(link)
    y, levels = ordinal_codes(ratings, scale)
    Xm = _design(X, len(y))
    model = _Model(y, Xm, Layout.build(groups or {}, len(y)), len(levels), link)
    alpha = np.asarray(thresholds, float)
    if alpha.shape != (len(levels) - 1,) or np.any(np.diff(alpha) <= 0):
        raise InputError(f"thresholds must be {len(levels) - 1} increasing values")
    return -model.objective(alpha, np.asarray(beta, float), np.asarray(sds, float), grad=False)[0]


def fit_clmm(
    ratings: np.ndarray | Sequence[float],
    X: np.ndarray | None = None,
    groups: Mapping[str, Sequence[object] | np.ndarray] | None = None,
    *,
    link: str = "logit",
    scale: tuple[int, int] | None = None,
    beta_names: Sequence[str] | None = None,
    start_sd: float = 1.0,
    hessian: bool = True,
) -> ClmmFit:
    """Fit a CLMM by the Laplace approximation (no R); the parameters and likelihood of ``ordinal::clmm``.

    ``X``: fixed-effect design without an intercept (N x p, e.g. system dummies); ``groups``:
    name -> grouping array (one scalar random intercept per entry; build interaction terms
    such as worker:system by pairing labels). ``scale``: (lowest, highest) rating.
    ``hessian=False``: no observed information after the fit (the same estimates and likelihood, ``cov`` NaN).
    """
    check_link(link)
    y, levels = ordinal_codes(ratings, scale)
    Xm = _design(X, len(y))
    with one_blas_thread():  # small dense factorisations: extra BLAS threads only contend
        return _fit(y, levels, Xm, groups or {}, link, beta_names, start_sd, hessian)


def _start(y: np.ndarray, K: int, p: int, m: int, link: str, start_sd: float) -> np.ndarray:
    """Starting (theta_1, log increments, beta, s): thresholds of the marginal proportions, beta = 0."""
    cum = np.cumsum(np.bincount(y, minlength=K))[:-1] / len(y)
    alpha0 = special.logit(cum) if link == "logit" else special.ndtri(cum)
    return np.concatenate([[alpha0[0]], np.log(np.diff(alpha0)), np.zeros(p), np.full(m, start_sd)])


def _fit(y: np.ndarray, levels: tuple[int, ...], Xm: np.ndarray, groups: Mapping[str, Sequence[object] | np.ndarray],
         link: str, beta_names: Sequence[str] | None, start_sd: float, hessian: bool = True) -> ClmmFit:
    K, p = len(levels), Xm.shape[1]
    model = _Model(y, Xm, Layout.build(groups, len(y)), K, link)
    names_b = tuple(beta_names) if beta_names is not None else tuple(f"x{j + 1}" for j in range(p))
    fit = _optimise(model, levels, names_b, _start(y, K, p, model.m, link, start_sd), hessian=hessian)[0]
    # the objective at the estimates once more, its conditional modes found from zero: the optimisation
    # warm-starts them, which can carry it where the likelihood cannot be evaluated (SDs ~50 on the AMT ratings
    # of two systems, 12 items, 84 workers: P(y) loses its digits and H is no longer positive definite)
    again = -_Model(y, Xm, model.L, K, link).objective(fit.thresholds, fit.beta, fit.sds, grad=False)[0]
    sds = ", ".join(f"{n} {v:.3g}" for n, v in zip(fit.sd_names, fit.sds))
    if not np.isfinite(again):
        raise InputError(f"the Laplace fit ran to SDs ({sds}) where its likelihood cannot be evaluated: the ratings "
                         "do not identify them (e.g. most workers rate only one or two outputs)")
    if abs(again - fit.loglik) > 1e-6 * max(1.0, abs(fit.loglik)):
        note = (f"the log-likelihood at the estimates depends on the start of the conditional modes ({fit.loglik:.8g} "
                f"warm, {again:.8g} from zero)")
        fit = replace(fit, converged=False, warnings=(*fit.warnings, note))
    return fit


def _flip_signs(model: _Model, s: np.ndarray) -> None:
    """The objective is even in each SD: before reporting a negative SD as |s|, negate its term's modes (the
    modes at -s), so the next evaluation starts from the modes it needs."""
    neg = np.flatnonzero(s < 0)
    if len(neg):
        edges = np.concatenate([[0], np.cumsum(model.L.n_levels)])
        for t in neg:
            model.u[edges[t]:edges[t + 1]] *= -1
        model.u_dot = None


def _optimise(model: _Model, levels: tuple[int, ...], names_b: tuple[str, ...], psi0: np.ndarray,
              gtol: float = 1e-7, polish: int = 3, central: bool = True, hess_inv0: np.ndarray | None = None,
              hessian: bool = True) -> tuple[ClmmFit, np.ndarray | None]:
    """BFGS from ``psi0`` (and ``hess_inv0``, an inverse Hessian in psi), up to ``polish`` Newton steps, the
    observed information (central or forward differences; none unless ``hessian``). Also returns the inverse Hessian in psi at the
    estimates (None if not positive definite): a warm start for a similar data set."""
    K, p, N = model.K, model.p, len(model.y)

    last: list[tuple[bytes, float, np.ndarray]] = []  # the latest evaluation (BFGS ends where it evaluated)

    def fun_grad_nat(phi: np.ndarray) -> tuple[float, np.ndarray]:
        if last and last[0][0] == phi.tobytes():
            return last[0][1], last[0][2]
        val, g = model.objective(phi[:K - 1], phi[K - 1:K - 1 + p], phi[K - 1 + p:])
        out = val, (np.full(len(phi), np.nan) if g is None else g)
        last[:] = [(phi.tobytes(), *out)]
        return out

    best: list[tuple[float, np.ndarray]] = [(np.inf, psi0)]  # the lowest finite evaluation

    def fun_grad_psi(psi: np.ndarray) -> tuple[float, np.ndarray]:
        val, g = fun_grad_nat(_to_natural(psi, K))
        if not np.isfinite(val):
            return 1e300, np.zeros(len(psi))
        if val < best[0][0]:
            best[0] = (val, psi.copy())
        return val, _jacobian(psi, K).T @ g

    res = optimize.minimize(fun_grad_psi, psi0, jac=True, method="BFGS",
                            options={"gtol": gtol, "maxiter": 1000, "hess_inv0": hess_inv0})
    for _ in range(3):  # BFGS ended where the objective does not exist (a step far out): restart from the best point
        if res.fun < 1e300 or not np.isfinite(best[0][0]):
            break
        res = optimize.minimize(fun_grad_psi, best[0][1], jac=True, method="BFGS",
                                options={"gtol": gtol, "maxiter": 1000})
    phi = _to_natural(res.x, K)
    _flip_signs(model, phi[K - 1 + p:])
    phi[K - 1 + p:] = np.abs(phi[K - 1 + p:])
    value, g = fun_grad_nat(phi)
    free = np.ones(len(phi), bool)
    free[K - 1 + p:] = phi[K - 1 + p:] >= BOUNDARY_SD
    n_iter = int(res.nit)
    for _ in range(polish):  # Newton polishing on the observed information
        Hs = _hessian(fun_grad_nat, phi, free)
        step = np.zeros(len(phi))
        try:
            step[free] = np.linalg.solve(Hs, g[free])
        except np.linalg.LinAlgError:
            break
        trial = phi - step
        trial[K - 1 + p:] = np.abs(trial[K - 1 + p:])
        tv, tg = fun_grad_nat(trial)
        if not (np.isfinite(tv) and tv <= value + 1e-10 * abs(value)):
            break
        phi, value, g = trial, tv, tg
        n_iter += 1
        if np.max(np.abs(step)) < 1e-9:
            break
    nfe = K - 1 + p
    warnings: list[str] = []
    max_grad = float(np.max(np.abs(g[free]), initial=0.0))
    converged = bool(np.isfinite(value) and max_grad < 1e-4)
    if not hessian:  # no covariance: BFGS's inverse Hessian is the warm start
        return (ClmmFit(
            thresholds=phi[:K - 1], threshold_names=(), beta=phi[K - 1:nfe], beta_names=names_b, sds=phi[nfe:],
            sd_names=model.L.names, loglik=-value, cov=np.full((nfe, nfe), np.nan), link=model.link, levels=levels,
            n_obs=N, converged=converged, message=str(res.message), n_iter=n_iter, max_grad=max_grad,
            backend="laplace"), res.hess_inv)
    Hs = _hessian(fun_grad_nat, phi, free, None if central else g)
    sd_se = np.full(model.m, np.nan)
    try:
        inv = np.linalg.inv(Hs)
        cov = inv[:nfe, :nfe]
        var_sd = np.diag(inv)[nfe:]  # the free SDs, in order
        sd_se[free[nfe:]] = np.sqrt(np.where(var_sd > 0, var_sd, np.nan))
    except np.linalg.LinAlgError:
        cov = np.full((nfe, nfe), np.nan)
        warnings.append("the observed information is singular")
    if np.any(np.linalg.eigvalsh(Hs) <= 0):
        warnings.append("the observed information is not positive definite")
    hinv_psi = None
    if not warnings:
        H_full = np.eye(len(phi))
        H_full[np.ix_(free, free)] = Hs
        th = phi[:K - 1]
        Jp = _jacobian(np.concatenate([[th[0]], np.log(np.diff(th)), phi[K - 1:]]), K)
        hinv_psi = np.linalg.inv(Jp.T @ H_full @ Jp)
        hinv_psi = 0.5 * (hinv_psi + hinv_psi.T)
    return (ClmmFit(
        thresholds=phi[:K - 1], threshold_names=tuple(f"{levels[k]}|{levels[k + 1]}" for k in range(K - 1)),
        beta=phi[K - 1:nfe], beta_names=names_b, sds=phi[nfe:], sd_names=model.L.names,
        loglik=-value, cov=cov, link=model.link, levels=levels, n_obs=N, converged=converged,
        message=str(res.message), n_iter=n_iter, max_grad=max_grad, backend="laplace", warnings=tuple(warnings),
        sd_se=sd_se,
    ), hinv_psi)


# --------------------------------------------------------------------------- many studies on one layout


def _positive_definite(a: np.ndarray | None) -> bool:
    """Whether ``a`` is a finite symmetric positive-definite matrix."""
    if a is None or a.ndim != 2 or not np.all(np.isfinite(a)):
        return False
    try:
        np.linalg.cholesky(0.5 * (a + a.T))
    except np.linalg.LinAlgError:
        return False
    return True


@dataclass(frozen=True)
class ClmmBatch:
    """Per-study results of :func:`fit_clmm_many` for one coefficient (NaN where a study failed)."""

    estimate: np.ndarray
    se: np.ndarray
    z: np.ndarray
    p_wald: np.ndarray
    loglik: np.ndarray
    lr: np.ndarray  # 2 (loglik - loglik without the coefficient); NaN unless lrt
    p_lr: np.ndarray
    converged: np.ndarray
    failed: np.ndarray
    reasons: tuple[str, ...]
    sds: np.ndarray  # S x m fitted random-effect SDs (full model), in the order of ``groups``
    #: S x (K-1 + p-1 + m): the null model's (thresholds, beta without ``coef``, SDs) per study; NaN unless lrt
    null_params: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    #: S x B likelihood ratios of parametric-bootstrap data sets drawn from each study's fitted null model
    #: (:func:`bootstrap_lr`); NaN where a draw failed; (S, 0) when not drawn
    lr_boot: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))

    @property
    def p_bartlett(self) -> np.ndarray:
        """Bartlett-corrected LRT p-values: :func:`bartlett_p` of ``lr`` with the mean of every bootstrap LR."""
        return bartlett_p(self.lr, self.lr_boot)


def _study(y: np.ndarray, Xm: np.ndarray, X0: np.ndarray, coef: int, layout: Layout, levels: tuple[int, ...],
           link: str, lrt: bool, warm: dict[bool, tuple[np.ndarray, np.ndarray | None]],
           information: bool = True) -> dict[bool, ClmmFit]:
    """One study's fits, warm-started and updating ``warm``: with the coefficient (from the previous
    study's fit) and, for the LRT, without it (from this study's full fit, the coefficient dropped)."""
    K = len(levels)
    fits = {}
    modes = np.zeros(layout.q)
    for full in (True, False) if lrt else (True,):
        Xs = Xm if full else X0
        model = _Model(y, Xs, layout, K, link)
        model.inner_tol = 1e-8
        model.u = modes  # the null model starts from the full model's modes
        if full:
            psi0, hinv0 = warm.get(True, (_start(y, K, Xs.shape[1], model.m, link, 1.0), None))
        else:
            psi0, hinv0 = _drop(*warm[True], K - 1 + coef)
        fit, hinv = _optimise(model, levels, (), psi0, gtol=1e-5, polish=0, central=False, hess_inv0=hinv0,
                              hessian=full and information)
        modes = model.u
        fits[full] = fit
        th = fit.thresholds
        warm[full] = (np.concatenate([[th[0]], np.log(np.diff(th)), fit.beta, np.maximum(fit.sds, 0.05)]),
                      0.5 * (hinv + hinv.T) if hinv is not None and _positive_definite(hinv) else hinv0)
    return fits


def _drop(psi: np.ndarray, hinv: np.ndarray | None, j: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Parameter j removed from a start and from an inverse Hessian (through the Hessian)."""
    if hinv is None:
        return np.delete(psi, j), None
    H = np.delete(np.delete(np.linalg.inv(hinv), j, axis=0), j, axis=1)
    out = np.linalg.inv(H)
    out = 0.5 * (out + out.T)
    return np.delete(psi, j), out if _positive_definite(out) else None


def fit_clmm_many(
    responses: np.ndarray,
    X: np.ndarray,
    groups: Mapping[str, Sequence[object] | np.ndarray],
    *,
    coef: int = 0,
    scale: tuple[int, int],
    link: str = "logit",
    lrt: bool = False,
    bootstrap: int = 0,
    seed: int | np.random.SeedSequence | None = None,
    information: bool = True,
) -> ClmmBatch:
    """Fit the CLMM to every column of ``responses`` (N x S ratings) on one layout: Wald z (and with
    ``lrt`` the likelihood-ratio test) for coefficient ``coef``.

    The fast path of simulated studies: the layout and its Schur plan are built once, each study starts
    from the previous study's estimates, stops BFGS at gtol 1e-5 without Newton polishing and takes the
    observed information from forward differences. A study refused by :func:`ordinal_codes` (e.g. a
    category unused) is counted as failed with its reason.

    ``bootstrap`` = B > 0 (needs ``lrt``) also draws B data sets from each study's fitted null model and
    records their likelihood ratios (``lr_boot``, :func:`bootstrap_lr`; ``seed`` by default derived from
    the ratings) for the Bartlett-corrected LRT (``p_bartlett``). ``information=False`` skips the observed
    information (``se``, ``z`` NaN): the likelihood ratio only, as the bootstrap draws need.
    """
    check_link(link)
    Y = np.asarray(responses)
    if Y.ndim != 2:
        raise InputError("responses must be an N x S matrix (one column per study)")
    N, S = Y.shape
    Xm = _design(X, N)
    p = Xm.shape[1]
    if not 0 <= coef < p:
        raise InputError(f"coefficient index {coef} is outside the design's {p} columns")
    if bootstrap and not lrt:
        raise InputError("the parametric bootstrap of the likelihood ratio needs lrt=True")
    layout = Layout.build(groups, N)
    X0 = np.delete(Xm, coef, axis=1)
    levels = tuple(range(scale[0], scale[1] + 1))
    out = {k: np.full(S, np.nan) for k in ("estimate", "se", "loglik", "lr")}
    converged, failed = np.zeros(S, bool), np.zeros(S, bool)
    sds = np.full((S, len(layout.names)), np.nan)
    reasons: list[str] = []
    warm: dict[bool, tuple[np.ndarray, np.ndarray | None]] = {}
    null_params = np.full((S, len(levels) - 1 + p - 1 + len(layout.names)), np.nan)
    with one_blas_thread():
        for j in range(S):
            try:
                y, _ = ordinal_codes(Y[:, j], scale)
            except InputError as exc:
                failed[j] = True
                reasons.append(str(exc))
                continue
            try:
                fits = _study(y, Xm, X0, coef, layout, levels, link, lrt, warm, information)
            except (np.linalg.LinAlgError, FloatingPointError, ValueError) as exc:
                failed[j] = True
                reasons.append(f"numerical failure: {exc}")
                continue
            f1 = fits[True]
            if lrt:
                f0 = fits[False]
                null_params[j] = np.concatenate([f0.thresholds, f0.beta, np.abs(f0.sds)])
            out["estimate"][j] = f1.beta[coef]
            out["se"][j] = f1.se_beta[coef]
            out["loglik"][j] = f1.loglik
            sds[j] = np.abs(f1.sds)
            converged[j] = f1.converged and all(f.converged for f in fits.values())
            if lrt:
                out["lr"][j] = max(0.0, 2 * (f1.loglik - fits[False].loglik))
    z = out["estimate"] / out["se"]
    batch = ClmmBatch(out["estimate"], out["se"], z, 2 * stats.norm.sf(np.abs(z)), out["loglik"], out["lr"],
                      stats.chi2.sf(out["lr"], 1), converged, failed, tuple(dict.fromkeys(reasons)), sds,
                      null_params if lrt else np.zeros((S, 0)), np.zeros((S, 0)))
    if bootstrap:
        batch = replace(batch, lr_boot=bootstrap_lr(batch, Xm, groups, coef=coef, scale=scale, link=link,
                                                    draws=bootstrap, seed=seed if seed is not None else data_seed(Y)))
    return batch


# --------------------------------------------------------------------------- the Bartlett-corrected LRT

BARTLETT_DRAWS = 200  #: bootstrap likelihood ratios per batch at least (the factor's relative SE ~ 0.1)


def bartlett_draws(studies: int, total: int = BARTLETT_DRAWS) -> int:
    """Bootstrap draws per study so that a batch of ``studies`` has at least ``total`` in all."""
    return max(1, -(-total // max(studies, 1)))


def bartlett_p(lr: np.ndarray, lr_boot: np.ndarray) -> np.ndarray:
    """Bartlett-corrected LRT p-values, as ``pbkrtest::PBmodcomp``'s "Bartlett": LR / E[LR] against chi-square(1),
    E[LR] the mean of the bootstrap likelihood ratios ``lr_boot`` (all of them, pooled; NaN ignored). NaN
    everywhere when every draw failed (e.g. every study of the batch failed)."""
    boot = np.asarray(lr_boot, float)
    if not boot.size:
        raise InputError("the Bartlett-corrected LRT needs bootstrap likelihood ratios (fit_clmm_many(..., "
                         "lrt=True, bootstrap=B))")
    boot = boot[np.isfinite(boot)]
    return stats.chi2.sf(np.asarray(lr, float) / (boot.mean() if boot.size else np.nan), 1)


def concat_batches(batches: Sequence[ClmmBatch]) -> ClmmBatch:
    """The studies of several batches as one batch (e.g. studies with their own layouts, one Bartlett factor)."""
    first = batches[0]
    parts = {f: np.concatenate([getattr(b, f) for b in batches]) for f in first.__dataclass_fields__ if f != "reasons"}
    return ClmmBatch(**parts, reasons=tuple(dict.fromkeys(r for b in batches for r in b.reasons)))


def data_seed(Y: np.ndarray) -> np.random.SeedSequence:
    """A seed derived from the ratings: the bootstrap of a data set is reproducible without a seed argument."""
    import hashlib

    digest = hashlib.sha256(np.ascontiguousarray(Y, dtype=float).tobytes()).digest()
    return np.random.SeedSequence(list(np.frombuffer(digest[:16], np.uint32)))


def simulate_clmm(X: np.ndarray, groups: Mapping[str, Sequence[object] | np.ndarray], params: np.ndarray, *,
                  link: str = "logit", rng: np.random.Generator, lowest: int = 0) -> np.ndarray:
    """(N, S) ratings (``lowest`` + category code) of one data set per row of ``params`` = (thresholds, beta,
    SDs) from the CLMM with design ``X`` (N x p, no intercept) and the random terms of ``groups``, random
    effects and latent residuals drawn afresh."""
    check_link(link)
    layout = Layout.build(groups, len(X))
    P = np.atleast_2d(np.asarray(params, float))
    p, m = np.shape(X)[1], len(layout.names)
    K1 = P.shape[1] - p - m
    th, beta, s = P[:, :K1], P[:, K1:K1 + p], P[:, K1 + p:]
    S, N = len(P), len(X)
    eta = np.asarray(X, float) @ beta.T  # N x S
    u = rng.standard_normal((S, layout.q))
    sd_col = np.repeat(s, layout.n_levels, axis=1)  # S x q: each column's SD
    eta += ((u * sd_col)[:, layout.cols].sum(axis=2)).T if m else 0.0
    e = rng.logistic(size=(N, S)) if link == "logit" else rng.standard_normal((N, S))
    return lowest + (eta[:, :, None] + e[:, :, None] > th[None, :, :]).sum(axis=2)


def bootstrap_lr(batch: ClmmBatch, X: np.ndarray, groups: Mapping[str, Sequence[object] | np.ndarray], *,
                 coef: int, scale: tuple[int, int], link: str = "logit", draws: int,
                 seed: int | np.random.SeedSequence | None = None) -> np.ndarray:
    """S x ``draws`` likelihood ratios of parametric-bootstrap data sets drawn from each study's fitted null
    model (``batch.null_params``, a batch fitted with ``lrt=True``), each fitted with and without
    coefficient ``coef`` by :func:`fit_clmm_many`. NaN for a failed study or a draw that fails (e.g. leaves a
    category unused)."""
    if batch.null_params.shape[1] == 0:
        raise InputError("the parametric bootstrap needs the null fits: fit_clmm_many(..., lrt=True)")
    Xm = _design(X, len(X))
    X0 = np.delete(Xm, coef, axis=1)
    S = len(batch.null_params)
    ok = np.flatnonzero(np.all(np.isfinite(batch.null_params), axis=1))
    out = np.full((S, draws), np.nan)
    if not len(ok):
        return out
    rng = np.random.default_rng(seed)
    Y = simulate_clmm(X0, groups, np.repeat(batch.null_params[ok], draws, axis=0), link=link, rng=rng,
                      lowest=scale[0])
    boot = fit_clmm_many(Y, Xm, groups, coef=coef, scale=scale, link=link, lrt=True, information=False)
    out[ok] = boot.lr.reshape(len(ok), draws)
    return out
