"""The closed-form fits against independent references that need no R.

Reference: the dense Gaussian (RE)ML likelihood of the full data set, maximised
numerically, and lmerTest's Satterthwaite recipe (numerical Hessian of the REML
deviance in (theta, sigma), numerical gradient of Var(beta1)) re-implemented
densely. tests/test_lme4.py compares with lme4 + lmerTest themselves.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize

from humaneval_power.fitting.balanced import (
    draw_stats,
    expected_lambdas,
    fit_ml,
    fit_reml,
    stats_from_ratings,
    strata_df,
)
from humaneval_power.params import LikertParams
from humaneval_power.processes import long_design, simulate_ratings

N_WORKERS, N_ITEMS = 3, 7
PARAMS = LikertParams(0.5, 0.1, 0.15, 0.12, 0.2, 0.3)


class DenseModel:
    """y ~ x + (1 + x || worker) + (1 + x || item) with explicit covariance matrices."""

    def __init__(self, workers: int, items: int) -> None:
        cols = long_design(workers, items)
        x = cols["x"]
        zw = (cols["worker"][:, None] == np.arange(1, workers + 1)).astype(float)
        zi = (cols["item"][:, None] == np.arange(1, items + 1)).astype(float)
        self.blocks = [zw @ zw.T, (zw * x[:, None]) @ (zw * x[:, None]).T, zi @ zi.T,
                       (zi * x[:, None]) @ (zi * x[:, None]).T]
        self.X = np.column_stack([np.ones_like(x), x])
        self.n = len(x)

    def cov(self, theta: np.ndarray, sigma: float) -> np.ndarray:
        """theta = SDs relative to sigma, lme4 order (worker int, worker slope, item int, item slope)."""
        v = np.eye(self.n)
        for t, b in zip(theta, self.blocks):
            v = v + t**2 * b
        return sigma**2 * v

    def deviance(self, varpar: np.ndarray, y: np.ndarray, reml: bool) -> float:
        v = self.cov(varpar[:4], varpar[4])
        vi = np.linalg.inv(v)
        xtvx = self.X.T @ vi @ self.X
        beta = np.linalg.solve(xtvx, self.X.T @ vi @ y)
        r = y - self.X @ beta
        dev = np.linalg.slogdet(v)[1] + r @ vi @ r
        return dev + (np.linalg.slogdet(xtvx)[1] if reml else 0.0)

    def var_beta1(self, varpar: np.ndarray) -> float:
        vi = np.linalg.inv(self.cov(varpar[:4], varpar[4]))
        return float(np.linalg.inv(self.X.T @ vi @ self.X)[1, 1])

    def fit(self, y: np.ndarray, reml: bool, rng: np.random.Generator) -> optimize.OptimizeResult:
        best = None
        for _ in range(6):
            x0 = np.abs(rng.normal(0.5, 0.3, 5)) + 0.05
            res = optimize.minimize(self.deviance, x0, args=(y, reml), method="L-BFGS-B",
                                    bounds=[(0, None)] * 4 + [(1e-6, None)],
                                    options={"ftol": 1e-15, "gtol": 1e-11, "maxiter": 10_000})
            if best is None or res.fun < best.fun:
                best = res
        return best


def satterthwaite_reference(model: DenseModel, varpar: np.ndarray) -> float:
    """lmerTest's recipe: df = 2 v^2 / (g' A g), A = 2 H^-1, boundary components dropped."""
    free = np.r_[varpar[:4] > 1e-6, True]
    idx = np.flatnonzero(free)
    h = 1e-4

    def dev(p: np.ndarray) -> float:
        full = varpar.copy()
        full[idx] = p
        return model.deviance(full, model.y, True)

    def v(p: np.ndarray) -> float:
        full = varpar.copy()
        full[idx] = p
        return model.var_beta1(full)

    p0 = varpar[idx]
    k = len(p0)
    hess = np.zeros((k, k))
    grad = np.zeros(k)
    for a in range(k):
        ea = np.eye(k)[a] * h
        grad[a] = (v(p0 + ea) - v(p0 - ea)) / (2 * h)
        for b in range(k):
            eb = np.eye(k)[b] * h
            hess[a, b] = (dev(p0 + ea + eb) - dev(p0 + ea - eb) - dev(p0 - ea + eb) + dev(p0 - ea - eb)) / (4 * h * h)
    a_mat = 2 * np.linalg.inv(hess)
    return 2 * v(p0) ** 2 / (grad @ a_mat @ grad)


def _sds(fit, j: int) -> np.ndarray:
    """Study j's fitted SDs in the dense model's order (worker int, worker slope, item int, item slope, residual)."""
    vc = fit.variance_components()
    return np.array([vc[k][j] for k in ("sd_worker_intercept", "sd_worker_slope", "sd_item_intercept",
                                        "sd_item_slope", "sd_residual")])


def _assert_same_optimum(model: DenseModel, fit, j: int, y: np.ndarray, reml: bool, ref) -> None:
    """Converged, the numerical optimum's SE, and a deviance never worse than the numerical optimum's."""
    assert fit.converged[j]
    assert fit.se[j] == pytest.approx(np.sqrt(model.var_beta1(ref.x)), rel=1e-4)
    ours = _sds(fit, j)
    assert model.deviance(np.r_[ours[:4] / ours[4], ours[4]], y, reml) <= ref.fun + 1e-7


@pytest.mark.parametrize("sd_worker_slope", [0.15, 0.0])
def test_closed_form_matches_dense_likelihood(sd_worker_slope: float) -> None:
    rng = np.random.default_rng(11)
    params = PARAMS.with_sds(sd_worker_slope=sd_worker_slope)
    ratings = simulate_ratings(params, N_WORKERS, N_ITEMS, 0.2, 5, rng)
    model = DenseModel(N_WORKERS, N_ITEMS)
    reml, ml = fit_reml(stats_from_ratings(ratings)), fit_ml(stats_from_ratings(ratings))
    singular_seen = 0
    for j in range(len(ratings)):
        y = ratings[j].ravel()
        for fit, is_reml in ((reml, True), (ml, False)):
            ref = model.fit(y, is_reml, rng)
            ours = _sds(fit, j)
            np.testing.assert_allclose(ours, np.r_[ref.x[:4] * ref.x[4], ref.x[4]], atol=2e-4)
            _assert_same_optimum(model, fit, j, y, is_reml, ref)
            singular_seen += bool(fit.singular[j])
    if sd_worker_slope == 0.0:
        assert singular_seen > 0, "the boundary case was not exercised"


@pytest.mark.parametrize("sd_worker_slope", [0.6, 0.0])
def test_satterthwaite_df_matches_lmertest_recipe(sd_worker_slope: float) -> None:
    rng = np.random.default_rng(5)
    params = PARAMS.with_sds(sd_worker_slope=sd_worker_slope, sd_item_slope=0.5, sd_worker_intercept=0.4,
                             sd_item_intercept=0.4)
    ratings = simulate_ratings(params, N_WORKERS, N_ITEMS, 0.2, 4, rng)
    model = DenseModel(N_WORKERS, N_ITEMS)
    fit = fit_reml(stats_from_ratings(ratings))
    kinds = set()
    for j in range(len(ratings)):
        vc = fit.variance_components()
        sds = np.array([vc[k][j] for k in ("sd_worker_intercept", "sd_worker_slope", "sd_item_intercept",
                                           "sd_item_slope", "sd_residual")])
        varpar = np.r_[sds[:4] / sds[4], sds[4]]
        model.y = ratings[j].ravel()
        assert fit.df[j] == pytest.approx(satterthwaite_reference(model, varpar), rel=2e-3)
        kinds.add(bool(fit.singular[j]))
    assert (True in kinds) if sd_worker_slope == 0 else (False in kinds), "the intended case was not exercised"


def test_drawn_statistics_have_the_distribution_of_full_data() -> None:
    rng = np.random.default_rng(2)
    n = 4000
    lam = expected_lambdas(N_WORKERS, N_ITEMS, **PARAMS.sds)
    drawn = draw_stats(lam, N_WORKERS, N_ITEMS, 0.2, n, rng)
    full = stats_from_ratings(simulate_ratings(PARAMS, N_WORKERS, N_ITEMS, 0.2, n, rng))
    dfs = strata_df(N_WORKERS, N_ITEMS)
    for s in (drawn, full):
        ms = s.ss / dfs
        se = lam * np.sqrt(2 / dfs) / np.sqrt(n)  # SD of a scaled chi-square mean
        assert np.all(np.abs(ms.mean(0) - lam) < 4 * se)
        v = (lam[1] + lam[2] - lam[0]) / (N_WORKERS * N_ITEMS)
        assert abs(s.d_mean.mean() - 0.2) < 4 * np.sqrt(v / n)
        assert abs(s.d_mean.var() / v - 1) < 4 * np.sqrt(2 / n)


def _ml_deviance(p: np.ndarray, ss: np.ndarray, dfs: np.ndarray) -> float:
    """The stratum ML deviance written out in p = (lambda_E, tau_dW, tau_dI, tau_sW, tau_sI)."""
    lam = np.r_[p[0], p[0] + p[1:]]
    return float((dfs * np.log(lam) + ss / lam).sum() + np.log(p[0] + p[1] + p[2]) + np.log(p[0] + p[3] + p[4]))


@pytest.mark.parametrize("workers,items", [(3, 20), (10, 50)])
def test_ml_optimum_is_a_kkt_point_no_generic_optimizer_beats(workers: int, items: int) -> None:
    rng = np.random.default_rng(workers + items)
    lam = expected_lambdas(workers, items, 0.01, 0.22, 0.04, 0.28, 0.26)
    stats = draw_stats(lam, workers, items, 0.2, 25, rng)
    fit = fit_ml(stats)
    assert fit.converged.all() and fit.singular.any() and not fit.singular.all()
    dfs = strata_df(workers, items)
    for j in range(len(stats)):
        p = np.r_[fit.lam[j, 0], fit.lam[j, 1:] - fit.lam[j, 0]]
        ss = stats.ss[j]
        # projected gradient, by central differences relative to each parameter's scale
        h = 1e-6 * p[0]
        grad = np.array([(_ml_deviance(p + h * np.eye(5)[k], ss, dfs) - _ml_deviance(p - h * np.eye(5)[k], ss, dfs))
                         / (2 * h) if k == 0 or p[k] > h else
                         (_ml_deviance(p + h * np.eye(5)[k], ss, dfs) - _ml_deviance(p, ss, dfs)) / h
                         for k in range(5)])
        free = np.r_[True, ~fit.at_boundary[j]]
        assert np.all(np.abs(grad[free] * p[0]) < 1e-5), grad
        assert np.all(grad[~free] * p[0] > -1e-5), grad
        ref = optimize.minimize(_ml_deviance, np.r_[p[0], p[1:] + 0.1 * p[0]], args=(ss, dfs), method="L-BFGS-B",
                                bounds=[(1e-9, None)] + [(0, None)] * 4, options={"ftol": 1e-15, "gtol": 1e-12})
        assert _ml_deviance(p, ss, dfs) <= ref.fun + 1e-9
        np.testing.assert_allclose(p, ref.x, rtol=1e-4, atol=1e-4 * p[0])


def test_ml_safeguarded_path_gives_the_same_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Studies where the joint Newton step does not converge go to the bracketed profile solver."""
    from humaneval_power.fitting import balanced

    rng = np.random.default_rng(4)
    stats = draw_stats(expected_lambdas(3, 30, 0.01, 0.22, 0.04, 0.28, 0.26), 3, 30, 0.2, 2000, rng)
    fast = fit_ml(stats)
    monkeypatch.setattr(balanced, "_ml_newton", lambda e, m, *a: (e.copy(), m.copy(), np.zeros((2, 2, len(e))),
                                                                   np.zeros(len(e), dtype=bool)))
    safe = fit_ml(stats)
    assert safe.converged.all() and fast.singular.any()
    np.testing.assert_allclose(safe.lam, fast.lam, rtol=1e-10)
    np.testing.assert_allclose(safe.se, fast.se, rtol=1e-10)
    assert (safe.at_boundary == fast.at_boundary).all()


@pytest.mark.parametrize("workers,items", [(2, 3), (3, 2)])
def test_ml_tiny_designs_match_dense_likelihood(workers: int, items: int) -> None:
    """Where the ML optimum lies far from REML's (the projected-Newton solver before 62d6d3a stopped 10-40% off
    in SE on some of these studies while reporting convergence; lme4 agrees with the dense optimum)."""
    rng = np.random.default_rng(21)
    ratings = simulate_ratings(PARAMS, workers, items, 0.2, 8, rng)
    fit = fit_ml(stats_from_ratings(ratings))
    model = DenseModel(workers, items)
    for j in range(len(ratings)):
        y = ratings[j].ravel()
        _assert_same_optimum(model, fit, j, y, False, model.fit(y, False, rng))
