"""`hepower analyze` beyond the invariant model: --random maximal|slopes, --df kenward-roger, --by, --backend bambi.

References are lmerTest + emmeans (+ pbkrtest) run in R on the same data, coded as the lme4 backend codes it.
Tolerances are the issue's: estimates and SEs 1e-5, df 1e-3 (relative), p-values 1e-4, F and its ddf 1e-4.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from humaneval_power.cli import main
from humaneval_power.completed_study import analyze

from .test_analyze import _check_f_and_means, _r_reference, _shared, any_result_frame

# lmerTest + emmeans (+ pbkrtest) for any formula of the fixed part `score ~ system`; the contrast columns c1, ...
# (indicators of the later systems) exist for slope models. ddf: "Satterthwaite" or "Kenward-Roger".
R_REFERENCE = r"""
function(worker, item, system, score, levels, formula, ddf) {
  suppressPackageStartupMessages({library(lmerTest); library(emmeans)})
  d <- data.frame(worker = factor(worker), item = factor(item), score = score,
                  system = factor(levels[system], levels = levels))
  for (k in seq_along(levels)[-1]) d[[paste0("c", k - 1)]] <- as.numeric(system == k)
  if (length(levels) == 2) d$x <- ifelse(system == 2, 0.5, -0.5)
  m <- lmerTest::lmer(as.formula(formula), data = d, REML = TRUE,
                      control = lmerControl(calc.derivs = FALSE))  # no convergence checks: same fit
  a <- anova(m, ddf = ddf)
  emm_options(lmer.df = tolower(ddf), lmerTest.limit = Inf, pbkrtest.limit = Inf)
  e <- emmeans(m, "system")
  out <- list(F = a[["F value"]], num_df = a$NumDF, den_df = a$DenDF, p_F = a[["Pr(>F)"]],
              singular = as.numeric(isSingular(m)), emm = as.data.frame(summary(e)))
  for (adj in c("none", "holm")) {
    out[[paste0("pairs_", adj)]] <- as.data.frame(summary(pairs(e, reverse = TRUE, adjust = adj),
                                                          infer = c(TRUE, TRUE)))
  }
  out$baseline_none <- as.data.frame(summary(contrast(e, "trt.vs.ctrl", adjust = "none"), infer = c(TRUE, TRUE)))
  out
}
"""

INVARIANT = "score ~ system + (1 | worker) + (1 | worker:system) + (1 | item) + (1 | item:system)"


def _slopes_formula(k: int, sep: str) -> str:
    cols = ["x"] if k == 2 else [f"c{j}" for j in range(1, k)]
    return "score ~ system" + "".join(f" + (1 + {' + '.join(cols)} {sep} {g})" for g in ("worker", "item"))


def _r(lme4_backend, frame: pd.DataFrame, systems: list[str], formula: str, ddf: str = "Satterthwaite") -> dict:
    return _r_reference(lme4_backend, any_result_frame(frame), systems, R_REFERENCE, formula, ddf)


def _agree(result, ref: dict, est: float = 1e-5, df: float = 1e-3, p: float = 1e-4, f_rel: float = 1e-4) -> None:
    """Omnibus F, EMMs and contrasts of ``result`` (holm, pairs, or none, baseline) against the R reference."""
    _check_f_and_means(result, ref, rel_df=f_rel, abs_est=est, abs_p=p)  # F, ddf, p; EMMs, their SEs and df
    c = result.contrasts
    r = ref[f"{result.family}_{result.adjust}"].set_index("contrast").loc[[f"{s} - {v}" for s, v in
                                                                          zip(c.system, c.versus)]]
    np.testing.assert_allclose(c.estimate, r.estimate, atol=est)
    np.testing.assert_allclose(c.se, r.SE, atol=est)
    np.testing.assert_allclose(c.df, r.df, rtol=df)
    np.testing.assert_allclose(c.p_adjusted, r["p.value"], atol=p)
    q = float(((c.ci_high - c.estimate) / c.se).max())
    np.testing.assert_allclose(c.ci_low, r["lower.CL"], atol=est * (1 + q) + q * float(c.se.max()) * df)
    np.testing.assert_allclose(c.ci_high, r["upper.CL"], atol=est * (1 + q) + q * float(c.se.max()) * df)


@pytest.fixture(scope="module")
def expert3(data_dir):
    """Expert relevance ratings of A, B, C (900 ratings, 3 experts x 100 dialogues)."""
    return _shared(data_dir, "dialsummeval_expert", "relevance", ["A", "B", "C"])


@pytest.mark.r
def test_maximal_ladder_and_slopes_on_expert_data(expert3, lme4_backend, shared_analysis_fits):
    """maximal steps down as R's fits say (each singular), to the invariant model; slopes = lmerTest + emmeans.

    The slopes analysis reuses the ladder's fit of the same model (``shared_analysis_fits``), and R's fit of
    that model serves both checks."""
    systems = ["A", "B", "C"]
    result = analyze(expert3, random="maximal", backend="lme4")
    maximal = _r(lme4_backend, expert3, systems, "score ~ system + (system | worker) + (system | item)")
    no_cor = _r(lme4_backend, expert3, systems, _slopes_formula(3, "||"))
    assert maximal["singular"] == 1 and no_cor["singular"] == 1  # R: both steps singular
    assert len(result.steps) == 2 and all("singular fit" in s for s in result.steps)
    assert "covariance matrix (3 x 3) has rank 2" in result.steps[0]
    assert "item slope of B vs A at zero" in result.steps[1]
    assert result.model == INVARIANT and result.fitted_structure == "invariant"
    _agree(result, _r(lme4_backend, expert3, systems, INVARIANT))
    assert "maximal structure did not fit" in result.methods()

    slopes = analyze(expert3, random="slopes", backend="lme4")
    assert slopes.model == _slopes_formula(3, "||") and not slopes.steps
    ref = no_cor  # R's uncorrelated slope model, fitted above
    _agree(slopes, ref)
    assert slopes.components.icc.sum() == pytest.approx(1.0)
    assert any("treatment coding" in n for n in slopes.notes)
    # the no-R solver fits the same uncorrelated slope model: its REML criterion is lme4's to 2e-8 (lower), but
    # with 3 workers the criterion is flat in the worker SDs, so F and its ddf move by ~1e-4 (relative)
    no_r = analyze(expert3, random="slopes", backend="statsmodels", contrasts="baseline", adjust="none")
    _agree(no_r, ref, est=1e-4, df=1e-3, p=1e-3, f_rel=1e-3)


def _correlated_study(seed: int = 7, n: int = 24) -> pd.DataFrame:
    """3 systems, n workers x n items fully crossed, by-worker and by-item slopes strongly correlated."""
    rng = np.random.default_rng(seed)
    cov = np.array([[1.0, 0.6, -0.5], [0.6, 0.8, 0.2], [-0.5, 0.2, 0.9]]) * 0.5
    w, i = rng.multivariate_normal(np.zeros(3), cov, n), rng.multivariate_normal(np.zeros(3), cov, n)
    rows = [(f"w{a}", f"i{b}", s, 3 + 0.3 * k + w[a, 0] + i[b, 0] + (w[a, k] + i[b, k] if k else 0.0)
             + rng.normal(0, 0.7)) for a in range(n) for b in range(n) for k, s in enumerate("ABC")]
    return pd.DataFrame(rows, columns=["worker", "item", "system", "score"])


@pytest.mark.r
@pytest.mark.slow
def test_maximal_kept_when_it_fits_equals_lmertest(lme4_backend):
    """A study whose maximal fit converges, non-singular: kept, and its correlated-slope inference = R's."""
    frame = _correlated_study()
    result = analyze(frame, random="maximal", backend="lme4")
    assert not result.steps and result.model == "score ~ system + (system | worker) + (system | item)"
    ref = _r(lme4_backend, frame, ["A", "B", "C"], result.model)
    assert ref["singular"] == 0
    _agree(result, ref)
    assert result.components.component.str.startswith("cov(").sum() == 6
    assert result.components.icc.sum() == pytest.approx(1.0)


@pytest.mark.r
@pytest.mark.parametrize("which", ["expert", pytest.param("amt", marks=pytest.mark.slow)])
def test_kenward_roger_equals_pbkrtest(which, data_dir, lme4_backend):
    """--df kenward-roger, both backends: lmerTest's anova(ddf = "Kenward-Roger"), emmeans' lmer.df = "kenward-roger"."""
    if which == "expert":
        systems = ["A", "B", "C"]
        frame = _shared(data_dir, "dialsummeval_expert", "coherence", systems)
        frame = frame[frame.item.isin(sorted(frame.item.unique())[:40])]
    else:  # a sparse crowd: unbalanced, so KR and Satterthwaite differ
        systems = ["A", "C", "F"]
        frame = _shared(data_dir, "dialsummeval_amt", "coherence", systems)
        frame = frame[frame.item.isin(sorted(frame.item.unique())[:24])]
    ref = _r(lme4_backend, frame, systems, INVARIANT, "Kenward-Roger")
    # without R: our dense vcovAdj at the no-R optimum (measured differences <= 3e-6)
    for backend, contrasts, adjust in (("lme4", "pairs", "holm"), ("statsmodels", "baseline", "none")):
        result = analyze(frame, backend=backend, df="kenward-roger", contrasts=contrasts, adjust=adjust)
        _agree(result, ref)
    assert "Kenward-Roger denominator df" in str(result) and "pbkrtest" in result.methods()
    if which == "amt":
        satt = analyze(frame, backend="lme4", contrasts="baseline", adjust="none")
        assert not np.allclose(satt.contrasts.df, result.contrasts.df, rtol=1e-3)


@pytest.mark.r
def test_by_dimension_analyses_each_group_like_r(data_dir, lme4_backend, tmp_path, capsys, shared_analysis_fits):
    """--by dimension: each dimension's analysis equals R's on that dimension alone; records carry group."""
    path = data_dir / "dialsummeval_expert" / "ratings.csv"
    if not path.exists():
        pytest.skip(f"{path} not found")
    frame = pd.read_csv(path)
    frame = frame[frame.dimension.isin(["coherence", "relevance"]) & frame.system.isin(["A", "B", "C"])
                  & frame.item.isin(sorted(frame.item.unique())[:50])]
    result = analyze(frame, by="dimension", backend="lme4")
    assert list(result.results) == ["coherence", "relevance"]
    for dim, res in result.results.items():
        _agree(res, _r(lme4_backend, frame[frame.dimension == dim], ["A", "B", "C"], INVARIANT))
    records = result.records()
    assert [r["group"] for r in records] == ["coherence"] * 3 + ["relevance"] * 3
    assert "within one dimension only" in str(result) and "within one dimension only" in result.markdown()
    assert set(result.tables()["contrasts"].group) == {"coherence", "relevance"}
    data = tmp_path / "r.csv"
    frame.to_csv(data, index=False)
    assert main(["analyze", str(data), "--by", "dimension", "--backend", "lme4", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    np.testing.assert_allclose([r["p_adjusted"] for r in cli], [r["p_adjusted"] for r in records], rtol=1e-5)
    assert {r["group"] for r in cli} == {"coherence", "relevance"}


def test_cli_mirrors_api_for_kenward_roger_and_slopes_without_r(tmp_path, capsys):
    """--df kenward-roger --random slopes --backend statsmodels: the CLI's records are the API's."""
    frame = _toy_bayes()
    data = tmp_path / "ratings.csv"
    frame.to_csv(data, index=False)
    api = analyze(frame, backend="statsmodels", df="kenward-roger", random="slopes")
    assert main(["analyze", str(data), "--backend", "statsmodels", "--df", "kenward-roger", "--random", "slopes",
                 "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert [r["df_method"] for r in cli] == ["kenward-roger"] * 3 and cli[0]["model"] == api.model
    np.testing.assert_allclose([r["df"] for r in cli], api.contrasts.df, rtol=1e-9)
    np.testing.assert_allclose([r["p_adjusted"] for r in cli], api.contrasts.p_adjusted, rtol=1e-9)


def test_ladder_steps_down_on_failure_and_convergence_warning(monkeypatch):
    """Each step of the maximal ladder says why it was left: a failed fit, then a convergence warning."""
    from dataclasses import replace

    from humaneval_power.completed_study import backends as module
    from humaneval_power.completed_study.backends import statsmodels_inference
    from humaneval_power.errors import InputError

    calls = []

    def fake_fit(frame, spec, backend, kenward_roger, progress):
        calls.append(spec.correlated)
        if spec.correlated:
            raise InputError("lme4 could not fit the model: boom")
        raw, inference = statsmodels_inference(frame, spec)
        if len(calls) == 2:
            raw = replace(raw, warnings=("Model failed to converge with max|grad| = 0.0123 (tol = 0.002)",))
        return raw, inference

    monkeypatch.setattr(module, "fit_once", fake_fit)
    result = analyze(_toy_bayes(), random="maximal", backend="lme4")
    assert calls == [True, False, False] and result.fitted_structure == "invariant" and result.model == INVARIANT
    assert result.steps[0].startswith("maximal model `score ~ system + (system | worker) + (system | item)`: "
                                      "failed (lme4 could not fit the model: boom); next: no correlations")
    assert "convergence warning (Model failed to converge with max|grad| = 0.0123" in result.steps[1]
    assert result.steps[1].endswith("next: invariant") and "ladder: maximal model" in str(result)


def _toy_bayes() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    rows = [(f"w{w}", f"i{i}", s, 2.5 + 0.8 * k + rng.normal(0, 0.5)) for w in range(4) for i in range(6)
            for k, s in enumerate("ABC")]
    return pd.DataFrame(rows, columns=["worker", "item", "system", "score"])


@pytest.mark.slow
@pytest.mark.xdist_group("bambi")  # with test_fit_real's bambi test: pymc and pytensor imported once
def test_bambi_backend_reports_posteriors_not_p_values():
    """bambi: posterior mean/SD/HDI and P(system > versus), no p-value fields, reproducible from the seed."""
    pytest.importorskip("bambi")
    frame = _toy_bayes()
    a = analyze(frame, backend="bambi", draws=60, chains=2, seed=5)
    b = analyze(frame, backend="bambi", draws=60, chains=2, seed=5)
    pd.testing.assert_frame_equal(a.contrasts, b.contrasts)
    rec = a.records()[0]
    assert rec["inference"] == "posterior" and not any(k.startswith("p_") for k in rec)
    for key in ("system", "versus", "estimate", "sd", "hdi_low", "hdi_high", "prob_greater", "effect_size"):
        assert key in rec
    c = a.contrasts
    assert (c.hdi_low < c.estimate).all() and (c.estimate < c.hdi_high).all()
    # the posterior mean of a balanced contrast lies near the difference of the raw means (its least-squares
    # estimate): within 3 posterior SDs, and a difference of 0.8 on SD 0.5 noise is clearly positive
    raw = frame.groupby("system").score.mean()
    for row in c.itertuples():
        assert abs(row.estimate - (raw[row.system] - raw[row.versus])) < 3 * row.sd
    assert c.set_index(["system", "versus"]).loc[("C", "A"), "prob_greater"] > 0.95
    assert "posterior" in str(a) and "p-value" not in a.markdown().replace("no p-values", "")
