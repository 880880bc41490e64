"""The Bartlett-corrected likelihood-ratio test of the CLMM (fitting/clmm.py): LR / E[LR] against chi-square(1),
E[LR] from parametric-bootstrap data sets drawn from the fitted null models (pbkrtest::PBmodcomp's "Bartlett")."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special, stats

from humaneval_power.designs import CrowdDesign
from humaneval_power.errors import InputError
from humaneval_power.fitting.clmm import (
    bartlett_draws,
    bartlett_p,
    bootstrap_lr,
    concat_batches,
    crossed_groups,
    fit_clmm,
    fit_clmm_many,
    simulate_clmm,
    treatment_design,
)
from humaneval_power.ordinal_process import OrdinalProcess, ordinal_decision

from .conftest import mc_tolerance

CUTS = (-2.0, -0.7, 0.5, 1.8)


@settings(max_examples=10, deadline=None)
@given(c=st.floats(0.6, 3.0), seed=st.integers(0, 2**16))
def test_bartlett_p_is_uniform_when_the_statistic_is_a_scaled_chi_square(c: float, seed: int) -> None:
    """LR = c chi2(1), the factor c estimated from 4,000 bootstrap draws of the same law: the p-values reject at
    0.05 and 0.2 at their nominal rates. Tolerance: 3.5 SEs of the rejection rate, which has two sources: the
    4,000 statistics (binomial) and the factor's own error (relative SE sqrt(2 / draws), shared by every p-value:
    it moves the rate by density(q) q per unit of relative error, q the chi-square critical value)."""
    rng = np.random.default_rng(seed)
    n = 4000
    p = bartlett_p(c * rng.chisquare(1, n), c * rng.chisquare(1, (n // 2, 2)))
    for alpha in (0.05, 0.2):
        q = stats.chi2.ppf(1 - alpha, 1)
        factor_se = stats.chi2.pdf(q, 1) * q * np.sqrt(2 / n)
        assert abs(np.mean(p < alpha) - alpha) < np.hypot(mc_tolerance(alpha, n), 3.5 * factor_se)


def test_bartlett_p_needs_bootstrap_draws_and_ignores_failed_ones() -> None:
    assert bartlett_p(np.array([3.84]), np.array([[2.0, np.nan], [np.nan, np.nan]]))[0] == pytest.approx(
        special.chdtrc(1, 1.92))
    assert np.isnan(bartlett_p(np.array([1.0, 2.0]), np.full((2, 2), np.nan))).all()  # every draw failed
    with pytest.raises(InputError, match="bootstrap"):
        bartlett_p(np.array([1.0]), np.zeros((1, 0)))
    assert bartlett_draws(50) == 4 and bartlett_draws(200) == 1 and bartlett_draws(1) == 200


@pytest.mark.parametrize("link", ["logit", "probit"])
def test_simulate_clmm_has_the_models_category_probabilities(link: str) -> None:
    """One random term (SD 0.7) and a covariate: category shares at each covariate value equal the model's
    marginal P(Y <= k) (OrdinalProcess.cumulative, SD of the summed effect 0.7) within 4 binomial SEs."""
    N, S, beta = 200, 100, 0.8
    x = np.repeat([0.0, 1.0], N // 2)[:, None]
    groups = {"g": np.arange(N) % 40}
    y = simulate_clmm(x, groups, np.array([[*CUTS, beta, 0.7]]).repeat(S, axis=0), link=link,
                      rng=np.random.default_rng(5), lowest=1)
    truth = OrdinalProcess(CUTS, link, sd_worker=0.7)
    for xv, eta in ((0.0, 0.0), (1.0, beta)):
        ys = y[x[:, 0] == xv].ravel()
        cum = np.array([np.mean(ys <= k) for k in range(1, 5)])
        expect = truth.cumulative(eta)
        # ratings of one group share its effect: a group's share has variance <= P(1 - P), so the SE is at most
        # that of 40 x S independent draws (not of ys.size)
        assert np.all(np.abs(cum - expect) < 4 * np.sqrt(expect * (1 - expect) / (40 * S)))


@pytest.fixture(scope="module")
def small() -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray], object]:
    lay = CrowdDesign(items=10, workers=4, ratings_per_item=4).draw(np.random.default_rng(0), 1)
    p = OrdinalProcess(CUTS, sd_worker=0.5, sd_item=0.8)
    Y = p.simulate(lay, np.zeros(2), 3, np.random.default_rng(1))
    Y[:, 1] = np.minimum(Y[:, 1], 4)  # study 1 leaves rating 5 unused: it fails
    X, _ = treatment_design(lay.system)
    groups = crossed_groups(lay.worker, lay.item, lay.system, ("worker", "item"))
    return Y, X, groups, fit_clmm_many(Y, X, groups, scale=(1, 5), lrt=True, bootstrap=3, seed=4)


def test_bootstrap_draws_come_from_each_studys_null_fit(small) -> None:
    """null_params are the fit without the coefficient (fit_clmm to the batch's BFGS tolerance); lr_boot has one row
    per study, NaN for the failed one; the same seed gives the same draws; refusals."""
    Y, X, groups, batch = small
    assert batch.failed.tolist() == [False, True, False]
    assert batch.lr_boot.shape == (3, 3) and np.all(np.isnan(batch.lr_boot[1]))
    assert np.all(np.isfinite(batch.lr_boot[[0, 2]])) and np.all(batch.lr_boot[[0, 2]] >= 0)
    null = fit_clmm(Y[:, 0], None, groups, scale=(1, 5))
    assert np.allclose(batch.null_params[0], np.concatenate([null.thresholds, null.sds]), atol=2e-3)
    again = bootstrap_lr(batch, X, groups, coef=0, scale=(1, 5), draws=3, seed=4)
    assert np.array_equal(again, batch.lr_boot, equal_nan=True)
    assert ordinal_decision(batch, "bartlett")[1] == False  # noqa: E712  (a failed study never rejects)
    both = concat_batches([batch, batch])
    assert both.lr_boot.shape == (6, 3) and both.failed.sum() == 2
    with pytest.raises(InputError, match="lrt=True"):
        fit_clmm_many(Y, X, groups, scale=(1, 5), bootstrap=2)
    with pytest.raises(InputError, match="lrt=True"):
        bootstrap_lr(fit_clmm_many(Y[:, :1], X, groups, scale=(1, 5)), X, groups, coef=0, scale=(1, 5), draws=1)
