"""Sparse Cholesky of ``M = I + L Z'Z L`` (CHOLMOD via scikit-sparse) and the diagonal of ``M^-1``.

CHOLMOD factors ``P M P' = L L'`` with a fill-reducing permutation (found once per design: the pattern of
``M`` does not change with the variances). ``diag(M^-1)`` comes from the Takahashi recursions on the
pattern of ``L``: with ``Z = M^-1`` (permuted), for ``j`` from the last column down,
``Z_ij = -(1/L_jj) sum_{k in S_j} Z_ik L_kj`` (``i`` in ``S_j``, the rows below the diagonal of column j) and
``Z_jj = (1/L_jj - sum_{k in S_j} Z_kj L_kj) / L_jj``: every ``Z_ik`` needed lies in the pattern of ``L``
(``S_j`` is a clique of the filled graph), so the selected inverse has the memory of ``L`` and is exact
(no sampling). Columns with nested patterns (supernodes) are taken together as dense blocks.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

try:
    from numba import njit
except ImportError:  # pragma: no cover - numba is a dependency
    def njit(*args, **kwargs):  # type: ignore[no-redef]
        return (lambda f: f) if not args or not callable(args[0]) else args[0]

#: the one-line message when the sparse path is needed but scikit-sparse is missing
UNAVAILABLE = ("the sparse path needs scikit-sparse (CHOLMOD): `apt-get install libsuitesparse-dev` then "
               "`pip install 'humaneval-power[sparse]'`")


def cholmod():
    """The ``sksparse.cholmod`` module, or ImportError with :data:`UNAVAILABLE`."""
    try:
        from sksparse import cholmod as module
    except ImportError as exc:
        raise ImportError(UNAVAILABLE) from exc
    return module


@njit(cache=True)
def _gather(indptr: np.ndarray, indices: np.ndarray, z: np.ndarray, rows: np.ndarray) -> np.ndarray:  # pragma: no cover
    """The dense symmetric block ``Z[rows, rows]`` of the values stored on the pattern (rows sorted)."""
    r = rows.shape[0]
    out = np.empty((r, r))
    for b in range(r):
        k = rows[b]
        ptr = indptr[k]
        out[b, b] = z[ptr]
        for a in range(b + 1, r):
            while indices[ptr] < rows[a]:
                ptr += 1
            out[a, b] = z[ptr]
            out[b, a] = z[ptr]
    return out


@njit(cache=True)
def _takahashi(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, first: np.ndarray) -> np.ndarray:  # pragma: no cover
    """Values of ``(L L')^-1`` on the pattern of ``L`` (CSC, sorted, diagonal first), a supernode at a time.

    ``first``: the supernodes' first columns (and n). For a supernode J with rows R below it,
    ``Z_RJ = -Z_RR L_RJ L_JJ^-1`` and ``Z_JJ = L_JJ^-T L_JJ^-1 - Z_RJ' L_RJ L_JJ^-1`` (dense products).
    """
    z = np.zeros(data.shape[0])
    for sn in range(first.shape[0] - 2, -1, -1):
        s, e = first[sn], first[sn + 1]
        w = e - s
        rows = indices[indptr[s] + w:indptr[s + 1]]
        r = rows.shape[0]
        ljj = np.zeros((w, w))
        lrj = np.empty((r, w))
        for j in range(s, e):
            lo = indptr[j]
            for a in range(e - j):
                ljj[j - s + a, j - s] = data[lo + a]
            for a in range(r):
                lrj[a, j - s] = data[lo + e - j + a]
        linv = np.linalg.inv(ljj)
        zjj = linv.T @ linv
        if r:
            zrj = -(_gather(indptr, indices, z, rows) @ lrj) @ linv
            zjj -= zrj.T @ (lrj @ linv)
        for j in range(s, e):
            lo = indptr[j]
            for a in range(e - j):
                z[lo + a] = zjj[j - s + a, j - s]
            for a in range(r):
                z[lo + e - j + a] = zrj[a, j - s]
    return z


@njit(cache=True)
def _entries(indptr: np.ndarray, indices: np.ndarray, z: np.ndarray, rows: np.ndarray,
             cols: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """``Z[rows, cols]`` of the values on the pattern (symmetric; 0 where the pattern has no such entry)."""
    out = np.zeros(rows.shape[0])
    for t in range(rows.shape[0]):
        r, c = max(rows[t], cols[t]), min(rows[t], cols[t])
        lo, hi = indptr[c], indptr[c + 1]
        pos = lo + np.searchsorted(indices[lo:hi], r)
        if pos < hi and indices[pos] == r:
            out[t] = z[pos]
    return out


@njit(cache=True)
def _quadratic(indptr: np.ndarray, indices: np.ndarray, z: np.ndarray, ptr: np.ndarray, rows: np.ndarray,
               vals: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """``a_j' Z a_j`` per sparse vector ``a_j`` (CSC ``ptr, rows, vals``); NaN where a pair is off the pattern."""
    out = np.zeros(ptr.shape[0] - 1)
    for j in range(ptr.shape[0] - 1):
        total = 0.0
        for a in range(ptr[j], ptr[j + 1]):
            for b in range(a, ptr[j + 1]):
                r, c = max(rows[a], rows[b]), min(rows[a], rows[b])
                lo, hi = indptr[c], indptr[c + 1]
                pos = lo + np.searchsorted(indices[lo:hi], r)
                if pos >= hi or indices[pos] != r:
                    total = np.nan
                    break
                total += z[pos] * vals[a] * vals[b] * (1.0 if a == b else 2.0)
            if np.isnan(total):
                break
        out[j] = total
    return out


def quadratic(lower: sp.csc_matrix, z: np.ndarray, vectors: sp.csc_matrix) -> np.ndarray:
    """``a' (L L')^-1 a`` for each column ``a`` of ``vectors`` (rows in ``L``'s order) from the selected
    inverse ``(L, z)``: exact where every pair of the column's nonzeros is on ``L``'s pattern, NaN elsewhere."""
    vectors = sp.csc_matrix(vectors)
    return _quadratic(lower.indptr.astype(np.int64), lower.indices.astype(np.int64), z,
                      vectors.indptr.astype(np.int64), vectors.indices.astype(np.int64), vectors.data)


def selected_inverse(lower: sp.csc_matrix) -> tuple[sp.csc_matrix, np.ndarray]:
    """``(L, Z)``: ``L`` with sorted indices and the values of ``(L L')^-1`` on its pattern, exactly."""
    lower = sp.csc_matrix(lower)
    lower.sort_indices()
    n = lower.shape[0]
    count = np.diff(lower.indptr)
    # column j + 1 continues j's supernode when its pattern is j's without j
    nested = (count[:-1] == count[1:] + 1) & (lower.indices[np.minimum(lower.indptr[:-2] + 1, lower.nnz - 1)]
                                               == np.arange(1, n)) & (count[:-1] > 1)
    first = np.concatenate([[0], np.flatnonzero(~nested) + 1, [n]]).astype(np.int64)
    return lower, _takahashi(lower.indptr.astype(np.int64), lower.indices.astype(np.int64), lower.data, first)


def entries(lower: sp.csc_matrix, z: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Entries ``(rows, cols)`` of the selected inverse ``(L, z)`` of :func:`selected_inverse` (0 off its pattern)."""
    return _entries(lower.indptr.astype(np.int64), lower.indices.astype(np.int64), z,
                    np.asarray(rows, np.int64), np.asarray(cols, np.int64))


def inverse_diagonal(lower: sp.csc_matrix) -> np.ndarray:
    """``diag((L L')^-1)`` of a sparse lower Cholesky factor, exactly, in the memory of ``L``."""
    lower, z = selected_inverse(lower)
    return z[lower.indptr[:-1]]
