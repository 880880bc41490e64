"""lme4's profiled (RE)ML criterion of a linear mixed model with independent variance components: the one
criterion of the one-study solver (:mod:`.vc_reml`) and of the batched fits (:mod:`.batched`).

``y = X b + sum_k Z_k u_k + e``, ``u_k ~ N(0, g_k s^2 I)``, ``e ~ N(0, s^2 I)``. With the fixed effects and
``s^2`` profiled out, the deviance is

    log|M| [+ log|X' H^-1 X|] + nu (1 + log(2 pi r^2 / nu)),   M = I + L Z'Z L,

``L = diag(sqrt(g))``, ``H = I + Z diag(g) Z'``, ``nu = n - p`` (REML) or ``n``, ``r^2 = y' P y``; its exact
gradient in the relative variances ``g`` is

    d/dg_k = tr(Z_k' P Z_k) - nu |Z_k' P y|^2 / r^2       (H^-1 for P under ML).

With ``s`` held instead of profiled out (lmerTest's ``devfun_vp``, for the Satterthwaite df) the deviance is
``log|M| [+ log|X'H^-1X|] + r^2 / s^2 + nu log(2 pi s^2)`` and its gradient in ``g`` is
``tr(Z_k' P Z_k) - |Z_k' P y|^2 / s^2``. The solvers differ in how they get ``log|M|``, ``r^2``, the traces
and the scores (a dense Schur complement or CHOLMOD for one study; design tensors for many): these
functions take them as numbers (one study) or arrays (a batch, leading axis the studies).
"""
from __future__ import annotations

import math
from typing import overload

import numpy as np

#: lmerTest's tolerance on the eigenvalues of the Hessian of the deviance in (theta, sigma)
EIGEN_TOL = 1e-8


@overload
def profiled_deviance(logdet: float, r2: float, nu: float) -> float: ...
@overload
def profiled_deviance(logdet: np.ndarray, r2: np.ndarray, nu: np.ndarray) -> np.ndarray: ...
def profiled_deviance(logdet: float | np.ndarray, r2: float | np.ndarray, nu: float | np.ndarray
                      ) -> float | np.ndarray:
    """``logdet + nu (1 + log(2 pi r^2 / nu))``; ``logdet``: log|M| (+ log|X'H^-1X| under REML).

    A number is computed with :func:`math.log`, an array with :func:`numpy.log`: the two differ in the last bit
    for about 1 in 5,000 arguments, and each solver keeps the results it always gave.
    """
    log = math.log if isinstance(r2, float) else np.log
    return logdet + nu * (1 + log(2 * math.pi * r2 / nu))


def profiled_gradient(trace: np.ndarray, score: np.ndarray, r2: float | np.ndarray, nu: float | np.ndarray
                      ) -> np.ndarray:
    """The gradient of :func:`profiled_deviance` in the relative variances: ``tr(Z_k'PZ_k) - nu |Z_k'Py|^2 / r^2``
    (``r2`` and ``nu`` broadcast against the traces and scores)."""
    return trace - nu * score / r2


def fixed_sigma_deviance(logdet: float, r2: float, nu: float, sigma: float) -> float:
    """The deviance with ``s = sigma`` held: ``logdet + r^2 / s^2 + nu log(2 pi s^2)`` (one study)."""
    return logdet + r2 / sigma**2 + nu * math.log(2 * math.pi * sigma**2)


def fixed_sigma_gradient(trace: np.ndarray, score: np.ndarray, sigma2: float | np.ndarray) -> np.ndarray:
    """The gradient in the relative variances of the deviance with ``s^2 = sigma2`` held:
    ``tr(Z_k'PZ_k) - |Z_k'Py|^2 / s^2`` (equal to :func:`profiled_gradient` at ``s^2 = r^2 / nu``)."""
    return trace - score / sigma2


def projected_gradient(gamma: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """Largest projected gradient over the last axis: in gamma at the boundary; inside, the smaller of gamma's
    and sqrt(gamma)'s (the convergence test of both solvers)."""
    return np.where(gamma > 0, np.abs(grad) * np.minimum(1.0, 2 * np.sqrt(gamma)), np.maximum(-grad, 0.0)).max(-1)
