"""Batched Laplace fits of the logistic GLMM ``y ~ 1 + (1|worker) + (1|item)``: many studies, one layout.

What ``glmer`` (nAGQ = 1) computes, without R: the estimate minimises the Laplace deviance

    D(theta, beta) = -2 l(eta^) + |u^|^2 + log det(I + L Z'VZ L),   eta = beta + Z L u,

(``u^`` the conditional mode, ``L = diag(theta_worker, theta_item)``, ``V = diag(w mu (1 - mu))``) over
``theta >= 0`` and ``beta``; the SE is glmer's: ``sqrt(2 [H^-1]_beta,beta)`` with ``H`` the Hessian of
``D`` over ``(theta, beta)`` by central differences with step 1e-4 (lme4's ``deriv12``), falling back, as
``vcov.merMod`` does, to the conditional variance from ``RX`` when that is not positive (flag ``fallback``).
Wald z and its two-sided normal p-value follow; the LRT (``lrt=True``) refits with ``beta = 0``.

Bookkeeping: every study lives on the ``workers x items`` grid (a cell's judgments share one ``eta``, so
they add up: weight ``N`` = their total prior weight, score = their weighted mean; a split tie is a score of
1/2, a dropped one weight 0). Items are eliminated first (their block of ``I + L Z'VZ L`` is diagonal),
leaving a ``W x W`` Schur complement per study; all studies of a chunk iterate together (numpy, batched
``matmul``/``solve``). The outer problem is solved by Newton's method on ``(theta, beta)`` with the exact
gradient (implicit differentiation through the mode) and a forward-difference Hessian of it; ``D`` is even
in each ``theta``, so ``theta`` runs over the real line and ``|theta|`` is reported.
Memory: a few ``chunk x W x I`` arrays (the chunk is sized to ``CHUNK_CELLS``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats
from scipy.special import expit

from ..errors import InputError

#: lme4's isSingular tolerance on theta
SINGULAR_TOL = 1e-4
#: lme4's deriv12 step for the Hessian behind vcov()
HESSIAN_STEP = 1e-4
#: studies x workers x items per chunk (a few arrays of this many float64)
CHUNK_CELLS = 400_000
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
    n = np.broadcast_to(n, y.shape) if n.ndim == 2 else n
    step = max(1, chunk_cells // (nw * ni))
    parts = [_fit_chunk(y[a:a + step], n[a:a + step], lrt) for a in range(0, s, step)]
    return LaplaceFits(**{k: (np.concatenate([getattr(p, k) for p in parts])
                              if getattr(parts[0], k) is not None else None) for k in LaplaceFits.__dataclass_fields__})


# ------------------------------------------------------------------------------------------ internals

def _fit_chunk(y: np.ndarray, n: np.ndarray, lrt: bool) -> LaplaceFits:
    s = len(y)
    sat = 2 * np.sum(n * (_xlogx(y) + _xlogx(1 - y)), axis=(1, 2))  # saturated log-likelihood: 0 for 0/1
    tot = n.sum(axis=(1, 2))
    ybar = np.clip(np.sum(n * y, axis=(1, 2)) / np.maximum(tot, 1e-300), 0.02, 0.98)
    x0 = np.column_stack([np.ones(s), np.ones(s), np.log(ybar / (1 - ybar))])
    x, ev, conv = _optimise(y, n, sat, x0, np.array([True, True, True]))
    sign = np.where(x[:, :2] < 0, -1.0, 1.0)  # D is even in each theta: u's sign follows theta's
    x[:, :2] = np.abs(x[:, :2])
    hess, final = _hessian(y, n, sat, x, ev.u * sign[:, :1], ev.v * sign[:, 1:])
    var = np.full(s, np.nan)
    ok_h = np.all(np.isfinite(hess), axis=(1, 2))
    good = np.zeros(s, bool)
    if ok_h.any():
        det = np.linalg.det(hess[ok_h])
        inv = np.full((ok_h.sum(), 3, 3), np.nan)
        nz = np.abs(det) > 0
        inv[nz] = np.linalg.inv(hess[ok_h][nz])
        v_h = 2 * inv[:, 2, 2]
        var[ok_h] = v_h
        good[ok_h] = np.isfinite(v_h) & (v_h > 0)
    fallback = ~good
    var = np.where(good, var, final.var_rx)
    est = x[:, 2]
    se = np.sqrt(var)
    z = est / se
    failed = ~conv | ~np.isfinite(se) | (np.abs(est) > MAX_BETA)
    p_lrt = None
    if lrt:
        x0n = x.copy()
        x0n[:, 2] = 0.0
        _, ev0, conv0 = _optimise(y, n, sat, x0n, np.array([True, True, False]))
        failed |= ~conv0
        p_lrt = stats.chi2.sf(np.maximum(ev0.dev - final.dev, 0.0), 1)
    return LaplaceFits(est, se, z, 2 * stats.norm.sf(np.abs(z)), x[:, 0], x[:, 1], final.dev,
                       np.any(x[:, :2] < SINGULAR_TOL, axis=1), failed, fallback & ~failed, p_lrt)


def _xlogx(a: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(a > 0, a * np.log(np.where(a > 0, a, 1)), 0.0)


def _optimise(y: np.ndarray, n: np.ndarray, sat: np.ndarray, x: np.ndarray, free: np.ndarray,
              maxit: int = 60, tol: float = 1e-9) -> tuple[np.ndarray, _Eval, np.ndarray]:
    """Damped Newton on D over the ``free`` coordinates of x for every study; returns x, its evaluation, converged."""
    s = len(x)
    x = x.copy()
    ev = _evaluate(y, n, sat, x, np.zeros(y.shape[:2]), np.zeros((s, y.shape[2])))
    done = np.zeros(s, bool)
    fidx = np.flatnonzero(free)
    h = 1e-5
    for _ in range(maxit):
        a = np.flatnonzero(~done & ev.ok)
        if len(a) == 0:
            break
        ya, na, sa, xa = y[a], n[a], sat[a], x[a]
        g = ev.grad[a][:, fidx]
        hess = np.empty((len(a), len(fidx), len(fidx)))
        for c, j in enumerate(fidx):
            xp = xa.copy()
            xp[:, j] += h
            ep = _evaluate(ya, na, sa, xp, ev.u[a], ev.v[a])
            hess[:, :, c] = (ep.grad[:, fidx] - g) / h
        hess = 0.5 * (hess + np.swapaxes(hess, 1, 2))
        lam, vec = np.linalg.eigh(hess)
        lam = np.maximum(np.abs(lam), 1e-6 * np.maximum(np.abs(lam).max(axis=1, keepdims=True), 1e-3))
        step = -np.einsum("sij,sj,skj,sk->si", vec, 1 / lam, vec, g)
        big = np.abs(step).max(axis=1, keepdims=True)
        step *= np.minimum(1.0, 2.0 / big)
        t = np.ones(len(a))
        pending = np.ones(len(a), bool)
        new_x = xa.copy()
        for _ls in range(30):
            p = np.flatnonzero(pending)
            if len(p) == 0:
                break
            xt = xa[p].copy()
            xt[:, fidx] += t[p, None] * step[p]
            et = _evaluate(ya[p], na[p], sa[p], xt, ev.u[a][p], ev.v[a][p])
            dec = np.einsum("si,si->s", g[p], step[p]) * t[p]
            okp = et.ok & (et.dev <= ev.dev[a][p] + 1e-4 * dec + 1e-9 * np.abs(ev.dev[a][p]))
            acc = p[okp]
            new_x[acc] = xt[okp]
            for k in ("dev", "grad", "u", "v", "var_rx", "ok"):
                getattr(ev, k)[a[acc]] = getattr(et, k)[okp]
            small = np.abs(t[acc, None] * step[acc]).max(axis=1) < tol
            done[a[acc[small]]] = True
            pending[acc] = False
            t[p[~okp]] /= 2
        stuck = np.flatnonzero(pending)  # no decrease even for tiny steps: at the optimum to rounding
        done[a[stuck[np.abs(step[stuck]).max(axis=1) * t[stuck] < 1e-6]]] = True
        x[a] = new_x
    conv = done & ev.ok & np.all(np.isfinite(x), axis=1)
    return x, ev, conv


def _hessian(y: np.ndarray, n: np.ndarray, sat: np.ndarray, x: np.ndarray, u: np.ndarray,
             v: np.ndarray) -> tuple[np.ndarray, _Eval]:
    """glmer's Hessian of D in (theta_w, theta_i, beta): central differences (step 1e-4) of the exact gradient."""
    final = _evaluate(y, n, sat, x, u, v)
    s = len(x)
    hess = np.empty((s, 3, 3))
    for j in range(3):
        cols = []
        for sign in (1, -1):
            xp = x.copy()
            xp[:, j] += sign * HESSIAN_STEP
            cols.append(_evaluate(y, n, sat, xp, final.u, final.v).grad)
        hess[:, :, j] = (cols[0] - cols[1]) / (2 * HESSIAN_STEP)
    return 0.5 * (hess + np.swapaxes(hess, 1, 2)), final


def _evaluate(y: np.ndarray, n: np.ndarray, sat: np.ndarray, x: np.ndarray, u: np.ndarray, v: np.ndarray,
              tol: float = 1e-10, maxit: int = 60) -> _Eval:
    """Conditional modes (penalised IRLS from (u, v)), the Laplace deviance and its exact gradient."""
    tw, ti, beta = x[:, 0], x[:, 1], x[:, 2]
    s = len(x)
    u, v = u.copy(), v.copy()
    q_prev = np.full(s, -np.inf)
    du = np.zeros_like(u)
    dv = np.zeros_like(v)
    conv = np.zeros(s, bool)
    out_q = np.zeros(s)
    for it in range(maxit):
        eta = beta[:, None, None] + (tw[:, None] * u)[:, :, None] + (ti[:, None] * v)[:, None, :]
        loglik = np.sum(n * (y * eta - np.logaddexp(0, eta)), axis=(1, 2))
        q = loglik - 0.5 * (np.einsum("sw,sw->s", u, u) + np.einsum("si,si->s", v, v))
        worse = (q < q_prev - 1e-12 * np.abs(q_prev)) & ~conv
        if worse.any():  # step halving, then re-evaluate
            u[worse] -= 0.5 * du[worse]
            v[worse] -= 0.5 * dv[worse]
            du[worse] *= 0.5
            dv[worse] *= 0.5
            if np.abs(du[worse]).max(initial=0) > 1e-14 and it < maxit - 1:
                continue
        mu = expit(eta)
        var = n * mu * (1 - mu)
        res = n * (y - mu)
        rw, ri = res.sum(axis=2), res.sum(axis=1)
        aw, ai = var.sum(axis=2), var.sum(axis=1)
        gu = tw[:, None] * rw - u
        gv = ti[:, None] * ri - v
        dw = 1 + tw[:, None] ** 2 * aw
        di = 1 + ti[:, None] ** 2 * ai
        b = (tw * ti)[:, None, None] * var
        bd = b / di[:, None, :]
        schur = -np.matmul(bd, np.swapaxes(b, 1, 2))
        schur[:, np.arange(u.shape[1]), np.arange(u.shape[1])] += dw
        rhs = gu - np.einsum("swi,si->sw", bd, gv)
        step_u = np.linalg.solve(schur, rhs[..., None])[..., 0]
        step_v = (gv - np.einsum("swi,sw->si", b, step_u)) / di
        small = np.maximum(np.abs(step_u).max(axis=1), np.abs(step_v).max(axis=1, initial=0)) < tol
        newly = small & ~conv
        if newly.any() or it == maxit - 1:
            keep = newly if it < maxit - 1 else ~conv
            out_q[keep] = q[keep]
            conv |= newly
        if conv.all() or it == maxit - 1:
            break
        q_prev = np.where(conv, q_prev, q)
        du = np.where(conv[:, None], 0.0, step_u)
        dv = np.where(conv[:, None], 0.0, step_v)
        u += du
        v += dv
    # quantities at the mode (the last evaluation: converged studies took no further step)
    sign, logdet = np.linalg.slogdet(schur)
    dev = -2 * out_q + sat + np.log(di).sum(axis=1) + logdet
    sinv = np.linalg.inv(schur)
    gmat = np.matmul(sinv, b)  # S^-1 B
    p_wi = -gmat / di[:, None, :]
    p_ww = np.diagonal(sinv, axis1=1, axis2=2)
    p_ii = 1 / di + np.sum(b * gmat, axis=1) / di ** 2
    twc, tic = tw[:, None, None], ti[:, None, None]
    lev = twc ** 2 * p_ww[:, :, None] + tic ** 2 * p_ii[:, None, :] + 2 * twc * tic * p_wi
    qm = var * (1 - 2 * mu) * lev
    cross = np.sum(p_wi * var, axis=(1, 2))
    qw, qi = qm.sum(axis=2), qm.sum(axis=1)
    # s = H^-1 L Z' Qm
    sw_, si_ = _solve(sinv, b, di, tw[:, None] * qw, ti[:, None] * qi)
    g = np.empty((s, 3))
    # theta_w
    rhs_w = (rw - tw[:, None] * aw * u, -ti[:, None] * np.einsum("swi,sw->si", var, u))
    g[:, 0] = (-2 * np.einsum("sw,sw->s", u, rw)
               + 2 * (tw * np.einsum("sw,sw->s", p_ww, aw) + ti * cross)
               + np.einsum("sw,sw->s", u, qw) + _dot(sw_, si_, rhs_w))
    rhs_i = (-tw[:, None] * np.einsum("swi,si->sw", var, v), ri - ti[:, None] * ai * v)
    g[:, 1] = (-2 * np.einsum("si,si->s", v, ri)
               + 2 * (ti * np.einsum("si,si->s", p_ii, ai) + tw * cross)
               + np.einsum("si,si->s", v, qi) + _dot(sw_, si_, rhs_i))
    rhs_b = (-tw[:, None] * aw, -ti[:, None] * ai)
    g[:, 2] = -2 * rw.sum(axis=1) + qm.sum(axis=(1, 2)) + _dot(sw_, si_, rhs_b)
    # conditional variance of beta given theta (lme4's RX): 1 / (1'V1 - a'H^-1 a), a = L Z'V 1
    aw_, ai_ = tw[:, None] * aw, ti[:, None] * ai
    hw, hi = _solve(sinv, b, di, aw_, ai_)
    var_rx = 1 / (aw.sum(axis=1) - np.einsum("sw,sw->s", aw_, hw) - np.einsum("si,si->s", ai_, hi))
    ok = conv & (sign > 0) & np.isfinite(dev) & np.all(np.isfinite(g), axis=1)
    return _Eval(dev, g, u, v, var_rx, ok)


def _solve(sinv: np.ndarray, b: np.ndarray, di: np.ndarray, rw: np.ndarray, ri: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """H^-1 [rw; ri] by the Schur complement (items eliminated first)."""
    xw = np.einsum("svw,sw->sv", sinv, rw - np.einsum("swi,si->sw", b, ri / di))
    xi = (ri - np.einsum("swi,sw->si", b, xw)) / di
    return xw, xi


def _dot(aw: np.ndarray, ai: np.ndarray, rhs: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    return np.einsum("sw,sw->s", aw, rhs[0]) + np.einsum("si,si->s", ai, rhs[1])


__all__ = ["SINGULAR_TOL", "LaplaceFits", "fit_glmm_laplace", "fit_grid", "grid"]
