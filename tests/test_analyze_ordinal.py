"""``hepower analyze --family ordinal`` (issue 26, item 3): both backends against ``ordinal::clmm`` + ``emmeans``
typed directly in R (latent EMMs and contrasts with SEs, Holm and Tukey p, mean-class EMMs, category
probabilities, the likelihood-ratio and Wald tests) on DialSummEval expert ratings and on simulated ratings,
CLI == API, and the refusals (one line, exit 2, no output file)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from humaneval_power.cli import main
from humaneval_power.completed_study import analyze
from humaneval_power.completed_study.ordinal import OrdinalAnalysis, OrdinalPosterior
from humaneval_power.errors import InputError
from humaneval_power.fitting.ratings import read_ratings

from .conftest import share_calls
from .ordinal_ratings import simulated_ratings

#: acceptance tolerance (issue 26): latent contrasts and SEs, Holm p, mean-class EMMs, category probabilities
TOL = 1e-4


def _expert(data_dir: Path) -> pd.DataFrame:
    """DialSummEval expert consistency ratings of C, F, H, N on 15 items (180 ratings; not used elsewhere)."""
    d = pd.read_csv(data_dir / "dialsummeval_expert" / "ratings.csv", dtype={"worker": str, "item": str, "system": str})
    d = d[(d.dimension == "consistency") & d.system.isin(["C", "F", "H", "N"])]
    return d[d.item.isin(sorted(d.item.unique())[20:35])][["worker", "item", "system", "score"]].reset_index(drop=True)


_R_EMMEANS = """
function(path, terms, systems, link) {
  suppressPackageStartupMessages({library(ordinal); library(emmeans)})
  d <- read.csv(path, colClasses = c(worker = "character", item = "character", system = "character"))
  d$y <- factor(d$score, levels = sort(unique(d$score)), ordered = TRUE)
  d$system <- factor(d$system, levels = systems)
  d$ws <- factor(paste(d$worker, d$system)); d$is <- factor(paste(d$item, d$system))
  re <- paste0(" + (1 | ", terms, ")", collapse = "")
  m <- clmm(as.formula(paste("y ~ system", re)), data = d, link = link, Hess = TRUE)
  m0 <- clmm(as.formula(paste("y ~ 1", re)), data = d, link = link, Hess = FALSE)  # its likelihood only
  e <- emmeans(m, ~ system)
  lat <- summary(e)
  holm <- summary(pairs(e, reverse = TRUE, adjust = "holm"), infer = c(TRUE, TRUE))
  tukey <- summary(pairs(e, reverse = TRUE, adjust = "tukey"))
  mc <- summary(emmeans(m, ~ system, mode = "mean.class"))
  pr <- summary(emmeans(m, ~ y | system, mode = "prob"))
  b <- m$beta; V <- vcov(m)[names(b), names(b)]
  list(emmean = lat$emmean, emmean_se = lat$SE, contrast = as.character(holm$contrast),
       estimate = holm$estimate, se = holm$SE, z = holm$z.ratio, p_holm = holm$p.value,
       ci_low = holm$asymp.LCL, ci_high = holm$asymp.UCL, p_tukey = tukey$p.value,
       mean_class = mc$mean.class, mean_class_se = mc$SE,
       prob = pr$prob, prob_se = pr$SE, prob_system = as.character(pr$system), prob_y = as.character(pr$y),
       lr = as.numeric(2 * (logLik(m) - logLik(m0))), wald = as.numeric(t(b) %*% solve(V, b)))
}
"""
_R_TERM = {"worker": "worker", "item": "item", "worker:system": "ws", "item:system": "is"}


@pytest.fixture(scope="module")
def r_cases(data_dir: Path, tmp_path_factory: pytest.TempPathFactory, lme4_backend) -> dict[str, dict]:
    """Per data set: the analysis by both backends (Holm and Tukey) and clmm + emmeans typed in R."""
    from humaneval_power.fitting import clmm_r, lme4

    ok, why = clmm_r.available()
    if not ok:
        pytest.skip(why)
    ro = lme4.r_session()
    out = {}
    for case, frame, link in (("expert", _expert(data_dir), "logit"), ("simulated", simulated_ratings(workers=5, items=8), "probit")):
        path = tmp_path_factory.mktemp(case) / "ratings.csv"
        frame.to_csv(path, index=False)
        with pytest.MonkeyPatch.context() as mp:  # the clmm backend's fits, for the CLI test (same process)
            share_calls(mp, clmm_r, "fit_clmm_r")
            runs = {(b, a): analyze(path, family="ordinal", backend=b, link=link, adjust=a, df="asymptotic",
                                    bootstrap=0)
                    for b in ("clmm", "laplace") for a in ("holm", "tukey") if b == "laplace" or a == "holm"}
        systems = runs["laplace", "holm"].data.systems
        comp = runs["laplace", "holm"].components
        terms = [_R_TERM[c.replace(" x ", ":")] for c in comp.component[comp.status.str.startswith("fitted")]]
        res = ro.r(_R_EMMEANS)(str(path), ro.StrVector(terms), ro.StrVector(list(systems)), link)
        ref = {k: (np.asarray(list(res.rx2(k)), float) if k not in ("contrast", "prob_system", "prob_y")
                   else [str(v) for v in res.rx2(k)]) for k in res.names}
        out[case] = {"runs": runs, "ref": ref, "path": path, "link": link}
    return out


def _max_abs(a: np.ndarray | pd.Series, b: np.ndarray) -> float:
    return float(np.max(np.abs(np.asarray(a, float) - np.asarray(b, float))))


@pytest.mark.r
@pytest.mark.slow
@pytest.mark.xdist_group("analyze_ordinal_r")  # one worker: r_cases (~30 CPU s of clmm + emmeans) is per process
@pytest.mark.parametrize("case", ["expert", "simulated"])
@pytest.mark.parametrize("backend", ["clmm", "laplace"])
def test_ordinal_analysis_equals_emmeans_on_clmm(r_cases: dict, case: str, backend: str) -> None:
    run: OrdinalAnalysis = r_cases[case]["runs"][backend, "holm"]
    ref = r_cases[case]["ref"]
    con = run.contrasts
    labels = list(con.system + " - " + con.versus)  # emmeans' revpairwise: later minus earlier, its own order
    assert sorted(labels) == sorted(ref["contrast"])
    order = [ref["contrast"].index(label) for label in labels]
    ref = {k: (v[order] if k in ("estimate", "se", "z", "p_holm", "ci_low", "ci_high", "p_tukey") else v)
           for k, v in ref.items()}
    gaps = {
        "latent emmean": _max_abs(run.means.emmean, ref["emmean"]),
        "latent emmean se": _max_abs(run.means.se, ref["emmean_se"]),
        "contrast": _max_abs(con.estimate, ref["estimate"]),
        "contrast se": _max_abs(con.se, ref["se"]),
        "z": _max_abs(con.z, ref["z"]),
        "holm p": _max_abs(con.p_adjusted, ref["p_holm"]),
        "holm interval": max(_max_abs(con.ci_low, ref["ci_low"]), _max_abs(con.ci_high, ref["ci_high"])),
        "mean class": _max_abs(run.means.mean_rating, ref["mean_class"]),
        "mean class se": _max_abs(run.means.mean_rating_se, ref["mean_class_se"]),
    }
    probs = run.probabilities.set_index(["system", "rating"])
    keys = list(zip(ref["prob_system"], map(int, ref["prob_y"])))
    gaps["probability"] = _max_abs(probs.loc[keys, "probability"], ref["prob"])
    gaps["probability se"] = _max_abs(probs.loc[keys, "se"], ref["prob_se"])
    tests = run.omnibus.set_index("test")["chi2"]
    gaps["likelihood ratio (relative)"] = abs(tests["likelihood ratio"] / ref["lr"][0] - 1)
    gaps["wald chi2 (relative)"] = abs(tests["Wald"] / ref["wald"][0] - 1)
    tukey = r_cases[case]["runs"].get((backend, "tukey"))
    if tukey is not None:
        gaps["tukey p"] = _max_abs(tukey.contrasts.p_adjusted, ref["p_tukey"])
    bad = {k: v for k, v in gaps.items() if not v <= TOL}
    print(case, backend, {k: f"{v:.1e}" for k, v in gaps.items()})
    assert not bad, f"{case} {backend}: {bad}"


@pytest.mark.r
@pytest.mark.slow
@pytest.mark.xdist_group("analyze_ordinal_r")
def test_ordinal_cli_equals_api_with_r(r_cases: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The clmm backend through the CLI gives the API's records, and --out/--report are written. Its
    ``ordinal::clmm`` fits (deterministic) are the API run's, answered again for the same data and model
    (``conftest.share_calls``): a CLI that read other ratings or asked for another model would make other calls."""
    from humaneval_power.fitting import clmm_r

    share_calls(monkeypatch, clmm_r, "fit_clmm_r")
    case = r_cases["simulated"]
    argv = ["analyze", str(case["path"]), "--family", "ordinal", "--link", "probit", "--df", "asymptotic",
            "--bootstrap", "0", "--json",
            "--out", str(tmp_path / "c.csv"), "--report", str(tmp_path / "r.md")]
    assert main(argv) == 0
    records = json.loads(capsys.readouterr().out)
    api = case["runs"]["clmm", "holm"].records()
    pd.testing.assert_frame_equal(pd.DataFrame(records), pd.DataFrame(api), check_exact=True)
    assert len(pd.read_csv(tmp_path / "c.csv")) == len(api)
    assert "Category probabilities" in (tmp_path / "r.md").read_text()


@pytest.fixture(scope="module")
def small(small_ordinal_ratings: Path) -> Path:
    return small_ordinal_ratings


@pytest.fixture(scope="module")
def small_api(small: Path) -> OrdinalAnalysis:
    res = analyze(small, family="ordinal", backend="laplace", contrasts="baseline", adjust="bonferroni", bootstrap=0)
    assert isinstance(res, OrdinalAnalysis)
    return res


@pytest.mark.slow
def test_cli_equals_api_without_r(small: Path, small_api: OrdinalAnalysis, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    """--json, --out, --report and --plot of the laplace backend: the API's numbers, every output written."""
    outs = {"--out": tmp_path / "c.json", "--report": tmp_path / "r.html", "--plot": tmp_path / "p.png"}
    argv = ["analyze", str(small), "--family", "ordinal", "--backend", "laplace", "--contrasts", "baseline",
            "--adjust", "bonferroni", "--bootstrap", "0", "--json", *(str(v) for kv in outs.items() for v in kv)]
    assert main(argv) == 0
    cli = pd.DataFrame(json.loads(capsys.readouterr().out))
    pd.testing.assert_frame_equal(cli, pd.DataFrame(small_api.records()), check_exact=True)
    assert all(p.stat().st_size > 0 for p in outs.values())
    assert outs["--report"].read_text().count("<img") == 2  # the means + contrasts and category figures


def test_probabilities_sum_to_one_and_mean_class_is_their_mean(small_api: OrdinalAnalysis) -> None:
    """Internal consistency: per system the probabilities sum to 1, the mean rating is sum_k k p_k, the same
    holds for the population-averaged ones, and the latent contrasts are differences of the latent means."""
    res = small_api
    p = res.probabilities
    for column in ("probability", "population", "observed"):
        assert np.allclose(p.groupby("system")[column].sum(), 1.0, atol=1e-12)
    expected = (p.rating * p.probability).groupby(p.system).sum()
    assert np.allclose(res.means.set_index("system").mean_rating, expected.loc[res.means.system], atol=1e-12)
    population = (p.rating * p.population).groupby(p.system).sum()
    assert np.allclose(res.means.set_index("system").mean_rating_population, population.loc[res.means.system],
                       atol=1e-10)
    m = res.means.set_index("system").emmean
    assert np.allclose(res.contrasts.estimate, m[res.contrasts.system].to_numpy() - m[res.contrasts.versus].to_numpy(),
                       atol=1e-12)
    assert set(res.omnibus.test) == {"likelihood ratio", "Wald"} and (res.omnibus.p_value.between(0, 1)).all()


@pytest.mark.slow
@pytest.mark.xdist_group("ordinal_bambi")  # one worker: its posterior is test_ordinal_fit's bambi round trip's
def test_bambi_posterior_agrees_with_the_laplace_fit(small: Path, small_api: OrdinalAnalysis,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """backend="bambi" (2 chains x 100 draws after 100 tuning steps each, ~7 CPU s): each latent contrast's posterior
    mean lies within one posterior SD of the maximum-likelihood estimate (120 ratings; bambi's default priors are
    weak on the effects; the draws' Monte-Carlo error of the mean is ~0.1 SD at ~100 effective draws, the gaps
    were 0.13-0.26 SD at 200 draws and 0.12-0.22 at 100), P(better) is at least the level where the HDI excludes 0
    and at most 1 - level where it lies below, the probabilities sum to 1 and the mean rating is sum_k k p_k."""
    from humaneval_power.fitting import ordinal_fit

    share_calls(monkeypatch, ordinal_fit, "fit_bambi_ordinal")  # the one posterior of test_ordinal_fit's round trip
    res = analyze(small, family="ordinal", backend="bambi", contrasts="baseline", draws=100, chains=2, seed=1)
    assert isinstance(res, OrdinalPosterior)
    post, ml = res.contrasts, small_api.contrasts
    assert list(post.system) == list(ml.system) and list(post.versus) == list(ml.versus)
    assert (np.abs(post.estimate - ml.estimate) < post.sd).all(), (post.estimate, ml.estimate, post.sd)
    assert (post.prob_greater[post.hdi_low > 0] >= res.level).all()
    assert (post.prob_greater[post.hdi_high < 0] <= 1 - res.level).all()
    p = res.probabilities
    assert np.allclose(p.groupby("system")["probability"].sum(), 1.0, atol=1e-12)
    expected = (p.rating * p.probability).groupby(p.system).sum()
    assert np.allclose(res.means.set_index("system").mean_rating, expected.loc[res.means.system], atol=1e-12)
    records = res.records()
    assert all(r["inference"] == "posterior" and "p_value" not in r for r in records)
    assert res.report_sections()[0].startswith("Bayesian ordinal analysis")


BAD = {
    "kenward-roger": (["--df", "kenward-roger"], "--df kenward-roger does not apply to --family ordinal"),
    "statsmodels": (["--backend", "statsmodels"], "does not fit ordinal models"),
    "bambi with --adjust": (["--backend", "bambi", "--adjust", "holm"], "--adjust does not apply to --backend bambi"),
    "bambi with --latex": (["--backend", "bambi", "--latex", "{o}/t.tex"], "apply to ratings (--family gaussian)"),
    "random slopes": (["--random", "slopes"], "does not apply to --family ordinal"),
    "keep singular": (["--random", "maximal", "--keep-singular"], "does not apply to --family ordinal"),
    "latex": (["--latex", "{o}/t.tex"], "apply to ratings (--family gaussian)"),
    "paper records": (["--paper-records", "--json"], "apply to ratings (--family gaussian)"),
    "tukey with baseline": (["--contrasts", "baseline", "--adjust", "tukey"], "tukey adjusts all pairwise"),
    "link unknown": (["--link", "cauchit"], "invalid choice"),
    "duplicates average": (["--duplicates", "average"], "makes mean ratings, not categories"),
    "agreement metric": (["--agreement-metric", "ordinal"], "apply to --family gaussian"),
    "gaussian with clmm": (["--family", "gaussian", "--backend", "clmm"], "fits cumulative-link models"),
    "gaussian with --link": (["--family", "gaussian", "--link", "probit"], "--link applies to --family ordinal"),
    "binomial with --link": (["--family", "binomial", "--link", "probit"], "--link"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_combinations_are_refused(case: str, small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    extra, message = BAD[case]
    argv = ["analyze", str(small), "--family", "ordinal", *(a.format(o=tmp_path) for a in extra),
            "--out", str(tmp_path / "c.csv")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not any(tmp_path.iterdir())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spoil=st.sampled_from(["fraction", "nan", "out of scale", "unused category", "two categories"]),
       row=st.integers(0, 199), seed=st.integers(0, 10_000))
def test_malformed_ordinal_scores_are_refused(spoil: str, row: int, seed: int, tmp_path: Path) -> None:
    """Any one spoilt score (or spoilt category use) is refused by the API with one InputError, before a fit."""
    frame = simulated_ratings(seed=seed, link="logit", workers=5, items=8)
    assume(frame["score"].nunique() == 5)  # the clean ratings are analysable (read_ratings(family="ordinal") accepts them)
    read_ratings(frame, family="ordinal")
    row %= len(frame)
    scale = None
    if spoil == "fraction":
        frame["score"] = frame["score"].astype(float)
        frame.loc[row, "score"] += 0.5
    elif spoil == "nan":
        frame["score"] = frame["score"].astype(float)
        frame.loc[row, "score"] = np.nan
    elif spoil == "out of scale":
        scale = (1, 5)
        frame.loc[row, "score"] = 6
    elif spoil == "unused category":
        frame["score"] = frame["score"].replace(3, 4)
    else:
        frame["score"] = np.where(frame["score"] > 3, 5, 1)
    with pytest.raises(InputError):
        analyze(frame, family="ordinal", backend="laplace", scale=scale)
