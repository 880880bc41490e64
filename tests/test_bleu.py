"""BLEU / chrF: sufficient statistics vs sacrebleu, swap effects, P0/b0 fit, randomization power, paired tests."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from humaneval_power.cli import main
from humaneval_power.engine import run_cells
from humaneval_power.errors import InputError
from humaneval_power.fitting.swap_effects import (
    estimate_swap_parameters,
    fit_laplace,
    subset_swap_check,
    swap_effects,
)
from humaneval_power.metrics import corpus_stats, read_lines
from humaneval_power.scenarios.bleu import BleuScenario, bleu_mde, draw_swap_effects
from humaneval_power.scenarios.f1 import F1Scenario
from humaneval_power.significance.paired import paired_bootstrap, paired_randomization

from .conftest import mc_tolerance, sim_jobs

SYSTEMS = ("HW-TSC", "ONLINE-A", "ONLINE-Y", "NLLB_MBR_BLEU")


@pytest.fixture(scope="module")
def wmt(data_dir):
    d = data_dir / "wmt23_zhen"
    ref = read_lines(d / "reference.txt", "reference")
    outs = {s: read_lines(d / f"system.{s}.txt", "system") for s in SYSTEMS}
    official = {}
    for line in (d / "official_bleu.tsv").read_text().splitlines()[1:]:
        cols = line.split("\t")
        official[cols[1]] = float(cols[-1])
    return d, ref, outs, official


#: the tests that share the scorings below run on one xdist worker (the cache is per process)
WMT_SCORES = pytest.mark.xdist_group("wmt_scores")

#: scorings of the WMT texts computed once for the module's tests (``corpus_stats_once``, ``sacre``, ``scorer``)
_SCORED: dict[tuple, object] = {}


def _texts(lines: list[str] | list[list[str]]) -> tuple:
    return tuple(lines) if isinstance(lines[0], str) else tuple(map(tuple, lines))


def corpus_stats_once(hyp: list[str], refs: list[str] | list[list[str]], metric: str = "bleu") -> object:
    """``corpus_stats`` of these texts, computed once per module (deterministic; no test modifies it)."""
    key = ("ours", _texts(hyp), _texts(refs), metric)
    if key not in _SCORED:
        _SCORED[key] = corpus_stats(hyp, refs, metric)
    return _SCORED[key]


def scorer(metric: str, refs: list[str] | list[list[str]]) -> object:
    """sacrebleu's BLEU() or CHRF() with these references' n-grams extracted once: its own ``references=``
    cache for scoring many hypotheses against the same references (the same scores as passing them each
    time; extracting them is half of a corpus score's cost)."""
    import sacrebleu

    refs = [refs] if isinstance(refs[0], str) else refs
    key = ("scorer", metric, _texts(refs))
    if key not in _SCORED:
        _SCORED[key] = (sacrebleu.BLEU if metric == "bleu" else sacrebleu.CHRF)(references=refs)
    return _SCORED[key]


def sacre(hyp: list[str], refs: list[str] | list[list[str]], metric: str = "bleu") -> float:
    """sacrebleu's corpus score (``corpus_bleu`` / ``corpus_chrf`` defaults), once per module for these texts."""
    key = ("sacre", _texts(hyp), _texts(refs), metric)
    if key not in _SCORED:
        _SCORED[key] = scorer(metric, refs).corpus_score(hyp, None).score
    return _SCORED[key]


@WMT_SCORES
def test_corpus_scores_equal_sacrebleu_and_official(wmt) -> None:
    _, ref, outs, official = wmt
    rng = np.random.default_rng(0)
    for name, hyp in outs.items():
        for metric in ("bleu", "chrf"):
            st = corpus_stats_once(hyp, ref, metric)
            assert st.corpus_score() == pytest.approx(sacre(hyp, ref, metric), abs=1e-9)
            if metric == "bleu":
                assert abs(st.corpus_score() - official[name]) < 0.1
            # any sub-corpus, down to single sentences (smoothing, brevity penalty, empty orders)
            for density in (0.0008, 0.003, 0.3):
                w = (rng.random((60, st.n)) < density).astype(float)
                w[0, :] = 0
                w[0, rng.integers(st.n)] = 1
                sums = w @ st.stats
                want = [scorer(metric, ref)._compute_score_from_stats(list(s)).score for s in sums]
                assert np.allclose(st.score_sums(sums), want, atol=1e-9, rtol=0)


@WMT_SCORES
def test_swap_effects_against_rescoring_text(wmt) -> None:
    _, ref, outs, _ = wmt
    a_txt, b_txt = outs["ONLINE-A"], outs["HW-TSC"]
    a, b = corpus_stats_once(a_txt, ref), corpus_stats_once(b_txt, ref)
    eff = swap_effects(a, b)
    base = sacre(b_txt, ref) - sacre(a_txt, ref)
    for i in (0, 17, 1975):
        a2, b2 = list(a_txt), list(b_txt)
        a2[i], b2[i] = b_txt[i], a_txt[i]
        swapped = sacre(b2, ref) - sacre(a2, ref)
        assert eff[i] == pytest.approx(swapped - base, abs=1e-9)
    # App. G, Fig. 15: single-swap effects add up to the effect of swapping a subset
    check = subset_swap_check(a, b, eff)
    assert check["correlation"] > 0.99 and check["rms_gap"] < 0.25 * check["sd_subset_effect"]


@WMT_SCORES
def test_two_references_equal_sacrebleu(wmt) -> None:
    """Multi-reference statistics (issue 17: 9): the reference plus NLLB_MBR_BLEU's output as a second one."""
    _, ref, outs, _ = wmt
    refs = [ref, outs["NLLB_MBR_BLEU"]]
    rng = np.random.default_rng(1)
    for name in ("HW-TSC", "ONLINE-A", "ONLINE-Y"):
        hyp = outs[name]
        for metric in ("bleu", "chrf"):
            st = corpus_stats_once(hyp, refs, metric)
            assert st.references == 2
            assert st.corpus_score() == pytest.approx(sacre(hyp, refs, metric), abs=1e-9)
            assert st.corpus_score() > corpus_stats_once(hyp, ref, metric).corpus_score() + 5  # the second one counts
            w = (rng.random((20, st.n)) < 0.01).astype(float)  # sub-corpora: the sums score as sacrebleu
            want = [scorer(metric, refs)._compute_score_from_stats(list(x)).score for x in w @ st.stats]
            assert np.allclose(st.score_sums(w @ st.stats), want, atol=1e-9, rtol=0)
    a_txt, b_txt = outs["ONLINE-A"], outs["HW-TSC"]
    eff = swap_effects(corpus_stats_once(a_txt, refs), corpus_stats_once(b_txt, refs))
    base = sacre(b_txt, refs) - sacre(a_txt, refs)
    a2, b2 = list(a_txt), list(b_txt)
    a2[17], b2[17] = b_txt[17], a_txt[17]
    swapped = sacre(b2, refs) - sacre(a2, refs)
    assert eff[17] == pytest.approx(swapped - base, abs=1e-9)


@pytest.mark.parametrize("metric", ["bleu", "chrf"])
def test_references_extracted_once_give_sacrebleus_statistics(metric: str) -> None:
    """``corpus_stats`` extracts a reference set's n-grams once for the systems scored against it: every call
    still gives the statistics of sacrebleu passed the references (bit for bit), and other references of the
    same length and count (one word changed, one stream more) are not answered from the first ones."""
    import sacrebleu

    rng = np.random.default_rng(3)
    words = "the a cat dog sat on mat ran far home .".split()

    def lines() -> list[str]:
        return [" ".join(rng.choice(words, rng.integers(1, 12))) for _ in range(40)]

    ref, other, hyps = lines(), lines(), [lines() for _ in range(3)]
    edited = list(ref)
    edited[7] += " dog"
    for refs in ([ref], [ref], [edited], [ref, other], [ref], [edited, other]):
        for hyp in hyps:
            fresh = (sacrebleu.BLEU() if metric == "bleu" else sacrebleu.CHRF())._extract_corpus_statistics(hyp, refs)
            got = corpus_stats(hyp, refs if len(refs) > 1 else refs[0], metric)
            assert got.stats.tobytes() == np.asarray(fresh, dtype=float).tobytes() and got.references == len(refs)


def test_reference_streams_are_checked(wmt) -> None:
    _, ref, outs, _ = wmt
    hyp = outs["HW-TSC"]
    with pytest.raises(InputError, match="lines in reference 2"):
        corpus_stats(hyp, [ref, ref[:-1]])
    with pytest.raises(InputError, match="one line per segment"):
        corpus_stats(hyp, "the reference")
    a, b = corpus_stats(hyp, ref), corpus_stats(outs["ONLINE-A"], [ref, ref])
    with pytest.raises(InputError, match="same references"):
        paired_randomization(a, b)


def test_a_system_against_itself_is_a_clean_error(wmt, recwarn: pytest.WarningsRecorder) -> None:
    """Main: estimate leaked numpy's RuntimeWarning, the paired bootstrap called it significant (p = 0.001)."""
    _, ref, outs, _ = wmt
    a = corpus_stats(outs["HW-TSC"], ref)
    b = corpus_stats(list(outs["HW-TSC"]), ref)
    for call in (lambda: estimate_swap_parameters(a, b, 50), lambda: paired_bootstrap(a, b, 100),
                 lambda: paired_randomization(a, b, 100)):
        with pytest.raises(InputError, match="same statistics on every segment"):
            call()
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_laplace_fit_recovers_parameters() -> None:
    rng = np.random.default_rng(5)
    n, p0, b0 = 20_000, 0.15, 25.0
    eff = draw_swap_effects(n, 0.0, p0, b0, 1, rng)[0]
    fit = fit_laplace(eff)
    m = n * (1 - p0)
    assert abs(fit["p0"] - p0) < 4 * math.sqrt(p0 * (1 - p0) / n)
    assert abs(fit["b0"] - b0) < 4 * b0 / math.sqrt(m)  # MLE of a Laplace scale: SE b / sqrt(m)


def test_card2020_power_and_type_m() -> None:
    """n 2000, dB 1, P0 .13, b0 25.8: the authors' notebook 0.756 (500 sims), Type-M 1.20.

    Reference for Type-M: the normal limit (observed difference ~ N(1, sd), sd from
    Var(delta)), E[obs | significant] / 1 = 1.16; the notebook's 1.20 is 3 SE away
    with 500 studies (docs/bleu.md)."""
    sims = 4000
    r = run_cells([BleuScenario(2000, 1.0, 0.13, 25.8, "randomization", 10_000)], sims, seed=11, jobs=sim_jobs())[0]
    se = math.sqrt(r.power * (1 - r.power) / sims + 0.756 * 0.244 / 500)
    assert abs(r.power - 0.756) < 3.5 * se
    n, p0, b = 2000, 0.13, 25.8 / 2000
    mu = -2 / (n * (1 - p0))
    sd = 0.5 * math.sqrt(n * ((1 - p0) * (2 * b * b + mu * mu) - ((1 - p0) * mu) ** 2))
    c = stats.norm.isf(0.025) * sd
    z = (1 - c) / sd
    type_m = 1 + sd * stats.norm.pdf(z) / stats.norm.cdf(z)
    assert abs(r.type_m - type_m) < 0.02 and abs(r.power - stats.norm.sf(-z)) < mc_tolerance(r.power, sims)


@pytest.mark.parametrize("n", [100, 500, 2000])
def test_approximation_matches_montecarlo(n: int) -> None:
    """Same simulated studies, p-values by 5,000 permutations vs saddlepoint: power within 0.01."""
    for delta in (0.5, 1.0, 2.0):
        for p0 in (0.1, 0.3):
            for b0 in (20.0, 30.0):
                mc = run_cells([BleuScenario(n, delta, p0, b0, "randomization", 5000)], 400, seed=3, jobs=sim_jobs())[0].power
                sp = run_cells([BleuScenario(n, delta, p0, b0, "saddlepoint")], 400, seed=3, jobs=sim_jobs())[0].power
                assert abs(mc - sp) <= 0.01, (n, delta, p0, b0, mc, sp)


def test_null_rejection_rate() -> None:
    sims = 4000
    for method, permutations in (("randomization", 2000), ("saddlepoint", 1)):
        r = run_cells([BleuScenario(300, 0.0, 0.2, 25.0, method, permutations)], sims, seed=4, jobs=sim_jobs())[0]
        assert r.power <= 0.05 + mc_tolerance(0.05, sims), method


def test_mde_reaches_target() -> None:
    """The MDE's power reaches the target and 3% below it does not (n=300: the search's steps cost a fifth of n=2000's)."""
    m = bleu_mde(300, 0.13, 25.8, n_sims=1000, seed=2, jobs=sim_jobs())
    below = run_cells([BleuScenario(300, m.value * 0.97, 0.13, 25.8, "saddlepoint")], 1000, seed=2,
                      jobs=sim_jobs())[0].power
    assert m.at.power >= 0.8 > below
    assert m.low <= m.value <= m.high


@WMT_SCORES
def test_paired_tests_agree_with_sacrebleu(wmt) -> None:
    from sacrebleu.significance import _paired_ar_test, _paired_bs_test

    _, ref, outs, _ = wmt
    a_txt = outs["ONLINE-Y"]
    b_txt = outs["ONLINE-A"][:150] + a_txt[150:]  # a close pair: p-values far from 0 and 1
    a, b = corpus_stats_once(a_txt, ref), corpus_stats(b_txt, ref)
    metric = scorer("bleu", ref)  # BLEU() with the reference's n-grams cached: references=None below
    bl_stats = metric._extract_corpus_statistics(a_txt, None)
    info = {"BLEU": (bl_stats, metric._aggregate_and_compute(bl_stats))}
    ours = paired_randomization(a, b, 10_000, seed=1)["p_value"]
    theirs = _paired_ar_test(info, "b", b_txt, None, {"BLEU": metric}, 10_000, -1, 7)[1]["BLEU"].p_value
    assert abs(ours - theirs) < 3.5 * math.sqrt(2 * theirs * (1 - theirs) / 10_000)
    ours = paired_bootstrap(a, b, 1000, seed=1)["p_value"]
    theirs = _paired_bs_test(info, "b", b_txt, None, {"BLEU": metric}, 1000, -1, 7)[1]["BLEU"].p_value
    assert abs(ours - theirs) < 3.5 * math.sqrt(2 * theirs * (1 - theirs) / 1000)
    # with the same seed both draw the same resamples (numpy's integers / choice): the same p-value
    same = _paired_bs_test(info, "b", b_txt, None, {"BLEU": metric}, 1000, -1, 1)[1]["BLEU"].p_value
    assert ours == pytest.approx(same, abs=1e-12)


def test_f1_randomization_null_and_effect() -> None:
    null = F1Scenario(400, 0.2, (0.1, 0.1, 0.1, 0.7), (0.85, 0.05, 0.05, 0.05), permutations=500)
    r = run_cells([null], 600, seed=1, jobs=sim_jobs())[0]
    assert null.effect == 0 and r.power <= 0.05 + mc_tolerance(0.05, 600)
    alt = F1Scenario(400, 0.2, (0.1, 0.05, 0.15, 0.7), (0.85, 0.05, 0.05, 0.05), permutations=500)
    r = run_cells([alt], 600, seed=1, jobs=sim_jobs())[0]
    assert r.power > 0.2 and r.mean_estimate == pytest.approx(alt.effect, abs=0.01)


def test_cli_estimate_and_test(wmt, capsys: pytest.CaptureFixture[str]) -> None:
    d = wmt[0]
    assert main(["bleu", "estimate", "--ref", str(d / "reference.txt"), "--sys-a", str(d / "system.ONLINE-A.txt"),
                 "--sys-b", str(d / "system.HW-TSC.txt"), "--n-boot", "200", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)[0]
    assert {"n", "bleu_a", "bleu_b", "delta", "p0", "b0", "p0_ci_low", "b0_ci_high"} <= set(rec)
    assert rec["p0_ci_low"] <= rec["p0"] <= rec["p0_ci_high"] and rec["b0_ci_low"] <= rec["b0"] <= rec["b0_ci_high"]
    assert main(["bleu", "test", "--ref", str(d / "reference.txt"), "--baseline", str(d / "system.ONLINE-Y.txt"),
                 "--systems", str(d / "system.ONLINE-A.txt"), str(d / "system.NLLB_MBR_BLEU.txt"), "--paired-bs",
                 "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["system"] for r in rows] == ["ONLINE-A", "NLLB_MBR_BLEU"]
    assert {"system", "baseline", "score", "baseline_score", "delta", "p_value", "method"} <= set(rows[0])


def test_cli_power_records(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bleu", "power", "--n", "500", "--delta", "1", "--p0", "0.13", "--b0", "25.8", "--sims", "200",
                 "--method", "saddlepoint", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)[0]
    assert {"n", "delta", "p0", "b0", "power", "type_s", "type_m", "method"} <= set(rec)
    assert rec["method"] == "saddlepoint"


@pytest.mark.parametrize("argv", [
    ["power", "--n", "0", "--delta", "1", "--p0", "0.1", "--b0", "25"],
    ["power", "--n", "100", "--delta", "1", "--p0", "1.0", "--b0", "25"],
    ["power", "--n", "100", "--delta", "1", "--p0", "-0.1", "--b0", "25"],
    ["power", "--n", "100", "--delta", "1", "--p0", "0.1", "--b0", "0"],
    ["mde", "--n", "-5", "--p0", "0.1", "--b0", "25"],
    ["size", "--delta", "0", "--p0", "0.1", "--b0", "25"],
])
def test_bad_numbers(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bleu"] + argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_bad_files(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    ref, a, b, empty = (tmp_path / f for f in ("ref.txt", "a.txt", "b.txt", "empty.txt"))
    ref.write_text("the cat sat\na dog\n")
    a.write_text("the cat sat\n")
    b.write_text("the cat\na dog\n")
    empty.write_text("")
    cases = [["estimate", "--ref", str(ref), "--sys-a", str(a), "--sys-b", str(b)],
             ["estimate", "--ref", str(empty), "--sys-a", str(b), "--sys-b", str(b)],
             ["test", "--ref", str(ref), "--baseline", str(b), "--systems", str(tmp_path / "missing.txt")],
             ["test", "--ref", str(ref), "--baseline", str(b), "--systems", str(a)]]
    for argv in cases:
        assert main(["bleu"] + argv) == 2, argv
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@WMT_SCORES
def test_cli_several_references_and_the_same_system_twice(wmt, capsys: pytest.CaptureFixture[str]) -> None:
    d, ref, outs, _ = wmt
    refs = [str(d / "reference.txt"), str(d / "system.NLLB_MBR_BLEU.txt")]
    assert main(["bleu", "test", "--ref", *refs, "--baseline", str(d / "system.ONLINE-Y.txt"), "--systems",
                 str(d / "system.HW-TSC.txt"), "--trials", "200", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    two = [ref, outs["NLLB_MBR_BLEU"]]
    assert row["references"] == 2
    assert row["score"] == pytest.approx(sacre(outs["HW-TSC"], two), abs=1e-9)
    assert row["baseline_score"] == pytest.approx(sacre(outs["ONLINE-Y"], two), abs=1e-9)
    assert main(["bleu", "estimate", "--ref", refs[0], "--ref", refs[1], "--sys-a", str(d / "system.ONLINE-A.txt"),
                 "--sys-b", str(d / "system.HW-TSC.txt"), "--n-boot", "50", "--metric", "chrf", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)[0]
    assert rec["references"] == 2
    assert rec["chrf_b"] == pytest.approx(sacre(outs["HW-TSC"], two, "chrf"), abs=1e-9)
    same = str(d / "system.HW-TSC.txt")
    for argv in (["test", "--ref", refs[0], "--baseline", same, "--systems", same],
                 ["test", "--ref", refs[0], "--baseline", same, "--systems", same, "--paired-bs"],
                 ["estimate", "--ref", refs[0], "--sys-a", same, "--sys-b", same]):
        assert main(["bleu"] + argv) == 2, argv
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "same statistics" in err and "Warning" not in err


def test_compare_with_baseline_is_the_cli_loop_in_the_library(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """`bleu test` with several systems = compare_with_baseline = one paired test per system, same seed."""
    from humaneval_power.metrics import corpus_stats
    from humaneval_power.significance.paired import compare_with_baseline, paired_bootstrap, paired_randomization

    rng = np.random.default_rng(3)
    words = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran"]
    ref = [" ".join(rng.choice(words, 6)) for _ in range(40)]
    outs = {name: [" ".join(rng.choice(words, 6)) for _ in range(40)] for name in ("A", "B", "C")}
    stats = {k: corpus_stats(v, [ref], "bleu") for k, v in outs.items()}
    rows = compare_with_baseline(stats["A"], {"B": stats["B"], "C": stats["C"]}, "bootstrap", 300, seed=5)
    assert [r["system"] for r in rows] == ["B", "C"]
    assert rows[1]["p_value"] == paired_bootstrap(stats["A"], stats["C"], 300, 5)["p_value"]
    ar = compare_with_baseline(stats["A"], {"C": stats["C"]}, trials=500, seed=5)[0]
    assert ar["p_value"] == paired_randomization(stats["A"], stats["C"], 500, 5)["p_value"]
    for name, lines in {"ref": ref, **outs}.items():
        (tmp_path / f"system.{name}.txt").write_text("\n".join(lines) + "\n")
    code = main(["bleu", "test", "--ref", str(tmp_path / "system.ref.txt"), "--baseline", str(tmp_path / "system.A.txt"),
                 "--systems", str(tmp_path / "system.B.txt"), str(tmp_path / "system.C.txt"), "--paired-bs",
                 "--trials", "300", "--seed", "5", "--json"])
    assert code == 0
    cli = json.loads(capsys.readouterr().out)
    assert [(r["system"], r["p_value"]) for r in cli] == [(r["system"], r["p_value"]) for r in rows]


def test_adjust_pvalues_equals_statsmodels_multipletests(monkeypatch: pytest.MonkeyPatch) -> None:
    """multiplicity.adjust_pvalues (one home for holm / bonferroni / fdr, used by `analyze`, `bleu test` and the
    planner) against statsmodels' multipletests, on random families with ties and tiny p-values."""
    import gc

    from statsmodels.stats.multitest import multipletests

    from humaneval_power.multiplicity import adjust_pvalues

    # multipletests' holm runs gc.collect() on every call (memory hygiene, no effect on the result): a full
    # collection of this process's heap, 0.25 CPU s each with this module's texts loaded (10 s for the loop)
    monkeypatch.setattr(gc, "collect", lambda *args: 0)
    rng = np.random.default_rng(4)
    for m in (2, 3, 7, 40):
        for _ in range(10):
            p = np.round(rng.uniform(size=m) ** 3, 3)
            for ours, theirs in (("holm", "holm"), ("bonferroni", "bonferroni"), ("fdr", "fdr_bh")):
                np.testing.assert_allclose(adjust_pvalues(p, ours), multipletests(p, method=theirs)[1], rtol=1e-13)
    batch = rng.uniform(size=(5, 6))
    assert np.array_equal(adjust_pvalues(batch, "fdr")[2], adjust_pvalues(batch[2], "fdr"))


def test_bleu_test_adjust(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`bleu test --adjust` adds p_adjusted over the systems compared; p_value is unchanged."""
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(8)
    words = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran"]
    ref = [" ".join(rng.choice(words, 6)) for _ in range(40)]
    for name in ("ref", "A", "B", "C", "D"):
        lines = ref if name == "ref" else [" ".join(rng.choice(words, 6)) for _ in range(40)]
        (tmp_path / f"system.{name}.txt").write_text("\n".join(lines) + "\n")
    base = ["bleu", "test", "--ref", str(tmp_path / "system.ref.txt"), "--baseline", str(tmp_path / "system.A.txt"),
            "--systems", *(str(tmp_path / f"system.{s}.txt") for s in "BCD"), "--trials", "400", "--json"]
    for adjust, method in (("fdr", "fdr_bh"), ("bonferroni", "bonferroni"), ("holm", "holm"), ("none", None)):
        assert main(base + ["--adjust", adjust]) == 0
        rows = json.loads(capsys.readouterr().out)
        p = np.array([r["p_value"] for r in rows])
        expected = p if method is None else multipletests(p, method=method)[1]
        np.testing.assert_allclose([r["p_adjusted"] for r in rows], expected, rtol=1e-13)
        assert {r["adjust"] for r in rows} == {adjust}
    assert main(base + ["--adjust", "tukey"]) == 2
    assert "invalid choice" in capsys.readouterr().err
