"""Sparse Cholesky of ``M = I + L Z'Z L`` (CHOLMOD via scikit-sparse) and the diagonal of ``M^-1``.

CHOLMOD factors ``P M P' = L L'`` with a fill-reducing permutation (found once per design: the pattern of
``M`` does not change with the variances). ``diag(M^-1)`` comes from the Takahashi recursions on the
pattern of ``L``: with ``Z = M^-1`` (permuted), for ``j`` from the last column down,
``Z_ij = -(1/L_jj) sum_{k in S_j} Z_ik L_kj`` (``i`` in ``S_j``, the rows below the diagonal of column j) and
``Z_jj = (1/L_jj - sum_{k in S_j} Z_kj L_kj) / L_jj``: every ``Z_ik`` needed lies in the pattern of ``L``
(``S_j`` is a clique of the filled graph), so the selected inverse has the memory of ``L`` and is exact
(no sampling). The trailing columns whose pattern is full are one dense block, inverted by LAPACK.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy import linalg

try:
    from numba import njit
except ImportError:  # pragma: no cover - numba is a dependency
    def njit(*args, **kwargs):  # type: ignore[no-redef]
        return (lambda f: f) if not args or not callable(args[0]) else args[0]

#: the one-line message when the sparse path is needed but scikit-sparse is missing
UNAVAILABLE = ("the sparse path needs scikit-sparse (CHOLMOD): `apt-get install libsuitesparse-dev` then "
               "`pip install 'humaneval-power[sparse]'`")


#: LAPACK's flops per second over the Takahashi loop's pairs per second (measured: about 20)
DENSE_SPEEDUP = 20.0


def cholmod():
    """The ``sksparse.cholmod`` module, or ImportError with :data:`UNAVAILABLE`."""
    try:
        from sksparse import cholmod as module
    except ImportError as exc:
        raise ImportError(UNAVAILABLE) from exc
    return module


@njit(cache=True)
def _takahashi(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, start: int,
               tail: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """Values of ``(L L')^-1`` on the pattern of ``L`` (CSC, sorted, diagonal first); columns >= start dense."""
    z = np.zeros(data.shape[0])
    n = indptr.shape[0] - 1
    for j in range(start, n):  # the dense tail
        for pos in range(indptr[j], indptr[j + 1]):
            z[pos] = tail[indices[pos] - start, j - start]
    for j in range(start - 1, -1, -1):
        lo, hi = indptr[j] + 1, indptr[j + 1]
        m = hi - lo
        sums = np.zeros(m)
        for b in range(m):  # pairs a >= b of S_j: Z_{i_a k_b} lies in column k_b
            k = indices[lo + b]
            lkj = data[lo + b]
            if k >= start:  # in the dense tail
                sums[b] += tail[k - start, k - start] * lkj
                for a in range(b + 1, m):
                    zik = tail[indices[lo + a] - start, k - start]
                    sums[a] += zik * lkj
                    sums[b] += zik * data[lo + a]
                continue
            ptr = indptr[k]
            sums[b] += z[ptr] * lkj  # a == b: the diagonal of column k
            ptr += 1
            for a in range(b + 1, m):
                i = indices[lo + a]
                while indices[ptr] < i:
                    ptr += 1
                zik = z[ptr]
                sums[a] += zik * lkj
                sums[b] += zik * data[lo + a]
        ljj = data[indptr[j]]
        diag = 1.0 / ljj
        for a in range(m):
            z[lo + a] = -sums[a] / ljj
            diag -= z[lo + a] * data[lo + a]
        z[indptr[j]] = diag / ljj
    return z


def inverse_diagonal(lower: sp.csc_matrix) -> np.ndarray:
    """``diag((L L')^-1)`` of a sparse lower Cholesky factor, exactly, in the memory of ``L``."""
    lower = sp.csc_matrix(lower)
    lower.sort_indices()
    n = lower.shape[0]
    # the tail inverted densely: where the recursions' pair count beats LAPACK's flops by DENSE_SPEEDUP
    count = np.diff(lower.indptr).astype(float)
    tail_cost = (n - np.arange(n + 1)) ** 3 / (3 * DENSE_SPEEDUP)
    start = int(np.argmin(np.concatenate([[0.0], np.cumsum(count**2)]) + tail_cost))
    if start < n:
        block = lower[start:, start:].toarray()
        inv, info = linalg.lapack.dpotri(block, lower=1)
        if info:
            raise np.linalg.LinAlgError("dense inverse of the factor's tail failed")
        tail = np.tril(inv) + np.tril(inv, -1).T
    else:
        tail = np.zeros((0, 0))
    tail = np.ascontiguousarray(tail)
    z = _takahashi(lower.indptr.astype(np.int64), lower.indices.astype(np.int64), lower.data, start, tail)
    return z[lower.indptr[:-1]]
