"""The fast tier against lme4 + lmerTest on the same simulated data, and power agreement."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from humaneval_power.analyses.crossed import FORMULA
from humaneval_power.fitting.balanced import fit_ml, fit_reml, stats_from_ratings
from humaneval_power.fitting.statsmodels_lmm import fit_crossed_many
from humaneval_power.params import get_preset
from humaneval_power.processes import long_design, simulate_ratings

from .tier_pairing import full_data_closed_form_equals_the_fast_tier, refits_equal_the_closed_form

pytestmark = pytest.mark.r


@pytest.mark.parametrize("workers,items", [(3, 15), (5, 10), (10, 8)])
def test_same_estimate_se_df_p_as_lmertest(lme4_backend, workers: int, items: int) -> None:
    rng = np.random.default_rng(workers * 100 + items)
    ratings = simulate_ratings(get_preset("card2020-high"), workers, items, 0.2, 12, rng)
    y = ratings.reshape(len(ratings), -1).T
    cols = long_design(workers, items)
    ref = lme4_backend.refit_many(cols, y, FORMULA, "x", reml=True, satterthwaite=True)
    ours = fit_reml(stats_from_ratings(ratings))
    assert (ref.failed == 0).all()
    np.testing.assert_allclose(ours.estimate, ref.estimate, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(ours.se, ref.se, rtol=2e-3)
    np.testing.assert_allclose(ours.df, ref["df"], rtol=5e-3)
    p_ours = 2 * stats.t.sf(np.abs(ours.estimate / ours.se), ours.df)
    p_ref = 2 * stats.t.sf(np.abs(ref.estimate / ref.se), ref["df"])
    np.testing.assert_allclose(p_ours, p_ref, atol=2e-3)
    assert ours.singular.any(), "boundary fits must be among the compared ones"
    assert (ours.singular == (ref.singular > 0)).mean() >= 0.9

    ml_ref = lme4_backend.refit_many(cols, y, FORMULA, "x", reml=False, satterthwaite=False)
    ml = fit_ml(stats_from_ratings(ratings))
    np.testing.assert_allclose(ml.se, ml_ref.se, rtol=2e-3)


def test_statsmodels_backend_matches_closed_form() -> None:
    rng = np.random.default_rng(8)
    ratings = simulate_ratings(get_preset("card2020-low").with_sds(sd_worker_intercept=0.2, sd_item_intercept=0.2),
                               4, 8, 0.2, 100, rng)
    res = fit_crossed_many(long_design(4, 8), ratings.reshape(100, -1).T, reml=True)
    ours = fit_reml(stats_from_ratings(ratings))
    np.testing.assert_allclose(res.estimate, ours.estimate, rtol=1e-6)
    np.testing.assert_allclose(res.se, ours.se, rtol=1e-6)
    # lmerTest's Satterthwaite df, from a numerical Hessian of the exact gradient, against the closed form
    np.testing.assert_allclose(res.df, ours.df, rtol=1e-6)
    assert res.singular.any(), "boundary fits must be among the compared ones"


#: lme4-tier studies per cell: each is compared fit by fit with the closed form on the same data
#: (tests/tier_pairing.py), so the tier's power needs no Monte-Carlo tolerance of its own (before: 250-300
#: independent studies per cell, compared with the fast tier's power within both cells' error, +-0.07 to +-0.11;
#: round 4: 100). A systematic error of the refit path (refit.R: estimate, SE, df, the decision) shows on every
#: study, so on the first; one on a share f of studies goes unseen by all 9 cells' 450 refits with probability
#: (1 - f)^450 (1% of studies: 1e-2). The engine's power is tied to the recorded refits exactly.
LME4_SIMS = 50


def _lme4_tier_agrees_with_the_fast_tier(lme4_backend, monkeypatch: pytest.MonkeyPatch, workers: int, items: int,
                                         effect: float, test: str, seed: int) -> None:
    """The lme4 tier's power equals the fast tier's (tests/tier_pairing.py): every lme4 + lmerTest refit of the
    engine's studies against the closed form to test_same_estimate_se_df_p_as_lmertest's tolerances."""
    params = get_preset("card2020-high")
    refits_equal_the_closed_form(monkeypatch, lme4_backend, "refit_many", "lme4", params, workers, items, effect, test,
                                 seed, LME4_SIMS, rtol_se=2e-3, rtol_df=5e-3, atol_p=2e-3)
    full_data_closed_form_equals_the_fast_tier(params, workers, items, effect, test, seed)


@pytest.mark.slow
@pytest.mark.parametrize("workers,items,effect", [(3, 20, 0.3), (5, 30, 0.2), (10, 20, 0.15)])
def test_fast_and_lme4_power_agree(lme4_backend, monkeypatch: pytest.MonkeyPatch, workers: int, items: int,
                                   effect: float) -> None:
    _lme4_tier_agrees_with_the_fast_tier(lme4_backend, monkeypatch, workers, items, effect, "satterthwaite", 1)


@pytest.mark.slow
@pytest.mark.parametrize("workers", [3, 5, 10])
@pytest.mark.parametrize("test", ["satterthwaite", "card2020"])
def test_null_rejection_rates_agree(lme4_backend, monkeypatch: pytest.MonkeyPatch, workers: int, test: str) -> None:
    _lme4_tier_agrees_with_the_fast_tier(lme4_backend, monkeypatch, workers, 20, 0.0, test, 2)


@pytest.mark.parametrize("workers,items", [(2, 3), (3, 2), (2, 50)])
def test_ml_fit_of_tiny_designs_matches_lme4(lme4_backend, workers: int, items: int) -> None:
    """Designs where the ML optimum is far from REML's (the fast tier's solver before 62d6d3a was 10-40% off)."""
    rng = np.random.default_rng(5)
    ratings = simulate_ratings(get_preset("card2020-high"), workers, items, 0.2, 30, rng)
    ref = lme4_backend.refit_many(long_design(workers, items), ratings.reshape(len(ratings), -1).T, FORMULA, "x",
                                  reml=False, satterthwaite=False)
    assert (ref.failed == 0).all()
    np.testing.assert_allclose(fit_ml(stats_from_ratings(ratings)).se, ref.se, rtol=1e-3)  # lme4: ~2e-4
