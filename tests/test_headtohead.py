"""Head-to-head studies: exact sign-test power, simulation, solvers, the GLMM, bad input."""
from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from humaneval_power.analyses import JudgmentGLMM
from humaneval_power.cli import main
from humaneval_power.engine import run_cells
from humaneval_power.params import H2HParams, load_h2h_params
from humaneval_power.scenarios.headtohead import (
    IndependentJudgments,
    MixedJudgments,
    h2h_mde,
    h2h_mixed_power,
    h2h_power,
    h2h_sample_size,
)
from humaneval_power.significance.binomial import exact_power, sign_test

from .conftest import mc_tolerance
from .crowd_sharing import laplace_fits_with_the_lrt, same_wald_fields


def test_card2020_figure1_numbers() -> None:
    t = h2h_power([100, 25], [0.65])
    assert t.power.round(4).tolist() == [0.8276, 0.3061]


def test_sign_test_equals_scipy_binomtest() -> None:
    for w, t, lo in [(60, 0, 40), (13, 5, 2), (0, 3, 0), (7, 0, 8)]:
        p, _ = sign_test(np.array([w]), np.array([t]), np.array([lo]), "drop", 0.05)
        ref = stats.binomtest(w, w + lo, 0.5).pvalue if w + lo else 1.0
        assert p[0] == pytest.approx(ref, rel=1e-9)


@pytest.mark.parametrize("ties", ["drop", "split"])
@pytest.mark.parametrize("n,p_win,p_tie", [(25, 0.65, 0.0), (100, 0.65, 0.0), (150, 0.45, 0.2), (80, 0.3, 0.3)])
def test_exact_equals_simulation(ties: str, n: int, p_win: float, p_tie: float) -> None:
    sims = 100_000
    exact = IndependentJudgments(n, p_win, p_tie, ties, "exact").exact()
    sim = run_cells([IndependentJudgments(n, p_win, p_tie, ties, "simulate")], sims, seed=4)[0]
    assert abs(sim.power - exact.power) < mc_tolerance(exact.power, sims)
    assert abs(sim.type_m - exact.type_m) < 0.02 * exact.type_m
    assert abs(sim.type_s - exact.type_s) < mc_tolerance(max(exact.type_s, 1e-3), max(int(sims * exact.power), 1))


def test_null_rejection_is_at_most_alpha() -> None:
    for ties in ("drop", "split"):
        rate, type_s, type_m = exact_power(300, 0.4, 0.2, ties)
        assert rate <= 0.05 and np.isnan(type_s) and np.isnan(type_m)


def test_one_million_judgments() -> None:
    power, _, _ = exact_power(1_000_000, 0.401, 0.2, "drop")
    # normal approximation of the same test as an independent check
    q = 0.401 / 0.8
    m = 800_000
    z = (q - 0.5) * np.sqrt(m) / np.sqrt(q * (1 - q))
    approx = stats.norm.sf(1.959964 * 0.5 / np.sqrt(q * (1 - q)) - z)
    assert power == pytest.approx(approx, abs=5e-3)


def test_sample_size_and_mde() -> None:
    r = h2h_sample_size(0.6, 0.1)
    below = [exact_power(k, 0.6, 0.1)[0] for k in range(max(1, r.value - 40), r.value)]
    assert exact_power(r.value, 0.6, 0.1)[0] >= 0.8 and max(below) < 0.8
    assert r.high >= r.value == r.low
    m = h2h_mde(100)
    assert m.at.power == pytest.approx(0.8, abs=1e-6)
    assert exact_power(100, m.value - 1e-3, 0.0)[0] < 0.8


@pytest.mark.parametrize("argv", [
    ["power", "--p-win", "0.7", "--p-tie", "0.4", "--n", "10"],
    ["power", "--p-win", "1.2", "--n", "10"],
    ["power", "--p-win", "0", "--n", "10"],
    ["power", "--p-win", "0.6", "--n", "0"],
    ["power", "--p-win", "0.6", "--p-tie", "-0.1", "--n", "10"],
    ["size", "--p-win", "0.5"],
    ["mde", "--n", "0"],
    ["power", "--sd-worker", "0.5", "--workers", "5", "--items", "10", "--effect", "0.6"],
    ["power", "--sd-worker", "0.5", "--sd-item", "0.1", "--workers", "5", "--items", "10", "--effect", "1.5"],
])
def test_bad_input(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["h2h"] + argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_params_file_of_the_wrong_family(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from humaneval_power.params import get_preset, save_params

    path = tmp_path / "likert.json"
    save_params(get_preset("card2020-high"), path)
    assert main(["h2h", "power", "--params", str(path), "--workers", "5", "--items", "20", "--effect", "0.6"]) == 2
    assert "not a head-to-head parameter file" in capsys.readouterr().err
    h2h = tmp_path / "h2h.json"
    h2h.write_text(json.dumps({"schema": "humaneval-power/h2h-params", "version": 1, "family": "binomial",
                               "sd_worker": 0.3, "sd_item": 0.4}))
    assert main(["likert", "power", "--params", str(h2h), "--effect", "0.1", "--sims", "10"]) == 2
    assert "binomial" in capsys.readouterr().err


def test_glmm_design_assignment_is_balanced() -> None:
    cell = MixedJudgments(H2HParams(0.3, 0.3), workers=6, items=9, log_odds=0.4, per_item=4)
    w, i = cell.design()
    assert len(w) == 36 and np.bincount(i).tolist() == [4] * 9
    assert np.bincount(w, minlength=6).tolist() == [6] * 6
    assert all(len(set(w[i == k])) == 4 for k in range(9))


#: null / zero-variance studies refitted by glmer (the lme4 tier) in the tests below: each is compared with the
#: fast tier's fit of the same data, so the glmer tier's rates need no Monte-Carlo tolerance of their own (a
#: glmer-tier error fails on the study where it shows; 150 studies before round 5, 600 before round 4)
GLMER_SIMS = 60
#: studies of the fast tier (no R) for the rates themselves
FAST_SIMS = 2000


def _recording_glmer(monkeypatch: pytest.MonkeyPatch) -> list[tuple[dict, np.ndarray, object]]:
    """The glmer refits the engine makes in this process (``jobs=1``), as (columns, responses, result)."""
    from humaneval_power.fitting import lme4

    refits: list = []
    refit = lme4.refit_glmm_many

    def recording(columns, y, *args, **kwargs):
        refits.append((columns, y, refit(columns, y, *args, **kwargs)))
        return refits[-1][2]

    monkeypatch.setattr(lme4, "refit_glmm_many", recording)
    return refits


def _glmer_fits_equal_the_fast_fits(refits: list, lrt: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each recorded glmer study refitted by the fast tier (glmer's Laplace fit without R): Wald z within 0.05 and
    LRT p within 2e-3 (test_glmm_fast.test_decides_as_glmer's tolerances). Returns glmer's z and LRT p (NaN
    unless ``lrt``) and its failures."""
    import pandas as pd

    from humaneval_power.fitting.glmm_laplace import fit_glmm_laplace

    z_all, p_all, failed_all = [], [], []
    for columns, y, res in refits:
        fast = fit_glmm_laplace(columns["worker"] - 1, columns["item"] - 1, y.T, lrt=lrt)
        res = pd.DataFrame(res)
        z = (res["estimate"] / res["se"]).to_numpy()
        ok = (res["failed"].to_numpy() == 0) & ~fast.failed
        assert np.abs(fast.z - z)[ok].max() < 0.05
        if lrt:
            assert fast.p_lrt is not None
            np.testing.assert_allclose(fast.p_lrt[ok], res["p_lrt"].to_numpy()[ok], atol=2e-3)
        z_all.append(z)
        p_all.append(res["p_lrt"].to_numpy())
        failed_all.append(res["failed"].to_numpy() > 0)
    return np.concatenate(z_all), np.concatenate(p_all), np.concatenate(failed_all)


@pytest.mark.r
@pytest.mark.slow
def test_glmm_without_random_effects_matches_independent_judgments(lme4_backend,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Zero variances: 10 workers x 50 items = 500 independent judgments at P(B) = 0.5707 (exact power 0.877).
    The glmer tier through the engine on 60 studies, each equal to the fast tier's fit of the same data, and its
    power the share glmer's z finds; the fast tier on 2,000 studies at the exact power within Monte-Carlo error
    (+-0.026; before: 400 glmer studies, +-0.058).

    (On small designs the GLMM pays for estimating the variances: see docs/headtohead.md.)
    """
    p_b = 0.5707
    refits = _recording_glmer(monkeypatch)
    cell = MixedJudgments(H2HParams(0.0, 0.0), 10, 50, float(np.log(p_b / (1 - p_b))),
                          analysis=JudgmentGLMM("lme4", "z"))
    glmm = run_cells([cell], GLMER_SIMS, seed=3, jobs=1)[0]  # in this process: the refits are recorded
    z, _, failed = _glmer_fits_equal_the_fast_fits(refits, lrt=False)
    assert len(z) == GLMER_SIMS and glmm.n_failed == 0 == failed.sum()
    assert glmm.power == pytest.approx(np.mean(2 * stats.norm.sf(np.abs(z)) <= 0.05), abs=1e-12)
    fast = run_cells([replace(cell, analysis=JudgmentGLMM("fast", "z"))], FAST_SIMS, seed=3, jobs=1)[0]
    exact = exact_power(500, p_b, 0.0)[0]
    assert abs(fast.power - exact) < mc_tolerance(exact, FAST_SIMS), (fast.power, exact)
    assert fast.n_failed == 0


@pytest.mark.r
@pytest.mark.slow
def test_glmm_null_rejection_rate(lme4_backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """The LRT holds alpha; the Wald z is liberal (documented: it ignores that sd_worker rests on 10 workers,
    docs/headtohead.md). The glmer tier's LRT cell through the engine on 60 null studies: each study's glmer
    fit (its LRT p and Wald z) equals the fast tier's fit of the same data, and the cell's rate is the share of
    those studies glmer's LRT rejects; the rates themselves from the fast tier's LRT and z cells on 2,000 null
    studies (LRT within +-0.017 of alpha; before: 600 glmer studies, +-0.031), the z cell reading the LRT cell's
    fits of the same studies (the fit with the LRT carries the Wald z bit for bit: checked on glmer's first chunk).
    The z side at this design is also test_glmm_fast.test_type_one_error_of_the_tests's first case."""
    refits = _recording_glmer(monkeypatch)
    cell = MixedJudgments(H2HParams(0.5, 0.5), 10, 40, 0.0, per_item=5, analysis=JudgmentGLMM("lme4", "lrt"))
    r = run_cells([cell], GLMER_SIMS, seed=5, jobs=1)[0]  # in this process: the refits are recorded
    _, p_lrt, failed = _glmer_fits_equal_the_fast_fits(refits, lrt=True)
    assert len(p_lrt) == GLMER_SIMS
    assert r.power == pytest.approx(np.mean((p_lrt <= cell.analysis.alpha) & ~failed), abs=1e-12)
    columns, y, _ = refits[0]
    same_wald_fields(columns["worker"] - 1, columns["item"] - 1, y.T)  # so the z cell may read the LRT cell's fits
    laplace_fits_with_the_lrt(monkeypatch)
    lrt, z = run_cells([replace(cell, analysis=JudgmentGLMM("fast", t)) for t in ("lrt", "z")], FAST_SIMS, seed=5,
                       jobs=1)
    print(f"\nGLMM null rejection rates: lrt {lrt.power:.3f} [{lrt.ci_low:.3f}, {lrt.ci_high:.3f}], "
          f"z {z.power:.3f} [{z.ci_low:.3f}, {z.ci_high:.3f}]")
    assert abs(lrt.power - 0.05) < mc_tolerance(0.05, FAST_SIMS)
    assert z.ci_low > 0.05


@pytest.mark.r
def test_wmt13_fit_then_plan(lme4_backend, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "h2h.json"
    assert main(["fit", str(data_dir / "wmt13_fren_rankings" / "pairs.csv"), "--family", "binomial",
                 "--worker", "judge", "--item", "segment", "--where", "split=train",
                 "--baseline", "uedin-wmt13.2838", "--systems", "uedin-wmt13.2838", "online-B", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["h2h", "power", "--params", str(out), "--workers", "10", "--items", "30", "--judgments-per-item",
                 "3", "--effect", "0.6", "--sims", "30", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)[0]
    assert rec["workers"] == 10 and rec["judgments_per_item"] == 3 and rec["n_sims"] == 30
    # the CLI is the API: the fitted file, p_win 0.6 as log-odds, the default seed (0): the same studies
    api = h2h_mixed_power(load_h2h_params(out), [10], [30], [math.log(0.6 / 0.4)], [3], n_sims=30).iloc[0]
    assert (rec["power"], rec["ci_low"], rec["effect"]) == pytest.approx((api.power, api.ci_low, api.effect), abs=1e-12)
