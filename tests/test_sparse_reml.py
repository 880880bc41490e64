"""The sparse (CHOLMOD + Takahashi) path of the profiled REML equals the dense Schur-complement path.

Over a grid of small crossed designs (sparse worker/item layouts, with systems, with and without a slope,
REML and ML), the deviance, its exact gradient, lmerTest's varpar Hessian, the Satterthwaite df
and the Jacobian of Cov(b) agree to tight tolerance; the dense path is itself tested against lmerTest
(tests/test_vc_reml.py).
"""
from __future__ import annotations

import numpy as np
import pytest

from humaneval_power.fitting import vc_reml

pytest.importorskip("sksparse")


def design(seed: int, items: int, workers: int, systems: int, per: int, slope: bool):
    """A sparse crowd layout: each output (item x system) rated by ``per`` random workers."""
    rng = np.random.default_rng(seed)
    item = np.repeat(np.arange(items), systems * per)
    system = np.tile(np.repeat(np.arange(systems), per), items)
    worker = rng.integers(0, workers, len(item))
    x = np.column_stack([np.ones(len(item))] + [(system == s).astype(float) for s in range(1, systems)])
    cov = rng.normal(size=len(item))
    y = (0.2 * system + rng.normal(0, 0.5, workers)[worker] + rng.normal(0, 0.6, items)[item]
         + 0.3 * cov * rng.normal(size=workers)[worker] + rng.normal(0, 0.3, items * systems)[item * systems + system]
         + rng.normal(size=len(item)))
    factors = {"worker": worker, "item": item, "item:system": item * systems + system,
               "worker:system": worker * systems + system}
    comps = [("worker", "(Intercept)"), ("item", "(Intercept)"), ("item:system", "(Intercept)"),
             ("worker:system", "(Intercept)")] + ([("worker", "c")] if slope else [])
    return x, y, factors, {"c": cov}, comps


def both(monkeypatch, *args, reml: bool = True):
    dense = vc_reml.CrossedComponentsModel(*args, reml=reml)
    monkeypatch.setattr(vc_reml, "SPARSE_ABOVE", -1)
    sparse = vc_reml.CrossedComponentsModel(*args, reml=reml)
    monkeypatch.undo()
    assert sparse.sparse and not dense.sparse
    return dense, sparse


@pytest.mark.parametrize("seed,items,workers,systems,per,slope,reml", [
    (1, 12, 8, 3, 2, False, True), (2, 20, 15, 2, 3, True, True), (3, 8, 30, 4, 1, False, False),
    (4, 15, 6, 1, 4, True, True), (5, 25, 10, 3, 2, True, False)])
def test_sparse_equals_dense(monkeypatch, seed, items, workers, systems, per, slope, reml):
    args = design(seed, items, workers, systems, per, slope)
    dense, sparse = both(monkeypatch, *args, reml=reml)
    # rounding grows with M's condition (~ n gamma): tight at fitted scales, looser at gamma = 1e6; at 1e-9
    # 1 - (M^-1)_jj loses its digits and the traces come from the exact formulas of both paths
    tiny = np.where(np.arange(dense.k) % 2, 1e-9, 0.7)
    for gamma, tol in ((np.full(dense.k, 0.5), 1e-10), (np.linspace(0.0, 2.0, dense.k), 1e-10),
                       (tiny, 1e-10), (np.full(dense.k, 1e6), 1e-6)):
        d, s = dense.deviance(gamma), sparse.deviance(gamma)
        assert s[0] == pytest.approx(d[0], rel=tol)
        np.testing.assert_allclose(s[1], d[1], rtol=1e3 * tol, atol=1e3 * tol * (1 + np.abs(d[1]).max()))
        np.testing.assert_allclose(s[2], d[2], rtol=1e2 * tol, atol=1e2 * tol)
    fit_d = dense.fit()  # (the sparse path's fit follows from its equal deviance and gradient)
    assert sparse.at(fit_d.gamma).deviance == pytest.approx(fit_d.deviance, rel=1e-11)
    sd, ss = dense.satterthwaite(fit_d), sparse.satterthwaite(fit_d)  # the same point: the calculus alone
    np.testing.assert_allclose(ss.df, sd.df, rtol=1e-6)
    hd = dense.varpar_hessian(fit_d)  # (vcov_varpar inverts it: near-flat directions amplify rounding)
    np.testing.assert_allclose(sparse.varpar_hessian(fit_d), hd, rtol=1e-5, atol=1e-6 * np.abs(hd).max())
    np.testing.assert_allclose(ss.jacobian, sd.jacobian, rtol=1e-8, atol=1e-13)


@pytest.mark.r
@pytest.mark.slow
def test_sparse_analysis_equals_lmertest_emmeans(monkeypatch, lme4_backend):
    """A simulated sparse crowd study (8 systems x 40 items, each output rated by 3 of 60 workers), analysed
    without R through the sparse path: lmerTest + emmeans' F, means and Holm pairs (the no-R tolerances of
    tests/test_analyze.py)."""
    import pandas as pd

    from humaneval_power.completed_study import analyze
    from humaneval_power.designs import CrowdDesign
    from humaneval_power.processes import InvariantProcess
    from tests.test_analyze import (
        R_REFERENCE,
        _check_against_r,
        _check_f_and_means,
        _r_reference,
        any_result_frame,
    )

    systems = [f"S{s}" for s in range(8)]
    rng = np.random.default_rng(3)
    lay = CrowdDesign(items=40, workers=60, ratings_per_item=3, systems=8, assignment="random",
                      presentation="between").draw(rng, 1)
    y = InvariantProcess(0.6, 0.15, 0.2, 0.15, 0.6, systems=8, intercept=3.5).simulate(
        lay, np.linspace(0, 0.4, 8), 1, rng)[:, 0]
    frame = pd.DataFrame({"worker": [f"w{w:02d}" for w in np.asarray(lay.worker).ravel()],
                          "item": [f"i{i:02d}" for i in lay.item], "system": [systems[s] for s in lay.system],
                          "score": y})
    monkeypatch.setattr(vc_reml, "SPARSE_ABOVE", 0)  # 480 effects outside the largest factor: force sparse
    only_holm = R_REFERENCE.replace('c("none", "holm", "bonferroni", "fdr", "tukey", "mvt")', '"holm"').replace(
        'c("none", "holm", "mvt")', "character(0)")  # the multivariate-t adjustments are R's slow part
    ref = _r_reference(lme4_backend, any_result_frame(frame), systems, only_holm)
    result = analyze(frame, contrasts="pairs", adjust="holm", backend="statsmodels")
    _check_f_and_means(result, ref, rel_df=1e-3, abs_est=1e-4, abs_p=1e-3)
    _check_against_r(result, ref, "pairs", "holm", rel_df=1e-3, abs_est=1e-4, abs_p=1e-3)
