"""lmerTest's inference for contrasts of the fixed effects of every study: estimate, SE and Satterthwaite df."""
from __future__ import annotations

import numpy as np

from ..criterion import EIGEN_TOL, fixed_sigma_gradient
from .deviance import AnyBatch, Point


def vcov_varpar(bt: AnyBatch, pt: Point, theta: np.ndarray, sigma: np.ndarray, hess_gamma: np.ndarray) -> np.ndarray:
    """lmerTest's ``2 H^-1`` over H's eigenvalues above its tolerance.

    H is the Hessian of the deviance in (theta, sigma) with sigma not profiled
    out (lmerTest's ``devfun_vp``), obtained from the Hessian of the profiled
    deviance in gamma: in theta by the chain rule, then the sigma terms
    (analytic) added back through the Schur complement.
    """
    kk = theta.shape[1]
    s3 = sigma[:, None] ** 3
    assert pt.trace is not None and pt.score is not None  # a gradient evaluation
    g_gamma = fixed_sigma_gradient(pt.trace, pt.score, sigma[:, None] ** 2)  # = the profiled gradient at sigma_hat
    h_theta = 4 * theta[:, :, None] * theta[:, None, :] * hess_gamma
    h_theta[:, np.arange(kk), np.arange(kk)] += 2 * g_gamma
    d_ts = 4 * theta * pt.score / s3
    d_ss = -2 * bt.nu / sigma**2 + 6 * pt.r2 / sigma**4
    hess = np.empty((theta.shape[0], kk + 1, kk + 1))
    hess[:, :kk, :kk] = h_theta + d_ts[:, :, None] * d_ts[:, None, :] / d_ss[:, None, None]
    hess[:, :kk, kk] = hess[:, kk, :kk] = d_ts
    hess[:, kk, kk] = d_ss
    w, v = np.linalg.eigh(hess)
    inv = np.where(w > EIGEN_TOL, 1.0 / np.where(w > EIGEN_TOL, w, 1.0), 0.0)
    return 2 * np.einsum("sik,sk,sjk->sij", v, inv, v)


def contrast_stats(bt: AnyBatch, pt: Point, theta: np.ndarray, sigma: np.ndarray, contrasts: np.ndarray,
                    hess_gamma: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Estimate, SE and Satterthwaite df of each contrast row, (n, m) each."""
    p = bt.st.p
    cx = np.linalg.inv(pt.sxx)
    cl = np.einsum("sij,mj->smi", cx, contrasts)                 # C l
    lcl = np.einsum("mi,smi->sm", contrasts, cl)
    s2 = sigma[:, None] ** 2
    var = s2 * lcl
    est = pt.beta @ contrasts.T
    if hess_gamma is None:
        return est, np.sqrt(var), np.full(var.shape, np.inf)
    assert pt.omega is not None  # a gradient evaluation
    d_gamma = s2[:, :, None] * np.einsum("smi,skij,smj->smk", cl, pt.omega[:, :, :p, :p], cl)
    grads = np.concatenate([2 * theta[:, None, :] * d_gamma, (2 * sigma[:, None] * lcl)[:, :, None]], axis=2)
    a = vcov_varpar(bt, pt, theta, sigma, hess_gamma)
    denom = np.einsum("smi,sij,smj->sm", grads, a, grads)
    df = np.divide(2 * var**2, denom, out=np.full(var.shape, np.inf), where=denom > 0)
    return est, np.sqrt(var), df
