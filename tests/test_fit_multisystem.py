"""More than two systems (issue 17.3): the coding-invariant default, Card's slopes and per-system SDs,
each backend against lmerTest typed directly in R on the same model."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from humaneval_power.errors import InputError
from humaneval_power.fitting.model import fit_pilot
from humaneval_power.fitting.ratings import read_ratings
from humaneval_power.params import PRESETS
from tests.crowd import crowd_ratings
from tests.lmm_reference import lme4_typed_directly

INVARIANT = "score ~ system + (1 | worker) + (1 | worker:system) + (1 | item) + (1 | item:system)"


def lmertest(data, formula: str = INVARIANT) -> dict:
    """lmerTest on the raw factors (no contrast columns of ours): coefficients with df and p, SDs, criterion."""
    return lme4_typed_directly(data, formula, package="lmerTest")


def _against_lmertest(fit, ref: dict, rtol_df: float) -> None:
    for rec in fit.records:
        est, se, df, _, p = ref["coef"][rec["system"]]
        assert rec["effect"] == pytest.approx(est, abs=1e-6)
        assert rec["effect_se"] == pytest.approx(se, rel=1e-4)
        assert rec["df"] == pytest.approx(df, rel=rtol_df)
        assert rec["p_value"] == pytest.approx(p, rel=1e-3, abs=1e-8)
    comp = fit.raw.components.set_index("group")["sd"]
    for g in ("worker", "worker:system", "item", "item:system"):
        assert comp[g] == pytest.approx(ref["sd"][g], rel=1e-3, abs=1e-4), g
    assert fit.raw.sigma == pytest.approx(ref["sd"]["Residual"], rel=1e-4)
    assert fit.raw.criterion == pytest.approx(ref["reml"], abs=1e-4)


def expert(data_dir: Path, systems=None, baseline: str = "A"):
    return read_ratings(data_dir / "dialsummeval_expert" / "ratings.csv", where={"dimension": "consistency"},
                        systems=list(systems) if systems else None, baseline=baseline, scale=(1, 5))


@pytest.fixture(scope="module")
def expert14(lme4_backend, data_dir: Path) -> tuple:
    """The 14 expert systems and lmerTest's fit of them, once for both backends' tests."""
    data = expert(data_dir)
    return data, lmertest(data)


@pytest.mark.r
@pytest.mark.xdist_group("expert14")  # one worker: lmerTest's fit once; both fits shared with test_fit_real
@pytest.mark.parametrize("backend", ["lme4", "statsmodels"])
def test_invariant_default_equals_lmertest_on_14_expert_systems(expert14: tuple, data_dir: Path, backend: str) -> None:
    from tests.test_fit_real import shared_fit

    data, ref = expert14
    fit = shared_fit(data_dir, "expert", backend, systems=None)
    assert fit.data.frame.equals(data.frame)  # the same ratings as the reference's
    assert fit.design.random == "invariant" and len(fit.records) == 13
    _against_lmertest(fit, ref, rtol_df=1e-3)


@pytest.mark.r
@pytest.mark.parametrize("backend", ["lme4", "statsmodels"])
def test_invariant_equals_lmertest_on_a_simulated_crowd(lme4_backend, backend: str) -> None:
    data = read_ratings(crowd_ratings(items=40, systems=5, raters=3, pool=25, seed=3))
    fit = fit_pilot(data, backend)
    _against_lmertest(fit, lmertest(data), rtol_df=1e-3)


def test_invariant_fit_does_not_depend_on_the_baseline() -> None:
    """Card's treatment-coded slopes change with the baseline (another REML optimum); the default does not."""
    frame = crowd_ratings(items=30, systems=4, raters=3, pool=12, seed=5)
    by_base = {b: fit_pilot(read_ratings(frame, baseline=b), "statsmodels") for b in ("S00", "S02")}
    assert by_base["S00"].raw.criterion == pytest.approx(by_base["S02"].raw.criterion, abs=1e-6)
    one, other = by_base["S00"].comparison("S02"), by_base["S02"].comparison("S00")
    assert one["effect"] == pytest.approx(-other["effect"], abs=1e-8)
    assert one["p_value"] == pytest.approx(other["p_value"], rel=1e-4)
    for key in ("sd_worker_slope", "sd_item_slope", "sd_worker_intercept", "sd_item_intercept", "sd_residual"):
        assert one[key] == pytest.approx(other[key], rel=1e-4)
    slopes = [fit_pilot(read_ratings(frame, baseline=b), "statsmodels", random="slopes").raw.criterion
              for b in ("S00", "S02")]
    assert abs(slopes[0] - slopes[1]) > 1e-3  # the defect this default avoids


def test_invariant_export_maps_to_the_planners_slope_model() -> None:
    """sd_slope^2 = 2 tau^2 and sd_intercept^2 = sigma^2 + tau^2 / 2, for every pair; no correlation."""
    fit = fit_pilot(read_ratings(crowd_ratings(items=30, systems=3, raters=3, pool=12, seed=6)), "statsmodels")
    sd = fit.raw.components.set_index("group")["sd"]
    for rec in fit.records:
        for g in ("worker", "item"):
            assert rec[f"sd_{g}_slope"] == pytest.approx(math.sqrt(2) * sd[f"{g}:system"], rel=1e-12)
            assert rec[f"sd_{g}_intercept"] ** 2 == pytest.approx(sd[g] ** 2 + sd[f"{g}:system"] ** 2 / 2, rel=1e-12)
            lo, hi = fit.raw.components.set_index("group").loc[f"{g}:system", ["lower", "upper"]]
            assert rec["intervals"][f"sd_{g}_slope"] == pytest.approx([math.sqrt(2) * lo, math.sqrt(2) * hi])
        doc = fit.to_params_doc(rec["system"])
        assert doc["provenance"]["random"] == "invariant" and not doc["correlations"]


def test_per_system_sds_and_their_pair_export() -> None:
    data = read_ratings(crowd_ratings(items=30, systems=3, raters=3, pool=12, seed=7))
    fit = fit_pilot(data, "statsmodels", random="per-system")
    comp = fit.raw.components.set_index(["group", "term"])["sd"]
    assert len(comp) == 6
    rec = fit.comparison("S02")
    for g in ("worker", "item"):
        a, b = comp[(g, "s0")], comp[(g, "s2")]
        assert rec[f"sd_{g}_slope"] == pytest.approx(math.hypot(a, b), rel=1e-12)
        assert rec[f"sd_{g}_intercept"] == pytest.approx(math.hypot(a, b) / 2, rel=1e-12)
    assert "worker SD of S02" in fit.summary()


def test_df_resting_on_a_zero_component_is_flagged() -> None:
    """No system-specific worker or item variation: those SDs are estimated at zero; the df then come from
    the residual alone, and the summary says so."""
    frame = crowd_ratings(items=20, systems=3, raters=2, pool=6, seed=8, sd_worker_system=0.0, sd_item_system=0.0)
    fit = fit_pilot(read_ratings(frame), "statsmodels")
    comp = fit.raw.components.set_index("group")["sd"]
    assert min(comp["worker:system"], comp["item:system"]) <= 1e-4 * fit.raw.sigma
    assert all(any("rest on a variance component estimated at zero" in n for n in r["notes"]) for r in fit.records)
    assert "rest on a variance component estimated at zero" in fit.summary()


def test_random_option_is_checked() -> None:
    data = read_ratings(crowd_ratings(items=10, systems=3, raters=2, pool=5, seed=9))
    with pytest.raises(InputError, match="random-effect structure"):
        fit_pilot(data, "statsmodels", random="maximal")
    with pytest.raises(InputError, match="--correlated needs several terms"):
        fit_pilot(data, "lme4", correlated=True)


def test_reverse_mapping_exists_only_when_the_intercept_sd_is_large_enough() -> None:
    p = PRESETS["card2020-low"].with_sds(sd_worker_intercept=0.2, sd_item_intercept=0.2)
    comp = p.invariant_components()
    assert comp["sd_worker_system"] == pytest.approx(p.sd_worker_slope / math.sqrt(2))
    assert comp["sd_worker"] ** 2 == pytest.approx(p.sd_worker_intercept**2 - p.sd_worker_slope**2 / 4)
    with pytest.raises(InputError, match="no coding-invariant equivalent"):
        PRESETS["card2020-high"].invariant_components()
