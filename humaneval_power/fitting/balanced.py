"""Exact REML / ML fits of the fully crossed two-system LMM from sufficient statistics.

Model (x = -1/2 for system A, +1/2 for system B)::

    y = b0 + u[w] + v[i] + (b1 + a[w] + b[i]) * x + e

Per (worker, item) take d = yB - yA and s = yB + yA. Each half is a two-way
crossed layout with strata (workers, items, residual) whose expected mean
squares are ``lambda``::

    residual (d and s pooled)  2 se^2                  df 2 (W-1)(I-1)
    d: workers                 2 se^2 + I sd_ws^2      df W-1
    d: items                   2 se^2 + W sd_is^2      df I-1
    s: workers                 2 se^2 + 4 I sd_wi^2    df W-1
    s: items                   2 se^2 + 4 W sd_ii^2    df I-1

The REML deviance is ``sum df*log(lambda) + SS/lambda`` over these five strata,
minimised under ``lambda_k >= lambda_residual``: a pool-adjacent-violators step
(closed form). ML adds ``log(lambda_dW + lambda_dI - lambda_E)`` and the same
for s, which couples the strata; it is solved by batched projected Newton.
``b1_hat = mean(d)``, ``Var(b1_hat) = (lambda_dW + lambda_dI - lambda_E) / (W I)``,
and the Satterthwaite df are lmerTest's ``2 v^2 / (g' A g)`` evaluated in
closed form (zero variance components drop out, as in lmerTest).

All functions are vectorised over simulated studies (leading axis).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Stratum order used in every ``ss``/``lam`` array: residual first, then the
#: four random-effect strata.
STRATA = ("residual", "d_worker", "d_item", "s_worker", "s_item")
#: Variance component that each non-residual stratum carries.
COMPONENTS = ("sd_worker_slope", "sd_item_slope", "sd_worker_intercept", "sd_item_intercept")


def strata_df(workers: int, items: int) -> np.ndarray:
    """Degrees of freedom of the five strata for a W x I fully crossed design."""
    w, i = workers - 1, items - 1
    return np.array([2 * w * i, w, i, w, i], dtype=float)


@dataclass(frozen=True)
class BalancedStats:
    """Sufficient statistics of fully crossed two-system studies.

    ``d_mean`` has shape (n,), ``ss`` shape (n, 5) in :data:`STRATA` order.
    """

    workers: int
    items: int
    d_mean: np.ndarray
    ss: np.ndarray

    def __len__(self) -> int:
        return int(self.d_mean.shape[0])


def _two_way_ss(m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Grand mean and row/column/residual sums of squares of (..., W, I) arrays."""
    grand = m.mean(axis=(-2, -1))
    rows = m.mean(axis=-1)
    cols = m.mean(axis=-2)
    n_w, n_i = m.shape[-2], m.shape[-1]
    ss_rows = n_i * ((rows - grand[..., None]) ** 2).sum(-1)
    ss_cols = n_w * ((cols - grand[..., None]) ** 2).sum(-1)
    resid = m - rows[..., :, None] - cols[..., None, :] + grand[..., None, None]
    return grand, ss_rows, ss_cols, (resid**2).sum(axis=(-2, -1))


def stats_from_ratings(ratings: np.ndarray) -> BalancedStats:
    """Sufficient statistics from ratings of shape (n, W, I, 2) (last axis: system A, B)."""
    r = np.asarray(ratings, dtype=float)
    if r.ndim == 3:
        r = r[None]
    d = r[..., 1] - r[..., 0]
    s = r[..., 1] + r[..., 0]
    d_mean, d_w, d_i, d_e = _two_way_ss(d)
    _, s_w, s_i, s_e = _two_way_ss(s)
    ss = np.stack([d_e + s_e, d_w, d_i, s_w, s_i], axis=-1)
    return BalancedStats(r.shape[-3], r.shape[-2], d_mean, ss)


def expected_lambdas(
    workers: int,
    items: int,
    sd_worker_intercept: float,
    sd_worker_slope: float,
    sd_item_intercept: float,
    sd_item_slope: float,
    sd_residual: float,
) -> np.ndarray:
    """Expected mean squares of the five strata (slope SDs in the mean-difference coding)."""
    e = 2.0 * sd_residual**2
    return np.array(
        [
            e,
            e + items * sd_worker_slope**2,
            e + workers * sd_item_slope**2,
            e + 4.0 * items * sd_worker_intercept**2,
            e + 4.0 * workers * sd_item_intercept**2,
        ]
    )


def draw_stats(
    lam: np.ndarray, workers: int, items: int, effect: float, n: int, rng: np.random.Generator
) -> BalancedStats:
    """Draw the sufficient statistics of ``n`` simulated studies directly (O(1) each)."""
    dfs = strata_df(workers, items)
    v = (lam[1] + lam[2] - lam[0]) / (workers * items)
    d_mean = effect + np.sqrt(v) * rng.standard_normal(n)
    ss = lam[None, :] * rng.chisquare(dfs[None, :], size=(n, 5))
    return BalancedStats(workers, items, d_mean, ss)


@dataclass(frozen=True)
class BalancedFit:
    """Fit of the contrast b1 for each study: estimate, SE, Satterthwaite df (NaN for ML)."""

    estimate: np.ndarray
    se: np.ndarray
    df: np.ndarray
    lam: np.ndarray  #: fitted stratum variances, shape (n, 5)
    at_boundary: np.ndarray  #: (n, 4) bool, a variance component estimated as zero
    converged: np.ndarray  #: (n,) bool
    workers: int
    items: int

    @property
    def singular(self) -> np.ndarray:
        """True where any variance component sits at zero (lme4's ``isSingular``)."""
        return self.at_boundary.any(axis=1)

    def variance_components(self) -> dict[str, np.ndarray]:
        """Fitted SDs in the mean-difference coding, keyed like the parameter file."""
        lam, w, i = self.lam, self.workers, self.items
        exc = np.maximum(lam[:, 1:] - lam[:, :1], 0.0)
        scale = np.array([i, w, 4.0 * i, 4.0 * w])
        out = {name: np.sqrt(exc[:, k] / scale[k]) for k, name in enumerate(COMPONENTS)}
        out["sd_residual"] = np.sqrt(lam[:, 0] / 2.0)
        return out


def _pool_reml(ss: np.ndarray, dfs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Constrained REML optimum: pool strata whose mean square falls below the residual."""
    n = ss.shape[0]
    rows = np.arange(n)
    ms = ss[:, 1:] / dfs[1:]
    order = np.argsort(ms, axis=1)
    pooled = np.zeros((n, 4), dtype=bool)
    num = ss[:, 0].copy()
    den = np.full(n, dfs[0])
    active = np.ones(n, dtype=bool)
    for j in range(4):
        k = order[:, j]
        take = active & (ms[rows, k] < num / den)
        num = num + np.where(take, ss[rows, 1 + k], 0.0)
        den = den + np.where(take, dfs[1 + k], 0.0)
        pooled[rows[take], k[take]] = True
        active &= take
    lam_e = num / den
    lam = np.column_stack([lam_e, np.where(pooled, lam_e[:, None], ms)])
    return lam, pooled


def satterthwaite_df(lam: np.ndarray, pooled: np.ndarray, dfs: np.ndarray) -> np.ndarray:
    """lmerTest's Satterthwaite df for b1 at a (constrained) REML optimum.

    At the optimum the REML Hessian is diagonal in the stratum variances
    (``df/lambda^2``); pooled strata merge into the residual and drop out.
    """
    n_e = dfs[0] + (pooled * dfs[1:]).sum(axis=1)
    c_e = -1.0 + pooled[:, 0] + pooled[:, 1]
    num = lam[:, 1] + lam[:, 2] - lam[:, 0]
    den = (c_e * lam[:, 0]) ** 2 / n_e
    den = den + np.where(pooled[:, 0], 0.0, lam[:, 1] ** 2 / dfs[1])
    den = den + np.where(pooled[:, 1], 0.0, lam[:, 2] ** 2 / dfs[2])
    return num**2 / den


def fit_reml(stats: BalancedStats) -> BalancedFit:
    """REML fit (what ``lmer(REML=TRUE)`` + lmerTest give on the full data)."""
    dfs = strata_df(stats.workers, stats.items)
    lam, pooled = _pool_reml(stats.ss, dfs)
    at_boundary = pooled | (lam[:, 1:] <= lam[:, :1])
    v = (lam[:, 1] + lam[:, 2] - lam[:, 0]) / (stats.workers * stats.items)
    return BalancedFit(
        estimate=stats.d_mean,
        se=np.sqrt(v),
        df=satterthwaite_df(lam, at_boundary, dfs),
        lam=lam,
        at_boundary=at_boundary,
        converged=np.ones(len(stats), dtype=bool),
        workers=stats.workers,
        items=stats.items,
    )


def _ml_objective(p: np.ndarray, ss: np.ndarray, dfs: np.ndarray, order: int):
    """ML deviance (up to a constant) in p = (lambda_E, tau_dW, tau_dI, tau_sW, tau_sI).

    Returns the deviance, and with ``order=2`` also its gradient and Hessian.
    """
    lam_e = p[:, 0]
    lam = lam_e[:, None] + p[:, 1:]
    m_d = lam_e + p[:, 1] + p[:, 2]
    m_s = lam_e + p[:, 3] + p[:, 4]
    dev = dfs[0] * np.log(lam_e) + ss[:, 0] / lam_e
    dev = dev + (dfs[1:] * np.log(lam) + ss[:, 1:] / lam).sum(1) + np.log(m_d) + np.log(m_s)
    if order == 0:
        return dev, None, None
    f1_e = dfs[0] / lam_e - ss[:, 0] / lam_e**2
    f2_e = -dfs[0] / lam_e**2 + 2 * ss[:, 0] / lam_e**3
    f1 = dfs[1:] / lam - ss[:, 1:] / lam**2
    f2 = -dfs[1:] / lam**2 + 2 * ss[:, 1:] / lam**3
    inv_m = np.column_stack([1 / m_d, 1 / m_d, 1 / m_s, 1 / m_s])
    q = -(inv_m**2)
    grad = np.empty_like(p)
    grad[:, 1:] = f1 + inv_m
    grad[:, 0] = f1_e + f1.sum(1) + 1 / m_d + 1 / m_s
    hess = np.zeros(p.shape + (5,))
    for k in range(4):
        hess[:, 1 + k, 1 + k] = f2[:, k] + q[:, k]
        hess[:, 0, 1 + k] = hess[:, 1 + k, 0] = f2[:, k] + q[:, k]
    hess[:, 1, 2] = hess[:, 2, 1] = q[:, 0]
    hess[:, 3, 4] = hess[:, 4, 3] = q[:, 2]
    hess[:, 0, 0] = f2_e + f2.sum(1) + q[:, 0] + q[:, 2]
    return dev, grad, hess


def _modified_ldl_solve(a: np.ndarray, b: np.ndarray, floor: float = 1e-6) -> np.ndarray:
    """Solve a x = b for a batch of small symmetric matrices via LDL' with pivots >= floor."""
    n, k = b.shape
    low = np.zeros_like(a)
    d = np.zeros_like(b)
    for j in range(k):
        d[:, j] = np.maximum(a[:, j, j] - (low[:, j, :j] ** 2 * d[:, :j]).sum(1), floor)
        low[:, j, j] = 1.0
        for i in range(j + 1, k):
            low[:, i, j] = (a[:, i, j] - (low[:, i, :j] * low[:, j, :j] * d[:, :j]).sum(1)) / d[:, j]
    y = np.zeros_like(b)
    for i in range(k):
        y[:, i] = b[:, i] - (low[:, i, :i] * y[:, :i]).sum(1)
    y = y / d
    x = np.zeros_like(b)
    for i in reversed(range(k)):
        x[:, i] = y[:, i] - (low[:, i + 1 :, i] * x[:, i + 1 :]).sum(1)
    return x


def _ml_newton(p: np.ndarray, ss: np.ndarray, dfs: np.ndarray, max_iter: int = 60):
    """Batched projected Newton for the bound-constrained ML deviance (tau >= 0)."""
    n = p.shape[0]
    converged = np.zeros(n, dtype=bool)
    eye = np.eye(5)
    for _ in range(max_iter):
        todo = ~converged
        if not todo.any():
            break
        pt, st = p[todo], ss[todo]
        dev, grad, hess = _ml_objective(pt, st, dfs, 2)
        active = np.zeros_like(pt, dtype=bool)
        active[:, 1:] = (pt[:, 1:] <= 0.0) & (grad[:, 1:] > 0.0)
        free = ~active
        g = np.where(free, grad, 0.0)
        h = hess * (free[:, :, None] & free[:, None, :]) + eye * active[:, :, None]
        # Symmetric diagonal scaling, then a modified-Cholesky Newton step (descent even
        # where the Hessian is not positive definite).
        scale = 1.0 / np.sqrt(np.maximum(np.abs(np.diagonal(h, axis1=1, axis2=2)), 1e-300))
        hs = h * scale[:, :, None] * scale[:, None, :]
        step = -scale * _modified_ldl_solve(hs, scale * g)
        decrement = -(g * step).sum(1)
        done = decrement < 1e-11 * np.maximum(1.0, np.abs(dev))
        t = np.ones(len(pt))
        new = pt.copy()
        accepted = done.copy()
        for _ls in range(40):
            cand = pt + t[:, None] * step
            cand[:, 1:] = np.maximum(cand[:, 1:], 0.0)
            cand[:, 0] = np.maximum(cand[:, 0], 0.05 * pt[:, 0])
            dev_new, _, _ = _ml_objective(cand, st, dfs, 0)
            ok = ~accepted & (dev_new <= dev + 1e-4 * (grad * (cand - pt)).sum(1))
            new[ok] = cand[ok]
            accepted |= ok
            if accepted.all():
                break
            t = np.where(accepted, t, 0.5 * t)
        idx = np.flatnonzero(todo)
        p[idx] = np.where(accepted[:, None], new, pt)
        # A failed line search at a tiny step means we are at the optimum to rounding.
        converged[idx] = done | (~accepted & (t < 1e-10))
    return p, converged


def fit_ml(stats: BalancedStats) -> BalancedFit:
    """ML fit (``lmer(REML=FALSE)``); df are NaN (the ML test uses a z cut-off)."""
    dfs = strata_df(stats.workers, stats.items)
    start = fit_reml(stats).lam
    p = np.column_stack([start[:, 0], start[:, 1:] - start[:, :1]])
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        p, converged = _ml_newton(p, stats.ss, dfs)
    lam = np.column_stack([p[:, 0], p[:, :1] + p[:, 1:]])
    v = (p[:, 0] + p[:, 1] + p[:, 2]) / (stats.workers * stats.items)
    return BalancedFit(
        estimate=stats.d_mean,
        se=np.sqrt(v),
        df=np.full(len(stats), np.nan),
        lam=lam,
        at_boundary=p[:, 1:] <= 1e-12 * p[:, :1],
        converged=converged,
        workers=stats.workers,
        items=stats.items,
    )
