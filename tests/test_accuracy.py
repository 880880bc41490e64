"""Accuracy comparisons: Card et al. App. C and Table 2, MESS and power.prop.test reference numbers."""
from __future__ import annotations

import pytest
from scipy import optimize

from humaneval_power.cli import main
from humaneval_power.engine import run_cells
from humaneval_power.scenarios.accuracy import (
    BENCHMARK_TASKS,
    McNemarScenario,
    accuracy_mde,
    discordant,
    expected_gain,
    lachenbruch_sample_size,
    mcnemar_sample_size,
    mde_table,
    prop_test_power,
    solve_prop_test,
)

from .conftest import mc_tolerance


@pytest.mark.parametrize("agreement,power,type_m", [(0.9, 0.249, 1.89), (0.975, 0.798, 1.12)])
def test_appendix_c(agreement: float, power: float, type_m: float) -> None:
    exact = McNemarScenario(500, 0.02, agreement).exact()
    assert exact.power == pytest.approx(power, abs=5e-4) and exact.type_m == pytest.approx(type_m, abs=5e-3)
    sims = 100_000
    sim = run_cells([McNemarScenario(500, 0.02, agreement, "simulate")], sims, seed=2)[0]
    assert abs(sim.power - exact.power) < mc_tolerance(exact.power, sims)
    assert sim.type_m == pytest.approx(exact.type_m, rel=0.02)


def test_mess_normal_sample_sizes() -> None:
    # MESS power_mcnemar_test(paid, psi): p10 = paid, p01 = psi * paid -> delta, agreement
    assert mcnemar_sample_size(0.125, 0.625, 0.9).detail["n_unrounded"] == pytest.approx(247.9973, abs=5e-4)
    assert mcnemar_sample_size(0.1, 0.7, 0.8).detail["n_unrounded"] == pytest.approx(233.0945, abs=5e-4)


def test_power_prop_test() -> None:
    assert prop_test_power(50, 0.5, 0.75) == pytest.approx(0.7401659, abs=1e-7)
    n = optimize.brentq(lambda k: prop_test_power(k, 0.5, 0.75) - 0.9, 2, 1e6)
    assert round(n, 1) == 76.7


#: Card et al. Table 9 (percentage points): regression-prior MDE, unpaired ("binomial") MDE,
#: Lachenbruch midpoint (low, high), expected gain; Table 2 has the same regression MDEs.
TABLE9 = {
    "WNLI": (5.26, 5.38, 5.42, 5.36, 5.45, -1.17), "MRPC": (1.62, 2.40, 1.91, 0.45, 2.48, 0.03),
    "SST-2": (1.02, 1.34, 1.10, 0.43, 1.35, 0.18), "RTE": (1.23, 1.89, 1.48, 0.26, 1.96, 1.11),
    "QNLI": (0.55, 0.77, 0.60, 0.14, 0.78, 0.69), "MNLI-m": (0.67, 1.08, 0.82, 0.08, 1.12, 0.12),
    "MNLI-mm": (0.68, 1.09, 0.84, 0.08, 1.14, 0.34), "QQP": (0.11, 0.18, 0.13, 8.45e-7, 0.19, 0.08),
    "SQuAD 2.0": (0.556, 1.18, 0.91, 0.09, 1.23, 0.528),
}


def test_table2_mdes() -> None:
    """Table 2 within +-0.01 points: the paper's exact unconditional test for the GLUE tasks
    (QQP: normal, as the paper did); the normal approximation alone misses SST-2 (1.04)."""
    normal = {r["task"]: r for r in mde_table("glue", ["normal"])}
    for task in ("MRPC", "RTE", "QNLI", "MNLI-m", "MNLI-mm", "QQP"):
        assert 100 * normal[task]["mde"] == pytest.approx(TABLE9[task][0], abs=0.01), task
    assert 100 * normal["SST-2"]["mde"] == pytest.approx(1.04, abs=0.005)
    assert normal["WNLI"]["mde"] is None and "no gain" in normal["WNLI"]["reason"]
    for task in ("MRPC", "SST-2", "RTE", "QNLI", "MNLI-m", "MNLI-mm"):
        n, sota, _ = BENCHMARK_TASKS[task]
        r = accuracy_mde(n, sota, "glue", method="unconditional")
        assert 100 * r.value == pytest.approx(TABLE9[task][0], abs=0.01), task
        assert r.at.power == pytest.approx(0.8, abs=1e-6)
    # WNLI: the paper's +5.26 is the mid-p test's MDE (unconditional: 5.11, normal: none)
    assert 100 * accuracy_mde(147, 0.945, "glue", method="midp").value == pytest.approx(5.26, abs=0.01)
    squad = mde_table("squad2")[0]
    assert 100 * squad["mde"] == pytest.approx(TABLE9["SQuAD 2.0"][0], abs=0.01)


def test_table9_unpaired_lachenbruch_and_expected_gain() -> None:
    rows = {r["task"]: r for p in ("glue", "squad2") for r in mde_table(p)}
    for task, (_, unpaired, mid, low, high, gain) in TABLE9.items():
        r = rows[task]
        assert 100 * r["mde_unpaired"] == pytest.approx(unpaired, abs=0.01), task
        # the paper's Lachenbruch figures come from a 1e-4 grid over P(both right): +-0.01 points
        assert 100 * r["mde_lachenbruch"] == pytest.approx(mid, abs=0.01), task
        assert 100 * r["mde_lachenbruch_high"] == pytest.approx(high, abs=0.01), task
        if task not in ("WNLI", "QQP"):  # documented differences in the paper's lower bounds
            assert 100 * r["mde_lachenbruch_low"] == pytest.approx(low, abs=0.01), task
        # expected gain from the rounded Table 7/8 coefficients: the slope's rounding (+-5e-4 per
        # point of baseline) and the intercept's and task's (+-5e-4 each) bound the difference
        _, sota, prior = BENCHMARK_TASKS[task]
        bound = (5e-4 * 100 * sota + 1e-3 + 5e-3) if prior == "glue" else (5e-5 * sota + 5e-5) * 100 + 5e-3
        assert abs(100 * expected_gain(prior, sota, task) - gain) <= bound, task


def test_lachenbruch_formula_and_bounds() -> None:
    """Against the closed form n = z^2 pd / d^2 at pd = d, midpoint, max (Lachenbruch 1992)."""
    from scipy import stats

    z2 = (stats.norm.isf(0.025) + stats.norm.ppf(0.9)) ** 2
    r = lachenbruch_sample_size(0.8, 0.9, 0.9)
    assert r["n_low"] == pytest.approx(z2 * 0.1 / 0.01) and r["n_high"] == pytest.approx(z2 * 0.3 / 0.01)
    assert r["n_mid"] == pytest.approx(z2 * 0.2 / 0.01) and r["n_required"] == [106, 211, 316]
    # the normal McNemar power at the midpoint agreement with n_mid is close to the target
    from humaneval_power.scenarios.accuracy import normal_power

    assert normal_power(r["n_mid"], 0.1, 0.8) == pytest.approx(0.9, abs=0.02)


def test_unconditional_critical_value_by_enumeration() -> None:
    """z* against brute force: every table of n = 25 pairs, size maximised on a fine grid."""
    import numpy as np
    from scipy import stats

    from humaneval_power.significance.binomial import unconditional_critical_z

    n = 25
    z = unconditional_critical_z(n, 0.05)
    n01, n10 = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    ok = n01 + n10 <= n
    m = np.maximum(n01 + n10, 1)
    stat = np.where(n01 + n10 > 0, np.abs(n01 - n10) / np.sqrt(m), 0.0)

    def size(cut: float) -> float:
        worst = 0.0
        for pi in np.linspace(1e-4, 1, 4001):
            probs = stats.multinomial.pmf(np.stack([n01, n10, n - n01 - n10], -1)[ok], n,
                                          [pi / 2, pi / 2, 1 - pi])
            worst = max(worst, probs[stat[ok] >= cut - 1e-12].sum())
        return worst

    assert size(z) <= 0.05 + 1e-9
    attainable = np.unique(np.round(stat[ok], 12))
    below = attainable[attainable < z - 1e-9].max()
    assert size(below) > 0.05  # z* is the smallest attainable cut-off that keeps the level


def test_unconditional_fast_numerics_against_scipy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The blocked recursions (tails of every m, grid pmfs) and the incremental tails between
    bisection steps against the same size computed with scipy's binomial CDF and pmf throughout."""
    import numpy as np
    from scipy import stats

    from humaneval_power.significance import binomial

    n = 40_000
    m = np.arange(n + 1.0)

    def tails(n: int, z: float) -> np.ndarray:
        return np.where(m > 0, np.minimum(1, 2 * stats.binom.cdf(np.floor((m - z * np.sqrt(m)) / 2 + 1e-9), m, .5)), 0)

    for z in (0.4, 1.96, 2.6, 25.0):  # 25: the recursion starts late (m >= z^2)
        np.testing.assert_allclose(binomial._two_sided_tails(n, z), tails(n, z), rtol=1e-12, atol=1e-16)
    pis = np.array([0.001, 0.3, 0.5, 0.999, 1.0])
    start, stop = binomial._support_bounds(n, pis)
    width = int((stop - start).max()) + 1
    assert width > 2 * binomial._BLOCK
    np.testing.assert_allclose(binomial._binom_pmf_rows(n, pis, start, width),
                               stats.binom.pmf(start[:, None] + np.arange(width), n, pis[:, None]),
                               rtol=1e-11, atol=1e-16)

    zs = (2.1, 1.95, 1.9605, 1.96049, 1.9604)  # the last two move few cut-offs: incremental tails
    fast = binomial._UnconditionalSize(n)
    sizes = []
    for z in zs:
        sizes.append(fast(z))
        np.testing.assert_allclose(fast.tails(z)[: n + 1], tails(n, z), rtol=1e-12, atol=1e-16)
    monkeypatch.setattr(binomial, "_two_sided_tails", tails)
    monkeypatch.setattr(binomial, "_binom_pmf_rows", lambda n, p, start, width: stats.binom.pmf(
        start[:, None] + np.arange(width), n, p[:, None]))
    for z, size in zip(zs, sizes):
        assert size == pytest.approx(binomial._UnconditionalSize(n)(z), rel=1e-12), z


def test_unconditional_power_against_simulated_decisions() -> None:
    import numpy as np

    from humaneval_power.significance.binomial import unconditional_critical_z

    n, delta, agreement = 400, 0.03, 0.88
    exact = McNemarScenario(n, delta, agreement, "unconditional").exact()
    z = unconditional_critical_z(n, 0.05)
    rng = np.random.default_rng(3)
    p01, p10 = (1 - agreement + delta) / 2, (1 - agreement - delta) / 2
    c = rng.multinomial(n, [p01, agreement, p10], size=200_000)
    m, d = c[:, 0] + c[:, 2], c[:, 0] - c[:, 2]
    sig = (m > 0) & (np.abs(d) >= z * np.sqrt(np.maximum(m, 1)) - 1e-9)
    assert abs((sig & (d > 0)).mean() - exact.power) < mc_tolerance(exact.power, len(c))
    type_m = np.abs(d[sig]).mean() / n / delta
    assert abs(type_m - exact.type_m) < 4 * (np.abs(d[sig]) / n / delta).std() / np.sqrt(sig.sum())
    # null: the rejection rate never exceeds alpha, whatever the discordance
    for pa in (0.2, 0.6, 0.95):
        assert McNemarScenario(n, 0.0, pa, "unconditional").exact().power <= 0.05 + 1e-12


def test_solve_prop_test_each_way() -> None:
    assert solve_prop_test(n=50, p1=0.5, p2=0.75)["power"] == pytest.approx(0.7401659, abs=1e-7)
    assert round(solve_prop_test(p1=0.5, p2=0.75, power=0.9)["n"], 1) == 76.7
    p2 = solve_prop_test(n=76.70693, p1=0.5, power=0.9)["p2"]
    assert p2 == pytest.approx(0.75, abs=1e-5)


def test_mde_power_and_exact_method() -> None:
    r = accuracy_mde(1725, 0.92)
    assert r.at.power == pytest.approx(0.8, abs=1e-6)
    ex = mcnemar_sample_size(0.02, 0.9, 0.8, "exact")
    assert McNemarScenario(ex.value, 0.02, 0.9).exact().power >= 0.8
    assert McNemarScenario(ex.value - 1, 0.02, 0.9).exact().power < 0.8  # the first n that reaches it


@pytest.mark.parametrize("argv", [
    ["power", "--n", "500", "--delta", "0.2", "--agreement", "0.9"],
    ["power", "--n", "500", "--delta", "0.02", "--agreement", "1.2"],
    ["power", "--n", "0", "--delta", "0.02", "--agreement", "0.9"],
    ["mde", "--n", "100", "--baseline", "1.5"],
    ["size", "--delta", "0", "--agreement", "0.9"],
    ["mde", "--n", "100", "--baseline", "0.9", "--prior", "lachenbruch", "--method", "exact"],
    ["unpaired", "--p1", "0.5", "--n", "50"],
    ["power", "--n", "500", "--table", "0.8", "0.1", "0.1", "0.1"],
    ["power", "--n", "500", "--table", "0.8", "0.1", "0.1", "0.0", "--delta", "0.01"],
    ["unpaired", "--p1", "1.5", "--n", "50", "--p2", "0.6"],
    ["power", "--n", "500", "--delta", "0.02", "--agreement", "0.9", "--plot", "out.txt"],
])
def test_bad_input(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["accuracy"] + argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def _exact_mcnemar_power(n: int, delta: float, agreement: float, alpha: float = 0.05) -> float:
    """Exact conditional McNemar power (significant with B ahead), summed over the discordant counts with
    scipy's binomial: an independent reference for the sign-test recursions."""
    import numpy as np
    from scipy import stats

    p_b, p_a = discordant(delta, agreement)
    total = 0.0
    for m in range(1, n + 1):
        c = np.arange(m + 1)  # discordant pairs with B right
        p = np.minimum(1.0, 2 * np.minimum(stats.binom.cdf(c, m, 0.5), stats.binom.sf(c - 1, m, 0.5)))
        hit = (p <= alpha) & (2 * c > m)
        total += stats.binom.pmf(m, n, p_a + p_b) * stats.binom.pmf(c[hit], m, p_b / (p_a + p_b)).sum()
    return float(total)


def test_gsm8k_estimate_then_plan(data_dir, capsys: pytest.CaptureFixture[str]) -> None:
    from scipy import stats
    from statsmodels.stats.contingency_tables import mcnemar

    from humaneval_power.scenarios.accuracy import estimate_accuracy

    path = data_dir / "gsm8k_solutions" / "correct.csv"
    est = estimate_accuracy(path, "6b_verification", "175b_finetuning")
    # the data README: b = 209 (first right, second wrong), c = 152; accuracies 0.3904 and 0.3472
    assert (est["a_right_b_wrong"], est["b_right_a_wrong"], est["n"]) == (209, 152, 1319)
    assert est["accuracy_a"] == pytest.approx(0.3904, abs=1e-4) and est["accuracy_b"] == pytest.approx(0.3472, abs=1e-4)
    assert est["delta"] == pytest.approx(est["accuracy_b"] - est["accuracy_a"])
    assert est["p_value"] == pytest.approx(mcnemar([[306, 209], [152, 652]], exact=True).pvalue, rel=1e-9)
    assert est["p_value"] == pytest.approx(stats.binomtest(152, 361).pvalue, rel=1e-9)
    power = McNemarScenario(est["n"], abs(est["delta"]), est["agreement"]).exact().power
    assert power == pytest.approx(_exact_mcnemar_power(est["n"], abs(est["delta"]), est["agreement"]), abs=1e-9)
    assert main(["accuracy", "estimate", str(path), "--model-a", "6b_finetuning", "--model-b",
                 "175b_verification", "--json"]) == 0
    assert '"b_right_a_wrong": 499' in capsys.readouterr().out


def test_predictions_with_unequal_item_sets(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.csv"
    path.write_text("item,model,correct\n1,A,1\n2,A,0\n1,B,1\n3,B,1\n")
    assert main(["accuracy", "estimate", str(path), "--model-a", "A", "--model-b", "B"]) == 2
    assert "different items" in capsys.readouterr().err
    path.write_text("item,model,correct\n1,A,1\n1,B,yes\n")
    assert main(["accuracy", "estimate", str(path), "--model-a", "A", "--model-b", "B"]) == 2


def test_midp_power_against_simulated_decisions() -> None:
    """Mid-p power by summation against mid-p p-values computed on simulated tables."""
    import numpy as np
    from scipy import stats

    n, delta, agreement = 300, 0.03, 0.85
    exact = McNemarScenario(n, delta, agreement, "midp").exact().power
    rng = np.random.default_rng(0)
    p01, p10 = (1 - agreement + delta) / 2, (1 - agreement - delta) / 2
    c = rng.multinomial(n, [p01, agreement, p10], size=100_000)
    m, w = c[:, 0] + c[:, 2], c[:, 0]
    small = np.minimum(w, m - w)
    midp = 2 * (stats.binom.cdf(small, m, 0.5) - stats.binom.pmf(small, m, 0.5) / 2)
    sim = ((midp <= 0.05) & (w > m - w)).mean()
    assert abs(sim - exact) < mc_tolerance(exact, len(c))
    assert exact >= McNemarScenario(n, delta, agreement, "exact").exact().power


def test_cli_table_plot_and_unpaired(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["accuracy", "table", "--method", "normal", "midp", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {(r["task"], r["method"]) for r in rows} >= {("SST-2", "normal"), ("SST-2", "midp")}
    assert main(["accuracy", "table", "--prior", "squad2"]) == 0
    assert "SQuAD 2.0" in capsys.readouterr().out
    plot = tmp_path / "fig.png"
    assert main(["accuracy", "power", "--n", "500", "2000", "--delta", "0.01:0.03:0.01", "--agreement", "0.9",
                 "0.95", "--plot", str(plot), "--json"]) == 0
    recs = json.loads(capsys.readouterr().out)
    assert plot.stat().st_size > 10_000 and len(recs) == 12
    assert {"n", "delta", "agreement", "power", "type_s", "type_m", "method"} <= set(recs[0])
    assert main(["accuracy", "power", "--n", "500", "--table", "0.85", "0.04", "0.06", "0.05", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)[0]
    assert (rec["delta"], rec["agreement"]) == (pytest.approx(0.02), pytest.approx(0.9))
    assert rec["power"] == pytest.approx(McNemarScenario(500, 0.02, 0.9).exact().power)
    assert main(["accuracy", "unpaired", "--p1", "0.5", "--p2", "0.75", "--power", "0.9", "--json"]) == 0
    assert round(json.loads(capsys.readouterr().out)[0]["n"], 1) == 76.7
    assert main(["accuracy", "mde", "--n", "1725", "--baseline", "0.92", "--prior", "lachenbruch", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)[0]
    assert rec["delta_low"] < rec["delta"] == rec["value"] < rec["delta_high"] and rec["solve_for"] == "delta"
