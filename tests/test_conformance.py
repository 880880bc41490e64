"""One conformance check that every scenario class passes (the engine's contract, scikit-learn style).

A scenario cell must (1) carry its effect in its record, (2) draw its random
stream independently of the effect (common random numbers across effects),
(3) give results that do not depend on how its chunks are scheduled (jobs) or
which other cells run beside it, and (4) where it has both an exact and a
simulated method, agree between them within Monte-Carlo error.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

import pytest

from humaneval_power.assurance import Prior, apply_draws, assured
from humaneval_power.engine import Scenario, run_cells
from humaneval_power.params import get_preset
from humaneval_power.scenarios.accuracy import McNemarScenario
from humaneval_power.scenarios.bleu import BleuScenario
from humaneval_power.scenarios.f1 import F1Scenario
from humaneval_power.scenarios.headtohead import IndependentJudgments
from humaneval_power.scenarios.likert import LikertScenario

from .conftest import mc_tolerance

HIGH = get_preset("card2020-high")

#: scenario name -> a cell with the given (positive) effect; simulated methods only
CELLS: dict[str, Callable[[float], Scenario]] = {
    "likert-fast": lambda e: LikertScenario(HIGH, 3, 30, e, "fast"),
    "likert-fast-card2020": lambda e: LikertScenario(HIGH, 4, 20, e, "fast", "card2020"),
    "likert-fast-assurance": lambda e: assured(lambda p: lambda e: LikertScenario(p, 3, 30, e, "fast"), HIGH, apply_draws(
        HIGH, Prior(("sd_item_slope=gamma:4,0.07",)).sample(3, 1)), 200, 0, 0.8, "prior")(e),
    "h2h-simulate": lambda e: IndependentJudgments(60, (1 + e) / 2 - 0.05, 0.1, "split", "simulate"),
    "mcnemar-simulate": lambda e: McNemarScenario(400, e / 4, 0.9, "simulate"),
    "bleu-saddlepoint": lambda e: BleuScenario(300, 4 * e, 0.2, 25.0, "saddlepoint"),
    "bleu-randomization": lambda e: BleuScenario(200, 4 * e, 0.2, 25.0, "randomization", 200),
}
F1 = F1Scenario(300, 0.4, (0.1, 0.05, 0.15, 0.7), (0.8, 0.08, 0.07, 0.05), 200)


@pytest.mark.parametrize("name", sorted(CELLS))
def test_cell_carries_its_effect_and_its_stream_ignores_it(name: str) -> None:
    make = CELLS[name]
    a, b = make(0.1), make(0.2)
    assert a.cell()["effect"] == pytest.approx(a.effect) and b.cell()["effect"] == pytest.approx(b.effect)
    assert a.effect != b.effect and a.cell() != b.cell()
    assert a.stream_key() == b.stream_key()


@pytest.mark.parametrize("name", sorted(CELLS))
def test_results_do_not_depend_on_scheduling(name: str) -> None:
    """jobs=1 vs jobs=2, alone vs beside other cells, chunk by chunk: identical records."""
    make = CELLS[name]
    cell = make(0.15)
    small = replace(cell, **{"items": 10}) if isinstance(cell, LikertScenario) else cell
    n = 2 * small.chunk_size + 7 if small.chunk_size < 50 else 301
    alone = run_cells([small], n, seed=5, jobs=1)[0].record()
    together = run_cells([make(0.3), small], n, seed=5, jobs=2)[1].record()
    assert alone == together


def test_f1_scenario_conforms() -> None:
    assert F1.cell()["effect"] == pytest.approx(F1.effect)
    assert run_cells([F1], 120, seed=2, jobs=1)[0].record() == run_cells([F1, F1], 120, seed=2, jobs=2)[1].record()


#: (exact cell, simulated cell) pairs of the same design
PAIRS: dict[str, tuple[Scenario, Scenario]] = {
    "sign-test-drop": (IndependentJudgments(80, 0.6, 0.1, "drop", "exact"),
                       IndependentJudgments(80, 0.6, 0.1, "drop", "simulate")),
    "sign-test-split": (IndependentJudgments(80, 0.6, 0.1, "split", "exact"),
                        IndependentJudgments(80, 0.6, 0.1, "split", "simulate")),
    "mcnemar": (McNemarScenario(500, 0.03, 0.9, "exact"), McNemarScenario(500, 0.03, 0.9, "simulate")),
    "likert-westfall": (LikertScenario(get_preset("card2020-low").with_sds(
        sd_worker_intercept=0.3, sd_worker_slope=0.4, sd_item_intercept=0.3, sd_item_slope=0.4), 20, 20, 0.4,
        "analytic"), LikertScenario(get_preset("card2020-low").with_sds(
            sd_worker_intercept=0.3, sd_worker_slope=0.4, sd_item_intercept=0.3, sd_item_slope=0.4), 20, 20, 0.4,
            "fast")),
}


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_exact_and_simulated_power_agree(name: str) -> None:
    exact_cell, sim_cell = PAIRS[name]
    exact = exact_cell.exact()
    assert exact is not None and exact.n_sims == 0 and sim_cell.exact() is None
    n = 20_000
    sim = run_cells([sim_cell], n, seed=11)[0]
    assert abs(sim.power - exact.power) < mc_tolerance(exact.power, n), (sim.power, exact.power)
