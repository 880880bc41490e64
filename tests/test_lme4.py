"""The fast tier against lme4 + lmerTest on the same simulated data, and power agreement."""
from __future__ import annotations

import zlib

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from humaneval_power.analyses.crossed import FORMULA, CrossedSlopes
from humaneval_power.engine import run_cells
from humaneval_power.fitting.balanced import fit_ml, fit_reml, stats_from_ratings
from humaneval_power.fitting.statsmodels_lmm import fit_crossed_many
from humaneval_power.params import get_preset
from humaneval_power.processes import long_design, simulate_ratings
from humaneval_power.scenarios.crossed import CrossedLikertScenario
from humaneval_power.significance.coef_test import coefficient_test, uses_reml

from .conftest import mc_tolerance

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


#: lme4-tier studies per cell: each is compared fit by fit with the closed form on the same data (below), so
#: the tier's power needs no Monte-Carlo tolerance of its own (before: 250-300 independent studies per cell,
#: compared with the fast tier's power within both cells' Monte-Carlo error, +-0.07 to +-0.11)
LME4_SIMS = 100
#: studies of the closed form on full data sets against the fast tier (whose statistics are drawn directly)
FULL_DATA_SIMS = 20_000


def _lme4_tier_agrees_with_the_fast_tier(lme4_backend, monkeypatch: pytest.MonkeyPatch, workers: int, items: int,
                                         effect: float, test: str, seed: int) -> None:
    """The lme4 tier's power equals the fast tier's, in two links that are each checked more tightly than one
    Monte-Carlo comparison of the two tiers could:

    1. the lme4 cell run by the engine: every study's lme4 + lmerTest fit equals the closed-form fit of the same
       data set (the fits the engine made are recorded), to test_same_estimate_se_df_p_as_lmertest's
       tolerances, and the engine's power is the share of those studies the lme4 fits find;
    2. the closed form on full simulated data sets (``simulate_ratings``, the lme4 tier's data-generating
       process) against the fast tier (its sufficient statistics drawn directly) within both cells'
       Monte-Carlo error at 20,000 studies each (+-0.01 to +-0.02 in power).
    """
    params = get_preset("card2020-high")
    analysis = CrossedSlopes("fast", test)
    fitter = fit_reml if uses_reml(test) else fit_ml
    shape = (workers, items, 2)
    recorded: list[tuple[np.ndarray, object]] = []
    refit = lme4_backend.refit_many

    def recording(columns, y, *args, **kwargs):
        recorded.append((y, refit(columns, y, *args, **kwargs)))
        return recorded[-1][1]

    monkeypatch.setattr(lme4_backend, "refit_many", recording)
    slow = run_cells([CrossedLikertScenario(params, workers, items, effect, "lme4", test)], LME4_SIMS, seed=seed,
                     jobs=1)[0]  # in this process: its refits are recorded
    y = np.concatenate([r[0] for r in recorded], axis=1)
    ref = pd.concat([r[1] for r in recorded], ignore_index=True)
    assert y.shape[1] == len(ref) == LME4_SIMS and slow.n_failed <= 0.01 * LME4_SIMS
    ok = (ref.failed == 0).to_numpy()
    ours = fitter(stats_from_ratings(y.T.reshape(LME4_SIMS, *shape)))
    np.testing.assert_allclose(ours.estimate[ok], ref.estimate[ok], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(ours.se[ok], ref.se[ok], rtol=2e-3)
    df_ours = ours.df if test == "satterthwaite" else None
    df_ref = ref["df"].to_numpy() if test == "satterthwaite" else None
    if df_ours is not None:
        np.testing.assert_allclose(df_ours[ok], df_ref[ok], rtol=5e-3)
    p_ours, _ = coefficient_test(ours.estimate, ours.se, df_ours, test, analysis.alpha)
    p_ref, sig_ref = coefficient_test(ref.estimate.to_numpy(), ref.se.to_numpy(), df_ref, test, analysis.alpha)
    np.testing.assert_allclose(p_ours[ok], p_ref[ok], atol=2e-3)
    assert slow.power == pytest.approx((sig_ref & ok).mean(), abs=1e-12)

    fast = run_cells([CrossedLikertScenario(params, workers, items, effect, "fast", test)], FULL_DATA_SIMS, seed=seed,
                     jobs=1)[0]
    rng = np.random.default_rng(zlib.crc32(f"full data {workers} {items} {effect} {test}".encode()))
    hits = 0
    for _ in range(FULL_DATA_SIMS // 2_000):
        ratings = simulate_ratings(params, workers, items, effect, 2_000, rng)
        hits += int(analysis.decide(analysis.fit_statistics(stats_from_ratings(ratings))).significant.sum())
    full = hits / FULL_DATA_SIMS
    tol = mc_tolerance(fast.power, FULL_DATA_SIMS) + mc_tolerance(full, FULL_DATA_SIMS)
    assert abs(fast.power - full) < tol, (fast.cell, fast.power, full)


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
