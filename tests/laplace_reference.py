"""An independent logistic GLMM fit for tests: ``y ~ 1 + (1|worker) + (1|item)`` by the Laplace
approximation, written from the formulas (dense algebra, small data only), not through lme4.

Responses are fractional scores in [0, 1] (a split tie is 1/2): each row's log-likelihood is
``score * eta - log(1 + exp(eta))``, i.e. a win and a loss at weight 1/2 for a tie.
Deviance at (beta, theta): ``-2 sum l(eta) + |u|^2 + log det(I + L Z'DZ L)`` at the conditional
mode u (L = diag(theta), D = diag(mu (1 - mu))), which is what glmer (nAGQ = 1) minimises.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize
from scipy.special import expit
from threadpoolctl import threadpool_limits


@dataclass(frozen=True)
class LaplaceFit:
    estimate: float
    se: float
    sd_worker: float
    sd_item: float
    deviance: float


def design_matrix(worker: np.ndarray, item: np.ndarray) -> np.ndarray:
    w = np.unique(worker, return_inverse=True)[1]
    i = np.unique(item, return_inverse=True)[1]
    z = np.zeros((len(w), w.max() + 1 + i.max() + 1))
    z[np.arange(len(w)), w] = 1
    z[np.arange(len(w)), w.max() + 1 + i] = 1
    return z


def laplace_deviance(params: np.ndarray, y: np.ndarray, z: np.ndarray, n_workers: int) -> float:
    beta, tw, ti = params
    lam = np.r_[np.full(n_workers, tw), np.full(z.shape[1] - n_workers, ti)]
    zl = z * lam

    def penalised(u: np.ndarray) -> float:
        eta = beta + zl @ u
        return float(np.sum(y * eta - np.logaddexp(0, eta))) - 0.5 * float(u @ u)

    u = np.zeros(z.shape[1])
    for _ in range(100):  # damped Newton on the penalised log-likelihood (concave)
        mu = expit(beta + zl @ u)
        grad = zl.T @ (y - mu) - u
        if np.abs(grad).max() < 1e-10:
            break
        step = np.linalg.solve(zl.T @ (zl * (mu * (1 - mu))[:, None]) + np.eye(len(u)), grad)
        t, now = 1.0, penalised(u)
        while penalised(u + t * step) < now and t > 1e-6:
            t /= 2
        u += t * step
    eta = beta + zl @ u
    mu = expit(eta)
    loglik = float(np.sum(y * eta - np.logaddexp(0, eta)))
    hess = zl.T @ (zl * (mu * (1 - mu))[:, None]) + np.eye(len(u))
    return -2 * loglik + float(u @ u) + float(np.linalg.slogdet(hess)[1])


@threadpool_limits.wrap(limits=1)  # small dense algebra: one BLAS thread is 20x faster on a loaded machine
def laplace_fit(score: np.ndarray, worker: np.ndarray, item: np.ndarray) -> LaplaceFit:
    """Minimise the Laplace deviance over (beta, theta_worker, theta_item >= 0); SE from its Hessian."""
    y = np.asarray(score, float)
    z = design_matrix(np.asarray(worker), np.asarray(item))
    n_w = len(np.unique(worker))
    f = lambda p: laplace_deviance(p, y, z, n_w)
    p0 = np.array([np.log(y.mean() / (1 - y.mean())), 0.5, 0.5])
    best = optimize.minimize(f, p0, method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000})
    best = optimize.minimize(f, np.abs(best.x), method="L-BFGS-B", bounds=[(None, None), (0, None), (0, None)],
                             options={"ftol": 1e-15, "gtol": 1e-10})
    x = best.x
    h = 1e-4
    hess = np.zeros((3, 3))
    for a in range(3):
        for b in range(3):
            ea, eb = np.eye(3)[a] * h, np.eye(3)[b] * h
            hess[a, b] = (f(x + ea + eb) - f(x + ea - eb) - f(x - ea + eb) + f(x - ea - eb)) / (4 * h * h)
    se = float(np.sqrt(2 * np.linalg.inv(hess)[0, 0]))
    return LaplaceFit(float(x[0]), se, float(x[1]), float(x[2]), float(best.fun))
