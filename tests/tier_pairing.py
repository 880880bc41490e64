"""A refitting tier of the crossed cell checked against the fast tier in two links, each tighter than one
Monte-Carlo comparison of the two tiers' powers (tests/test_lme4.py, tests/test_statsmodels_tier.py):

1. the refitting cell run by the engine (in this process): every study's refit equals the closed-form fit of the
   same data set (the engine's refits are recorded), and the engine's power is the share of those studies the
   refits find;
2. the closed form on full simulated data sets (``simulate_ratings``, the refitting tiers' data-generating
   process) against the fast tier (its sufficient statistics drawn directly) within both cells' Monte-Carlo
   error at 20,000 studies each (+-0.01 to +-0.02 in power).
"""
from __future__ import annotations

import zlib

import numpy as np
import pandas as pd
import pytest

from humaneval_power.analyses.crossed import CrossedSlopes
from humaneval_power.engine import run_cells
from humaneval_power.fitting.balanced import fit_ml, fit_reml, stats_from_ratings
from humaneval_power.params import LikertParams
from humaneval_power.processes import simulate_ratings
from humaneval_power.scenarios.crossed import CrossedLikertScenario
from humaneval_power.significance.coef_test import coefficient_test, uses_reml

from .conftest import mc_tolerance

#: studies of the closed form on full data sets against the fast tier
FULL_DATA_SIMS = 20_000


def refits_equal_the_closed_form(monkeypatch: pytest.MonkeyPatch, module: object, name: str, tier: str,
                                 params: LikertParams, workers: int, items: int, effect: float, test: str, seed: int,
                                 sims: int, rtol_se: float, rtol_df: float, atol_p: float) -> None:
    """Link 1 for the cell refitted by ``module.name`` (called as ``name(columns, y, ...)``, returning estimate, se,
    df and failed per column of y): estimates to 1e-6, SEs, df and p-values to the given tolerances."""
    recorded: list[tuple[np.ndarray, pd.DataFrame]] = []
    refit = getattr(module, name)

    def recording(columns, y, *args, **kwargs):
        recorded.append((y, refit(columns, y, *args, **kwargs)))
        return recorded[-1][1]

    monkeypatch.setattr(module, name, recording)
    slow = run_cells([CrossedLikertScenario(params, workers, items, effect, tier, test)], sims, seed=seed,
                     jobs=1)[0]  # in this process: its refits are recorded
    y = np.concatenate([r[0] for r in recorded], axis=1)
    ref = pd.concat([r[1] for r in recorded], ignore_index=True)
    assert y.shape[1] == len(ref) == sims and slow.n_failed <= 0.01 * sims
    ok = (ref.failed == 0).to_numpy()
    ours = (fit_reml if uses_reml(test) else fit_ml)(stats_from_ratings(y.T.reshape(sims, workers, items, 2)))
    np.testing.assert_allclose(ours.estimate[ok], ref.estimate[ok], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(ours.se[ok], ref.se[ok], rtol=rtol_se)
    df_ours = df_ref = None
    if test == "satterthwaite":
        df_ours, df_ref = ours.df, ref["df"].to_numpy()
        np.testing.assert_allclose(df_ours[ok], df_ref[ok], rtol=rtol_df)
    alpha = CrossedSlopes("fast", test).alpha
    p_ours, _ = coefficient_test(ours.estimate, ours.se, df_ours, test, alpha)
    p_ref, sig_ref = coefficient_test(ref.estimate.to_numpy(), ref.se.to_numpy(), df_ref, test, alpha)
    np.testing.assert_allclose(p_ours[ok], p_ref[ok], atol=atol_p)
    assert slow.power == pytest.approx((sig_ref & ok).mean(), abs=1e-12)


def full_data_closed_form_equals_the_fast_tier(params: LikertParams, workers: int, items: int, effect: float,
                                               test: str, seed: int) -> None:
    """Link 2: the fast tier's power within Monte-Carlo error of the closed form's on full data sets."""
    analysis = CrossedSlopes("fast", test)
    fast = run_cells([CrossedLikertScenario(params, workers, items, effect, "fast", test)], FULL_DATA_SIMS, seed=seed,
                     jobs=1)[0]
    rng = np.random.default_rng(zlib.crc32(f"full data {workers} {items} {effect} {test} {seed}".encode()))
    hits = 0
    for _ in range(FULL_DATA_SIMS // 2_000):
        ratings = simulate_ratings(params, workers, items, effect, 2_000, rng)
        hits += int(analysis.decide(analysis.fit_statistics(stats_from_ratings(ratings))).significant.sum())
    full = hits / FULL_DATA_SIMS
    tol = mc_tolerance(fast.power, FULL_DATA_SIMS) + mc_tolerance(full, FULL_DATA_SIMS)
    assert abs(fast.power - full) < tol, (fast.cell, fast.power, full)
