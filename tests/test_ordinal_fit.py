"""``hepower fit --family ordinal`` (issue 26, item 1): both ordinal backends against ``ordinal::clmm`` typed
directly in R on DialSummEval ratings, the parameter file's round trip, and bad input (one line, exit 2,
no output file)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from humaneval_power.cli import main
from humaneval_power.errors import InputError
from humaneval_power.fitting import registry
from humaneval_power.fitting.ordinal_fit import (
    OrdinalFitResult,
    fit_ordinal,
    identified_terms,
)
from humaneval_power.fitting.ratings import read_ratings
from humaneval_power.ordinal_process import OrdinalProcess
from humaneval_power.params import ORDINAL_SD_NAMES, OrdinalParams, load_ordinal_params

from .conftest import share_calls

#: acceptance tolerances (issue 26): thresholds and effects absolute, SDs absolute, log-likelihood relative
TOL_FIXED, TOL_SD, TOL_LOGLIK = 1e-4, 1e-3, 1e-6

#: bambi's draws per chain in the posterior test_analyze_ordinal shares (2 chains, seed 1)
BAMBI_DRAWS = 100

#: the two real data sets: (file, systems, number of items), relevance ratings 1-5
CASES = {"expert": ("dialsummeval_expert", ("A", "F", "H"), 20), "amt": ("dialsummeval_amt", ("B", "M"), 12)}


def _subset(data_dir: Path, case: str) -> pd.DataFrame:
    folder, systems, n_items = CASES[case]
    d = pd.read_csv(data_dir / folder / "ratings.csv", dtype={"worker": str, "item": str, "system": str})
    d = d[(d.dimension == "relevance") & d.system.isin(systems)]
    return d[d.item.isin(sorted(d.item.unique())[:n_items])][["worker", "item", "system", "score"]].reset_index(drop=True)


_R_CLMM = """
function(path, formula, systems, link) {
  suppressPackageStartupMessages(library(ordinal))
  d <- read.csv(path, colClasses = c(worker = "character", item = "character", system = "character"))
  d$y <- factor(d$score, levels = 1:5, ordered = TRUE)
  d$system <- factor(d$system, levels = systems)
  d$ws <- factor(paste(d$worker, d$system)); d$is <- factor(paste(d$item, d$system))
  m <- clmm(as.formula(formula), data = d, link = link, Hess = TRUE)
  V <- vcov(m)
  st <- paste0("ST", seq_along(m$ST))
  list(alpha = unname(m$alpha), beta = unname(m$beta), sd = vapply(m$ST, function(s) s[1, 1], 0),
       sd_names = names(m$ST), loglik = as.numeric(logLik(m)), se = unname(sqrt(diag(V))[c(names(m$alpha), names(m$beta))]),
       sd_se = vapply(st, function(k) if (k %in% rownames(V)) sqrt(V[k, k]) else NA_real_, 0))
}
"""
_R_TERM = {"worker": "worker", "item": "item", "worker:system": "ws", "item:system": "is"}


def _clmm_typed(frame: pd.DataFrame, path: Path, terms: tuple[str, ...], systems: tuple[str, ...]) -> dict:
    """ordinal::clmm typed directly in R on the CSV (the reference: no code of the package's R bridge)."""
    from humaneval_power.fitting import lme4

    ro = lme4.r_session()
    frame.to_csv(path, index=False)
    formula = "y ~ system" + "".join(f" + (1 | {_R_TERM[t]})" for t in terms)
    res = ro.r(_R_CLMM)(str(path), formula, ro.StrVector(list(systems)), "logit")
    get = lambda k: np.asarray(list(res.rx2(k)), float)
    by_r = dict(zip([str(s) for s in res.rx2("sd_names")], zip(get("sd"), get("sd_se"))))
    return {"thresholds": get("alpha"), "beta": get("beta"), "loglik": float(get("loglik")[0]), "se": get("se"),
            "sds": np.array([by_r[_R_TERM[t]][0] for t in terms]), "sd_se": np.array([by_r[_R_TERM[t]][1] for t in terms])}


@pytest.fixture(scope="module")
def real_fits(data_dir: Path, tmp_path_factory: pytest.TempPathFactory, lme4_backend) -> dict[str, dict]:
    """Per data set: both backends' fits through the API and clmm typed in R (shared by the tests below)."""
    from humaneval_power.fitting import clmm_r

    ok, why = clmm_r.available()
    if not ok:
        pytest.skip(why)
    out = {}
    for case in CASES:
        frame = _subset(data_dir, case)
        data = read_ratings(frame, family="ordinal")
        with pytest.MonkeyPatch.context() as mp:  # the clmm backend's fits, for the CLI test (same process)
            share_calls(mp, clmm_r, "fit_clmm_r")
            fits = {b: fit_ordinal(data, b) for b in ("clmm", "laplace")}
        ref = _clmm_typed(frame, tmp_path_factory.mktemp(case) / "ratings.csv", fits["laplace"].terms, data.systems)
        out[case] = {"fits": fits, "ref": ref}
    return out


def _differences(fit: OrdinalFitResult, ref: dict) -> dict[str, float]:
    f = fit.fit
    return {
        "thresholds": float(np.max(np.abs(f.thresholds - ref["thresholds"]))),
        "beta": float(np.max(np.abs(f.beta - ref["beta"]))),
        "sds": float(np.max(np.abs(np.abs(f.sds) - ref["sds"]))),
        "loglik_rel": abs(f.loglik - ref["loglik"]) / abs(ref["loglik"]),
        "se_rel": float(np.max(np.abs(f.se / ref["se"] - 1))),
    }


@pytest.mark.r
@pytest.mark.slow
@pytest.mark.xdist_group("ordinal_real_fits")  # one worker: the fits of real_fits are made once
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("backend", ["clmm", "laplace"])
def test_ordinal_fit_equals_clmm_typed_in_r(real_fits: dict, case: str, backend: str) -> None:
    fit, ref = real_fits[case]["fits"][backend], real_fits[case]["ref"]
    assert fit.fit.converged and fit.terms == tuple(t for t in ("worker", "item", "worker:system", "item:system"))
    d = _differences(fit, ref)
    assert d["thresholds"] < TOL_FIXED and d["beta"] < TOL_FIXED, d
    assert d["sds"] < TOL_SD, d
    assert d["loglik_rel"] < TOL_LOGLIK, d
    assert d["se_rel"] < 1e-3, d  # hence the Wald intervals of thresholds and effects
    # the SD intervals: SE(sd) of the same observed information, where clmm reports one
    both = np.isfinite(ref["sd_se"]) & (ref["sds"] > 1e-3)
    assert np.allclose(fit.fit.sd_se[both], ref["sd_se"][both], rtol=1e-3), (fit.fit.sd_se, ref["sd_se"])
    assert fit.fit.beta_names == fit.systems[1:] and [fit.fit.levels[0], fit.fit.levels[-1]] == [1, 5]


@pytest.mark.r
@pytest.mark.slow
@pytest.mark.xdist_group("ordinal_real_fits")
def test_ordinal_cli_equals_api_and_round_trips(real_fits: dict, data_dir: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI (default backend clmm) prints the API's numbers and writes the file load_ordinal_params reads. Its
    ``ordinal::clmm`` fits (deterministic) are the API run's, answered again for the same data and model
    (``conftest.share_calls``): a CLI that read other ratings or asked for another model would make other calls."""
    from humaneval_power.fitting import clmm_r

    share_calls(monkeypatch, clmm_r, "fit_clmm_r")
    frame = _subset(data_dir, "expert")
    frame.to_csv(tmp_path / "r.csv", index=False)
    assert main(["fit", str(tmp_path / "r.csv"), "--family", "ordinal", "-o", str(tmp_path / "p.json"), "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    api = real_fits["expert"]["fits"]["clmm"]
    assert [r["system"] for r in records] == ["F", "H"] and records[0]["backend"].startswith("clmm")
    for rec, want in zip(records, api.records()):
        assert rec["effect"] == pytest.approx(want["effect"], abs=1e-6)
        assert rec["threshold_1|2"] == pytest.approx(want["threshold_1|2"], abs=1e-6)
    params = load_ordinal_params(tmp_path / "p.json")
    assert params.thresholds == pytest.approx(tuple(api.fit.thresholds), abs=1e-6)
    assert OrdinalProcess.from_params(params).scale == (1, 5)


def _synthetic(seed: int = 3, workers: int = 6, items: int = 12) -> pd.DataFrame:
    """Fully crossed 1-5 ratings of two systems from a CLMM (all categories used)."""
    rng = np.random.default_rng(seed)
    w, i, s = (a.ravel() for a in np.meshgrid(np.arange(workers), np.arange(items), np.arange(2), indexing="ij"))
    eta = 0.6 * s + 0.8 * rng.standard_normal(workers)[w] + 0.7 * rng.standard_normal(items)[i]
    y = 1 + np.searchsorted(np.array([-2.0, -0.7, 0.5, 1.8]), eta + rng.logistic(size=len(w)))
    return pd.DataFrame({"worker": [f"w{k}" for k in w], "item": [f"i{k}" for k in i],
                         "system": np.where(s == 1, "B", "A"), "score": y})


@pytest.fixture(scope="module")
def synthetic_fit() -> OrdinalFitResult:
    return fit_ordinal(read_ratings(_synthetic(), family="ordinal"), "laplace")


def test_parameter_file_round_trip(synthetic_fit: OrdinalFitResult, tmp_path: Path) -> None:
    from humaneval_power.params import params_json

    doc = synthetic_fit.to_params_file()
    (tmp_path / "p.json").write_text(params_json(doc))
    back = load_ordinal_params(tmp_path / "p.json")
    assert back.to_json() == json.loads(params_json(doc))
    assert back == OrdinalParams.from_json(json.loads(params_json(doc)))
    assert doc["family"] == "ordinal" and doc["link"] == "logit" and doc["scale"] == [1, 2, 3, 4, 5]
    assert list(doc["sds"]) == list(ORDINAL_SD_NAMES) and doc["systems"] == ["A", "B"] and set(doc["effects"]) == {"B"}
    lo, hi = doc["provenance"]["intervals"]["effects"]["B"]
    assert lo < doc["effects"]["B"] < hi
    proc = OrdinalProcess.from_params(back)
    assert proc.thresholds == tuple(doc["thresholds"]) and proc.sd_item == doc["sds"]["sd_item"]


def test_ordinal_cli_without_r(tmp_path: Path, capsys: pytest.CaptureFixture[str], synthetic_fit: OrdinalFitResult) -> None:
    """``--backend laplace``: the readable summary, and the same numbers as the API."""
    _synthetic().to_csv(tmp_path / "r.csv", index=False)
    assert main(["fit", str(tmp_path / "r.csv"), "--family", "ordinal", "--backend", "laplace",
                 "-o", str(tmp_path / "p.json")]) == 0
    out = capsys.readouterr().out
    assert "cumulative logit" in out and "B vs A" in out and "thresholds" in out and "wrote" in out
    doc = json.loads((tmp_path / "p.json").read_text())
    assert doc["effects"]["B"] == pytest.approx(float(synthetic_fit.fit.beta[0]), abs=1e-9)


def test_probit_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _synthetic().to_csv(tmp_path / "r.csv", index=False)
    assert main(["fit", str(tmp_path / "r.csv"), "--family", "ordinal", "--backend", "laplace", "--link", "probit",
                 "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)[0]
    assert rec["link"] == "probit" and rec["threshold_1|2"] < rec["threshold_2|3"]


def test_unidentified_terms_are_left_out() -> None:
    """Each worker rates one system: worker x system groups as worker does; one rating per output: item x
    system is the latent residual. Both are left out and said so."""
    f = _synthetic()
    f = f[(f.worker.isin(["w0", "w1", "w2"]) & (f.system == "A")) | (f.worker.isin(["w3", "w4", "w5"]) & (f.system == "B"))]
    f = f.groupby(["item", "system"]).head(1)
    groups, notes = identified_terms(f)
    assert list(groups) == ["worker", "item"]
    assert any("worker x system groups the ratings exactly as worker" in n for n in notes)
    assert any("item x system: one rating per level" in n for n in notes)


# --------------------------------------------------------------------------- bad input


def _ratings(scores: list[float]) -> pd.DataFrame:
    n = len(scores)
    return pd.DataFrame({"worker": [f"w{k % 4}" for k in range(n)], "item": [f"i{k // 4}" for k in range(n)],
                         "system": ["A" if k % 2 else "B" for k in range(n)], "score": scores})


def _refused(argv: list[str], folder: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """Run the CLI, expect exit 2, one line on stderr, nothing on stdout, no output file; the line."""
    capsys.readouterr()
    code = main(argv)
    cap = capsys.readouterr()
    lines = cap.err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in cap.err and cap.out == "", cap.err
    assert not (folder / "p.json").exists()
    return lines[0]


BASE = [1, 2, 3, 4, 5] * 4

BAD = {
    "non-integer score": (BASE[:-1] + [3.5], [], "must be integers"),
    "out of range": (BASE[:-1] + [6], ["--scale", "1", "5"], "must lie in 1..5"),
    "two categories": ([1, 1, 2, 2] * 5, [], "at least three categories"),
    "a category never used": ([v for v in BASE if v != 3] + [2, 4], ["--scale", "1", "5"], "thresholds 2|3 and 3|4"),
    "top category never used": ([1, 2, 3, 4] * 5, ["--scale", "1", "5"], "threshold 4|5 cannot"),
    "unknown link": (BASE, ["--link", "logistic"], "--link"),
    "non-integer scale": (BASE, ["--scale", "1", "5.5"], "integer ratings"),
    "averaged duplicates": (BASE, ["--duplicates", "average"], "not categories"),
    "gaussian options": (BASE, ["--correlated"], "--correlated does not apply"),
    "a gaussian backend": (BASE, ["--backend", "statsmodels"], "does not fit ordinal"),
    "intervals not offered": (BASE, ["--backend", "laplace", "--intervals", "profile"], "not available"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_ordinal_input(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scores, more, expect = BAD[case]
    _ratings(scores).to_csv(tmp_path / "r.csv", index=False)
    line = _refused(["fit", str(tmp_path / "r.csv"), "--family", "ordinal", "-o", str(tmp_path / "p.json"), *more],
                    tmp_path, capsys)
    assert expect in line, line


def test_ordinal_backend_refuses_gaussian(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _ratings(BASE).to_csv(tmp_path / "r.csv", index=False)
    line = _refused(["fit", str(tmp_path / "r.csv"), "--backend", "clmm", "-o", str(tmp_path / "p.json")], tmp_path, capsys)
    assert "does not fit gaussian" in line
    line = _refused(["fit", str(tmp_path / "r.csv"), "--link", "probit", "-o", str(tmp_path / "p.json")], tmp_path, capsys)
    assert "--link applies to --family ordinal" in line
    line = _refused(["fit", str(tmp_path / "r.csv"), "--family", "ordinal", "--backend", "laplace", "--draws", "10",
                     "-o", str(tmp_path / "p.json")], tmp_path, capsys)
    assert "from --backend bambi" in line


#: ways to spoil an integer 1-5 rating column that uses every category, and the refusal each must give
_SPOIL = ("fraction", "beyond", "drop_category", "two_categories", "missing")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spoil=st.sampled_from(_SPOIL), seed=st.integers(0, 2**31 - 1), n=st.integers(10, 40))
def test_malformed_rating_columns_are_refused(spoil: str, seed: int, n: int, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Property: any such column is refused in one line with exit 2 and no parameter file, naming the problem."""
    rng = np.random.default_rng(seed)
    scores = list(rng.permutation(np.r_[1:6, rng.integers(1, 6, n)]).astype(float))
    k = int(rng.integers(len(scores)))
    if spoil == "fraction":
        scores[k] = float(rng.integers(1, 5)) + float(rng.uniform(0.01, 0.99))
        expect = "must be integers"
    elif spoil == "beyond":
        scores[k] = float(rng.choice([0, 6, 7, -3, 100]))
        expect = "must lie in 1..5"
    elif spoil == "drop_category":
        gone = int(rng.integers(1, 6))
        scores = [v if v != gone else float(gone + 1 if gone < 5 else gone - 1) for v in scores]
        expect = "is never used"
    elif spoil == "two_categories":
        keep = sorted(rng.choice(np.arange(1, 6), 2, replace=False))
        scores = [float(keep[int(v) % 2]) for v in scores]
        expect = "at least three categories"
    else:
        scores[k] = math.nan
        expect = "missing"
    _ratings(scores).to_csv(tmp_path / "r.csv", index=False)
    (tmp_path / "p.json").unlink(missing_ok=True)
    line = _refused(["fit", str(tmp_path / "r.csv"), "--family", "ordinal", "--backend", "laplace", "--scale", "1", "5",
                     "-o", str(tmp_path / "p.json")], tmp_path, capsys)
    assert expect in line, (spoil, line)


def _doc() -> dict:
    return OrdinalParams((-1.0, 0.0, 1.0, 2.0), dict.fromkeys(ORDINAL_SD_NAMES, 0.5), systems=("A", "B"),
                         effects={"B": 0.3}).to_json()


EDITS = {
    "thresholds not increasing": ({"thresholds": [-1.0, 0.5, 0.2, 2.0]}, "thresholds must increase: 2|3 = 0.5"),
    "tied thresholds": ({"thresholds": [-1.0, 0.0, 0.0, 2.0]}, "thresholds must increase"),
    "too few thresholds": ({"thresholds": [-1.0, 0.0, 1.0]}, "5 categories need 4 thresholds"),
    "unknown link": ({"link": "cauchit"}, "unknown link 'cauchit'"),
    "negative SD": ({"sds": {**dict.fromkeys(ORDINAL_SD_NAMES, 0.5), "sd_item": -0.1}}, "sd_item must be >= 0"),
    "missing SD": ({"sds": dict.fromkeys(ORDINAL_SD_NAMES[:3], 0.5)}, "missing: sd_item_system"),
    "scale not consecutive": ({"scale": [1, 2, 4, 5, 6]}, "consecutive integer"),
    "threshold not a number": ({"thresholds": [-1.0, "0", 1.0, 2.0]}, "threshold 2 must be a number"),
    "other version": ({"version": 9}, "unsupported version 9"),
    "a posterior draw with thresholds not increasing": (
        {"posterior_draws": {"thresholds": [[-1.0, 0.0, 1.0, 2.0], [-1.0, 1.0, 0.5, 2.0]],
                             **{k: [0.5, 0.4] for k in ORDINAL_SD_NAMES}, "effects": {"B": [0.1, 0.2]}}},
        "draw 2 of the thresholds is not 4 increasing numbers"),
    "posterior draws of unequal length": (
        {"posterior_draws": {"thresholds": [[-1.0, 0.0, 1.0, 2.0]], **{k: [0.5, 0.4] for k in ORDINAL_SD_NAMES}}},
        "sd_worker must list 1 draws"),
}


@pytest.mark.parametrize("case", list(EDITS))
def test_edited_parameter_file_is_refused(case: str, tmp_path: Path) -> None:
    edit, expect = EDITS[case]
    (tmp_path / "p.json").write_text(json.dumps({**_doc(), **edit}))
    with pytest.raises(InputError) as err:
        load_ordinal_params(tmp_path / "p.json")
    assert expect in str(err.value) and "\n" not in str(err.value) and str(tmp_path / "p.json") in str(err.value)


def test_typed_parameters_are_checked() -> None:
    with pytest.raises(InputError, match="thresholds must increase"):
        OrdinalParams((0.0, -1.0), dict.fromkeys(ORDINAL_SD_NAMES, 0.1), scale=(1, 2, 3))
    with pytest.raises(InputError, match="unknown link"):
        OrdinalParams((0.0, 1.0), dict.fromkeys(ORDINAL_SD_NAMES, 0.1), link="loglog", scale=(1, 2, 3))


def test_registry_families() -> None:
    assert registry.backends_for("ordinal") == ("bambi", "clmm", "laplace")
    assert registry.default_backend("ordinal") == "clmm" and registry.default_backend("gaussian") == "lme4"


def test_laplace_refuses_sds_the_ratings_do_not_identify(data_dir: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """AMT F vs H, 12 items, 84 workers, four terms: clmm fails ("nlminb failed to converge"); the Laplace fit
    ran to SDs ~50 where the likelihood cannot be evaluated and crashed with a LinAlgError (an internal error,
    exit 1). Now: one line, exit 2, no file, as clmm."""
    d = pd.read_csv(data_dir / "dialsummeval_amt" / "ratings.csv", dtype={"worker": str, "item": str, "system": str})
    d = d[(d.dimension == "relevance") & d.system.isin(["F", "H"])]
    d[d.item.isin(sorted(d.item.unique())[:12])].to_csv(tmp_path / "r.csv", index=False)
    line = _refused(["fit", str(tmp_path / "r.csv"), "--family", "ordinal", "--backend", "laplace",
                     "-o", str(tmp_path / "p.json")], tmp_path, capsys)
    assert "cannot be evaluated" in line


@pytest.mark.slow
@pytest.mark.xdist_group("ordinal_bambi")  # one worker: the bambi posterior is shared with test_analyze_ordinal
def test_bambi_posterior_draws_round_trip(small_ordinal_ratings: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """bambi's cumulative family: posterior medians near the Laplace fit (each effect's median inside its 95% Wald
    interval), increasing thresholds in every draw, and the draws stored in the file and read back. The posterior
    (2 chains x 100 draws, seed 1) of the small ratings file is the one
    test_analyze_ordinal::test_bambi_posterior_agrees_with_the_laplace_fit summarises (``conftest.share_calls``:
    the fitter's same arguments, fitted once per process; bambi's sampling and start-up were all of this test)."""
    pytest.importorskip("bambi")
    from humaneval_power.fitting import ordinal_fit
    from humaneval_power.params import params_json

    share_calls(monkeypatch, ordinal_fit, "fit_bambi_ordinal")
    data = read_ratings(small_ordinal_ratings, family="ordinal")
    post = fit_ordinal(data, "bambi", draws=BAMBI_DRAWS, chains=2, seed=1)
    assert post.intervals == "posterior" and post.posterior
    ml = fit_ordinal(data, "laplace")
    effects = data.systems[1:]
    for rec, want in zip(post.records(), ml.records(), strict=True):
        assert rec["system"] == want["system"] and want["effect_ci_low"] < rec["effect"] < want["effect_ci_high"]
        assert 0.5 <= rec["p_direction"] <= 1
    rec = post.records()[0]
    assert math.isnan(rec["z"]) and "p_value" not in rec
    doc = post.to_params_file()
    draws = doc["posterior_draws"]
    n = 2 * BAMBI_DRAWS  # both chains' draws
    assert len(draws["thresholds"]) == n and all(np.all(np.diff(t) > 0) for t in draws["thresholds"])
    assert set(draws) == {"thresholds", *ORDINAL_SD_NAMES, "effects"} and set(draws["effects"]) == set(effects)
    assert all(len(v) == n for v in draws["effects"].values())
    (tmp_path / "p.json").write_text(params_json(doc))
    back = load_ordinal_params(tmp_path / "p.json")
    assert back.draws == json.loads(params_json(doc))["posterior_draws"]
    assert "posterior medians" in post.summary()
