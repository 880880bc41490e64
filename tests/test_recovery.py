"""Parameter recovery of `hepower fit`: unbiased within Monte-Carlo error, 95% intervals cover 90-99%.

The statsmodels backend (no R) fits 100 simulated studies per design and its recovery and coverage are checked
there; the lme4 backend is checked in the paired form (as tests/tier_pairing.py does for the tiers): its fit of
each of the first ``LME4_STUDIES`` of the same studies equals the statsmodels fit of that study (estimates,
SEs, df, SDs and every Wald interval end, and so whether each interval covers the truth), so its bias and
coverage are the checked ones. Before: lme4 fitted all 100 studies and its table was checked on its own; a
backend difference shows now on the study where it happens, not only through a mean over 100 studies.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import tests.recovery as rec_mod
from humaneval_power.fitting.model import fit_pilot
from humaneval_power.params import SD_NAMES
from tests.conftest import mc_tolerance
from tests.recovery import recovery

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("recovery")]  # one worker: the fits are shared

#: studies of each design the lme4 backend fits, each compared with the statsmodels fit of the same data
LME4_STUDIES = 25
DESIGNS = ("crossed", "sparse")


@pytest.fixture(scope="module")
def no_r_runs() -> dict[str, tuple[pd.DataFrame, list]]:
    """Per design: the statsmodels backend's recovery table of 100 studies and each study's (data, fit)."""
    runs = {}
    for design in DESIGNS:
        made: list = []

        def recording(data, *args, made=made, **kwargs):
            made.append((data, fit_pilot(data, *args, **kwargs)))
            return made[-1][1]

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(rec_mod, "fit_pilot", recording)
            runs[design] = (recovery(design, reps=100, intervals="wald", backend="statsmodels"), made)
    return runs


@pytest.mark.parametrize("design", DESIGNS)
def test_recovery_and_coverage_without_r(no_r_runs: dict, design: str) -> None:
    """The statsmodels backend (its own Satterthwaite df and Wald intervals)."""
    table, made = no_r_runs[design]
    assert len(made) == 100 and all(f.raw.backend == "statsmodels" for _, f in made)
    _check(table)


@pytest.mark.r
@pytest.mark.parametrize("design", DESIGNS)
def test_recovery_and_coverage(lme4_backend, no_r_runs: dict, design: str) -> None:
    """The lme4 backend's fit of each study equals the statsmodels fit of the same data: estimates, SEs and SDs
    within 1e-4, df within 1e-3 relative, every Wald interval end within 1e-3 relative, and the same verdict on
    whether each interval covers the truth (so the same coverage as the table checked above)."""
    table, made = no_r_runs[design]
    truth = dict(zip(table.parameter, table.truth))
    for data, ours in made[:LME4_STUDIES]:
        a, b = fit_pilot(data, "lme4", intervals="wald").records[0], ours.records[0]
        for key in ("effect", "effect_se") + SD_NAMES:
            assert a[key] == pytest.approx(b[key], abs=1e-4), key
        assert a["df"] == pytest.approx(b["df"], rel=1e-3)
        assert _covers(_t_interval(a), truth["effect"]) == _covers(_t_interval(b), truth["effect"])
        for key in SD_NAMES:
            ends_a, ends_b = np.asarray(a["intervals"][key]), np.asarray(b["intervals"][key])
            np.testing.assert_allclose(ends_a, ends_b, rtol=1e-3, atol=1e-6, err_msg=key)
            assert _covers(ends_a, truth[key]) == _covers(ends_b, truth[key]), key


def _t_interval(rec: dict) -> np.ndarray:
    half = stats.t.isf(0.025, rec["df"]) * rec["effect_se"]  # recovery()'s Satterthwaite t interval
    return np.array([rec["effect"] - half, rec["effect"] + half])


def _covers(ends: np.ndarray, value: float) -> bool:
    return bool(ends[0] <= value <= ends[1])  # an unknown bound (NaN) does not cover, as in recovery()


def _check(table: pd.DataFrame) -> None:
    print("\n" + table.to_string(index=False))
    for row in table.itertuples():
        if row.parameter == "effect":
            assert abs(row.mean_estimate - row.truth) < 3.5 * row.mc_se, row
        else:  # REML is unbiased for variances (not SDs) away from the boundary
            assert abs(row.mean_variance - row.truth**2) < 3.5 * row.variance_mc_se, row
        if row.at_boundary < 0.05:  # nominal 95% within Monte-Carlo error of the replicates
            assert abs(row.coverage - 0.95) <= mc_tolerance(0.95, row.reps), row
