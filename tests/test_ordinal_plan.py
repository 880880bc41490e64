"""Planning ordinal ratings: the ``ordinal`` CLMM analysis in the Likert planner (issue 26, "Plan").

The fast tier (batched no-R Laplace CLMM) against ``ordinal::clmm`` refits of the same simulated studies,
the Type-I error of the default test (Wald t, latent Satterthwaite df) under the null, the CLI against the API on an ordinal
parameter file, and the refusals of mismatched parameters and models.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from humaneval_power.analyses import OrdinalCLMM, get_analysis
from humaneval_power.cli import main
from humaneval_power.designs import CrowdDesign
from humaneval_power.engine import run_cells
from humaneval_power.errors import InputError
from humaneval_power.ordinal_process import DEFAULT_TEST, OrdinalProcess
from humaneval_power.params import OrdinalParams
from humaneval_power.processes import InvariantProcess
from humaneval_power.scenarios.crowd import CrowdScenario, cell_factory
from humaneval_power.scenarios.likert import likert_mde, likert_power

from .conftest import mc_tolerance

#: the settings of examples/ordinal_type1.py (thresholds on 1..5, latent SDs)
PROCESS = OrdinalProcess(thresholds=(-2.0, -0.7, 0.5, 1.8), sd_worker=0.8, sd_worker_system=0.3, sd_item=1.0,
                         sd_item_system=0.5)


@pytest.mark.r
@pytest.mark.slow
def test_fast_tier_power_equals_clmm_refits_of_the_same_studies() -> None:
    """Same simulated studies (the stream ignores the analysis), fitted by the fast tier and by clmm:
    powers within Monte-Carlo error, decisions agreeing on almost every study. The Wald t test (one fit per
    study and tier): the tiers' agreement is about the fits, not the test; with the Bartlett test each study
    also pays a clmm null fit and the chunk 200 bootstrap draws, four times this test's time."""
    pytest.importorskip("rpy2")
    design, n = CrowdDesign(items=20, workers=4, ratings_per_item=4), 40
    cells = [CrowdScenario(design, PROCESS, OrdinalCLMM.of(PROCESS, tier=tier, test="t"), 1.0)
             for tier in ("fast", "clmm")]
    fast, clmm = (c.simulate(n, np.random.default_rng(3)) for c in cells)
    ok = ~(fast.failed | clmm.failed)
    assert ok.sum() >= n - 2
    power_fast, power_clmm = fast.significant[ok].mean(), clmm.significant[ok].mean()
    assert abs(power_fast - power_clmm) <= mc_tolerance(power_clmm, int(ok.sum()))
    assert np.mean(fast.significant[ok] == clmm.significant[ok]) >= 0.95
    assert np.max(np.abs(fast.estimate[ok] - clmm.estimate[ok])) < 1e-2


@pytest.mark.slow
def test_type_one_error_of_the_default_test_is_at_most_alpha() -> None:
    """Null studies on a crossed design with few workers, through the planner: the default test (Wald t with the
    latent Satterthwaite df) rejects at most at alpha within MC error (it is conservative with 5 workers:
    docs/ordinal.md, 0.031 of 1,000 studies with 40 items), where clmm's Wald z rejects about twice alpha."""
    n = 300
    r = run_cells([CrowdScenario(CrowdDesign(items=20, workers=5, ratings_per_item=5), PROCESS,
                                 OrdinalCLMM.of(PROCESS), 0.0)], n, seed=11, jobs=1)[0]
    assert r.cell["test"] == DEFAULT_TEST == "t" and r.n_failed <= 3
    assert r.power <= 0.05 + mc_tolerance(0.05, n)


def test_mismatched_parameters_and_models_are_refused() -> None:
    with pytest.raises(InputError, match="ordinal ratings are analysed by"):
        cell_factory(PROCESS, model="slopes")
    with pytest.raises(InputError, match="Gaussian"):
        cell_factory("card2020-high", model="ordinal")
    with pytest.raises(InputError, match="ordinal parameters"):
        CrowdScenario(CrowdDesign(8, 4, 4), InvariantProcess(0.3, 0.1, 0.3, 0.1, 0.8), OrdinalCLMM(), 0.1)
    with pytest.raises(InputError, match="compare"):
        cell_factory(PROCESS, compare="pairs", systems=3)
    with pytest.raises(InputError, match="not slopes"):
        cell_factory(PROCESS, model=get_analysis("slopes"))


def test_default_model_and_link_follow_the_process() -> None:
    probit = OrdinalProcess((-1.0, 0.0, 1.0), link="probit", lowest=0, sd_item=0.5)
    cell = cell_factory(probit)(10, 4, effect=0.3)
    assert isinstance(cell.analysis, OrdinalCLMM)
    assert (cell.analysis.link, cell.analysis.scale, cell.analysis.test) == ("probit", (0, 3), DEFAULT_TEST)


def test_cli_power_equals_the_api(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`hepower likert power --params ordinal.json --model ordinal` gives the API's records."""
    params = OrdinalParams(PROCESS.thresholds, PROCESS.sds, name="test-ordinal")
    path = tmp_path / "ordinal.json"
    path.write_text(json.dumps(params.to_json()))
    assert main(["likert", "power", "--params", str(path), "--model", "ordinal", "--workers", "4", "--items", "12",
                 "--effect", "0.8", "--sims", "20", "--test", "z", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    api = likert_power(OrdinalProcess.from_params(params), 4, 12, 0.8, test="z", n_sims=20, model="ordinal")
    assert len(cli) == 1 and cli[0]["model"] == "ordinal" and cli[0]["test"] == "z"
    for key in ("power", "n_failed", "mean_estimate", "items", "workers"):
        assert cli[0][key] == pytest.approx(api.iloc[0][key], nan_ok=True)


@pytest.mark.slow
def test_mde_notes_the_mean_rating_difference() -> None:
    r = likert_mde(PROCESS, 3, 8, n_sims=10, test="z")  # the note, not the value: the smallest search
    assert r.value is not None and "latent shift" in r.detail["note"]
    assert f"{PROCESS.mean_difference(r.value):.4g}" in r.detail["note"]
