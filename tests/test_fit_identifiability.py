"""Variance components a design cannot separate (issue 17.5): found before fitting, left out, said plainly;
Wald SD intervals that mean nothing are not reported."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from humaneval_power.errors import InputError
from humaneval_power.fitting.identifiability import RESIDUAL, unidentified
from humaneval_power.fitting.model import fit_pilot
from humaneval_power.fitting.ratings import read_ratings
from humaneval_power.fitting.types import GROUPS, Design
from humaneval_power.fitting.vc_reml import CrossedComponentsModel
from tests.crowd import crowd_ratings
from tests.test_fit_multisystem import lmertest


def one_rater(systems: int, items: int = 60, seed: int = 2, pool: int = 15) -> pd.DataFrame:
    """Every (item, system) output rated by exactly one worker (an MQM-like study)."""
    return crowd_ratings(items=items, systems=systems, raters=1, pool=pool, seed=seed, sd_item_system=0.4)


def found(frame: pd.DataFrame, random: str | None = None) -> list:
    design = Design.for_data(read_ratings(frame), random)
    return unidentified(design.model_frame(read_ratings(frame)), design.columns, tuple(design.components()))


def test_the_design_decides_what_is_confounded() -> None:
    """One rating per output: item x system is the residual (invariant), and with x = -1/2, +1/2 the item
    intercept, slope and residual are tied (4 ZsZs' + ZiZi' = 2I); two raters per output separate them, and so
    does a study where a fifth of the outputs get a second rating."""
    inv = found(one_rater(4))
    assert [(f.components, f.dropped) for f in inv] == [((("item:system", "(Intercept)"), RESIDUAL),
                                                         ("item:system", "(Intercept)"))]
    two = found(one_rater(2))
    assert [f.dropped for f in two] == [("item", "x")]
    assert set(two[0].components) == {("item", "(Intercept)"), ("item", "x"), RESIDUAL}
    assert found(crowd_ratings(items=60, systems=4, raters=2, pool=15, seed=2)) == []
    frame = one_rater(4)
    extra = frame.sample(frac=0.2, random_state=1).assign(worker="w_extra", score=lambda f: f.score + 0.1)
    assert found(pd.concat([frame, extra])) == []


def test_without_the_check_the_split_is_arbitrary() -> None:
    """The defect: the full two-system model reaches one criterion at different item-slope/residual splits."""
    data = read_ratings(one_rater(2, items=80))
    design = Design.for_data(data)
    frame = design.model_frame(data)
    comps = design.components()
    model = CrossedComponentsModel(np.column_stack([np.ones(len(frame)), frame.x]), frame.score.to_numpy(),
                                   {g: frame[g].to_numpy() for g in GROUPS}, {"x": frame.x.to_numpy()}, comps)
    fits = [model.fit(start=np.array(s)) for s in ([0.1, 0.1, 0.1, 0.1], [0.1, 0.1, 0.5, 2.0])]
    assert fits[0].deviance == pytest.approx(fits[1].deviance, abs=1e-6)
    slope = comps.index(("item", "x"))
    assert abs(fits[0].sds[slope] - fits[1].sds[slope]) > 0.05  # same optimum, another split


@pytest.mark.parametrize("backend", ["statsmodels", pytest.param("lme4", marks=pytest.mark.r)])
def test_one_rater_per_output_fits_the_identified_model(request: pytest.FixtureRequest, backend: str) -> None:
    """More than two systems: lme4 cannot even fit the full model (as many item x system levels as ratings);
    the tool fits it without item x system, equal to lmerTest typed directly on that model, and says so."""
    if backend == "lme4":
        request.getfixturevalue("lme4_backend")
    data = read_ratings(one_rater(4))
    fit = fit_pilot(data, backend)
    assert [(g, t) for g, t, _ in fit.dropped] == [("item:system", "(Intercept)")]
    assert fit.unidentified and "item x system, the residual are confounded" in fit.summary()
    prov = fit.to_params_doc("S01")["provenance"]
    assert prov["unidentified"] == list(fit.unidentified) and "item:system" not in prov["model"]
    for rec in fit.records:
        assert rec["sd_item_slope"] == 0.0
    if backend == "lme4":
        ref = lmertest(data, "score ~ system + (1 | worker) + (1 | worker:system) + (1 | item)")
        for rec in fit.records:
            assert rec["effect"] == pytest.approx(ref["coef"][rec["system"]][0], abs=1e-6)
            assert rec["df"] == pytest.approx(ref["coef"][rec["system"]][2], rel=1e-3)
        assert fit.raw.sigma == pytest.approx(ref["sd"]["Residual"], rel=1e-4)


def test_two_systems_export_the_identified_split() -> None:
    """The slope model's item slope is left out: what remains reproduces the pilot's covariance exactly."""
    fit = fit_pilot(read_ratings(one_rater(2, items=80)), "statsmodels")
    rec = fit.comparison()
    assert [(g, t) for g, t, _ in fit.dropped] == [("item", "x")] and rec["sd_item_slope"] == 0.0
    assert math.isnan(rec["intervals"]["sd_item_slope"][0])


def test_per_system_sds_are_refused_when_confounded() -> None:
    with pytest.raises(InputError, match=r"per-system SDs are not identifiable.*--random invariant"):
        fit_pilot(read_ratings(one_rater(3)), "statsmodels", random="per-system")
