"""The small-sample tests of ``hepower analyze --family ordinal``: contrasts with the latent working model's
Satterthwaite df (the planner's ``t`` test) and the Bartlett-corrected likelihood-ratio test of all systems equal
(the planner's ``bartlett`` test; docs/ordinal.md, "Analysing ordinal ratings")."""
from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from humaneval_power.cli import main
from humaneval_power.completed_study import analyze
from humaneval_power.completed_study.ordinal import OrdinalAnalysis, bartlett_test
from humaneval_power.fitting.clmm import TERMS, crossed_groups, fit_clmm, simulate_clmm
from humaneval_power.ordinal_process import contrast_satterthwaite_df, latent_satterthwaite_df

from .ordinal_ratings import simulated_ratings


def _balanced(W: int, n_items: int, S: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    w, i, s = (a.ravel() for a in np.meshgrid(np.arange(W), np.arange(n_items), np.arange(S), indexing="ij"))
    return crossed_groups(w, i, s, TERMS), np.column_stack([(s == k).astype(float) for k in range(1, S)])


@pytest.mark.parametrize(("W", "n_items", "S"), list(itertools.product((3, 5), (4, 6), (2, 3, 4))))
def test_contrast_df_is_the_anova_closed_form_on_balanced_crossed_designs(W: int, n_items: int, S: int) -> None:
    """Every worker rates every item under each of S systems: the df of any pair's contrast is the ANOVA
    Satterthwaite df (a + b - c)^2 / (a^2 / ((W-1)(S-1)) + b^2 / ((I-1)(S-1))), a = s2 + I sd_ws^2,
    b = s2 + W sd_is^2, c = s2 (the link's residual variance, known), at random SDs."""
    groups, X = _balanced(W, n_items, S)
    rng = np.random.default_rng(W * 100 + n_items * 10 + S)
    for link, s2 in (("logit", math.pi ** 2 / 3), ("probit", 1.0)):
        sds = rng.uniform(0.05, 1.5, 4)
        sd = dict(zip(groups, sds))
        a, b = s2 + n_items * sd["worker:system"] ** 2, s2 + W * sd["item:system"] ** 2
        closed = (a + b - s2) ** 2 / (a ** 2 / ((W - 1) * (S - 1)) + b ** 2 / ((n_items - 1) * (S - 1)))
        for j, k in itertools.combinations(range(S), 2):  # system k minus system j (0: the baseline)
            L = np.zeros(S - 1)
            L[k - 1] = 1.0
            if j:
                L[j - 1] = -1.0
            assert contrast_satterthwaite_df(groups, X, L, sds, link) == pytest.approx(closed, rel=1e-9)


def test_contrast_df_is_the_planners_df_of_the_recoded_coefficient() -> None:
    """An unbalanced design (random worker assignment, missing ratings): the df of system 2 minus system 1 is
    the planner's latent_satterthwaite_df of system 2's coefficient with system 1 as the baseline (same data),
    and a unit contrast is exactly the planner's df."""
    f = simulated_ratings(seed=5, workers=6, items=8).sample(frac=0.8, random_state=1)
    groups = crossed_groups(f["worker"], f["item"], f["system"], TERMS)
    sds = np.array([0.7, 0.4, 0.5, 0.2])
    X = np.column_stack([(f["system"] == s).to_numpy(float) for s in ("S1", "S2")])
    X1 = np.column_stack([(f["system"] == s).to_numpy(float) for s in ("S0", "S2")])
    assert contrast_satterthwaite_df(groups, X, np.array([-1.0, 1.0]), sds) == pytest.approx(
        latent_satterthwaite_df(groups, X1, 1, sds), rel=1e-9)
    assert contrast_satterthwaite_df(groups, X, np.array([0.0, 1.0]), sds) == latent_satterthwaite_df(groups, X, 1, sds)


@pytest.fixture(scope="module")
def ratings(small_ordinal_ratings: Path) -> Path:
    return small_ordinal_ratings


@pytest.fixture(scope="module")
def both(ratings: Path) -> dict[str, OrdinalAnalysis]:
    out = {df: analyze(ratings, family="ordinal", backend="laplace", df=df, bootstrap=0)
           for df in ("satterthwaite", "asymptotic")}
    assert all(isinstance(r, OrdinalAnalysis) for r in out.values())
    return out  # type: ignore[return-value]


def test_satterthwaite_contrasts_use_the_planners_df_of_the_fitted_sds(both: dict[str, OrdinalAnalysis]) -> None:
    """The default contrasts: the asymptotic estimates and SEs, the df of the planner's latent working model at
    the fitted SDs (the baseline contrasts: latent_satterthwaite_df of each coefficient), t p-values; the
    asymptotic ones keep emmeans' z (df = Inf) and are at least as small."""
    sat, asy = both["satterthwaite"], both["asymptotic"]
    f, names = sat.data.frame, list(sat.data.systems)  # type: ignore[union-attr]
    groups = crossed_groups(f["worker"], f["item"], f["system"], TERMS)
    comp = sat.components.set_index("component")["sd"]
    sds = np.array([comp[t.replace(":", " x ")] for t in groups])
    X = np.column_stack([(f["system"] == s).to_numpy(float) for s in names[1:]])
    c = sat.contrasts.set_index(["system", "versus"])
    for j, s in enumerate(names[1:]):
        assert c.loc[(s, names[0]), "df"] == pytest.approx(latent_satterthwaite_df(groups, X, j, sds), rel=1e-12)
    assert np.allclose(sat.contrasts.estimate, asy.contrasts.estimate) and np.allclose(sat.contrasts.se, asy.contrasts.se)
    assert np.allclose(sat.contrasts.p_value, 2 * stats.t.sf(np.abs(sat.contrasts.t), sat.contrasts.df), rtol=1e-12)
    assert "z" in asy.contrasts and "df" not in asy.contrasts
    assert (asy.contrasts.p_value <= sat.contrasts.p_value).all()
    assert "Satterthwaite df of the latent working model" in sat.methods()


@pytest.fixture(scope="module")
def null_model(ratings: Path) -> dict:
    """The fitted model without systems of the module's ratings, its LR against the model with systems."""
    f = pd.read_csv(ratings)
    groups = crossed_groups(f["worker"], f["item"], f["system"], TERMS)
    X = np.column_stack([(f["system"] == s).to_numpy(float) for s in ("S1", "S2")])
    scale = (int(f.score.min()), int(f.score.max()))
    m0 = fit_clmm(f.score.to_numpy(), None, groups, scale=scale)
    m1 = fit_clmm(f.score.to_numpy(), X, groups, scale=scale)
    return {"groups": groups, "X": X, "scale": scale, "params": np.concatenate([m0.thresholds, np.abs(m0.sds)]),
            "lr": max(0.0, 2 * (m1.loglik - m0.loglik))}


def test_bartlett_test_is_reproducible_and_is_the_lr_over_its_bootstrap_mean(null_model: dict) -> None:
    """Same seed, same test; another seed moves the factor within its Monte-Carlo error (4 SE of the mean of
    the draws' LR over q); the statistic is LR / factor against chi-square(q); factor 1 gives the plain LR p."""
    m, draws = null_model, 12
    run = [bartlett_test(m["lr"], m["X"], m["groups"], m["params"], "logit", m["scale"], draws, seed)
           for seed in (7, 7, 8)]
    assert run[0] == run[1] and run[0]["bartlett_factor"] != run[2]["bartlett_factor"]
    assert run[0]["p_value"] == stats.chi2.sf(m["lr"] / run[0]["bartlett_factor"], 2) and run[0]["df"] == 2
    # the factor's Monte-Carlo SE: chi-square(2) LRs have SD 2 -> the mean over q = 2 of n draws, SD ~ 1/sqrt(n)
    assert abs(run[0]["bartlett_factor"] - run[2]["bartlett_factor"]) <= 4 * math.sqrt(2) * 1.5 / math.sqrt(draws)
    assert stats.chi2.sf(m["lr"] / 1.0, 2) == pytest.approx(stats.chi2.sf(m["lr"], 2))


def test_bootstrap_lr_of_several_systems_equals_direct_null_fits(null_model: dict) -> None:
    """The draws' LR of q = 2 system effects (the model without systems fitted as the null of a one-column
    model) equals the LR of the full fits of both models (fit_clmm), within the fast path's tolerance."""
    from humaneval_power.completed_study import ordinal as mod

    m = null_model
    seed = 3
    Y = simulate_clmm(np.zeros((len(m["X"]), 0)), m["groups"], np.repeat(m["params"][None, :], 2, axis=0),
                      rng=np.random.default_rng(seed), lowest=m["scale"][0])
    direct = [2 * (fit_clmm(y, m["X"], m["groups"], scale=m["scale"]).loglik
                   - fit_clmm(y, None, m["groups"], scale=m["scale"]).loglik) for y in Y.T]
    res = mod.bartlett_test(1.0, m["X"], m["groups"], m["params"], "logit", m["scale"], 2, seed)
    assert res["bartlett_factor"] * 2 == pytest.approx(np.mean(direct), abs=2e-3)


@pytest.mark.slow
def test_cli_omnibus_has_the_bartlett_test_first(ratings: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI's default: the Bartlett-corrected LR (200 draws, --seed; here 10: the rows' order and the statistic's
    definition do not depend on their number) first, the plain LR and Wald beside it; --bootstrap applies to
    --family ordinal only (one line, exit 2)."""
    res = analyze(ratings, family="ordinal", backend="laplace", bootstrap=10, seed=2)
    assert isinstance(res, OrdinalAnalysis)
    assert list(res.omnibus.test) == ["Bartlett-corrected likelihood ratio", "likelihood ratio", "Wald"]
    b, lr = res.omnibus.iloc[0], res.omnibus.iloc[1]
    assert b.chi2 == pytest.approx(lr.chi2 / b.bartlett_factor) and 0 < b.draws <= 10
    assert "Bartlett factor" in str(res) and "Bartlett-corrected" in res.methods()
    assert main(["analyze", str(ratings), "--family", "gaussian", "--bootstrap", "10", "--out",
                 str(tmp_path / "c.csv")]) == 2
    assert "--bootstrap applies to --family ordinal" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
