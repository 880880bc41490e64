"""The exact-gradient (RE)ML solver behind the statsmodels backend, against statsmodels and calculus."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from humaneval_power.fitting.statsmodels_lmm import statsmodels_deviance
from humaneval_power.fitting.vc_reml import CrossedComponentsModel

COLUMNS = ("c1", "c2")
COMPONENTS = [(g, t) for g in ("worker", "item") for t in ("(Intercept)",) + COLUMNS]


def sparse_ratings(workers: int, items: int, per_worker: int, seed: int) -> pd.DataFrame:
    """Each worker rates a random subset of items under all three systems (A baseline, B, C)."""
    rng = np.random.default_rng(seed)
    rows = [(w, i, s) for w in range(workers) for i in rng.choice(items, per_worker, replace=False) for s in range(3)]
    f = pd.DataFrame(rows, columns=["worker", "item", "system"])
    f["c1"], f["c2"] = (f.system == 1).astype(float), (f.system == 2).astype(float)
    u = {k: rng.normal(0, sd, n) for k, sd, n in [("w", 0.3, workers), ("i", 0.4, items), ("ws", 0.15, workers),
                                                  ("is", 0.2, items)]}
    f["score"] = (0.1 * f.c1 - 0.2 * f.c2 + u["w"][f.worker] + u["i"][f.item]
                  + (u["ws"][f.worker] + u["is"][f.item]) * f.c1 + rng.normal(0, 0.5, len(f)))
    return f


def model(f: pd.DataFrame, reml: bool = True) -> CrossedComponentsModel:
    x = np.column_stack([np.ones(len(f)), f.c1, f.c2])
    return CrossedComponentsModel(x, f.score.to_numpy(), {"worker": f.worker.to_numpy(), "item": f.item.to_numpy()},
                                  {c: f[c].to_numpy() for c in COLUMNS}, COMPONENTS, reml)


# more workers than item effects, and the reverse: either factor becomes the block-diagonal one
DESIGNS = [(40, 12, 5, 1), (6, 50, 20, 2)]


@pytest.mark.parametrize("reml", [True, False])
@pytest.mark.parametrize("design", DESIGNS)
def test_deviance_equals_statsmodels(design: tuple, reml: bool) -> None:
    f = sparse_ratings(*design)
    m = model(f, reml)
    rng = np.random.default_rng(3)
    for gamma in (np.full(6, 0.5), rng.uniform(0.01, 2, 6), np.array([1e-6, 3.0, 0.1, 0.02, 1e-3, 0.7])):
        point = m.at(gamma)
        assert point.deviance == pytest.approx(statsmodels_deviance(f, COLUMNS, point, reml), rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("reml", [True, False])
@pytest.mark.parametrize("design", DESIGNS)
def test_gradient_equals_richardson_difference(design: tuple, reml: bool) -> None:
    m = model(sparse_ratings(*design), reml)
    gamma = np.array([0.4, 0.05, 1.3, 0.2, 0.0, 0.9])  # one component at the boundary
    _, grad, _, _ = m.deviance(gamma)
    h = 1e-4
    for k in range(6):
        e = np.eye(6)[k]
        if gamma[k] == 0:  # one-sided, second order: (-3 f0 + 4 f(h) - f(2h)) / 2h
            fs = [m.deviance(gamma + j * h * e, False)[0] for j in range(3)]
            fd = (-3 * fs[0] + 4 * fs[1] - fs[2]) / (2 * h)
            tol = 1e-5 * (1 + abs(fd))  # O(h^2) truncation with h = 1e-4
        else:
            central = [(m.deviance(gamma + s * e, False)[0] - m.deviance(gamma - s * e, False)[0]) / (2 * s)
                       for s in (h, h / 2)]
            fd = (4 * central[1] - central[0]) / 3  # Richardson: O(h^4)
            tol = 1e-7 * (1 + abs(fd))
        assert grad[k] == pytest.approx(fd, abs=tol), k


@pytest.mark.parametrize("design", DESIGNS)
def test_optimum_is_a_kkt_point_reached_from_any_start(design: tuple) -> None:
    m = model(sparse_ratings(*design))
    a, b = m.fit(), m.fit(start=np.full(6, 0.01))
    assert a.converged and b.converged, (a.message, b.message)
    assert a.deviance == pytest.approx(b.deviance, abs=1e-7)
    np.testing.assert_allclose(a.sds, b.sds, atol=1e-4)
    # no single coordinate improves on it (a local check independent of the optimiser)
    for k in range(6):
        for step in (1e-3, -1e-3):
            g = a.gamma.copy()
            g[k] = max(g[k] + step, 0.0)
            assert m.deviance(g, False)[0] >= a.deviance - 1e-9
    # Cov(beta) = s^2 (X'V^-1 X)^-1 against a direct dense computation
    f = sparse_ratings(*design)
    x = np.column_stack([np.ones(len(f)), f.c1, f.c2])
    z = [np.equal.outer(f[g].to_numpy(), np.unique(f[g])) * (1.0 if t == "(Intercept)" else f[t].to_numpy()[:, None])
         for g, t in COMPONENTS]
    v = a.sigma2 * (np.eye(len(f)) + sum(gk * zk @ zk.T for gk, zk in zip(a.gamma, z)))
    vi_x = np.linalg.solve(v, x)
    np.testing.assert_allclose(a.beta_cov, np.linalg.inv(x.T @ vi_x), rtol=1e-8)
    np.testing.assert_allclose(a.beta, np.linalg.solve(x.T @ vi_x, vi_x.T @ f.score.to_numpy()), rtol=1e-8, atol=1e-12)


@pytest.mark.r
def test_statsmodels_backend_equals_lme4_on_unbalanced_designs(lme4_backend) -> None:
    """20 simulated studies, sparse crowd and crossed-with-a-zero-SD: the same REML optimum as lme4.

    Here there is no closed form; lme4 (BOBYQA on the same criterion) is the reference.
    """
    from humaneval_power.fitting.model import fit_pilot
    from humaneval_power.fitting.ratings import read_ratings
    from humaneval_power.params import SD_NAMES
    from humaneval_power.processes import simulate_long
    from tests.recovery import BOUNDARY_TRUTH, EFFECT, TRUTH, crossed_pairs, sparse_pairs

    rng = np.random.default_rng(11)
    singular = 0
    for rep in range(20):
        truth, pairs = (TRUTH, sparse_pairs(rng, 30, 30, 4)) if rep % 2 else (BOUNDARY_TRUTH, crossed_pairs(6, 10))
        data = read_ratings(simulate_long(truth, pairs, EFFECT, rng), baseline="A")
        a, b = fit_pilot(data, "lme4", intervals="none"), fit_pilot(data, "statsmodels")
        assert b.raw.criterion <= a.raw.criterion + 1e-6  # never a worse optimum than lme4's
        assert a.raw.criterion - b.raw.criterion < 1e-4
        for key in ("effect", "effect_se") + SD_NAMES:
            assert abs(a.records[0][key] - b.records[0][key]) < 1e-3, (rep, key)
        singular += b.raw.singular
    assert 0 < singular < 20  # boundary fits are among the compared ones


def test_memory_stays_proportional_to_the_data() -> None:
    """A gradient at a zero component solves those components' columns exactly. That once made a dense
    q x n_zero copy of Z'Z (12.3 GB at 100,000 ratings), besides dense q1 x q2 cross blocks. Here: 3,000 items
    each rated under both systems by 2 of 40 workers (12,000 ratings), item slope at zero: the old code
    peaked at 442 MB in this one evaluation; now under 20 MB."""
    import tracemalloc

    rng = np.random.default_rng(5)
    items, workers = 3_000, 40
    w = np.concatenate([rng.choice(workers, 2, replace=False) for _ in range(items)]).repeat(2)
    i = np.arange(items).repeat(4)
    x = np.tile([-0.5, 0.5], 2 * items)
    y = rng.normal(size=len(x)) + 0.3 * rng.normal(size=workers)[w] + 0.3 * rng.normal(size=items)[i]
    comps = [(g, t) for g in ("worker", "item") for t in ("(Intercept)", "x")]
    m = CrossedComponentsModel(np.column_stack([np.ones(len(x)), x]), y, {"worker": w, "item": i}, {"x": x}, comps)
    gamma = np.array([0.1, 0.05, 0.1, 0.0])  # the item slope at zero: 3,000 exact columns
    tracemalloc.start()
    dev, grad, _, _ = m.deviance(gamma)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 20e6, peak
    h = 1e-6  # the exact columns' gradient is right: one-sided difference into the interior
    assert grad[3] == pytest.approx((m.deviance(gamma + h * np.eye(4)[3], False)[0] - dev) / h, rel=1e-3)


@pytest.mark.parametrize("design", DESIGNS)
def test_beta_jacobian_equals_central_difference(design: tuple) -> None:
    """lmerTest's J_k = dCov(b)/dvarpar_k (varpar = theta..., sigma), against differences of s^2 (X'H^-1 X)^-1."""
    m = model(sparse_ratings(*design))
    fit = m.fit()
    theta, sigma = fit.theta, np.sqrt(fit.sigma2)

    def cov(th: np.ndarray, s: float) -> np.ndarray:
        return s**2 * np.linalg.inv(m.deviance(th**2, False)[3][:m.p, :m.p])

    jac = m.beta_jacobian(fit)
    assert jac.shape == (m.k + 1, m.p, m.p)
    for k in range(m.k + 1):
        h = 1e-5 * max(theta[k] if k < m.k else sigma, 1e-2)
        e = np.eye(m.k + 1)[k] * h
        up, down = (cov(np.abs(theta + d[:-1]), sigma + d[-1]) for d in (e, -e))  # |.|: theta -> theta^2 is even
        assert jac[k] == pytest.approx((up - down) / (2 * h), rel=1e-5, abs=1e-8 * np.abs(jac).max())


def _formula_deviance(frame: pd.DataFrame, columns: tuple[str, ...], point, reml: bool) -> float:
    """statsmodels' -2 log-likelihood with the model built by patsy (``MixedLM.from_formula``)."""
    from statsmodels.regression.mixed_linear_model import MixedLM, MixedLMParams

    frame = frame.assign(**{g.replace(":", "_"): frame[g.split(":")].astype(str).agg("_".join, axis=1)
                            for g, _ in point.components if ":" in g})
    vc = {f"{g}|{t}": f"0 + C({g.replace(':', '_')})" + ("" if t == "(Intercept)" else f":{t}")
          for g, t in point.components}
    m = MixedLM.from_formula("score ~ 1" + "".join(f" + {c}" for c in columns), frame, groups=np.ones(len(frame)),
                             vc_formula=vc, re_formula="0", use_sparse=True)
    gamma = dict(zip((f"{g}|{t}" for g, t in point.components), point.gamma))
    params = MixedLMParams.from_components(point.beta, cov_re=np.zeros((0, 0)),
                                           vcomp=np.array([gamma[n] for n in m.exog_vc.names]))
    m.reml, m.cov_pen, m.fe_pen, m._freepat, m._cov_sing = reml, None, None, None, 0
    return float(-2 * m.loglike(params, profile_fe=False))


@pytest.mark.parametrize("reml", [True, False])
def test_statsmodels_deviance_equals_the_formula_built_models(reml: bool) -> None:
    """statsmodels_deviance builds MixedLM from arrays (no patsy: the backend's likelihood check 3x faster); the
    same model built by patsy from the formula (group indicators coded independently of ours, an interaction
    group among the components) has the same likelihood at several points."""
    f = sparse_ratings(30, 12, 5, 4)
    comps = COMPONENTS + [("worker:item", "(Intercept)")]
    x = np.column_stack([np.ones(len(f)), f.c1, f.c2])
    m = CrossedComponentsModel(x, f.score.to_numpy(), {"worker": f.worker.to_numpy(), "item": f.item.to_numpy(),
                                                       "worker:item": pd.MultiIndex.from_frame(f[["worker", "item"]])
                                                       .factorize()[0]},
                               {c: f[c].to_numpy() for c in COLUMNS}, comps, reml)
    rng = np.random.default_rng(5)
    for gamma in (np.full(7, 0.5), rng.uniform(0.01, 2, 7)):
        point = m.at(gamma)
        ours = statsmodels_deviance(f, COLUMNS, point, reml)
        assert ours == pytest.approx(point.deviance, rel=1e-9)
        assert ours == pytest.approx(_formula_deviance(f, COLUMNS, point, reml), rel=1e-12, abs=1e-10)
