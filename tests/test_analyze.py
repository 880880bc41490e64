"""`hepower analyze` against lmerTest + emmeans on the same data, the no-R backend, and bad input."""
from __future__ import annotations

import json
import math
import os

import numpy as np
import pandas as pd
import pytest

from humaneval_power.cli import main
from humaneval_power.completed_study import analyze
from humaneval_power.completed_study.inference import fisher_ddf
from humaneval_power.errors import InputError
from humaneval_power.multiplicity import adjusted, emmeans_df, max_abs_t

# lmerTest + emmeans on a data frame with the same coding as the lme4 backend's (integer-coded worker and
# item factors, system a factor whose first level is the baseline), so that lme4 reaches the same optimum;
# emmeans is told to use Satterthwaite df (its default for lmer models is Kenward-Roger below 3,000 rows
# and asymptotic z above).
R_REFERENCE = r"""
function(worker, item, system, score, levels) {
  suppressPackageStartupMessages({library(lmerTest); library(emmeans)})
  d <- data.frame(worker = factor(worker), item = factor(item), score = score,
                  system = factor(levels[system], levels = levels))
  m <- lmerTest::lmer(score ~ system + (1 | worker) + (1 | worker:system) + (1 | item) + (1 | item:system),
                      data = d, REML = TRUE, control = lmerControl(calc.derivs = FALSE))  # no convergence checks: same fit
  a <- anova(m, ddf = "Satterthwaite")
  emm_options(lmer.df = "satterthwaite", lmerTest.limit = Inf, pbkrtest.limit = 0)
  e <- emmeans(m, "system")
  out <- list(F = a[["F value"]], num_df = a$NumDF, den_df = a$DenDF, p_F = a[["Pr(>F)"]],
              emm = as.data.frame(summary(e)))
  set.seed(1)
  for (adj in c("none", "holm", "bonferroni", "fdr", "tukey", "mvt")) {
    out[[paste0("pairs_", adj)]] <- as.data.frame(summary(pairs(e, reverse = TRUE, adjust = adj),
                                                          infer = c(TRUE, TRUE)))
  }
  for (adj in c("none", "holm", "mvt")) {
    out[[paste0("baseline_", adj)]] <- as.data.frame(summary(contrast(e, "trt.vs.ctrl", adjust = adj),
                                                             infer = c(TRUE, TRUE)))
  }
  out
}
"""

EXPERT_SYSTEMS = ["A", "B", "C", "D", "E"]
AMT_SYSTEMS = ["A", "C", "F", "M"]
#: the two data sets; one xdist group each, so that both backends' tests read one R reference (r_reference)
WHICH = [pytest.param("expert", marks=pytest.mark.xdist_group("analyze_expert")),
         pytest.param("amt", marks=[pytest.mark.slow, pytest.mark.xdist_group("analyze_amt")])]


def _r_reference(lme4_backend, result_frame: pd.DataFrame, systems: list[str], source: str = R_REFERENCE,
                 *extra: str) -> dict[str, object]:
    """The R function ``source`` called on the coded ratings (and ``extra`` arguments): its list, as Python."""
    from rpy2.robjects import pandas2ri
    from rpy2.robjects.conversion import localconverter

    ro = lme4_backend.r_session()
    if not ro.r('isTRUE(requireNamespace("emmeans", quietly = TRUE))')[0]:
        if os.environ.get("CI"):
            pytest.fail("CI must run the emmeans comparisons but R lacks emmeans (apt-get install r-cran-emmeans)")
        pytest.skip("R lacks emmeans (Debian: apt-get install r-cran-emmeans)")
    fun = ro.r(source)
    codes = {s: k + 1 for k, s in enumerate(systems)}
    res = fun(ro.IntVector((pd.factorize(result_frame["worker"])[0] + 1).tolist()),
              ro.IntVector((pd.factorize(result_frame["item"])[0] + 1).tolist()),
              ro.IntVector(result_frame["system"].map(codes).tolist()),
              ro.FloatVector(result_frame["score"].tolist()), ro.StrVector(systems), *extra)
    out = {}
    with localconverter(ro.default_converter + pandas2ri.converter):
        for name in res.names:
            value = res.rx2(name)
            out[name] = value if isinstance(value, pd.DataFrame) else float(np.asarray(value).ravel()[0])
    return out


def _shared(data_dir, folder: str, dimension: str, systems: list[str]) -> pd.DataFrame:
    path = data_dir / folder / "ratings.csv"
    if not path.exists():
        pytest.skip(f"{path} not found")
    frame = pd.read_csv(path)
    return frame[(frame.dimension == dimension) & frame.system.isin(systems)]


@pytest.fixture(scope="module")
def expert(data_dir):
    return _shared(data_dir, "dialsummeval_expert", "relevance", EXPERT_SYSTEMS)


@pytest.fixture(scope="module")
def amt(data_dir):
    return _shared(data_dir, "dialsummeval_amt", "coherence", AMT_SYSTEMS)


@pytest.fixture(scope="module")
def r_reference(request, lme4_backend):
    """lmerTest + emmeans (R_REFERENCE) on the ``expert`` or ``amt`` ratings, computed once for both backends' tests."""
    cache: dict[str, dict[str, object]] = {}

    def get(which: str) -> dict[str, object]:
        if which not in cache:
            frame = request.getfixturevalue(which)
            cache[which] = _r_reference(lme4_backend, any_result_frame(frame),
                                        EXPERT_SYSTEMS if which == "expert" else AMT_SYSTEMS)
        return cache[which]

    return get


def _label(result_contrasts: pd.DataFrame) -> list[str]:
    return [f"{s} - {v}" for s, v in zip(result_contrasts.system, result_contrasts.versus)]


def _check_against_r(result, ref: dict, family: str, adjust: str, rel_df: float, abs_est: float,
                     abs_p: float) -> None:
    r_adj = {"dunnett": "mvt"}.get(adjust, adjust)
    r = ref[f"{family}_{r_adj}"].set_index("contrast").loc[_label(result.contrasts)]
    c = result.contrasts
    np.testing.assert_allclose(c.estimate, r.estimate, atol=abs_est)
    np.testing.assert_allclose(c.se, r.SE, atol=abs_est)
    np.testing.assert_allclose(c.df, r.df, rtol=rel_df)
    np.testing.assert_allclose(c.t, r["t.ratio"], rtol=rel_df)
    tol = abs_p if r_adj != "mvt" else max(abs_p, 3e-3)  # emmeans' mvtnorm: absolute error 1e-3; ours ~5e-4
    np.testing.assert_allclose(c.p_adjusted, r["p.value"], atol=tol)
    # an interval end is estimate - q SE: its error is bounded by that of the estimate plus q times that of the SE
    q = float(((c.ci_high - c.estimate) / c.se).max())
    ci_tol = abs_est * (1 + q) if r_adj != "mvt" else 2e-3 * float(c.se.max()) * 10
    np.testing.assert_allclose(c.ci_low, r["lower.CL"], atol=ci_tol)
    np.testing.assert_allclose(c.ci_high, r["upper.CL"], atol=ci_tol)


def _check_f_and_means(result, ref: dict, rel_df: float, abs_est: float, abs_p: float) -> None:
    o = result.omnibus.iloc[0]
    assert o.num_df == ref["num_df"]
    assert o.F == pytest.approx(ref["F"], rel=abs_p)
    assert o.den_df == pytest.approx(ref["den_df"], rel=rel_df)
    assert o.p_value == pytest.approx(ref["p_F"], abs=abs_p)
    emm = ref["emm"].set_index("system").loc[result.means.system]
    np.testing.assert_allclose(result.means.emmean, emm.emmean, atol=abs_est)
    np.testing.assert_allclose(result.means.se, emm.SE, atol=abs_est)
    np.testing.assert_allclose(result.means.df, emm.df, rtol=rel_df)
    np.testing.assert_allclose(result.means.ci_low, emm["lower.CL"], atol=abs_est * 10)
    np.testing.assert_allclose(result.means.ci_high, emm["upper.CL"], atol=abs_est * 10)


@pytest.mark.r
@pytest.mark.parametrize("which", WHICH)
def test_lme4_backend_equals_lmertest_emmeans(which, request, r_reference, shared_analysis_fits):
    """The lme4 backend: the same lme4 optimum, so lmerTest's and emmeans' numbers to 1e-6 (p 1e-4 / mvt MC).

    The nine analyses share one fit of the model (``shared_analysis_fits``): they differ after it.
    """
    frame = request.getfixturevalue(which)
    results = {(fam, adj): analyze(frame, contrasts=fam, adjust=adj, backend="lme4")
               for fam, adj in [("pairs", a) for a in ("none", "holm", "bonferroni", "fdr", "tukey", "dunnett")]
               + [("baseline", a) for a in ("none", "holm", "dunnett")]}
    any_result = results["pairs", "holm"]
    ref = r_reference(which)
    _check_f_and_means(any_result, ref, rel_df=1e-6, abs_est=1e-6, abs_p=1e-6)
    for (fam, adj), result in results.items():
        _check_against_r(result, ref, fam, adj, rel_df=1e-6, abs_est=1e-6, abs_p=1e-6)


def any_result_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The ratings as :func:`read_ratings` orders them (the R reference codes workers and items the same way)."""
    from humaneval_power.fitting.ratings import read_ratings

    return read_ratings(frame).frame


@pytest.mark.r
@pytest.mark.parametrize("which", WHICH)
def test_statsmodels_backend_equals_lmertest_emmeans(which, request, r_reference, shared_analysis_fits):
    """Without R: the same numbers within the optimisers' tolerance (df 1e-3 relative, estimates/SE 1e-4)."""
    frame = request.getfixturevalue(which)
    ref = r_reference(which)
    for fam, adj in (("pairs", "holm"), ("pairs", "tukey"), ("baseline", "dunnett")):
        result = analyze(frame, contrasts=fam, adjust=adj, backend="statsmodels")
        if adj == "holm":
            _check_f_and_means(result, ref, rel_df=1e-3, abs_est=1e-4, abs_p=1e-3)
        _check_against_r(result, ref, fam, adj, rel_df=1e-3, abs_est=1e-4, abs_p=1e-3)


def test_fisher_ddf_is_lmertests():
    assert fisher_ddf(np.array([7.0])) == 7.0
    assert fisher_ddf(np.array([5.0, 5.0])) == 5.0
    assert fisher_ddf(np.array([1.5, 9.0])) == 2.0
    e = 10 / 8 + 20 / 18
    assert fisher_ddf(np.array([10.0, 20.0])) == pytest.approx(2 * e / (e - 2))


def test_emmeans_df_rounding():
    assert emmeans_df(np.array([8.74, 8.76, 0.3, 1e5, np.inf])).tolist() == [8.0, 9.0, 1.0, 0.0, 0.0]


def test_dunnett_reproducible_and_two_sided_bonferroni_bound():
    """max|t| draws: same seed, same numbers; the adjusted p lies between the unadjusted and Bonferroni's."""
    from scipy import stats

    corr = np.full((3, 3), 0.5) + 0.5 * np.eye(3)
    t, df = np.array([2.5, 1.0, -2.2]), np.array([20.0, 20.0, 20.0])
    p = 2 * stats.t.sf(np.abs(t), df)
    a1, c1 = adjusted(t, df, p, corr, "dunnett", 4, 0.95, seed=3)
    a2, c2 = adjusted(t, df, p, corr, "dunnett", 4, 0.95, seed=3)
    assert a1.tolist() == a2.tolist() and c1.tolist() == c2.tolist()
    assert np.all(a1 >= p) and np.all(a1 <= np.minimum(3 * p, 1) + 1e-3)
    # Dunnett's two-sided critical value, 3 treatments vs a control, df 20, 95%: 2.54 (tables)
    assert c1[0] == pytest.approx(2.54, abs=0.01)
    draws = max_abs_t(np.eye(2), [0.0], seed=0, draws=200_000)[0.0]
    assert np.mean(draws <= 1.959964) == pytest.approx(0.95**2, abs=3e-3)


def _toy(n_items: int = 12, n_workers: int = 4, systems: str = "ABC", seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = [(f"w{w}", f"i{i}", s, float(rng.integers(1, 6))) for w in range(n_workers) for i in range(n_items)
            for s in systems]
    return pd.DataFrame(rows, columns=["worker", "item", "system", "score"])


def test_statsmodels_backend_on_simulated_study_tables():
    result = analyze(_toy(), backend="statsmodels", adjust="tukey", scale=(1, 5))
    tables = result.tables()
    assert set(tables) == {"design", "components", "omnibus", "means", "contrasts"}
    assert len(result.contrasts) == 3 and result.contrasts.p_adjusted.between(0, 1).all()
    assert result.components.icc.sum() == pytest.approx(1.0)
    design = dict(zip(result.design.name, result.design.value))
    assert design["crossing"].startswith("fully crossed") and design["connected"].startswith("yes")
    rating_sd = math.sqrt(result.components.variance.sum())
    np.testing.assert_allclose(result.contrasts.effect_size, result.contrasts.estimate / rating_sd)
    # all-pairs estimates are differences of the marginal means
    means = result.means.set_index("system").emmean
    for row in result.contrasts.itertuples():
        assert row.estimate == pytest.approx(means[row.system] - means[row.versus], abs=1e-10)
    assert "F(2," in str(result) and "Tukey" in str(result) and "Satterthwaite" in result.markdown()


@pytest.mark.parametrize("bad, kwargs, message", [
    (_toy(systems="A"), {}, "only one system"),
    (pd.concat([_toy(systems="AB"), pd.DataFrame([["w0", "i0", "C", 3.0]], columns=["worker", "item", "system",
                                                                                   "score"])]), {},
     "single rating"),
    (_toy().assign(score=3.0), {}, "constant scores"),
    (pd.concat([_toy(systems="AB"), _toy(systems="CD").assign(item=lambda f: "x" + f.item,
                                                              worker=lambda f: "v" + f.worker)]), {},
     "disconnected"),
    (_toy(), {"baseline": "Z"}, "baseline"),
    (_toy(), {"adjust": "sidak"}, "adjustment"),
    (_toy(), {"contrasts": "baseline", "adjust": "tukey"}, "tukey"),
    (_toy(), {"random": "crossed"}, "random-effect structure"),
    (_toy(), {"random": "maximal"}, "--random maximal needs --backend lme4"),
    (_toy(), {"df": "kenward-roger", "backend": "bambi"}, "does not apply to --backend bambi"),
    (_toy(n_items=400), {"df": "kenward-roger"}, "limit of 4,000 ratings"),
    (_toy(), {"df": "containment"}, "df method"),
    (_toy(), {"backend": "bambi", "adjust": "holm"}, "does not apply to --backend bambi"),
    (_toy(), {"by": "nocolumn"}, "--by column 'nocolumn' not found"),
    (_toy(), {"level": 1.5}, "level"),
    ("/nonexistent/ratings.csv", {}, "not found"),
])
def test_bad_input_is_an_input_error(bad, kwargs, message):
    with pytest.raises(InputError, match=message):
        analyze(bad, **{"backend": "statsmodels", **kwargs})


def test_cli_json_report_and_bad_input(tmp_path, capsys):
    data = tmp_path / "ratings.csv"
    _toy().to_csv(data, index=False)
    report, out = tmp_path / "r.md", tmp_path / "c.csv"
    assert main(["analyze", str(data), "--backend", "statsmodels", "--contrasts", "baseline", "--adjust", "dunnett",
                 "--json", "--report", str(report), "--out", str(out)]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["system"] for r in records] == ["B", "C"] and {r["versus"] for r in records} == {"A"}
    for key in ("estimate", "se", "df", "t", "p_value", "p_adjusted", "adjust", "ci_low", "ci_high",
                "effect_size", "model", "backend"):
        assert key in records[0]
    assert report.read_text().startswith("# Analysis") and len(pd.read_csv(out)) == 2
    for args in (["--baseline", "Z"], ["--adjust", "sidak"], ["--where", "nocolumn=1"], ["--report", "r.txt"]):
        bad_report = tmp_path / "bad.md"
        code = main(["analyze", str(data), "--backend", "statsmodels", "--report", str(bad_report), *args])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and err[0].startswith("hepower: error:")
        assert not bad_report.exists()
    assert main(["analyze", str(tmp_path / "missing.csv"), "--backend", "statsmodels"]) == 2
