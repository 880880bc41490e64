"""The card2020 ML fit as it was before the profile solver (commit 6b70514): the "before" reference.

Batched projected Newton over the five stratum variances with a modified-LDL
step and a backtracking line search, in Python loops over iterations. Kept
here only so that ``bench_likert.py`` can time it against the current
``fit_ml`` in the same run and check that both reach the same optimum.
"""
from __future__ import annotations

import numpy as np

from humaneval_power.fitting.balanced import BalancedFit, BalancedStats, fit_reml, strata_df


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
    _, k = b.shape
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


def _ml_newton(p: np.ndarray, ss: np.ndarray, dfs: np.ndarray, max_iter: int = 60, tol: float = 1e-11):
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
        done = decrement < tol * np.maximum(1.0, np.abs(dev))
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


def fit_ml_before(stats: BalancedStats, tol: float = 1e-11) -> BalancedFit:
    """ML fit (``lmer(REML=FALSE)``); df are NaN (the ML test uses a z cut-off).

    ``tol`` is the stopping rule on the Newton decrement relative to the
    deviance: 1e-11 was the library's; smaller values run the same iteration on.
    """
    dfs = strata_df(stats.workers, stats.items)
    start = fit_reml(stats).lam
    p = np.column_stack([start[:, 0], start[:, 1:] - start[:, :1]])
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        p, converged = _ml_newton(p, stats.ss, dfs, tol=tol)
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
