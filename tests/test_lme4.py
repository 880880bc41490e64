"""The fast tier against lme4 + lmerTest on the same simulated data, and power agreement."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from humaneval_power.analyses.crossed import FORMULA
from humaneval_power.engine import run_cells
from humaneval_power.fitting.balanced import fit_ml, fit_reml, stats_from_ratings
from humaneval_power.fitting.statsmodels_lmm import fit_crossed_many
from humaneval_power.params import get_preset
from humaneval_power.processes import long_design, simulate_ratings
from humaneval_power.scenarios.crossed import CrossedLikertScenario

from .conftest import mc_tolerance, sim_jobs

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


def _agree(fast, slow) -> None:
    tol = mc_tolerance(fast.power, fast.n_sims) + mc_tolerance(slow.power, slow.n_sims)
    assert abs(fast.power - slow.power) < tol, (fast.cell, fast.power, slow.power)
    assert slow.n_failed <= 0.01 * slow.n_sims


@pytest.mark.slow
@pytest.mark.parametrize("workers,items,effect", [(3, 20, 0.3), (5, 30, 0.2), (10, 20, 0.15)])
def test_fast_and_lme4_power_agree(lme4_backend, workers: int, items: int, effect: float) -> None:
    params = get_preset("card2020-high")
    fast = run_cells([CrossedLikertScenario(params, workers, items, effect, "fast")], 20_000, seed=1, jobs=1)[0]
    slow = run_cells([CrossedLikertScenario(params, workers, items, effect, "lme4")], 300, seed=1, jobs=sim_jobs())[0]
    _agree(fast, slow)


@pytest.mark.slow
@pytest.mark.parametrize("workers", [3, 5, 10])
@pytest.mark.parametrize("test", ["satterthwaite", "card2020"])
def test_null_rejection_rates_agree(lme4_backend, workers: int, test: str) -> None:
    params = get_preset("card2020-high")
    fast = run_cells([CrossedLikertScenario(params, workers, 20, 0.0, "fast", test)], 20_000, seed=2, jobs=1)[0]
    slow = run_cells([CrossedLikertScenario(params, workers, 20, 0.0, "lme4", test)], 250, seed=2, jobs=sim_jobs())[0]
    _agree(fast, slow)


@pytest.mark.parametrize("workers,items", [(2, 3), (3, 2), (2, 50)])
def test_ml_fit_of_tiny_designs_matches_lme4(lme4_backend, workers: int, items: int) -> None:
    """Designs where the ML optimum is far from REML's (the fast tier's solver before 62d6d3a was 10-40% off)."""
    rng = np.random.default_rng(5)
    ratings = simulate_ratings(get_preset("card2020-high"), workers, items, 0.2, 30, rng)
    ref = lme4_backend.refit_many(long_design(workers, items), ratings.reshape(len(ratings), -1).T, FORMULA, "x",
                                  reml=False, satterthwaite=False)
    assert (ref.failed == 0).all()
    np.testing.assert_allclose(fit_ml(stats_from_ratings(ratings)).se, ref.se, rtol=1e-3)  # lme4: ~2e-4
