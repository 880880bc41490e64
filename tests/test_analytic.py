"""The analytic tier: Westfall et al. (2014) numbers, noncentral t, agreement with `fast`."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from humaneval_power.engine import run_cells
from humaneval_power.params import LikertParams, get_preset
from humaneval_power.scenarios.crossed import CrossedLikertScenario
from humaneval_power.significance.t_test import t_power

from .conftest import mc_tolerance


def westfall_defaults() -> LikertParams:
    """App defaults d=.5, E=.3, P=.2, S=.2, PC=.1, SC=.1 mapped to our convention (DESIGN.md)."""
    e, p, s, pc, sc = 0.3, 0.2, 0.2, 0.1, 0.1
    return LikertParams(0.0, math.sqrt(p), 2 * math.sqrt(pc), math.sqrt(s), 2 * math.sqrt(sc), math.sqrt(e))


def test_westfall_exact_satterthwaite() -> None:
    r = CrossedLikertScenario(westfall_defaults(), 20, 20, 0.5, method="analytic").exact()
    assert r.df == pytest.approx(35.39, abs=0.005)
    assert r.power == pytest.approx(0.6655, abs=5e-5)
    assert r.extra["ncp"] == pytest.approx(2.4544, abs=5e-5)
    assert r.record()["df"] == r.df


def test_westfall_app_figures_come_from_understated_mean_squares() -> None:
    """The app's 33.19 / 0.6638 follow from E + q*PC, E + p*SC instead of E + 2q*PC, E + 2p*SC."""
    e, pc, sc, p, q = 0.3, 0.1, 0.1, 20, 20
    ms_e, ms_pc, ms_sc = e, e + q * pc, e + p * sc
    df = (ms_pc + ms_sc - ms_e) ** 2 / (ms_pc**2 / (p - 1) + ms_sc**2 / (q - 1) + ms_e**2 / ((p - 1) * (q - 1)))
    ncp = 0.5 / math.sqrt(2 * (e / (p * q) + 2 * sc / q + 2 * pc / p))
    crit = stats.t.isf(0.025, df)
    assert df == pytest.approx(33.19, abs=0.005)
    assert stats.nct.sf(crit, df, ncp) + stats.nct.cdf(-crit, df, ncp) == pytest.approx(0.6638, abs=5e-5)


@pytest.mark.parametrize("ncp,df", [(2.0, 5.0), (0.7, 12.0), (3.1, math.inf)])
def test_t_power_against_simulation(ncp: float, df: float) -> None:
    crit = stats.t.isf(0.025, df) if math.isfinite(df) else stats.norm.isf(0.025)
    power, type_s, type_m = t_power(ncp, df, crit)
    rng = np.random.default_rng(0)
    n = 400_000
    z = rng.standard_normal(n) + ncp
    v = rng.chisquare(df, n) / df if math.isfinite(df) else np.ones(n)
    t = z / np.sqrt(v)
    sig = np.abs(t) > crit
    assert abs(power - (t > crit).mean()) < mc_tolerance(power, n)
    exag = np.abs(z[sig]) / ncp
    assert abs(type_m - exag.mean()) < 4 * exag.std() / np.sqrt(sig.sum())
    wrong = (t[sig] < 0).mean()
    assert abs(type_s - wrong) < mc_tolerance(max(type_s, 1e-3), int(sig.sum()))
    if math.isfinite(df):
        assert power == pytest.approx(stats.nct.sf(crit, df, ncp), rel=1e-9)


@pytest.mark.parametrize("test", ["satterthwaite", "z"])
def test_analytic_agrees_with_fast_where_boundary_is_rare(test: str) -> None:
    """Westfall defaults (all SDs sizeable), 20 x 20: variance estimates rarely hit zero."""
    params = westfall_defaults()
    cells = [CrossedLikertScenario(params, 20, 20, e, "fast", test) for e in (0.3, 0.5)]
    n = 20_000
    fast = run_cells(cells, n, seed=3, jobs=1)
    for cell, f in zip(cells, fast):
        a = CrossedLikertScenario(params, 20, 20, cell.effect, "analytic", test).exact()
        assert f.n_singular / n < 0.01
        assert abs(f.power - a.power) < mc_tolerance(a.power, n)


def test_sample_size_is_the_smallest_reaching_target() -> None:
    from humaneval_power.scenarios.likert import likert_sample_size

    params = get_preset("card2020-low")
    r = likert_sample_size(params, 0.1, workers=10, method="analytic")

    def power(n: int) -> float:
        return CrossedLikertScenario(params, 10, n, 0.1, "analytic").exact().power

    assert r.attainable and power(r.value) >= 0.8 > power(r.value - 1)
    assert r.low == r.high == r.value


def test_unattainable_target_reports_the_limit() -> None:
    """With W workers, Var(effect) -> sd_worker_slope^2 / W and df -> W - 1 as items grow."""
    from humaneval_power.scenarios.likert import likert_sample_size

    params = get_preset("card2020-high")
    r = likert_sample_size(params, 0.1, workers=3, method="analytic")
    limit = stats.nct.sf(stats.t.isf(0.025, 2), 2, 0.1 * math.sqrt(3) / params.sd_worker_slope)
    assert not r.attainable and r.value is None
    assert r.limit_power == pytest.approx(limit, abs=1e-4)
    assert "add workers" in r.reason
