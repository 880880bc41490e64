"""Batched Laplace fits of the logistic GLMM ``y ~ 1 + (1|worker) + (1|item)``: many studies, one layout.

What ``glmer`` (nAGQ = 1) computes, without R: the estimate minimises the Laplace deviance

    D(theta, beta) = -2 l(eta^) + |u^|^2 + log det(I + L Z'VZ L),   eta = beta + Z L u,

(``u^`` the conditional mode, ``L = diag(theta_worker, theta_item)``, ``V = diag(w mu (1 - mu))``) over
``theta >= 0`` and ``beta``; the SE is glmer's: ``sqrt(2 [H^-1]_beta,beta)`` with ``H`` the Hessian of
``D`` over ``(theta, beta)`` by central differences with step 1e-4 (lme4's ``deriv12``), falling back, as
``vcov.merMod`` does, to the conditional variance from ``RX`` when that is not positive (flag ``fallback``).
Wald z and its two-sided normal p-value follow; the LRT (``lrt=True``) refits with ``beta = 0``; ``p_t``
refers z to t with Satterthwaite df, at most workers - 1 unless the worker SD is estimated 0 (near alpha
where z is liberal: docs/headtohead.md).

Bookkeeping: every study lives on the ``workers x items`` grid (a cell's judgments share one ``eta``, so
they add up: weight ``N`` = their total prior weight, score = their weighted mean; a split tie is a score of
1/2, a dropped one weight 0). Items are eliminated first (their block of ``I + L Z'VZ L`` is diagonal),
leaving a ``W x W`` Schur complement per study; all studies of a chunk iterate together (numpy, batched
``matmul``/``solve``). The outer problem is solved by quasi-Newton steps on ``(theta, beta)`` (BFGS from a
forward-difference Hessian) with the exact gradient (implicit differentiation through the mode); ``D`` is even
in each ``theta``, so ``theta`` runs over the real line and ``|theta|`` is reported.
Memory: a few ``chunk x W x I`` arrays (the chunk is sized to ``CHUNK_CELLS``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats
from scipy.special import expit

from ..errors import InputError

#: lme4's isSingular tolerance on theta
SINGULAR_TOL = 1e-4
#: lme4's deriv12 step for the Hessian behind vcov()
HESSIAN_STEP = 1e-4
#: studies x workers x items per chunk (a few arrays of this many float64)
CHUNK_CELLS = 100000
#: |beta| beyond this: (quasi-)separated study, reported as failed
MAX_BETA = 25.0


@dataclass(frozen=True)
class LaplaceFits:
    """Per-study results (arrays of one length): glmer's estimate, SE, Wald z and p, the SDs."""

    estimate: np.ndarray
    se: np.ndarray
    z: np.ndarray
    p: np.ndarray
    sd_worker: np.ndarray
    sd_item: np.ndarray
    deviance: np.ndarray  #: the Laplace deviance at the optimum (-2 logLik for 0/1 scores)
    singular: np.ndarray  #: a theta below lme4's 1e-4
    failed: np.ndarray  #: no convergence, or |estimate| > MAX_BETA (separation)
    fallback: np.ndarray  #: Hessian not positive: SE from RX, as glmer (which warns)
    df: np.ndarray  #: Satterthwaite df of z, at most workers - 1 unless the worker SD is estimated 0
    p_t: np.ndarray  #: z against t(df): the calibrated test (docs/headtohead.md)
    p_lrt: np.ndarray | None = None  #: LRT against beta = 0 (chi-square, 1 df), when asked for

    def __len__(self) -> int:
        return len(self.estimate)


@dataclass
class _Eval:
    """The Laplace deviance of a batch at x = (theta_w, theta_i, beta), its gradient, the mode."""

    dev: np.ndarray
    grad: np.ndarray
    u: np.ndarray
    v: np.ndarray
    var_rx: np.ndarray
    ok: np.ndarray


def grid(worker: np.ndarray, item: np.ndarray, scores: np.ndarray,
         weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Studies on the worker x item grid: (Y, N), each (S, W, I): weighted mean score and total weight.

    ``worker``/``item``: integer codes 0.. of the n judgments (shared by all studies); ``scores``: (S, n)
    or (n,) in [0, 1]; ``weights``: prior weights (n,) or (S, n), 0 drops a judgment (default 1).
    """
    w, i = np.asarray(worker), np.asarray(item)
    y = np.atleast_2d(np.asarray(scores, float))
    if w.ndim != 1 or w.shape != i.shape or y.shape[1] != len(w) or w.dtype.kind not in "iu" or i.dtype.kind not in "iu":
        raise InputError("worker and item must be integer codes of equal length, one per column of scores")
    if len(w) == 0 or w.min() < 0 or i.min() < 0:
        raise InputError("worker and item codes must be non-negative, with at least one judgment")
    if not np.all((y >= 0) & (y <= 1)):
        raise InputError("scores must be in [0, 1] (1 = B preferred, 1/2 = a split tie)")
    nw, ni = int(w.max()) + 1, int(i.max()) + 1
    wt = np.broadcast_to(np.ones(len(w)) if weights is None else np.asarray(weights, float), y.shape)
    if not np.all(np.isfinite(wt) & (wt >= 0)):
        raise InputError("weights must be finite and non-negative")
    cell = w * ni + i
    s = y.shape[0]
    flat = (np.arange(s)[:, None] * (nw * ni) + cell[None, :]).ravel()
    n = np.bincount(flat, wt.ravel(), s * nw * ni).reshape(s, nw, ni)
    ys = np.bincount(flat, (wt * y).ravel(), s * nw * ni).reshape(s, nw, ni)
    with np.errstate(invalid="ignore", divide="ignore"):
        ys = np.where(n > 0, ys / np.where(n > 0, n, 1), 0.0)
    return ys, n


def fit_glmm_laplace(worker: np.ndarray, item: np.ndarray, scores: np.ndarray, weights: np.ndarray | None = None,
                     lrt: bool = False, chunk_cells: int = CHUNK_CELLS) -> LaplaceFits:
    """Fit ``score ~ 1 + (1|worker) + (1|item)`` (logistic, Laplace) to each row of ``scores`` (see :func:`grid`)."""
    y, n = grid(worker, item, scores, weights)
    return fit_grid(y, n, lrt, chunk_cells)


def fit_grid(y: np.ndarray, n: np.ndarray, lrt: bool = False, chunk_cells: int = CHUNK_CELLS) -> LaplaceFits:
    """:func:`fit_glmm_laplace` on grid arrays (S, W, I) from :func:`grid`; ``n`` may be one (W, I) layout."""
    s, nw, ni = y.shape
    shared = n.ndim == 2 or (len(n) == 1 and s > 1)
    step = max(1, chunk_cells // (nw * ni))
    parts = [_fit_chunk(_Data.make(y[a:a + step], n.reshape(-1, nw, ni) if shared else n[a:a + step]), lrt)
             for a in range(0, s, step)]
    fields: dict[str, Any] = {k: (np.concatenate([getattr(p, k) for p in parts]) if getattr(parts[0], k) is not None
                                  else None) for k in LaplaceFits.__dataclass_fields__}
    return LaplaceFits(**fields)


# ------------------------------------------------------------------------------------------ internals

@dataclass(frozen=True)
class _Data:
    """A chunk of studies on the grid with the sums that do not change during the fit."""

    y: np.ndarray  #: (s, W, I) mean scores
    n: np.ndarray | None  #: (s or 1, W, I) weights; None: every cell one judgment of weight 1
    nyw: np.ndarray  #: sum of weighted scores per worker (s, W)
    nyi: np.ndarray  #: ... per item (s, I)
    sat: np.ndarray  #: saturated deviance (0 for 0/1 scores)

    @staticmethod
    def make(y: np.ndarray, n: np.ndarray) -> _Data:
        ny = y * n
        sat = 2 * np.sum(n * (_xlogx(y) + _xlogx(1 - y)), axis=(1, 2)) * np.ones(len(y))
        unit = n.shape[0] == 1 and bool(np.all(n == 1))
        return _Data(y, None if unit else n, ny.sum(axis=2), ny.sum(axis=1), sat)

    def take(self, a: np.ndarray) -> _Data:
        n = self.n if self.n is None or len(self.n) == 1 else self.n[a]
        return _Data(self.y[a], n, self.nyw[a], self.nyi[a], self.sat[a])

    def weights(self) -> np.ndarray:
        return np.ones((1,) + self.y.shape[1:]) if self.n is None else self.n


def _fit_chunk(d: _Data, lrt: bool) -> LaplaceFits:
    s = len(d.y)
    n = d.weights()
    tot = np.broadcast_to(n, d.y.shape).sum(axis=(1, 2))
    ybar = np.clip(d.nyw.sum(axis=1) / np.maximum(tot, 1e-300), 0.02, 0.98)
    x0 = np.column_stack([np.full(s, 0.5), np.full(s, 0.5), np.log(ybar / (1 - ybar))])
    x, ev, conv = _optimise(d, x0, np.array([True, True, True]))
    sign = np.where(x[:, :2] < 0, -1.0, 1.0)  # D is even in each theta: u's sign follows theta's
    x[:, :2] = np.abs(x[:, :2])
    hess, final, dvar = _hessian(d, x, ev.u * sign[:, :1], ev.v * sign[:, 1:])
    fin = np.all(np.isfinite(hess), axis=(1, 2))
    inv = np.full((s, 3, 3), np.nan)
    det = np.zeros(s)
    det[fin] = np.linalg.det(hess[fin])
    nz = fin & (np.abs(det) > 0)
    inv[nz] = np.linalg.inv(hess[nz])
    var = 2 * inv[:, 2, 2]
    good = np.isfinite(var) & (var > 0)
    # a last Newton correction of the estimate from the exact Hessian (the optimiser stops at steps of 1e-5)
    corr = np.where(nz[:, None], np.einsum("sij,sj->si", np.nan_to_num(inv), final.grad), 0.0)
    est = x[:, 2] - np.where(np.abs(corr).max(axis=1) < 1e-3, corr[:, 2], 0.0)
    var = np.where(good, var, final.var_rx)
    se = np.sqrt(var)
    z = est / se
    failed = ~conv | ~final.ok | ~np.isfinite(se) | (np.abs(est) > MAX_BETA)
    # Satterthwaite: df = 2 V^2 / Var(V), V(theta) beta's conditional variance, Var(V) by the delta method
    # with cov(theta) = 2 [H^-1]_theta,theta (a theta at 0 does not count: V is even in it); where the
    # worker SD is estimated above 0, at most workers - 1, as that variance rests on that many workers (the
    # delta method overstates df with few workers: docs/headtohead.md, Type-I error)
    spread = np.einsum("si,sij,sj->s", dvar, 2 * inv[:, :2, :2], dvar)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(nz & (spread > 0), 2 * final.var_rx ** 2 / spread, np.inf)
    cap = np.count_nonzero(d.weights().sum(axis=2) > 0, axis=1) - 1
    df = np.where(x[:, 0] >= SINGULAR_TOL, np.minimum(df, cap), df)
    p_lrt = None
    if lrt:
        x0n = x.copy()  # theta = 0 is stationary (D is even in theta): start the null fit away from it
        x0n[:, :2] = np.maximum(x0n[:, :2], 0.2)
        x0n[:, 2] = 0.0
        _, ev0, conv0 = _optimise(d, x0n, np.array([True, True, False]), final.u, final.v)
        failed |= ~conv0
        p_lrt = stats.chi2.sf(np.maximum(ev0.dev - final.dev, 0.0), 1)
    return LaplaceFits(est, se, z, 2 * stats.norm.sf(np.abs(z)), x[:, 0], x[:, 1], final.dev,
                       np.any(x[:, :2] < SINGULAR_TOL, axis=1), failed, ~good & ~failed, df,
                       2 * stats.t.sf(np.abs(z), df), p_lrt)


def _xlogx(a: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(a > 0, a * np.log(np.where(a > 0, a, 1)), 0.0)


def _fd_hessian(d: _Data, x: np.ndarray, ev: _Eval, fidx: np.ndarray, h: float = 1e-5) -> np.ndarray:
    """Forward differences of the exact gradient, symmetrised and made positive definite."""
    g = ev.grad[:, fidx]
    hess = np.empty((len(x), len(fidx), len(fidx)))
    for c, j in enumerate(fidx):
        xp = x.copy()
        xp[:, j] += h
        hess[:, :, c] = (_evaluate(d, xp, ev.u, ev.v).grad[:, fidx] - g) / h
    hess = np.nan_to_num(0.5 * (hess + np.swapaxes(hess, 1, 2)))
    lam, vec = np.linalg.eigh(hess)
    lam = np.maximum(np.abs(lam), 1e-6 * np.maximum(np.abs(lam).max(axis=1, keepdims=True), 1e-3))
    return np.einsum("sij,sj,skj->sik", vec, lam, vec)


def _optimise(d: _Data, x: np.ndarray, free: np.ndarray, u: np.ndarray | None = None, v: np.ndarray | None = None,
              maxit: int = 80, tol: float = 1e-5) -> tuple[np.ndarray, _Eval, np.ndarray]:
    """Quasi-Newton (BFGS from a difference Hessian, refreshed every 8 steps) with Armijo backtracking on D
    over the ``free`` coordinates of x, all studies at once; returns x, its evaluation, converged."""
    s, nw, ni = d.y.shape
    x = x.copy()
    ev = _evaluate(d, x, np.zeros((s, nw)) if u is None else u, np.zeros((s, ni)) if v is None else v)
    done = np.zeros(s, bool)
    fidx = np.flatnonzero(free)
    bmat = np.zeros((s, len(fidx), len(fidx)))
    age = np.full(s, 8)
    for _ in range(maxit):
        a = np.flatnonzero(~done & ev.ok)
        if len(a) == 0:
            break
        da, xa = d.take(a), x[a]
        eva = _Eval(*(getattr(ev, k)[a] for k in _Eval.__dataclass_fields__))
        old = age[a] >= 8
        if old.any():
            o = np.flatnonzero(old)
            sub = _Eval(*(getattr(eva, k)[o] for k in _Eval.__dataclass_fields__))
            bmat[a[o]] = _fd_hessian(da.take(o), xa[o], sub, fidx)
            age[a[o]] = 0
        g = eva.grad[:, fidx]
        step = -np.linalg.solve(bmat[a], g[..., None])[..., 0]
        step *= np.minimum(1.0, 2.0 / np.maximum(np.abs(step).max(axis=1, keepdims=True), 1e-300))
        t = np.ones(len(a))
        pending = np.ones(len(a), bool)
        for _ls in range(30):
            p = np.flatnonzero(pending)
            if len(p) == 0:
                break
            xt = xa[p].copy()
            xt[:, fidx] += t[p, None] * step[p]
            et = _evaluate(da.take(p), xt, eva.u[p], eva.v[p])
            dec = np.einsum("si,si->s", g[p], step[p]) * t[p]
            okp = et.ok & (et.dev <= eva.dev[p] + 1e-4 * dec + 1e-10 * np.abs(eva.dev[p]))
            acc, idx = p[okp], a[p[okp]]
            sk = t[acc, None] * step[acc]
            yk = et.grad[okp][:, fidx] - g[acc]
            x[idx] = xt[okp]
            for k in _Eval.__dataclass_fields__:
                getattr(ev, k)[idx] = getattr(et, k)[okp]
            bmat[idx] = _bfgs(bmat[idx], sk, yk)
            age[idx] += 1
            done[idx[np.abs(sk).max(axis=1) < tol]] = True
            pending[acc] = False
            t[p[~okp]] /= 2
        stuck = np.flatnonzero(pending)  # no decrease even for tiny steps: at the optimum up to rounding
        done[a[stuck[np.abs(step[stuck]).max(axis=1) * t[stuck] < 1e-6]]] = True
        age[a[stuck]] = 8
    conv = done & ev.ok & np.all(np.isfinite(x), axis=1)
    return x, ev, conv


def _bfgs(b: np.ndarray, s: np.ndarray, y: np.ndarray) -> np.ndarray:
    """BFGS update of Hessian approximations b (skipped where the curvature condition fails)."""
    sy = np.einsum("si,si->s", s, y)
    bs = np.einsum("sij,sj->si", b, s)
    sbs = np.einsum("si,si->s", s, bs)
    ok = (sy > 1e-10 * np.sqrt(np.einsum("si,si->s", s, s) * np.einsum("si,si->s", y, y))) & (sbs > 0)
    upd = (np.einsum("si,sj->sij", y, y) / np.where(ok, sy, 1)[:, None, None]
           - np.einsum("si,sj->sij", bs, bs) / np.where(ok, sbs, 1)[:, None, None])
    return b + np.where(ok[:, None, None], upd, 0.0)


def _hessian(d: _Data, x: np.ndarray, u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, _Eval, np.ndarray]:
    """glmer's Hessian of D in (theta_w, theta_i, beta): central differences (step 1e-4) of the exact gradient;
    also the derivative of the conditional variance of beta (RX) in theta, from the same evaluations."""
    final = _evaluate(d, x, u, v)
    hess = np.empty((len(x), 3, 3))
    dvar = np.empty((len(x), 2))
    for j in range(3):
        evs = []
        for sign in (1, -1):
            xp = x.copy()
            xp[:, j] += sign * HESSIAN_STEP
            evs.append(_evaluate(d, xp, final.u, final.v))
        hess[:, :, j] = (evs[0].grad - evs[1].grad) / (2 * HESSIAN_STEP)
        if j < 2:
            dvar[:, j] = (evs[0].var_rx - evs[1].var_rx) / (2 * HESSIAN_STEP)
    return 0.5 * (hess + np.swapaxes(hess, 1, 2)), final, dvar


def _evaluate(d: _Data, x: np.ndarray, u: np.ndarray, v: np.ndarray, tol: float = 1e-10, maxit: int = 40) -> _Eval:
    """Conditional modes (Newton from (u, v)), the Laplace deviance and its exact gradient."""
    tw, ti, beta = x[:, 0], x[:, 1], x[:, 2]
    tw_, ti_, tt = tw[:, None], ti[:, None], (tw * ti)[:, None, None]
    s, nw = d.y.shape[:2]
    u, v = u.copy(), v.copy()
    conv = np.zeros(s, bool)
    diag = np.arange(nw)
    for it in range(maxit):
        mu = expit((beta[:, None] + tw_ * u)[:, :, None] + (ti_ * v)[:, None, :])
        nmu = mu if d.n is None else mu * d.n
        var = 1 - mu
        var *= nmu
        rw, ri = d.nyw - nmu.sum(axis=2), d.nyi - nmu.sum(axis=1)
        aw, ai = var.sum(axis=2), var.sum(axis=1)
        gu, gv = tw_ * rw - u, ti_ * ri - v
        di = 1 + ti_ ** 2 * ai
        vd = var / di[:, None, :]
        schur = -tt ** 2 * np.matmul(vd, np.swapaxes(var, 1, 2))
        schur[:, diag, diag] += 1 + tw_ ** 2 * aw
        rhs = gu - tt[:, :, 0] * np.matmul(vd, gv[..., None])[..., 0]
        step_u = np.linalg.solve(schur, rhs[..., None])[..., 0]
        step_v = (gv - tt[:, :, 0] * np.matmul(step_u[:, None, :], var)[:, 0]) / di
        big = np.maximum(np.abs(step_u).max(axis=1), np.abs(step_v).max(axis=1, initial=0))
        conv |= big < tol
        if conv.all() or it == maxit - 1:
            break
        step = np.where(conv, 0.0, np.minimum(1.0, 3.0 / np.maximum(big, 1e-300)))[:, None]
        u += step * step_u
        v += step * step_v
    # everything below at the mode (converged studies took no further step)
    # log(1 + e^eta) = max(eta, 0) - log(max(mu, 1 - mu)), exact to rounding, from the last mu (cheaper)
    eta = (beta[:, None] + tw_ * u)[:, :, None] + (ti_ * v)[:, None, :]
    soft = np.maximum(eta, 0, out=eta)
    soft -= np.log(np.maximum(mu, 1 - mu))
    if d.n is not None:
        soft *= d.n
    loglik = (beta * d.nyw.sum(axis=1) + np.einsum("sw,sw->s", tw_ * u, d.nyw) + np.einsum("si,si->s", ti_ * v, d.nyi)
              - soft.sum(axis=(1, 2)))
    sign, logdet = np.linalg.slogdet(schur)
    dev = (-2 * loglik + d.sat + np.einsum("sw,sw->s", u, u) + np.einsum("si,si->s", v, v)
           + np.log(di).sum(axis=1) + logdet)
    sinv = np.linalg.inv(schur)
    gmat = tt * np.matmul(sinv, var)  # S^-1 B, B = theta_w theta_i V
    p_ww = np.diagonal(sinv, axis1=1, axis2=2)
    p_ii = 1 / di + tt[:, :, 0] * np.sum(var * gmat, axis=1) / di ** 2
    lev = gmat / di[:, None, :]  # -P_wi
    cross = -np.sum(lev * var, axis=(1, 2))  # sum P_wi V_wi
    lev *= -2 * tt
    lev += (tw_ ** 2 * p_ww)[:, :, None]
    lev += (ti_ ** 2 * p_ii)[:, None, :]
    qm = 1 - 2 * mu
    qm *= var
    qm *= lev
    qw, qi = qm.sum(axis=2), qm.sum(axis=1)
    sw_, si_ = _solve(sinv, var, tt, di, tw_ * qw, ti_ * qi)
    vu = np.matmul(u[:, None, :], var)[:, 0]  # (V'u)_i
    vv = np.matmul(var, v[..., None])[..., 0]  # (V v)_w
    g = np.empty((s, 3))
    g[:, 0] = (-2 * np.einsum("sw,sw->s", u, rw) + 2 * (tw * np.einsum("sw,sw->s", p_ww, aw) + ti * cross)
               + np.einsum("sw,sw->s", u, qw) + _dot(sw_, si_, (rw - tw_ * aw * u, -ti_ * vu)))
    g[:, 1] = (-2 * np.einsum("si,si->s", v, ri) + 2 * (ti * np.einsum("si,si->s", p_ii, ai) + tw * cross)
               + np.einsum("si,si->s", v, qi) + _dot(sw_, si_, (-tw_ * vv, ri - ti_ * ai * v)))
    g[:, 2] = -2 * rw.sum(axis=1) + qw.sum(axis=1) + _dot(sw_, si_, (-tw_ * aw, -ti_ * ai))
    # conditional variance of beta given theta (lme4's RX): 1 / (1'V1 - a'H^-1 a), a = L Z'V 1
    aw_, ai_ = tw_ * aw, ti_ * ai
    hw, hi = _solve(sinv, var, tt, di, aw_, ai_)
    var_rx = 1 / (aw.sum(axis=1) - np.einsum("sw,sw->s", aw_, hw) - np.einsum("si,si->s", ai_, hi))
    ok = conv & (sign > 0) & np.isfinite(dev) & np.all(np.isfinite(g), axis=1)
    return _Eval(dev, g, u, v, var_rx, ok)


def _solve(sinv: np.ndarray, var: np.ndarray, tt: np.ndarray, di: np.ndarray, rw: np.ndarray,
           ri: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """H^-1 [rw; ri] by the Schur complement (items eliminated first; B = tt V)."""
    t = tt[:, :, 0]
    xw = np.matmul(sinv, (rw - t * np.matmul(var, (ri / di)[..., None])[..., 0])[..., None])[..., 0]
    xi = (ri - t * np.matmul(xw[:, None, :], var)[:, 0]) / di
    return xw, xi


def _dot(aw: np.ndarray, ai: np.ndarray, rhs: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    return np.einsum("sw,sw->s", aw, rhs[0]) + np.einsum("si,si->s", ai, rhs[1])


__all__ = ["SINGULAR_TOL", "LaplaceFits", "fit_glmm_laplace", "fit_grid", "grid"]
