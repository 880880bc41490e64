"""Which variance components a design can separate, checked before fitting.

The covariance of a linear mixed model is ``V = sum_k s_k^2 Z_k Z_k' + s_e^2 I``. Its
(RE)ML information about the variances is ``tr(P V_k P V_l) / 2`` with ``V_k = Z_k Z_k'``
and ``P`` the residual projector; it is singular, at every parameter value, exactly
when the projected generators ``K' V_k K`` (``K`` spanning the residuals of ``X``) are
linearly dependent. The dependence is then a property of the design, not of the
data: e.g. with one rating per (item, system) output, ``Z_item:system Z_item:system' = I``
and the item x system variance cannot be told from the residual. Three optimisers
then stop at three different splits with the same criterion.

:func:`unidentified` finds such dependencies from the Gram matrix
``tr(P0 V_k P0 V_l) = |Z_k' P0 Z_l|_F^2`` (``P0`` the ordinary projector), all in sparse
cross-products, and names the component to leave out for each.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy import linalg

#: an eigenvalue of the normalised Gram matrix below this is a dependence (exact ones are ~1e-16)
TOL = 1e-10
RESIDUAL = ("Residual", "")


@dataclass(frozen=True)
class Confounded:
    """Components whose variances only the design's data cannot separate, and the one left out."""

    components: tuple[tuple[str, str], ...]  #: (group, term); ``RESIDUAL`` for the residual
    dropped: tuple[str, str]


def _z(frame: pd.DataFrame, group: str, term: str) -> sp.csr_matrix:
    from .types import group_codes

    codes = group_codes(frame, group)
    values = np.ones(len(frame)) if term == "(Intercept)" else frame[term].to_numpy(float)
    return sp.csr_matrix((values, (np.arange(len(frame)), codes)), shape=(len(frame), int(codes.max()) + 1))


def _gram(zs: list[sp.csr_matrix], x: np.ndarray) -> np.ndarray:
    """``|Z_k' P0 Z_l|_F^2`` for all pairs, ``P0 = I - X (X'X)^-1 X'``."""
    r = linalg.cholesky(x.T @ x, lower=False)
    u = [linalg.solve_triangular(r, np.asarray(z.T @ x).T, trans="T").T for z in zs]  # Z_k' X R^-1
    uu = [a.T @ a for a in u]
    m = len(zs)
    gram = np.empty((m, m))
    for k in range(m):
        for j in range(k, m):
            a = (zs[k].T @ zs[j]).tocsr()
            cross = float(np.sum(np.asarray(a @ u[j]) * u[k]))
            gram[k, j] = gram[j, k] = a.multiply(a).sum() - 2 * cross + float(np.sum(uu[k] * uu[j]))
    return gram


def _dependence(gram: np.ndarray) -> np.ndarray | None:
    """A null vector of the normalised Gram matrix (largest entries first), or None."""
    d = np.sqrt(np.diag(gram))
    if (d <= 0).any():  # a component that the fixed effects absorb entirely
        v = np.zeros(len(d))
        v[np.argmin(d)] = 1.0
        return v
    values, vectors = np.linalg.eigh(gram / np.outer(d, d))
    return vectors[:, 0] if values[0] <= TOL * values[-1] else None


def unidentified(frame: pd.DataFrame, columns: tuple[str, ...],
                 components: tuple[tuple[str, str], ...]) -> list[Confounded]:
    """The dependencies among ``components`` and the residual, each with the component to leave out.

    For each dependency the component left out is the last one involved in the order of
    ``components`` (slopes and group x system terms come after intercepts): the model
    without it is the same family of covariances, now identified.
    """
    from threadpoolctl import threadpool_limits

    x = np.column_stack([np.ones(len(frame))] + [frame[c].to_numpy(float) for c in columns])
    kept = list(components)
    found: list[Confounded] = []
    while kept:
        zs = [_z(frame, g, t) for g, t in kept] + [sp.identity(len(frame), format="csr")]
        with threadpool_limits(1):  # small products: a threaded BLAS only spins on them
            null = _dependence(_gram(zs, x))
        if null is None:
            break
        names = kept + [RESIDUAL]
        involved = [n for n, c in zip(names, null) if abs(c) > 1e-6 * np.abs(null).max()]
        candidates = [n for n in involved if n != RESIDUAL]
        if not candidates:
            break
        drop = candidates[-1]
        found.append(Confounded(tuple(involved), drop))
        kept.remove(drop)
    return found
