"""The supernodal factor of :mod:`humaneval_power.fitting.sparse_inverse` (numeric Cholesky on CHOLMOD's
symbolic structure, its solves and the Takahashi selected inverse) against dense linear algebra, on random
SPD patterns (supernodes of any width, disconnected blocks, a dense row)."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from humaneval_power.fitting import sparse_inverse

pytest.importorskip("sksparse")


def spd(n: int, density: float, seed: int, dense_row: bool) -> sp.csc_matrix:
    a = sp.random(n, n, density, random_state=seed, format="csc")
    if dense_row:
        a = sp.vstack([a[:-1], sp.csc_matrix(np.ones((1, n)))]).tocsc()
    m = (a @ a.T + sp.identity(n)).tocsc()
    m.sort_indices()
    return m


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 60), st.floats(0.0, 0.3), st.integers(0, 2**31), st.booleans(), st.booleans())
def test_factor_solve_and_selected_inverse_equal_dense(n, density, seed, dense_row, lapack_root):
    """Both ways of the last supernode: in the loops, or by LAPACK's triangular routines (``ROOT_WIDTH`` 1)."""
    m = spd(n, density, seed, dense_row and n > 1)
    dense = m.toarray()
    saved = sparse_inverse.ROOT_WIDTH
    sparse_inverse.ROOT_WIDTH = 1 if lapack_root else n + 1
    try:
        structure = sparse_inverse.Supernodal(m)
    finally:
        sparse_inverse.ROOT_WIDTH = saved
    assert structure.root == int(lapack_root)
    factor = structure.factor(m.data)
    inverse = np.linalg.inv(dense)
    assert factor.logdet == pytest.approx(np.linalg.slogdet(dense)[1], rel=1e-12, abs=1e-12)
    rhs = np.random.default_rng(seed).normal(size=(n, 3))
    np.testing.assert_allclose(factor.solve(rhs), inverse @ rhs, rtol=1e-9, atol=1e-10 * np.abs(inverse @ rhs).max())
    np.testing.assert_allclose(factor.solve(rhs[:, 0]), inverse @ rhs[:, 0], rtol=1e-9,
                               atol=1e-10 * np.abs(inverse @ rhs).max())
    diag, zbuf = factor.selected_inverse()
    np.testing.assert_allclose(diag, np.diag(inverse), rtol=1e-10)
    # every entry of the factor's pattern (rows and columns in M's order), and quadratic forms on cliques
    rows, cols = structure.perm[structure.lind], structure.perm[np.repeat(np.arange(n), np.diff(structure.lptr))]
    np.testing.assert_allclose(factor.entries(zbuf, rows, cols), inverse[rows, cols], rtol=1e-9, atol=1e-12)
    off = factor.entries(zbuf, np.arange(n), np.roll(np.arange(n), 1))  # 0 where off the pattern
    assert np.all((off == 0) | np.isclose(off, inverse[np.arange(n), np.roll(np.arange(n), 1)], rtol=1e-9))
    vectors = sp.csc_matrix((np.arange(1.0, len(rows) + 1), (np.maximum(rows, cols), np.arange(len(rows)))),
                            shape=(n, len(rows)))
    vectors = vectors + sp.csc_matrix((np.ones(len(rows)), (np.minimum(rows, cols), np.arange(len(rows)))),
                                      shape=(n, len(rows)))
    dense_q = np.einsum("ij,ik,kj->j", vectors.toarray(), inverse, vectors.toarray())
    np.testing.assert_allclose(factor.quadratic(zbuf, vectors), dense_q, rtol=1e-9, atol=1e-12)


def test_same_pattern_other_values():
    """One structure serves every matrix on its pattern (the fit's evaluations at other variances); a wide
    last supernode (70 dense rows) goes through LAPACK's routines by default."""
    n = 150
    a = sp.vstack([sp.random(n - 70, n, 0.02, random_state=3), sp.csc_matrix(np.ones((70, n)))]).tocsc()
    m = (a @ a.T + sp.identity(n)).tocsc()
    m.sort_indices()
    structure = sparse_inverse.Supernodal(m)
    assert structure.root == 1
    for scale in (0.1, 1.0, 30.0):
        other = (m + scale * sp.diags(np.arange(1.0, n + 1.0))).tocsc()
        other.sort_indices()
        assert np.array_equal(other.indices, m.indices)
        factor = structure.factor(other.data)
        diag, _ = factor.selected_inverse()
        np.testing.assert_allclose(diag, np.diag(np.linalg.inv(other.toarray())), rtol=1e-10)
        assert factor.logdet == pytest.approx(np.linalg.slogdet(other.toarray())[1], rel=1e-12)


def test_not_positive_definite_raises():
    m = spd(10, 0.2, 1, False)
    structure = sparse_inverse.Supernodal(m)
    with pytest.raises(np.linalg.LinAlgError):
        structure.factor(-m.data)
