"""Assurance (power averaged over parameter draws) against independent references.

* The sign test with a Beta(a, b) prior on p_win: the probability of a significant win is the
  beta-binomial sum  sum_k BetaBin(k; n, a, b) 1[the test rejects with k wins, k > n/2]
  (rejection decided by scipy's binomtest): exactly per draw, and the Monte-Carlo draws within
  their standard error.
* A brute-force nested simulation for the Likert fast tier: draw the SDs, simulate full data
  sets, fit them (balanced REML) and test; against the tier's assurance within the two SEs.
* Bad input: one line, exit 2, nothing written or overwritten.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from humaneval_power.assurance import ParamDraws, Prior, apply_draws, success_probability
from humaneval_power.cli import main
from humaneval_power.errors import InputError
from humaneval_power.params import get_preset

Z = 3.5  # Monte-Carlo tolerances: Z standard errors


def _win_rejections(n: int, alpha: float = 0.05) -> np.ndarray:
    """1 where k wins out of n (no ties) give a significant sign test in favour of B (scipy's binomtest)."""
    return np.array([stats.binomtest(k, n, 0.5).pvalue <= alpha and k > n / 2 for k in range(n + 1)], float)


@pytest.mark.parametrize("n", [25, 60])
def test_success_per_draw_is_the_binomial_sum(n: int) -> None:
    """Every draw's probability of a significant win — same sign, opposite sign (through Type-S) and at
    p = 1/2 (half the rejection rate) — equals the binomial sum over the rejection region."""
    from humaneval_power.scenarios.headtohead import IndependentJudgments

    reject = _win_rejections(n)
    for p in (0.2, 0.45, 0.5, 0.58, 0.7, 0.9):
        exact = float(stats.binom.pmf(np.arange(n + 1), n, p) @ reject)
        mine = success_probability(IndependentJudgments(n, p).exact(), planned_sign=1.0)
        assert mine == pytest.approx(exact, rel=1e-9, abs=1e-13), (n, p)


@pytest.mark.parametrize("n,a,b", [(30, 13, 7), (80, 6, 4)])
def test_sign_test_assurance_is_the_beta_binomial_sum(n: int, a: float, b: float) -> None:
    """Closed form (beta-binomial) = the tool's assurance over Beta draws, within its SE; and, for the
    same draws, exactly the mean of the per-draw binomial sums."""
    from humaneval_power.scenarios.headtohead import h2h_power

    reject = _win_rejections(n)
    closed = float(stats.betabinom.pmf(np.arange(n + 1), n, a, b) @ reject)
    draws = Prior((f"p_win=beta:{a},{b}",)).sample(1500, seed=11)
    row = h2h_power(n, a / (a + b), assurance=draws, draws=None).iloc[0]
    assert row.draws == 1500 and row.power == row.assurance
    assert abs(row.assurance - closed) <= Z * row.assurance_se, (row.assurance, closed, row.assurance_se)
    per_draw = stats.binom.pmf(np.arange(n + 1)[None, :], n, np.array(draws.values["p_win"])[:, None]) @ reject
    assert row.assurance == pytest.approx(per_draw.mean(), rel=1e-9)
    assert row.assurance_se == pytest.approx(per_draw.std(ddof=1) / np.sqrt(len(per_draw)), rel=1e-6)
    assert row.p_power_reaches_target == pytest.approx((per_draw >= 0.8).mean())
    assert row.conditional_power == pytest.approx(float(stats.binom.pmf(np.arange(n + 1), n, a / (a + b)) @ reject))


def test_sign_test_size_with_assurance() -> None:
    """The smallest n whose assurance reaches the target: reached there, not one judgment earlier (the
    same draws), and the plain answer at the point estimate beside it."""
    from humaneval_power.scenarios.headtohead import h2h_power, h2h_sample_size

    draws = Prior(("p_win=beta:26,14",)).sample(60, seed=2)
    r = h2h_sample_size(0.65, assurance=draws, target_assurance=0.7)
    reject = [(_win_rejections(int(k))) for k in (r.value - 1, r.value)]
    p = np.array(draws.values["p_win"])[:, None]
    before, at = (float((stats.binom.pmf(np.arange(len(rj)), len(rj) - 1, p) @ rj).mean()) for rj in reject)
    assert before < 0.7 <= at and r.at.power == pytest.approx(at, rel=1e-9)
    assert r.detail["conditional_value"] == h2h_sample_size(0.65).value == 90
    table = h2h_power([int(r.value)], 0.65, assurance=draws, draws=None)
    assert table.assurance.iloc[0] == pytest.approx(at, rel=1e-9)


def test_likert_assurance_agrees_with_nested_simulation() -> None:
    """Fast tier (sufficient statistics, 200 draws x 2,000 studies) against brute force: 1,500 draws
    of the SDs, each with 4 full data sets simulated, fitted by REML and tested."""
    from humaneval_power.fitting.balanced import fit_reml, stats_from_ratings
    from humaneval_power.processes import simulate_ratings
    from humaneval_power.scenarios.likert import likert_power
    from humaneval_power.significance.coef_test import coefficient_test

    point = get_preset("card2020-high")
    prior = Prior(("sd_worker_slope=lognormal:0.22,0.6", "sd_item_slope=lognormal:0.28,0.4"))
    workers, items, effect = 4, 20, 0.3
    row = likert_power(point, workers, items, effect, assurance=prior.sample(200, seed=8), n_sims=2000, seed=3,
                       jobs=1).iloc[0]
    rng = np.random.default_rng(5)
    success = []
    for params in apply_draws(point, prior.sample(1500, seed=9)):
        fit = fit_reml(stats_from_ratings(simulate_ratings(params, workers, items, effect, 4, rng)))
        _, sig = coefficient_test(fit.estimate, fit.se, fit.df, "satterthwaite", 0.05)
        success.append(np.mean(sig & (fit.estimate > 0)))
    brute, brute_se = np.mean(success), np.std(success, ddof=1) / np.sqrt(len(success))
    assert abs(row.assurance - brute) <= Z * np.hypot(row.assurance_se, brute_se), (row.assurance, brute)
    assert row.conditional_power == pytest.approx(
        likert_power(point, workers, items, effect, n_sims=2000, seed=3, jobs=1).power.iloc[0])
    assert 0 <= row.power_q05 <= row.power_q50 <= row.power_q95 <= 1


def test_a_point_mass_prior_gives_the_conditional_power() -> None:
    """Draws all at the point estimate (exact tier): assurance = conditional power, P(power >= target) 0 or 1."""
    from humaneval_power.scenarios.likert import likert_power, likert_sample_size

    point = get_preset("card2020-low")
    same = ParamDraws({"sd_worker_slope": (point.sd_worker_slope,) * 5}, "point mass")
    row = likert_power(point, 10, 135, 0.1, method="analytic", assurance=same, target_power=0.8).iloc[0]
    assert row.assurance == pytest.approx(row.conditional_power, rel=1e-12) and row.assurance_se == 0
    assert row.p_power_reaches_target == 1.0 and row.conditional_power >= 0.8
    r = likert_sample_size(point, 0.1, workers=10, method="analytic", assurance=same)
    assert r.value == r.detail["conditional_value"] == 135


def test_draws_are_reproducible_and_shared_by_every_design() -> None:
    """One seed, the same numbers; the same draws at every design of a grid."""
    from humaneval_power.scenarios.likert import likert_power

    prior = Prior(("sd_item_slope=gamma:4,0.07",))
    assert prior.sample(20, 1) == prior.sample(20, 1) and prior.sample(20, 1) != prior.sample(20, 2)
    a = likert_power("card2020-high", 3, [30, 60], 0.3, assurance=prior.sample(20, 1), n_sims=300, seed=4, jobs=1)
    b = likert_power("card2020-high", 3, [30, 60], 0.3, assurance=prior.sample(20, 1), n_sims=300, seed=4, jobs=1)
    pd.testing.assert_frame_equal(a, b)
    assert a.draw_source.nunique() == 1 and (a.draws == 20).all()


def test_assurance_does_not_depend_on_jobs() -> None:
    """The draws' cells run in parallel inside an assurance cell: jobs=1 and jobs=2 give the same table."""
    from humaneval_power.scenarios.likert import likert_power

    draws = Prior(("sd_worker_slope=lognormal:0.2,0.5",)).sample(6, 3)
    one, two = (likert_power("card2020-high", 3, 40, 0.3, assurance=draws, n_sims=30_000, seed=2, jobs=j)
                for j in (1, 2))
    pd.testing.assert_frame_equal(one, two)


def test_bootstrap_draws_start_from_the_fit(tmp_path: Path) -> None:
    """`fit --draws N` (statsmodels): N bootstrap draws of every SD in the file, identical to the
    backend's own parametric bootstrap from its optimum with the same seed."""
    from humaneval_power.fitting.model import fit_pilot
    from humaneval_power.fitting.ratings import read_ratings
    from humaneval_power.fitting.statsmodels_lmm import _model, bootstrap_sd_draws
    from humaneval_power.processes import simulate_ratings

    y = simulate_ratings(get_preset("card2020-high"), 5, 12, 0.2, 1, np.random.default_rng(3))[0]
    rows = [(f"w{w}", f"i{i}", "AB"[s], y[w, i, s]) for w in range(5) for i in range(12) for s in range(2)]
    data = read_ratings(pd.DataFrame(rows, columns=["worker", "item", "system", "score"]), baseline="A")
    fit = fit_pilot(data, "statsmodels", draws=15, seed=6)
    doc = fit.to_params_doc()
    assert "posterior_draws" not in doc and set(doc["bootstrap_draws"]) >= {"sd_worker_slope", "sd_residual"}
    assert all(len(v) == 15 for v in doc["bootstrap_draws"].values())
    spec = fit.design.spec()
    model = _model(fit.design.model_frame(data), spec.columns, list(spec.components), True)
    ref, _ = bootstrap_sd_draws(model, model.fit(), 15, seed=6)
    keys = [f"{g}|{t}" for g, t in spec.components]
    mine = np.column_stack([fit.raw.draws[k] for k in keys] + [fit.raw.draws["sigma"]])
    np.testing.assert_allclose(mine, ref, atol=2e-6)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    from humaneval_power.assurance import load_draws

    loaded = load_draws(str(path), ["sd_worker_slope", "sd_item_slope"])
    assert len(loaded) == 15 and loaded.source.startswith("parametric bootstrap")


@pytest.mark.r
def test_bootstrap_draws_of_an_lme4_fit(lme4_backend: object) -> None:
    """`fit --backend lme4 --draws N`: the refits start from lme4's estimates, whose profiled REML sigma the
    no-R model reproduces; the draws then match those started from the statsmodels optimum (the same
    optimum to 1e-3) within the optimisers' tolerance."""
    from humaneval_power.fitting.model import fit_pilot
    from humaneval_power.fitting.ratings import read_ratings
    from humaneval_power.processes import simulate_ratings

    y = simulate_ratings(get_preset("card2020-high"), 6, 15, 0.2, 1, np.random.default_rng(4))[0]
    rows = [(f"w{w}", f"i{i}", "AB"[s], y[w, i, s]) for w in range(6) for i in range(15) for s in range(2)]
    data = read_ratings(pd.DataFrame(rows, columns=["worker", "item", "system", "score"]), baseline="A")
    by_r, no_r = (fit_pilot(data, b, draws=12, seed=2) for b in ("lme4", "statsmodels"))
    assert by_r.to_params_doc()["provenance"]["backend"] == "lme4"
    for k, v in no_r.raw.draws.items():
        np.testing.assert_allclose(by_r.raw.draws[k], v, atol=2e-3, err_msg=k)


def test_assurance_plot_shows_assurance_and_conditional_power() -> None:
    from humaneval_power.plots import plot_likert_power
    from humaneval_power.scenarios.likert import likert_power

    table = likert_power("card2020-high", 3, [30, 60], [0.2, 0.3], method="analytic",
                         assurance=Prior(("sd_worker_slope=lognormal:0.22,0.5",)).sample(10, 1))
    ax = plot_likert_power(table).axes[0]
    assert ax.get_ylabel() == "assurance"
    dotted = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert len(dotted) == 2 and [list(line.get_ydata()) for line in dotted] == [
        list(table[table.effect == e].sort_values("items").conditional_power) for e in (0.2, 0.3)]


def test_prior_specs_are_checked() -> None:
    for bad in ("p_win", "p_win=beta:1", "p_win=cauchy:0,1", "p_win=beta:0,2", "sd=normal:0,-1", "x=lognormal:a,b"):
        with pytest.raises(InputError):
            Prior((bad,))
    with pytest.raises(InputError, match="more than once"):
        Prior(("p_win=beta:2,2", "p_win=beta:3,3"))
    with pytest.raises(InputError, match="not a parameter"):
        apply_draws(get_preset("card2020-high"), Prior(("effect=normal:0.3,0.1",)).sample(3))
    with pytest.raises(InputError, match="must be >= 0"):
        apply_draws(get_preset("card2020-high"), Prior(("sd_item_slope=normal:0,1",)).sample(50))


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("assurance")
    doc = get_preset("card2020-high").to_json()
    (d / "nodraws.json").write_text(json.dumps(doc))
    (d / "negative.json").write_text(json.dumps({**doc, "bootstrap_draws": {"sd_worker_slope": [0.2, -0.1]}}))
    (d / "ragged.json").write_text(json.dumps({**doc, "bootstrap_draws": {"sd_worker_slope": [0.2, 0.1],
                                                                          "sd_item_slope": [0.3]}}))
    (d / "text.json").write_text(json.dumps({**doc, "bootstrap_draws": {"sd_worker_slope": ["a", "b"]}}))
    pd.DataFrame({"worker": ["u", "v"] * 4, "item": [1, 1, 2, 2] * 2, "system_a": "A", "system_b": "B",
                  "outcome": list("abab" * 2)}).to_csv(d / "pairs.csv", index=False)
    return d


LIKERT = "likert power --workers 3 --items 20 --effect 0.2 --sims 50 --out {o}/out.csv"
BAD = {
    "file without draws": f"{LIKERT} --params {{d}}/nodraws.json --assurance",
    "negative SD draws": f"{LIKERT} --params {{d}}/negative.json --assurance",
    "ragged draws": f"{LIKERT} --params {{d}}/ragged.json --assurance",
    "draws that are not numbers": f"{LIKERT} --params {{d}}/text.json --assurance",
    "no draws at all": f"{LIKERT} --assurance",
    "--prior without --assurance": f"{LIKERT} --prior sd_item_slope=gamma:4,0.07",
    "--draws without --assurance": f"{LIKERT} --draws 10",
    "prior on the effect": f"{LIKERT} --assurance --prior effect=normal:0.2,0.1",
    "malformed prior": f"{LIKERT} --assurance --prior sd_item_slope=gamma:4",
    "checkpoint with assurance": f"{LIKERT} --assurance --prior sd_item_slope=gamma:4,0.07 --checkpoint {{o}}/ck",
    "size: --target-assurance alone": "likert size --workers 3 --effect 0.2 --target-assurance 0.7",
    "size: target assurance 1": "likert size --workers 3 --effect 0.2 --assurance --prior sd_item_slope=gamma:4,0.07 "
                                "--target-assurance 1",
    "h2h prior on the SDs of independent judgments": "h2h power --n 30 --p-win 0.6 --assurance --prior sd_item=gamma:2,1",
    "h2h prior beyond 1 - p_tie": "h2h size --p-win 0.5 --p-tie 0.3 --assurance --prior p_win=beta:8,2",
    "h2h GLMM file without draws": "h2h power --params {d}/nodraws.json --workers 5 --items 20 --effect 0.6 --assurance",
    "fit: bootstrap draws of a GLMM": "fit {d}/pairs.csv --family binomial --draws 10 -o {o}/p.json",
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input(case: str, files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "out.csv").write_text("keep me\n")
    before = {p.name: p.read_bytes() for p in files.iterdir()}
    capsys.readouterr()
    code = main(BAD[case].format(d=files, o=tmp_path).split())
    err = capsys.readouterr().err
    assert code == 2, (case, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hepower") and "Traceback" not in err, err
    assert (tmp_path / "out.csv").read_text() == "keep me\n" and sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]
    assert {p.name: p.read_bytes() for p in files.iterdir()} == before
