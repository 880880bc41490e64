"""The no-R Laplace CLMM (fitting/clmm.py) against R ordinal::clmm, statsmodels' OrderedModel and its own calculus."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from humaneval_power.errors import InputError
from humaneval_power.fitting import blas, clmm
from humaneval_power.fitting.clmm import (
    ClmmFit,
    crossed_groups,
    fit_clmm,
    ordinal_codes,
    treatment_design,
)


def _simulate(seed: int, workers: int, items: int, systems: int, sds: dict[str, float], delta: float,
              cuts: tuple[float, ...] = (-2.0, -0.7, 0.5, 1.8), link: str = "logit") -> pd.DataFrame:
    """Fully crossed ratings 1..K from the CLMM with the given latent SDs."""
    rng = np.random.default_rng(seed)
    w, i, s = (a.ravel() for a in np.meshgrid(np.arange(workers), np.arange(items), np.arange(systems), indexing="ij"))
    groups = crossed_groups(w, i, s, tuple(sds))
    eta = delta * s
    for term, sd in sds.items():
        _, codes = np.unique(groups[term], return_inverse=True)
        eta = eta + sd * rng.standard_normal(codes.max() + 1)[codes]
    noise = rng.logistic(size=len(w)) if link == "logit" else rng.standard_normal(len(w))
    y = 1 + np.searchsorted(np.asarray(cuts), eta + noise)
    return pd.DataFrame({"worker": w, "item": i, "system": s, "score": y})


def _fit(frame: pd.DataFrame, terms: tuple[str, ...], fitter=fit_clmm, **kw) -> ClmmFit:
    X, names = treatment_design(frame.system.to_numpy())
    groups = crossed_groups(frame.worker.to_numpy(), frame.item.to_numpy(), frame.system.to_numpy(), terms)
    return fitter(frame.score.to_numpy(), X, groups, beta_names=names, **kw)


# ----------------------------------------------------------------------------- no R


@pytest.mark.parametrize("link,terms", [("logit", ("worker", "item", "item:system")),
                                        ("probit", ("worker", "item", "item:system")), ("logit", ("item",))])
def test_gradient_is_the_derivative_of_the_laplace_loglik(link: str, terms: tuple[str, ...]) -> None:
    frame = _simulate(3, 4, 12, 2, {"worker": 0.8, "item": 1.0, "item:system": 0.5}, 0.4, link=link)
    y, levels = ordinal_codes(frame.score)
    X, _ = treatment_design(frame.system.to_numpy())
    groups = crossed_groups(frame.worker, frame.item, frame.system, terms)
    model = clmm._Model(y, X, clmm.Layout.build(groups, len(y)), len(levels), link)
    K = len(levels)
    phi = np.concatenate([np.linspace(-2, 2, K - 1), [0.3], [0.7, 1.1, 0.4][:len(terms)]])

    def value(ph: np.ndarray) -> float:
        return model.objective(ph[:K - 1], ph[K - 1:K], ph[K:], grad=False)[0]

    grad = model.objective(phi[:K - 1], phi[K - 1:K], phi[K:])[1]
    h = 1e-5
    numeric = [(value(phi + h * e) - value(phi - h * e)) / (2 * h) for e in np.eye(len(phi))]
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-6)


def test_no_random_effects_equals_statsmodels_ordered_model() -> None:
    from statsmodels.miscmodels.ordinal_model import OrderedModel
    from statsmodels.tools.sm_exceptions import ConvergenceWarning

    frame = _simulate(11, 6, 40, 3, {"item": 0.8}, 0.5)  # random item effects left out of both fits: a plain CLM
    X, names = treatment_design(frame.system.to_numpy())
    ours = fit_clmm(frame.score.to_numpy(), X, None, beta_names=names)
    with pytest.warns(ConvergenceWarning):  # statsmodels' step-size rule; the score check below shows the optimum
        ref = OrderedModel(frame.score.to_numpy(), X, distr="logit").fit(method="newton", disp=False, maxiter=25,
                                                                         tol=1e-10)
    p = X.shape[1]
    ref_cuts = ref.model.transform_threshold_params(ref.params)[1:-1]
    np.testing.assert_allclose(ours.beta, ref.params[:p], atol=1e-5)
    np.testing.assert_allclose(ours.thresholds, ref_cuts, atol=1e-5)
    assert ours.loglik == pytest.approx(ref.llf, rel=1e-9)
    np.testing.assert_allclose(ours.se_beta, ref.bse[:p], rtol=1e-4)  # the beta block is parametrisation-free
    assert ours.converged and ours.sds.size == 0
    assert np.abs(ref.model.score(ref.params)).max() < 1e-6  # the reference is at its optimum


def test_sparse_factorisation_gives_the_dense_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    frame = _simulate(5, 5, 15, 2, {"worker": 0.7, "item": 1.0, "worker:system": 0.3, "item:system": 0.5}, 0.3)
    dense = _fit(frame, clmm.TERMS)
    monkeypatch.setattr(clmm, "DENSE_MAX", 0)
    sparse = _fit(frame, clmm.TERMS)
    np.testing.assert_allclose(sparse.thresholds, dense.thresholds, atol=1e-7)
    np.testing.assert_allclose(sparse.sds, dense.sds, atol=1e-6)
    np.testing.assert_allclose(sparse.cov, dense.cov, rtol=1e-5, atol=1e-8)
    assert sparse.loglik == pytest.approx(dense.loglik, rel=1e-12)


def test_refusals_name_the_problem() -> None:
    with pytest.raises(InputError, match="integers"):
        ordinal_codes([1, 2, 3.5])
    with pytest.raises(InputError, match=r"1\.\.5"):
        ordinal_codes([1, 2, 3, 6], scale=(1, 5))
    with pytest.raises(InputError, match="at least three categories"):
        ordinal_codes([1, 2, 1, 2])
    with pytest.raises(InputError, match=r"2\|3 and 3\|4 cannot both"):
        ordinal_codes([1, 2, 4, 5])
    with pytest.raises(InputError, match=r"threshold 4\|5 cannot"):
        ordinal_codes([1, 2, 3, 4], scale=(1, 5))
    with pytest.raises(InputError, match="unknown link 'cauchit'"):
        fit_clmm([1, 2, 3], link="cauchit")
    with pytest.raises(InputError, match="intercept"):
        fit_clmm([1, 2, 3, 3], np.ones((4, 1)))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.integers(-3, 9), st.floats(allow_nan=True, allow_infinity=True)), min_size=1, max_size=30))
def test_malformed_ratings_raise_input_error_or_valid_codes(values: list[float]) -> None:
    """Any list: either valid codes on 1..5 (integers in range, >= 3 categories, none unused) or an InputError."""
    arr = np.asarray(values, dtype=float)
    valid = (np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)) and np.all((arr >= 1) & (arr <= 5))
             and set(arr.astype(int)) == {1, 2, 3, 4, 5})
    if valid:
        codes, levels = ordinal_codes(arr, scale=(1, 5))
        assert levels == (1, 2, 3, 4, 5) and np.array_equal(codes, arr.astype(int) - 1)
    else:
        with pytest.raises(InputError):
            ordinal_codes(arr, scale=(1, 5))


# ----------------------------------------------------------------------------- against R ordinal::clmm

CASES = {  # name -> (data, terms, link): subsets small enough for clmm to fit in seconds
    "expert": ("expert", ("worker", "item", "worker:system", "item:system"), "logit"),
    "amt": ("amt", ("worker", "item", "item:system"), "logit"),  # worker:system: 1-2 ratings per level
    "synthetic": ("synthetic", ("worker", "item", "worker:system"), "probit"),
}


def _case_frame(kind: str, data_root: Path) -> pd.DataFrame:
    if kind == "synthetic":  # not used while tuning the fitter
        return _simulate(2024, 6, 10, 2, {"worker": 0.6, "item": 0.9, "worker:system": 0.7}, 0.35, link="probit")
    path = data_root / ("dialsummeval_expert" if kind == "expert" else "dialsummeval_amt") / "ratings.csv"
    frame = pd.read_csv(path, dtype={"worker": str, "item": str, "system": str})
    frame = frame[(frame.dimension == "relevance") & frame.system.isin(["F", "H"])]
    items = sorted(frame["item"].unique())[:20 if kind == "expert" else 12]  # expert: 3 workers; AMT: 84
    return frame[frame["item"].isin(items)].reset_index(drop=True)


@pytest.fixture(scope="module")
def clmm_pairs(data_dir: Path) -> dict[str, tuple[ClmmFit, ClmmFit, float]]:
    """(ours, clmm's, our Laplace log-likelihood at clmm's estimates) per case, fitted once."""
    from humaneval_power.fitting import clmm_r

    ok, why = clmm_r.available()
    if not ok:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the clmm tests but R ordinal is unavailable: {why}")
        pytest.skip(f"R ordinal unavailable: {why}")
    out = {}
    for name, (kind, terms, link) in CASES.items():
        frame = _case_frame(kind, data_dir)
        ours, ref = _fit(frame, terms, link=link), _fit(frame, terms, clmm_r.fit_clmm_r, link=link)
        X, _ = treatment_design(frame.system.to_numpy())
        at_ref = clmm.laplace_loglik(frame.score.to_numpy(), X, crossed_groups(frame.worker, frame.item, frame.system, terms),
                                     ref.thresholds, ref.beta, ref.sds, link=link)
        out[name] = (ours, ref, at_ref)
    return out


@pytest.mark.r
@pytest.mark.slow
@pytest.mark.xdist_group("clmm_pairs")  # one worker: the module's clmm fits (clmm_pairs) are made once
@pytest.mark.parametrize("case", list(CASES))
def test_laplace_fit_equals_clmm(clmm_pairs: dict[str, tuple[ClmmFit, ClmmFit, float]], case: str) -> None:
    ours, ref, at_ref = clmm_pairs[case]
    # the same objective whatever the optimisers do (clmm: modes to |grad| < 1e-4, so its value is ~1e-6 low)
    assert at_ref == pytest.approx(ref.loglik, rel=1e-7) and at_ref >= ref.loglik
    assert ref.converged and ours.converged
    assert ours.threshold_names == ref.threshold_names and ours.sd_names == ref.sd_names
    np.testing.assert_allclose(ours.thresholds, ref.thresholds, atol=1e-4)
    np.testing.assert_allclose(ours.beta, ref.beta, atol=1e-4)
    np.testing.assert_allclose(ours.sds, ref.sds, atol=1e-3)
    assert ours.loglik == pytest.approx(ref.loglik, rel=1e-6)
    assert ours.loglik >= ref.loglik - 1e-6  # clmm stops near, not beyond, the optimum
    np.testing.assert_allclose(ours.se, ref.se, rtol=1e-3)


def test_batched_fits_equal_single_fits_and_count_refused_studies() -> None:
    frames = [_simulate(100 + k, 4, 12, 2, {"worker": 0.7, "item": 0.9, "item:system": 0.4}, 0.5) for k in range(2)]
    layout = frames[0][["worker", "item", "system"]]
    Y = np.column_stack([f.score.to_numpy() for f in frames] + [np.where(frames[0].score == 2, 3, frames[0].score)])
    terms = ("worker", "item", "item:system")
    groups = crossed_groups(layout.worker, layout.item, layout.system, terms)
    X = layout.system.to_numpy()[:, None].astype(float)
    batch = clmm.fit_clmm_many(Y, X, groups, scale=(1, 5), lrt=True)
    assert batch.failed.tolist() == [False, False, True] and "rating 2 is never used" in batch.reasons[0]
    for j in range(2):
        full = fit_clmm(Y[:, j], X, groups, scale=(1, 5))
        null = fit_clmm(Y[:, j], None, groups, scale=(1, 5))
        assert batch.estimate[j] == pytest.approx(full.beta[0], abs=1e-3)
        assert batch.se[j] == pytest.approx(full.se_beta[0], rel=1e-2)
        assert batch.lr[j] == pytest.approx(2 * (full.loglik - null.loglik), abs=1e-4)
        np.testing.assert_allclose(batch.sds[j], np.abs(full.sds), atol=1e-2)
    assert np.isnan(batch.estimate[2]) and np.isnan(batch.sds[2]).all() and batch.converged[:2].all()


def test_one_blas_thread_limits_every_blas_library_and_restores_them() -> None:
    """The fits' BLAS context (its controller found once per process): one thread inside for every BLAS library
    the controller lists, each library's own count again afterwards (set to 2 first: under xdist the suite already
    runs at one thread, where a context doing nothing would pass)."""
    controller = blas.blas_controller()

    def counts() -> dict[str, int]:
        return {lib["filepath"]: lib["num_threads"] for lib in controller.info() if lib["user_api"] == "blas"}

    assert counts()  # numpy's BLAS at least
    with controller.limit(limits=2, user_api="blas"):
        before = counts()
        assert set(before.values()) == {2}
        with blas.one_blas_thread():
            assert counts() == dict.fromkeys(before, 1)
        assert counts() == before


@pytest.mark.r
@pytest.mark.xdist_group("clmm_pairs")  # R started once with the module's clmm fits
@pytest.mark.parametrize("backend", ["laplace", "clmm"])
def test_a_fit_without_the_hessian_has_the_same_estimates_and_likelihood(backend: str) -> None:
    """``hessian=False`` (the null models of the likelihood-ratio tests: the planner's clmm tier, ``analyze``): the
    estimates, likelihood, convergence and gradient of the fit with the Hessian, bit for bit, and no covariance."""
    from humaneval_power.fitting import clmm_r

    if backend == "clmm" and not clmm_r.available()[0]:
        pytest.skip(clmm_r.available()[1])
    fitter = clmm_r.fit_clmm_r if backend == "clmm" else fit_clmm
    frame = _simulate(4, 4, 8, 2, {"worker": 0.8, "item": 0.7, "item:system": 0.3}, 0.5)
    groups = crossed_groups(frame.worker.to_numpy(), frame.item.to_numpy(), frame.system.to_numpy(),
                            ("worker", "item", "item:system"))
    with_h, without = (fitter(frame.score.to_numpy(), None, groups, hessian=h) for h in (True, False))
    for name in ("thresholds", "beta", "sds"):
        assert np.array_equal(getattr(without, name), getattr(with_h, name)), name
    assert (without.loglik, without.converged, without.max_grad) == (with_h.loglik, with_h.converged, with_h.max_grad)
    assert np.all(np.isfinite(with_h.cov)) and np.all(np.isnan(without.cov))
