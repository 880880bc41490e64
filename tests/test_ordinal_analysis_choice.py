"""Which analysis plans ordinal ratings (issue 26, "Plan"): the ordinal CLMM, the linear model of the ratings
(``--model invariant``) or both on the same simulated studies; the ordinal data-generating process from the
command line (typed thresholds and latent SDs, presets); the refusals of methods and tests of another
analysis; the effect as a difference in mean rating; assurance over ordinal parameter draws.
"""
from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from humaneval_power.analyses import get_analysis
from humaneval_power.assurance import ordinal_draws
from humaneval_power.cli import main
from humaneval_power.designs import Costs, CrowdDesign, Layout
from humaneval_power.engine import chunk_seed
from humaneval_power.errors import InputError
from humaneval_power.ordinal_process import ORDINAL_PRESETS, OrdinalProcess
from humaneval_power.params import LikertParams, OrdinalParams
from humaneval_power.plan_inputs import likert_params
from humaneval_power.scenarios.crowd import METHODS, MODELS, TESTS, CrowdScenario, analyses_of, cell_factory
from humaneval_power.scenarios.likert import latent_effects, likert_budget, likert_power

from .conftest import share_calls

PROCESS = OrdinalProcess(thresholds=(-2.0, -0.7, 0.5, 1.8), sd_worker=0.8, sd_worker_system=0.3, sd_item=1.0,
                         sd_item_system=0.5)
TYPED = ["--family", "ordinal", "--thresholds", "-2", "-0.7", "0.5", "1.8", "--sd-worker", "0.8",
         "--sd-worker-system", "0.3", "--sd-item", "1", "--sd-item-system", "0.5"]
#: slope parameters with an invariant equivalent (intercept SDs >= half the slope SDs)
GAUSSIAN = LikertParams(0.5, 0.2, 0.1, 0.2, 0.1, 0.2, name="gaussian")
SMALL = {"workers": 4, "items": 10, "n_sims": 6, "seed": 2, "jobs": 1}
#: tests these checks do not depend on: ``z``, the one both analyses have besides the default (whose ordinal
#: Bartlett test refits 200 bootstrap draws per chunk), and ``t`` for the ordinal one alone. The default end
#: to end: test_mean_rating_effect_is_said_in_the_record_and_note, test_ordinal_example, test_ordinal_plan.
BOTH_TEST = "z"
ORDINAL_TEST = "t"


def _records(table: Any) -> list[dict[str, Any]]:
    """Records with NaN as None (NaN != NaN) and the columns of one analysis only (the other's are NaN)."""
    return [{k: v for k, v in r.items() if not (isinstance(v, float) and math.isnan(v))}
            for r in table.to_dict("records")]


@pytest.fixture(scope="module")
def both() -> Any:
    return likert_power(PROCESS, SMALL["workers"], SMALL["items"], [0.8], model="both", n_sims=SMALL["n_sims"],
                        seed=SMALL["seed"], jobs=1, test=BOTH_TEST)


def test_both_gives_the_records_of_each_analysis_run_alone(both: Any) -> None:
    """Common random numbers: both analyses see the studies each sees alone on the same seed."""
    alone = [likert_power(PROCESS, SMALL["workers"], SMALL["items"], [0.8], model=m, n_sims=SMALL["n_sims"],
                          seed=SMALL["seed"], jobs=1, test=BOTH_TEST) for m in ("ordinal", "invariant")]
    assert _records(both) == _records(alone[0]) + _records(alone[1])
    assert list(both.model) == ["ordinal", "invariant"]


def test_type_one_error_is_the_same_cell_at_effect_zero(both: Any) -> None:
    zero = likert_power(PROCESS, SMALL["workers"], SMALL["items"], [0.8, 0.0], model="both", n_sims=SMALL["n_sims"],
                        seed=SMALL["seed"], jobs=1, test=BOTH_TEST)
    assert list(zero.effect) == [0.8, 0.0, 0.8, 0.0]  # a zero asked for is kept
    for m in ("ordinal", "invariant"):
        rows = zero[zero.model == m]
        assert rows.type1_error.tolist() == [rows.power.iloc[1]] * 2
        assert both[both.model == m].type1_error.iloc[0] == rows.power.iloc[1]
        assert both[both.model == m].power.iloc[0] == rows.power.iloc[0]


def test_linear_analysis_fits_ordinal_ratings_at_the_true_means() -> None:
    """Ordinal ratings do not move along a shift of the latent means: the linear model's estimates are those of
    the ratings simulated at the true effect (not of effect-0 ratings shifted, as for Gaussian ratings)."""
    cell = cell_factory(PROCESS, model="invariant")(10, 4, effect=1.5)
    out = cell.simulate(5, np.random.default_rng(7))
    layout = cell.design.draw(np.random.default_rng(0), 1)
    assert isinstance(layout, Layout)
    y = PROCESS.simulate(layout, np.array([0.0, 1.5]), 5, np.random.default_rng(7)).astype(float)
    analysis = get_analysis("invariant")
    direct = analysis.fit(layout, y, analysis.prepare(layout))
    np.testing.assert_allclose(out.estimate, direct.estimate[:, 0], rtol=1e-12)
    mean_diff = y[layout.system == 1].mean(axis=0) - y[layout.system == 0].mean(axis=0)
    np.testing.assert_allclose(out.estimate, mean_diff, atol=1e-8)  # crossed design: the LMM estimate is the mean difference


def test_linear_type_m_is_against_the_mean_rating_difference() -> None:
    """The linear model estimates mean-rating differences: its Type-M is their mean |estimate| when significant
    over the true mean difference (recomputed here from the cell's one chunk of studies)."""
    table = likert_power(PROCESS, 4, 10, 1.5, model="invariant", n_sims=12, seed=3, jobs=1)
    lin = table.iloc[0]
    assert 0 < lin.mean_difference < lin.effect
    cell = cell_factory(PROCESS, model="invariant")(10, 4, effect=1.5)
    out = cell.simulate(12, np.random.default_rng(chunk_seed(3, cell.stream_key(), 0)))
    sig = out.significant & ~out.failed
    assert sig.sum() == round(lin.power * 12) > 0
    assert lin.type_m == pytest.approx(np.abs(out.estimate[sig]).mean() / lin.mean_difference, rel=1e-12)


# ---------------------------------------------------------------------------------- refusals over all combinations

def _accepted(ordinal: bool, model: str | None, method: str, test: str) -> bool:
    """The rules (docs/ordinal.md): each analysis its own methods and tests; ordinal ratings analysed by the
    ordinal or the linear (invariant) model; Gaussian ratings never by the ordinal model."""
    own = {"ordinal": (("fast", "clmm"), ("satterthwaite", "z", "lrt", "t", "bartlett")),
           "invariant": (("fast", "lme4"), ("satterthwaite", "card2020", "z")),  # analytic/statsmodels: crossed slopes
           "slopes": (("fast", "lme4", "analytic", "statsmodels"), ("satterthwaite", "card2020", "z"))}
    if model is None:
        model = "ordinal" if ordinal else "slopes"
    models = ("ordinal", "invariant") if model == "both" else (model,)
    if not ordinal and ("ordinal" in models or len(models) > 1):
        return False
    if ordinal and "slopes" in models:
        return False
    if (method, test) == ("analytic", "card2020"):  # the slope model's closed form has no ML test
        return False
    return all(method in own[m][0] and test in own[m][1] for m in models)


GRID = list(itertools.product((False, True), (None, *MODELS), METHODS, TESTS))


@pytest.mark.parametrize(("ordinal", "model", "method", "test"), GRID)
def test_analysis_options_are_refused_or_accepted_by_the_rules(ordinal: bool, model: str | None, method: str,
                                                               test: str) -> None:
    params: Any = PROCESS if ordinal else GAUSSIAN
    ok = _accepted(ordinal, model, method, test)
    try:
        for m in analyses_of(model):  # what likert_power builds, cell by cell (no simulation)
            cell = cell_factory(params, model=m, method=method, test=test)(10, 4, effect=0.5)
            assert isinstance(cell, CrowdScenario)
    except InputError as exc:
        assert not ok, f"refused: {exc}"
        assert "\n" not in str(exc)
    else:
        assert ok, "accepted"


REFUSED_CLI = [g for g in GRID if not _accepted(*g)][::7]  # a spread of the refusals, through the command line


@pytest.mark.parametrize(("ordinal", "model", "method", "test"), REFUSED_CLI)
def test_refusals_on_the_command_line_are_one_line_exit_2(ordinal: bool, model: str | None, method: str, test: str,
                                                         capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "out.csv"
    argv = ["likert", "power", "--workers", "4", "--items", "10", "--effect", "0.5", "--sims", "4", "--method",
            method, "--test", test, "--out", str(out)] + (TYPED if ordinal else []) + (
        ["--model", model] if model else [])
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]
    assert not out.exists()


@pytest.mark.parametrize("argv", [
    ["--thresholds", "-1", "0", "1"],                                     # thresholds without --family ordinal
    ["--family", "gaussian", "--preset", "dialsummeval-amt"],
    ["--family", "ordinal", "--preset", "card2020-high"],
    ["--family", "ordinal", "--thresholds", "-1", "0", "1", "--sd-worker", "1"],   # latent SDs missing
    TYPED + ["--intercept", "0.5"],
    TYPED + ["--sd-residual", "1"],
    TYPED[:1] + TYPED[7:] + ["--thresholds", "1", "0"],                    # not increasing
    ["--preset", "dialsummeval-expert", "--link", "probit"],             # the preset's thresholds are logit
    ["--effect-scale", "latent"],                                         # Gaussian effects have no latent scale
    TYPED + ["--effect-scale", "mean-rating", "--effect", "9"],           # beyond the scale
])
def test_ordinal_parameter_refusals(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    base = ["likert", "power", "--workers", "4", "--items", "10", "--sims", "4"]
    assert main(base + (argv if "--effect" in argv else argv + ["--effect", "0.3"])) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]


# ---------------------------------------------------------------------------------- the effect as a mean rating

@settings(max_examples=10, deadline=None)
@given(st.floats(-0.9, 0.9).filter(lambda d: abs(d) > 1e-3), st.sampled_from(["logit", "probit"]))
def test_mean_rating_effect_round_trip(difference: float, link: str) -> None:
    """A difference in mean rating -> the latent shift planned -> the cell's mean_difference: the same number."""
    process = OrdinalProcess(PROCESS.thresholds, link, 0.8, 0.3, 1.0, 0.5)
    (latent,) = latent_effects(process, [difference], "mean-rating")
    assert latent == pytest.approx(process.latent_shift(difference), abs=0)
    cell = cell_factory(process)(10, 4, effect=latent)
    assert cell.cell()["mean_difference"] == pytest.approx(difference, abs=1e-9)
    assert np.sign(latent) == np.sign(difference)


def test_mean_rating_effect_is_said_in_the_record_and_note() -> None:
    table, r = likert_budget(PROCESS, 0.25, items=[10], workers=[4], ratings_per_item=[4], n_sims=4, seed=1,
                             costs=Costs(per_rating=1.0), effect_scale="mean-rating", jobs=1)
    assert "difference in expected mean rating" in r.detail["note"]
    assert f"{PROCESS.latent_shift(0.25):.4g}" in r.detail["note"]
    assert table.effect.iloc[0] == PROCESS.latent_shift(0.25) and table.effect_scale.iloc[0] == "mean-rating"
    assert table.mean_difference.iloc[0] == pytest.approx(0.25, abs=1e-9)
    with pytest.raises(InputError, match="latent"):
        latent_effects(likert_params("card2020-high"), [0.1], "latent")
    assert latent_effects(likert_params("card2020-high"), [0.1], "mean-rating") == [0.1]


# ---------------------------------------------------------------------------------- the command line = the API

def test_cli_both_with_typed_parameters_equals_the_api(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["likert", "power", "--workers", "4", "--items", "10", "--effect", "0.3", "--effect-scale", "mean-rating",
            "--model", "both", "--sims", "6", "--seed", "2", "--jobs", "1", "--test", BOTH_TEST, "--json", *TYPED]
    assert main(argv) == 0
    cli = json.loads(capsys.readouterr().out)
    api = likert_power(PROCESS, 4, 10, 0.3, model="both", effect_scale="mean-rating", n_sims=6, seed=2, jobs=1,
                       test=BOTH_TEST)
    assert [{k: v for k, v in r.items() if v is not None} for r in cli] == _records(api)
    assert {r["effect_scale"] for r in cli} == {"mean-rating"}
    assert cli[0]["mean_difference"] == pytest.approx(0.3, abs=1e-9)


def test_presets_and_typed_overrides() -> None:
    assert likert_params("dialsummeval-expert") is ORDINAL_PRESETS["dialsummeval-expert"]
    p = likert_params("dialsummeval-amt", sd_worker=1.0)
    assert p.sd_worker == 1.0 and p.thresholds == ORDINAL_PRESETS["dialsummeval-amt"].thresholds
    typed = likert_params(family="ordinal", thresholds=[-2, -0.7, 0.5, 1.8], sd_worker=0.8, sd_worker_system=0.3,
                          sd_item=1.0, sd_item_system=0.5)
    assert (typed.thresholds, typed.sds, typed.link) == (PROCESS.thresholds, PROCESS.sds, "logit")


def test_cli_lrt_equals_the_api(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["likert", "power", "--preset", "dialsummeval-expert", "--workers", "3", "--items", "12", "--effect",
                 "1.0", "--test", "lrt", "--sims", "5", "--jobs", "1", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    api = likert_power(ORDINAL_PRESETS["dialsummeval-expert"], 3, 12, 1.0, test="lrt", n_sims=5, jobs=1)
    assert cli[0]["test"] == "lrt" and [{k: v for k, v in r.items() if v is not None} for r in cli] == _records(api)


@pytest.mark.r
@pytest.mark.slow
def test_cli_clmm_method_equals_the_api(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The clmm tier from the command line gives the API's record. Each ``ordinal::clmm`` refit (deterministic) is
    made once and answered again for the same data set (``conftest.share_calls``): a CLI that simulated other
    studies or fitted another model would make other calls, fitted afresh."""
    pytest.importorskip("rpy2")
    from humaneval_power.fitting import clmm_r

    share_calls(monkeypatch, clmm_r, "fit_clmm_r")
    assert main(["likert", "power", *TYPED, "--workers", "4", "--items", "8", "--effect", "1.0", "--method", "clmm",
                 "--test", ORDINAL_TEST, "--sims", "2", "--jobs", "1", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    api = likert_power(PROCESS, 4, 8, 1.0, method="clmm", test=ORDINAL_TEST, n_sims=2, jobs=1)
    assert cli[0]["method"] == "clmm" and cli[0]["test"] == ORDINAL_TEST and cli[0]["power"] == api.power.iloc[0]
    assert cli[0]["n_failed"] == api.n_failed.iloc[0] == 0  # both studies fitted (8 items: half the clmm time of 12)
    assert cli[0]["mean_estimate"] == pytest.approx(api.mean_estimate.iloc[0], rel=1e-12)


# ---------------------------------------------------------------------------------- assurance

def test_assurance_over_the_posterior_draws_of_an_ordinal_file(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(0)
    n = 4
    draws = {"thresholds": [[t + rng.normal(0, 0.1) for t in PROCESS.thresholds] for _ in range(n)],
             **{k: [abs(v + rng.normal(0, 0.1)) for _ in range(n)] for k, v in PROCESS.sds.items()},
             "effects": {"B": [0.5] * n}}
    params = OrdinalParams(PROCESS.thresholds, PROCESS.sds, name="with-draws", draws=draws)
    path = tmp_path / "ordinal.json"
    path.write_text(json.dumps(params.to_json()))
    sample = ordinal_draws(params, str(path))
    assert sample.values["threshold_2"] == tuple(th[1] for th in draws["thresholds"])
    assert main(["likert", "power", "--params", str(path), "--workers", "4", "--items", "10", "--effect", "0.8",
                 "--assurance", "--draws", "2", "--sims", "3", "--test", ORDINAL_TEST, "--jobs", "1", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    api = likert_power(OrdinalProcess.from_params(params), 4, 10, 0.8, n_sims=3, jobs=1, assurance=sample, draws=2,
                       test=ORDINAL_TEST)
    assert cli[0]["assurance"] == api.assurance.iloc[0] and cli[0]["draws"] == 2
    assert "type1_error" not in cli[0]  # the power at effect 0 under assurance is no rejection rate
    no_draws = tmp_path / "plain.json"
    no_draws.write_text(json.dumps(OrdinalParams(PROCESS.thresholds, PROCESS.sds).to_json()))
    assert main(["likert", "power", "--params", str(no_draws), "--effect", "0.8", "--assurance", "--sims", "3"]) == 2
    assert "--prior" in capsys.readouterr().err


def test_presets_simulate_their_own_scale() -> None:
    """The presets are valid processes on 1..5 whose base mean rating is inside the scale."""
    for p in ORDINAL_PRESETS.values():
        assert p.scale == (1, 5) and 1 < float(p.mean_rating(0.0)) < 5
        CrowdScenario(CrowdDesign(10, 3, 3), p, get_analysis("ordinal", link=p.link, scale=p.scale), 0.5)
