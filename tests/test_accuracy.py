"""Accuracy comparisons: Card et al. App. C and Table 2, MESS and power.prop.test reference numbers."""
from __future__ import annotations

import pytest
from scipy import optimize

from humaneval_power.cli import main
from humaneval_power.engine import run_cells
from humaneval_power.scenarios.accuracy import (
    McNemarScenario,
    accuracy_mde,
    glue_table,
    mcnemar_sample_size,
    prop_test_power,
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
    assert mcnemar_sample_size(0.125, 0.625, 0.9)["n"] == pytest.approx(247.9973, abs=5e-4)
    assert mcnemar_sample_size(0.1, 0.7, 0.8)["n"] == pytest.approx(233.0945, abs=5e-4)


def test_power_prop_test() -> None:
    assert prop_test_power(50, 0.5, 0.75) == pytest.approx(0.7401659, abs=1e-7)
    n = optimize.brentq(lambda k: prop_test_power(k, 0.5, 0.75) - 0.9, 2, 1e6)
    assert round(n, 1) == 76.7


def test_table2_mdes() -> None:
    paper = {"MRPC": 1.62, "RTE": 1.23, "QNLI": 0.55, "MNLI-m": 0.67, "MNLI-mm": 0.68, "QQP": 0.11}
    rows = {r["task"]: r for r in glue_table()}
    for task, mde in paper.items():
        assert 100 * rows[task]["mde"] == pytest.approx(mde, abs=0.01), task
    assert rows["WNLI"]["mde"] is None and "no gain" in rows["WNLI"]["reason"]
    # SST-2: the normal approximation gives 1.04; the paper prints 1.02 (open: exact unconditional test)
    assert 100 * rows["SST-2"]["mde"] == pytest.approx(1.04, abs=0.005)


def test_mde_power_and_exact_method() -> None:
    r = accuracy_mde(1725, 0.92)
    assert r["power_at_mde"] == pytest.approx(0.8, abs=1e-6)
    ex = mcnemar_sample_size(0.02, 0.9, 0.8, "exact")
    assert McNemarScenario(ex["n"], 0.02, 0.9).exact().power >= 0.8


@pytest.mark.parametrize("argv", [
    ["power", "--n", "500", "--delta", "0.2", "--agreement", "0.9"],
    ["power", "--n", "500", "--delta", "0.02", "--agreement", "1.2"],
    ["power", "--n", "0", "--delta", "0.02", "--agreement", "0.9"],
    ["mde", "--n", "100", "--baseline", "1.5"],
    ["size", "--delta", "0", "--agreement", "0.9"],
])
def test_bad_input(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["accuracy"] + argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


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
    assert 0.5 < power < 1
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
