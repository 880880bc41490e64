"""Sparse Cholesky of ``M = I + L Z'Z L`` and the selected inverse of ``M`` (its values on the factor's pattern).

CHOLMOD (scikit-sparse) finds the fill-reducing permutation and the supernodes of ``P M P' = L L'`` once per
design (the pattern of ``M`` does not change with the variances); the numeric factor, its solves and the
selected inverse are this module's own supernodal code (:class:`Supernodal`): each supernode is a dense
``(w + r) x w`` panel (its ``w`` columns on their ``w`` diagonal rows and ``r`` further rows), factored right-looking
with the dense products on numpy's (OpenBLAS) BLAS. CHOLMOD's own numeric factor runs on the system BLAS,
which on this machine is the reference BLAS (~3 Gflop/s against OpenBLAS' ~30 on one thread): the same
factor took 0.18 s there and takes 0.05 s here (CPU, 15,000 ratings, 8,962 effects, 1.4 M entries in ``L``).

The selected inverse comes from the Takahashi recursions on the pattern of ``L``: with ``Z = M^-1``
(permuted), for a supernode J with rows R below it, ``Z_RJ = -Z_RR L_RJ L_JJ^-1`` and
``Z_JJ = L_JJ^-T L_JJ^-1 - Z_RJ' L_RJ L_JJ^-1``, from the last supernode down: every ``Z_RR`` entry needed
lies in the pattern of ``L`` (R is a clique of the filled graph, gathered from the panels as the factor
scattered its update), so the selected inverse has the memory of ``L`` and is exact (no sampling).
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from scipy.linalg import lapack

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


#: the last supernode is factored, inverted and its block of the inverse formed by LAPACK's triangular routines
#: (dpotrf, dtrtri, dlauum) from this width on: 543 columns (15,000 ratings) in 5 ms instead of 22 ms
ROOT_WIDTH = 64


# -- the numeric factor on CHOLMOD's symbolic structure, dense kernels on numpy's BLAS --------------------------


@njit(cache=True)
def _groups(first: np.ndarray, lptr: np.ndarray, lind: np.ndarray, owner: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """Where each supernode's update lands: per supernode J, its rows ``R`` below the diagonal block split into
    runs in one ancestor K each (``grp_sn``, ``grp_lo``, ``grp_hi`` positions in R); for a run starting at a,
    ``rel[rel_ptr[g] + b - a]`` is the position of ``R[b]`` (b >= a) in K's panel rows."""
    nsn = first.shape[0] - 1
    count_g, count_rel = 0, 0
    for j in range(nsn):  # count the runs and their positions
        w = first[j + 1] - first[j]
        lo = lptr[first[j]] + w
        r = lptr[first[j] + 1] - lo
        for a in range(r):
            if a == 0 or owner[lind[lo + a]] != owner[lind[lo + a - 1]]:
                count_g += 1
                count_rel += r - a
    grp_ptr = np.zeros(nsn + 1, np.int64)
    grp_sn = np.empty(count_g, np.int64)
    grp_lo = np.empty(count_g, np.int64)
    grp_hi = np.empty(count_g, np.int64)
    rel_ptr = np.empty(count_g, np.int64)
    rel = np.empty(count_rel, np.int64)
    ng, nrel = 0, 0
    for j in range(nsn):
        w = first[j + 1] - first[j]
        lo = lptr[first[j]] + w
        r = lptr[first[j] + 1] - lo
        a = 0
        while a < r:
            k = owner[lind[lo + a]]
            end = a
            while end < r and owner[lind[lo + end]] == k:
                end += 1
            grp_sn[ng], grp_lo[ng], grp_hi[ng], rel_ptr[ng] = k, a, end, nrel
            sk, ek = first[k], first[k + 1]
            klo = lptr[sk] + (ek - sk)
            ptr = 0
            for b in range(a, r):
                row = lind[lo + b]
                if row < ek:
                    rel[nrel + b - a] = row - sk
                else:
                    while lind[klo + ptr] < row:
                        ptr += 1
                    rel[nrel + b - a] = (ek - sk) + ptr
            ng += 1
            nrel += r - a
            a = end
        grp_ptr[j + 1] = ng
    return grp_ptr, grp_sn, grp_lo, grp_hi, rel_ptr, rel


@njit(cache=True)
def _panel_factor(buf: np.ndarray, stop: int, offset: np.ndarray, first: np.ndarray, lptr: np.ndarray,
                  lind: np.ndarray, grp_ptr: np.ndarray, grp_sn: np.ndarray, grp_lo: np.ndarray, grp_hi: np.ndarray,
                  rel_ptr: np.ndarray, rel: np.ndarray) -> float:  # pragma: no cover
    """Right-looking supernodal Cholesky in place on the panels ``buf`` (each ``(w + r) x w``, C order, holding
    the lower part of P M P'): each panel ends as ``[L_JJ^-1; L_RJ]`` (the inverse of the diagonal block is all
    that the solves and the selected inverse use). Only the supernodes before ``stop``; returns their part of
    ``log|M|``."""
    logdet = 0.0
    for j in range(stop):
        s, e = first[j], first[j + 1]
        w = e - s
        lo = lptr[s] + w
        r = lptr[s + 1] - lo
        f = buf[offset[j]:offset[j] + (w + r) * w].reshape((w + r, w))
        d = np.empty((w, w))
        for a in range(w):
            for b in range(a + 1):
                d[a, b] = f[a, b]
                d[b, a] = f[a, b]
        ljj = np.linalg.cholesky(d)
        li = np.linalg.inv(ljj)
        for a in range(w):
            logdet += 2.0 * math.log(ljj[a, a])
        f[:w] = li
        if r:
            lrj = f[w:] @ li.T
            f[w:] = lrj
            for g in range(grp_ptr[j], grp_ptr[j + 1]):  # the update L_RJ L_RJ', lower part, a run at a time
                k = grp_sn[g]
                sk = first[k]
                wk = first[k + 1] - sk
                ok = offset[k]
                a0 = grp_lo[g]
                base = rel_ptr[g] - a0
                u = lrj[a0:] @ lrj[a0:grp_hi[g]].T
                for a in range(a0, grp_hi[g]):
                    c = lind[lo + a] - sk
                    for b in range(a, r):
                        buf[ok + rel[base + b] * wk + c] -= u[b - a0, a - a0]
    return logdet


@njit(cache=True)
def _panel_solve(buf: np.ndarray, offset: np.ndarray, first: np.ndarray, lptr: np.ndarray, lind: np.ndarray,
                 x: np.ndarray) -> None:  # pragma: no cover
    """``x <- (L L')^-1 x`` in place (rows in L's order)."""
    nsn = first.shape[0] - 1
    for j in range(nsn):
        s, e = first[j], first[j + 1]
        w = e - s
        lo = lptr[s] + w
        r = lptr[s + 1] - lo
        li = buf[offset[j]:offset[j] + w * w].reshape((w, w))
        xj = li @ x[s:e]
        x[s:e] = xj
        if r:
            upd = buf[offset[j] + w * w:offset[j] + (w + r) * w].reshape((r, w)) @ xj
            for a in range(r):
                x[lind[lo + a]] -= upd[a]
    for j in range(nsn - 1, -1, -1):
        s, e = first[j], first[j + 1]
        w = e - s
        lo = lptr[s] + w
        r = lptr[s + 1] - lo
        li = buf[offset[j]:offset[j] + w * w].reshape((w, w))
        xj = x[s:e].copy()
        if r:
            xr = np.empty((r, x.shape[1]))
            for a in range(r):
                xr[a] = x[lind[lo + a]]
            xj -= buf[offset[j] + w * w:offset[j] + (w + r) * w].reshape((r, w)).T @ xr
        x[s:e] = li.T @ xj


@njit(cache=True)
def _panel_takahashi(buf: np.ndarray, z: np.ndarray, start: int, offset: np.ndarray, first: np.ndarray,
                     lptr: np.ndarray,
                     lind: np.ndarray, grp_ptr: np.ndarray, grp_sn: np.ndarray, grp_lo: np.ndarray,
                     grp_hi: np.ndarray, rel_ptr: np.ndarray, rel: np.ndarray) -> None:  # pragma: no cover
    """The selected inverse ``(L L')^-1`` into ``z`` (every panel entry written), a supernode at a time from
    the last: ``Z_RJ = -Z_RR L_RJ L_JJ^-1``, ``Z_JJ = L_JJ^-T L_JJ^-1 - Z_RJ' L_RJ L_JJ^-1``; the gather of
    ``Z_RR`` mirrors the factor's scatter of its update. Supernodes from ``start`` down."""
    for j in range(start, -1, -1):
        s, e = first[j], first[j + 1]
        w = e - s
        lo = lptr[s] + w
        r = lptr[s + 1] - lo
        li = buf[offset[j]:offset[j] + w * w].reshape((w, w))
        zjj = li.T @ li
        zf = z[offset[j]:offset[j] + (w + r) * w].reshape((w + r, w))
        if r:
            zrr = np.empty((r, r))
            for g in range(grp_ptr[j], grp_ptr[j + 1]):
                k = grp_sn[g]
                sk = first[k]
                wk = first[k + 1] - sk
                ok = offset[k]
                a0 = grp_lo[g]
                base = rel_ptr[g] - a0
                for a in range(a0, grp_hi[g]):
                    c = lind[lo + a] - sk
                    for b in range(a, r):
                        v = z[ok + rel[base + b] * wk + c]
                        zrr[b, a] = v
                        zrr[a, b] = v
            t = buf[offset[j] + w * w:offset[j] + (w + r) * w].reshape((r, w)) @ li
            zrj = -(zrr @ t)
            zjj -= zrj.T @ t
            zf[w:] = zrj
        zf[:w] = zjj


@njit(cache=True)
def _at(first: np.ndarray, owner: np.ndarray, lptr: np.ndarray, lind: np.ndarray, offset: np.ndarray, row: int,
        col: int) -> int:  # pragma: no cover - compiled
    """Index in the panels of L's entry (row, col) (either order: the lower one is taken), -1 off the pattern."""
    if row < col:
        row, col = col, row
    k = owner[col]
    s, e = first[k], first[k + 1]
    w = e - s
    if row < e:
        pos = row - s
    else:
        lo, hi = lptr[s] + w, lptr[s + 1]
        p = lo + np.searchsorted(lind[lo:hi], row)
        if p >= hi or lind[p] != row:
            return -1
        pos = w + p - lo
    return offset[k] + pos * w + (col - s)


@njit(cache=True)
def _positions(first: np.ndarray, owner: np.ndarray, lptr: np.ndarray, lind: np.ndarray, offset: np.ndarray,
               rows: np.ndarray, cols: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """:func:`_at` of each (row, col) pair."""
    out = np.empty(rows.shape[0], np.int64)
    for t in range(rows.shape[0]):
        out[t] = _at(first, owner, lptr, lind, offset, rows[t], cols[t])
    return out


@njit(cache=True)
def _quadratic(first: np.ndarray, owner: np.ndarray, lptr: np.ndarray, lind: np.ndarray, offset: np.ndarray,
               z: np.ndarray, ptr: np.ndarray, rows: np.ndarray, vals: np.ndarray) -> np.ndarray:  # pragma: no cover
    """``a_j' Z a_j`` per sparse vector ``a_j`` (CSC ``ptr, rows, vals``, L's order) from the panels ``z``;
    NaN where a pair of its nonzeros is off the pattern."""
    out = np.zeros(ptr.shape[0] - 1)
    for j in range(ptr.shape[0] - 1):
        total = 0.0
        for a in range(ptr[j], ptr[j + 1]):
            for b in range(a, ptr[j + 1]):
                at = _at(first, owner, lptr, lind, offset, rows[a], rows[b])
                if at < 0:
                    total = np.nan
                    break
                total += z[at] * vals[a] * vals[b] * (1.0 if a == b else 2.0)
            if np.isnan(total):
                break
        out[j] = total
    return out


class Supernodal:
    """The numeric supernodal Cholesky factor of matrices with one sparsity pattern (CHOLMOD's fill-reducing
    order and supernodes, found once), its solves and its selected inverse, with the dense kernels on numpy's
    BLAS. ``pattern``: CSC, sorted, symmetric, with the diagonal; values are given per factorization in the
    order of ``pattern.data``. ``perm``: L's row k is M's row ``perm[k]``; ``where`` its inverse.
    """

    def __init__(self, pattern: sp.csc_matrix) -> None:
        n = pattern.shape[0]
        cols = np.repeat(np.arange(n), np.diff(pattern.indptr))
        spd = sp.csc_matrix((np.where(pattern.indices == cols, n + 1.0, 1.0), pattern.indices, pattern.indptr),
                            shape=pattern.shape)  # diagonally dominant: any values on the pattern do
        factor = cholmod().analyze(pattern, mode="supernodal").cholesky(spd)
        self.perm = factor.P()
        lower = sp.csc_matrix(factor.L())
        del factor
        lower.sort_indices()
        lptr, lind = lower.indptr.astype(np.int64), lower.indices.astype(np.int64)
        del lower
        count = np.diff(lptr)
        nested = (count[:-1] == count[1:] + 1) & (lind[np.minimum(lptr[:-2] + 1, len(lind) - 1)]
                                                   == np.arange(1, n)) & (count[:-1] > 1)
        first = np.concatenate([[0], np.flatnonzero(~nested) + 1, [n]]).astype(np.int64)
        width = np.diff(first)
        self.offset = np.concatenate([[0], np.cumsum(count[first[:-1]] * width)]).astype(np.int64)
        self.first, self.lptr, self.lind = first, lptr, lind
        self.owner = np.repeat(np.arange(len(width)), width).astype(np.int64)  # each column's supernode
        self.groups = _groups(first, lptr, lind, self.owner)
        self.where = np.empty(n, np.int64)
        self.where[self.perm] = np.arange(n)
        pi, pj = self.where[pattern.indices], self.where[cols]
        self.source = np.flatnonzero(pi >= pj)
        self.target = self._positions(pi[self.source], pj[self.source])
        self.diagonal = self._positions(np.arange(n), np.arange(n))
        #: 1 when the last supernode (a dense block: the crossed factors' effects) is wide enough to be factored and
        #: inverted by LAPACK's triangular routines (a third of the flops of the general inverse) outside the loops
        self.root = int(width[-1] >= ROOT_WIDTH)

    def _positions(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Index in the panels of L's entries (rows, cols) (L's order; -1 off the pattern)."""
        return _positions(self.first, self.owner, self.lptr, self.lind, self.offset,
                          np.asarray(rows, np.int64), np.asarray(cols, np.int64))

    def factor(self, values: np.ndarray) -> SupernodalFactor:
        """The factor of the matrix with ``values`` on the pattern; ``np.linalg.LinAlgError`` if it is not
        positive definite."""
        buf = np.zeros(self.offset[-1])
        buf[self.target] = values[self.source]
        nsn = len(self.first) - 1
        logdet = _panel_factor(buf, nsn - self.root, self.offset, self.first, self.lptr, self.lind, *self.groups)
        if self.root:
            top = self._root_block(buf)
            chol, info = lapack.dpotrf(top, lower=0, clean=0, overwrite_a=1)
            if info:
                raise np.linalg.LinAlgError("the matrix is not positive definite")
            logdet += 2 * float(np.log(np.diagonal(chol)).sum())
            top[...] = lapack.dtrtri(chol, lower=0, overwrite_c=1)[0]  # (in place already: the view is Fortran)
        return SupernodalFactor(self, buf, logdet)

    def _root_block(self, buf: np.ndarray) -> np.ndarray:
        """The last supernode's panel (no rows below it) as a Fortran-ordered view: its lower triangle in C order
        is the upper one LAPACK sees."""
        w = int(self.first[-1] - self.first[-2])
        return buf[self.offset[-2]:self.offset[-1]].reshape(w, w).T


class SupernodalFactor:
    """``P M P' = L L'`` on a :class:`Supernodal` structure: ``logdet``, :meth:`solve`, :meth:`selected_inverse`."""

    def __init__(self, structure: Supernodal, buf: np.ndarray, logdet: float) -> None:
        self.structure, self.buf, self.logdet = structure, buf, logdet

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """``M^-1 rhs`` (rows in M's order; a vector or a matrix)."""
        st = self.structure
        x = np.asarray(rhs, float)
        flat = x.ndim == 1
        xp = np.ascontiguousarray((x[:, None] if flat else x)[st.perm])
        _panel_solve(self.buf, st.offset, st.first, st.lptr, st.lind, xp)
        out = np.empty_like(xp)
        out[st.perm] = xp
        return out[:, 0] if flat else out

    def selected_inverse(self) -> tuple[np.ndarray, np.ndarray]:
        """``diag(M^-1)`` in M's order, and the selected inverse ``(L L')^-1`` on the panels (for
        :meth:`entries` and :meth:`quadratic`)."""
        st = self.structure
        zbuf = np.empty(len(self.buf))
        nsn = len(st.first) - 1
        if st.root:  # Z of the last supernode: L_JJ^-T L_JJ^-1 (its lower triangle)
            root = st._root_block(zbuf)
            root[...] = st._root_block(self.buf)
            root[...] = lapack.dlauum(root, lower=0, overwrite_c=1)[0]
        _panel_takahashi(self.buf, zbuf, nsn - 1 - st.root, st.offset, st.first, st.lptr, st.lind, *st.groups)
        diag = np.empty(len(st.perm))
        diag[st.perm] = zbuf[st.diagonal]
        return diag, zbuf

    def entries(self, zbuf: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Entries ``(rows, cols)`` (M's order) of the selected inverse ``zbuf`` (0 off the factor's pattern)."""
        st = self.structure
        at = st._positions(st.where[np.asarray(rows, np.int64)], st.where[np.asarray(cols, np.int64)])
        return np.where(at >= 0, zbuf[np.maximum(at, 0)], 0.0)

    def quadratic(self, zbuf: np.ndarray, vectors: sp.spmatrix) -> np.ndarray:
        """``a' M^-1 a`` for each column ``a`` of ``vectors`` (rows in M's order) from the selected inverse
        ``zbuf``: exact where every pair of the column's nonzeros is on the factor's pattern, NaN elsewhere."""
        st = self.structure
        a = sp.csc_matrix(vectors)
        a.eliminate_zeros()
        return _quadratic(st.first, st.owner, st.lptr, st.lind, st.offset, zbuf, a.indptr.astype(np.int64),
                          st.where[a.indices], a.data)
