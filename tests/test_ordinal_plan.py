"""Planning ordinal ratings: the ``ordinal`` CLMM analysis in the Likert planner (issue 26, "Plan").

The fast tier (batched no-R Laplace CLMM) against ``ordinal::clmm`` refits of the same simulated studies,
the Type-I error of the default test (Wald t, latent Satterthwaite df) under the null, the CLI against the API on an ordinal
parameter file, and the refusals of mismatched parameters and models.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from humaneval_power.analyses import OrdinalCLMM, get_analysis
from humaneval_power.cli import main
from humaneval_power.designs import CrowdDesign
from humaneval_power.engine import run_cells
from humaneval_power.errors import InputError
from humaneval_power.ordinal_process import DEFAULT_TEST, OrdinalProcess, ordinal_decision, study_dfs
from humaneval_power.params import OrdinalParams
from humaneval_power.planning import SolveResult
from humaneval_power.processes import InvariantProcess
from humaneval_power.scenarios.crowd import CrowdScenario, cell_factory
from humaneval_power.scenarios.likert import likert_mde, likert_power

from .conftest import mc_tolerance, share_calls

#: the settings of examples/ordinal_type1.py (thresholds on 1..5, latent SDs)
PROCESS = OrdinalProcess(thresholds=(-2.0, -0.7, 0.5, 1.8), sd_worker=0.8, sd_worker_system=0.3, sd_item=1.0,
                         sd_item_system=0.5)


@pytest.mark.r
@pytest.mark.slow
def test_fast_tier_power_equals_clmm_refits_of_the_same_studies(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clmm tier's cell through the engine, its ``ordinal::clmm`` refits recorded, paired with the fast tier's
    fit of each same data set (tests/tier_pairing.py's form): every study's latent shift, SE, Wald z, latent
    Satterthwaite df and t-test decision agree to tolerances set by the two optimisers' stopping rules (clmm stops
    at gradients up to ~5e-4, the fast tier at BFGS gtol 1e-5: shifts within 1e-5, SEs and df within 1e-4
    relative were measured); the tier's fits as the engine decides them carry each refit's shift, SE and df exactly,
    and the engine's power is exactly the share of studies the refits reject. So the fast tier's power is the clmm
    tier's on any number of studies (before: the two powers within Monte-Carlo error at 40 studies, +-0.2, and
    shifts within 1e-2); the fast tier's power itself is checked against alpha at
    many studies (test_type_one_error_of_the_default_test_is_at_most_alpha) and its fits against clmm on real and
    simulated ratings (tests/test_clmm.py, tests/test_ordinal_fit.py). The Wald t test (one fit per study and
    tier): the tiers' agreement is about the fits, not the test."""
    pytest.importorskip("rpy2")
    from humaneval_power.fitting import clmm_r
    from humaneval_power.fitting.clmm import fit_clmm_many

    recorded: list[tuple[np.ndarray, np.ndarray, dict[str, np.ndarray], dict[str, Any], Any]] = []
    refit, tier_fit = clmm_r.fit_clmm_r, OrdinalCLMM.fit
    tier: list[Any] = []  # the tier's family fits, as the engine decides them

    def recording(y: np.ndarray, X: np.ndarray, groups: dict[str, np.ndarray], **kw: Any) -> Any:
        recorded.append((np.array(y), X, groups, kw, refit(y, X, groups, **kw)))
        return recorded[-1][-1]

    def fitting(self: OrdinalCLMM, *args: Any) -> Any:
        tier.append(tier_fit(self, *args))
        return tier[-1]

    monkeypatch.setattr(clmm_r, "fit_clmm_r", recording)
    monkeypatch.setattr(OrdinalCLMM, "fit", fitting)
    n, analysis = 6, OrdinalCLMM.of(PROCESS, tier="clmm", test="t")
    design = CrowdDesign(items=20, workers=4, ratings_per_item=4)
    slow = run_cells([CrowdScenario(design, PROCESS, analysis, 1.0)], n, seed=3, jobs=1)[0]  # in this process: its refits are recorded
    assert len(recorded) == n and slow.n_failed == 0
    got = {k: np.concatenate([getattr(f, k)[:, 0] for f in tier]) for k in ("estimate", "se", "df", "p")}
    rejects = []
    for j, (y, X, groups, kw, ref) in enumerate(recorded):
        fast = fit_clmm_many(y[:, None], X, groups, coef=0, scale=kw["scale"], link=kw["link"])
        assert ref.converged and fast.converged[0]
        df_ref, df_fast = (study_dfs(s, groups, X, 0, kw["link"])[0] for s in (np.abs(ref.sds)[None], fast.sds))
        # the tier decides on its refit: its estimate, SE and df are the refit's (the engine's decision below)
        assert (got["estimate"][j], got["se"][j], got["df"][j]) == (ref.beta[0], ref.se_beta[0], df_ref)
        ref_z = ref.beta[0] / ref.se_beta[0]
        assert fast.estimate[0] == pytest.approx(ref.beta[0], abs=5e-5)
        assert fast.se[0] == pytest.approx(ref.se_beta[0], rel=3e-4)
        assert fast.z[0] == pytest.approx(ref_z, abs=1e-3)
        assert df_fast == pytest.approx(df_ref, rel=3e-4)
        np.testing.assert_allclose(fast.sds[0], np.abs(ref.sds), atol=1e-4)
        p_ref = 2 * stats.t.sf(abs(ref_z), df_ref)
        rejects.append(p_ref <= analysis.alpha)
        assert (got["p"][j] <= analysis.alpha) == rejects[-1]
        assert ordinal_decision(fast, "t", analysis.alpha, [df_fast])[0] == rejects[-1]
    assert 0 < sum(rejects) < n  # both decisions occur: the pairing is not vacuous
    assert slow.power == pytest.approx(np.mean(rejects), abs=1e-12)
    # the fast tier's own cell through the engine (its chunked, warm-started fits) on the same studies
    tier.clear()
    fast_cell = run_cells([CrowdScenario(design, PROCESS, OrdinalCLMM.of(PROCESS, tier="fast", test="t"), 1.0)],
                          n, seed=3, jobs=1)[0]
    engine = {k: np.concatenate([getattr(f, k)[:, 0] for f in tier]) for k in ("estimate", "p")}
    np.testing.assert_allclose(engine["estimate"], [r[-1].beta[0] for r in recorded], atol=5e-5)
    assert list(engine["p"] <= analysis.alpha) == rejects
    assert fast_cell.power == pytest.approx(np.mean(rejects), abs=1e-12)


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


def test_cli_power_equals_the_api(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """`hepower likert power --params ordinal.json --model ordinal` gives the API's records. The fast tier's fits
    (deterministic) are made once and answered again for the same arguments (``conftest.share_calls``): a CLI that
    simulated other studies or fitted another model would make other calls, fitted afresh. One process (``--jobs 1``:
results do not depend on jobs, tests/test_conformance.py), where the fits can be shared."""
    from humaneval_power.fitting import clmm

    share_calls(monkeypatch, clmm, "fit_clmm_many")
    params = OrdinalParams(PROCESS.thresholds, PROCESS.sds, name="test-ordinal")
    path = tmp_path / "ordinal.json"
    path.write_text(json.dumps(params.to_json()))
    assert main(["likert", "power", "--params", str(path), "--model", "ordinal", "--workers", "4", "--items", "12",
                 "--effect", "0.8", "--sims", "20", "--test", "z", "--jobs", "1", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    api = likert_power(OrdinalProcess.from_params(params), 4, 12, 0.8, test="z", n_sims=20, model="ordinal", jobs=1)
    assert len(cli) == 1 and cli[0]["model"] == "ordinal" and cli[0]["test"] == "z"
    for key in ("power", "n_failed", "mean_estimate", "items", "workers"):
        assert cli[0][key] == pytest.approx(api.iloc[0][key], nan_ok=True)


def test_mde_notes_the_mean_rating_difference(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ordinal MDE's note: the latent shift found and its mean-rating difference. The note, not the search:
    the search answers a fixed effect here, after checking it was handed the ordinal analysis's cells (the
    ordinal MDE search itself runs in tests/test_ordinal_both_solve.py, alone and beside the linear one; before,
    this test ran a 10-study search of ~90 cells, 13 CPU s, for the note)."""
    import humaneval_power.scenarios.likert as likert

    def searched(make: Any, solve_for: str, *args: Any, **kw: Any) -> SolveResult:
        cell = make(0.5)
        assert solve_for == "effect" and isinstance(cell.analysis, OrdinalCLMM) and cell.analysis.test == "z"
        assert (cell.design.items, cell.design.workers) == (8, 3)
        return SolveResult("effect", 0.8, 1.2345, 1.1, 1.4, True, "", None, 0.9)

    monkeypatch.setattr(likert, "solve", searched)
    r = likert_mde(PROCESS, 3, 8, n_sims=10, test="z")
    assert r.value == 1.2345 and "latent shift" in r.detail["note"]
    assert f"{PROCESS.mean_difference(r.value):.4g}" in r.detail["note"]


def test_marginal_probabilities_use_the_gauss_hermite_rule_computed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """P(Y <= k) averaged over the random effects (logit link): the 80-point Gauss-Hermite sum, bit for bit as
    computed afresh, with the rule (an 80 x 80 eigenproblem) computed once per process, not per call."""
    import humaneval_power.ordinal_process as op

    locations = np.array([-1.3, 0.0, 0.4, 2.5])
    x, w = np.polynomial.hermite_e.hermegauss(80)
    w = w / w.sum()
    th = np.asarray(PROCESS.thresholds)
    fresh = np.tensordot(1 / (1 + np.exp(-(th[:, None] - locations[:, None, None] - PROCESS.tau * x))), w,
                         axes=([-1], [0]))
    calls = []
    rule = np.polynomial.hermite_e.hermegauss
    monkeypatch.setattr(np.polynomial.hermite_e, "hermegauss", lambda n: calls.append(n) or rule(n))
    op._gauss_hermite.cache_clear()
    first = PROCESS.cumulative(locations)
    np.testing.assert_allclose(first, fresh, rtol=1e-14, atol=0)  # expit vs the formula: rounding only
    assert np.array_equal(PROCESS.cumulative(locations), first) and PROCESS.mean_difference(0.7) > 0
    assert calls == [80]
