"""The fast budget search (issue 27, item 3): sequential Monte Carlo with a bounded error, the analytic
screen, the same cheapest design as the full search, and the CLI equal to the API."""
from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from humaneval_power.cli import main
from humaneval_power.designs import Costs
from humaneval_power.engine import StudyOutcomes, run_cells
from humaneval_power.executors import LocalProcesses
from humaneval_power.planning import (
    ABOVE,
    BELOW,
    FULL,
    SEQUENTIAL_ERROR,
    mc_margin,
    sequential_bound,
    sequential_cells,
)
from humaneval_power.processes import InvariantProcess
from humaneval_power.scenarios.crowd import cell_factory
from humaneval_power.scenarios.likert import SETTLED, likert_budget, optimistic_power

from .conftest import mc_tolerance
from .crowd_pool import two_workers_fixture  # noqa: F401  (the fixture two_workers)


@dataclass(frozen=True)
class Coin:
    """A toy cell of known power p: each study is significant with probability p."""

    p: float
    key: int
    effect: float = 1.0
    chunk_size: int = 50

    def cell(self) -> dict[str, Any]:
        return {"p": self.p, "key": self.key, "effect": self.effect}

    def stream_key(self) -> str:
        return f"coin-{self.key}"

    def exact(self) -> None:
        return None

    def simulate(self, n: int, rng: np.random.Generator) -> StudyOutcomes:
        sig = rng.random(n) < self.p
        return StudyOutcomes(np.ones(n), sig, np.zeros(n, bool), np.zeros(n, bool))


def test_sequential_stopping_error_is_bounded_at_the_target() -> None:
    """A cell whose true power equals the target (the worst case) is settled as falling short in at most
    SEQUENTIAL_ERROR of the runs (9 looks, Bonferroni); a cell far below stops at the first look; a cell
    that runs to the end equals run_cells."""
    reps, target = 400, 0.8
    at_target = [Coin(target, i) for i in range(reps)]
    runs = sequential_cells(at_target, 500, target, seed=1, jobs=1)
    wrong = sum(how == BELOW for _, how in runs) / reps
    assert wrong <= SEQUENTIAL_ERROR + mc_tolerance(SEQUENTIAL_ERROR, reps)
    low = sequential_cells([Coin(0.3, i) for i in range(20)], 500, target, seed=1, jobs=1)
    assert all(how == BELOW and r.n_sims == 50 for r, how in low)
    full = [(c, r) for c, (r, how) in zip(at_target[:40], runs) if how == FULL]
    assert [r.power for _, r in full] == [r.power for r in run_cells([c for c, _ in full], 500, seed=1, jobs=1)]


@pytest.mark.parametrize("chunks, size", [(10, 50), (5, 200), (2, 100)])
def test_the_stopping_rule_errs_at_most_its_error_at_the_target(chunks: int, size: int) -> None:
    """The rule itself on 20,000 binomial paths at the target: wrongly stopped at most SEQUENTIAL_ERROR of
    the time (a 97.5% bound at every look, without the Bonferroni split, errs 7% with 9 looks)."""
    reps, target = 20_000, 0.8
    k = np.random.default_rng(chunks).binomial(size, target, (reps, chunks)).cumsum(1)[:, :-1]
    n = size * np.arange(1, chunks)
    wrong = (sequential_bound(k, n, chunks - 1) < target).any(1).mean()
    assert wrong <= SEQUENTIAL_ERROR + mc_tolerance(SEQUENTIAL_ERROR, reps)


@pytest.mark.parametrize("chunks, size", [(10, 50), (5, 200), (2, 100)])
def test_stopping_above_errs_at_most_its_error_below_the_margin(chunks: int, size: int) -> None:
    """The two-sided rule on 20,000 binomial paths whose true power equals ``above`` (the worst case of a
    design below it): stopped as reaching at most SEQUENTIAL_ERROR of the time."""
    reps, above = 20_000, 0.8 - mc_margin(0.8, chunks * size)
    k = np.random.default_rng(chunks + 7).binomial(size, above, (reps, chunks)).cumsum(1)[:, :-1]
    n = size * np.arange(1, chunks)
    wrong = (sequential_bound(k, n, chunks - 1, lower=True) >= above).any(1).mean()
    assert wrong <= SEQUENTIAL_ERROR + mc_tolerance(SEQUENTIAL_ERROR, reps)


def test_sequential_cells_stop_above_with_bounded_error_and_drop_dearer_cells() -> None:
    """Cells at the margin stop ABOVE in at most SEQUENTIAL_ERROR of the runs; once a cell reaches the target the
    cells of no lower rank stop (None) and the cheaper ones run on until settled."""
    reps, target, n_sims = 400, 0.8, 500
    above = target - mc_margin(target, n_sims)
    runs = sequential_cells([Coin(above, i) for i in range(reps)], n_sims, target, seed=2, jobs=1, above=above)
    wrong = sum(how == ABOVE for _, how in runs) / reps
    assert wrong <= SEQUENTIAL_ERROR + mc_tolerance(SEQUENTIAL_ERROR, reps)
    cells = [Coin(0.3, 0), Coin(0.99, 1), Coin(0.8, 2), Coin(0.8, 3), Coin(0.78, 4)]
    out = sequential_cells(cells, n_sims, target, seed=2, jobs=1, above=above, rank=[1, 2, 2, 3, 1])
    assert out[1] is not None and out[1][1] == ABOVE and out[1][0].n_sims == 50
    assert out[2] is None and out[3] is None  # no cheaper than the one reaching the target: not needed
    assert out[0] is not None and out[0][1] == BELOW
    assert out[4] is not None and out[4][0].n_sims > 50  # cheaper: run on until settled


def test_sequential_results_do_not_depend_on_jobs(two_workers: LocalProcesses) -> None:
    """jobs=1 and two worker processes (one pool for both comparisons): the same results."""
    cells = [Coin(p, i) for i, p in enumerate((0.6, 0.75, 0.8, 0.9))]
    one = sequential_cells(cells, 400, 0.8, seed=3, jobs=1)
    two = sequential_cells(cells, 400, 0.8, seed=3, jobs=two_workers)
    assert [(r.power, r.n_sims, e) for r, e in one] == [(r.power, r.n_sims, e) for r, e in two]
    costs = [1.0, 2.0, 2.0, 3.0]
    one = sequential_cells(cells, 400, 0.8, seed=3, jobs=1, above=0.76, rank=costs)
    two = sequential_cells(cells, 400, 0.8, seed=3, jobs=two_workers, above=0.76, rank=costs)
    assert [x and (x[0].power, x[0].n_sims, x[1]) for x in one] == [x and (x[0].power, x[0].n_sims, x[1]) for x in two]


@pytest.mark.slow
def test_optimistic_power_bounds_simulated_power() -> None:
    """The analytic screen settles a design only when an upper bound of its power falls short: checked
    against simulation on crowd designs of both processes it was not tuned on (balanced and crossed)."""
    for params, effect in ((InvariantProcess(0.2, 0.25, 0.2, 0.1, 0.7), 0.3), ("card2020-low", 0.25)):
        make = cell_factory(params)
        cells = [make(i, 8, k, 1, effect) for i, k in itertools.product((20, 60), (2, 8))]
        for c, r in zip(cells, run_cells(cells, 200, seed=5, jobs=1)):
            assert r.power <= optimistic_power(c) + mc_tolerance(r.power, 200), c.cell()


def _full_search(params: Any, effect: float, grid: dict[str, list[int]], costs: Costs, n_sims: int,
                 seed: int) -> dict[tuple[int, int, int], Any]:
    """Every design of the grid at full precision, by (items, workers, k)."""
    make = cell_factory(params, costs=costs)
    cells = [make(i, w, k, 1, effect) for i, w, k in itertools.product(*grid.values()) if k <= w]
    return {(c.design.items, c.design.workers, c.design.k): r for c, r in zip(cells, run_cells(cells, n_sims, seed=seed,
                                                                                               jobs=1))}


@pytest.mark.parametrize("params, effect, grid", [
    pytest.param("card2020-high", 0.3, {"items": [10, 20, 40, 80], "workers": [6], "ratings_per_item": [2, 3, 6]},
                 marks=pytest.mark.slow),
    pytest.param(InvariantProcess(0.3, 0.15, 0.3, 0.15, 0.8), 0.4,
                 {"items": [20, 40, 80], "workers": [8], "ratings_per_item": [1, 8]}, marks=pytest.mark.slow),
])
def test_cheapest_design_is_the_full_searchs_or_within_mc_error(params: Any, effect: float,
                                                                 grid: dict[str, list[int]]) -> None:
    """The answer is the full search's cheapest cost, or a cheaper design whose full-precision power cannot be
    told from the target (its 95% interval reaches it); every design the search runs in full equals run_cells."""
    costs, target = Costs(per_rating=0.1), 0.8
    table, best = likert_budget(params, effect, **grid, costs=costs, n_sims=400, seed=2, jobs=1)
    full = _full_search(params, effect, grid, costs, 400, 2)
    reference = min((r.cell["cost"] for r in full.values() if r.power >= target), default=None)
    assert best.at is not None
    if best.attainable:
        at = full[best.at.cell["items"], best.at.cell["workers"], best.at.cell["ratings_per_item"]]
        assert best.value == reference or ((reference is None or best.value < reference) and at.ci_high >= target)
    else:
        assert reference is None
    for row in table[table.settled == "full"].itertuples():
        assert row.power == full[row.items, row.workers, row.ratings_per_item].power
    assert set(table.settled) <= {"analytic screen", "full", "exact", *SETTLED.values()}


def test_budget_cli_equals_api(capsys) -> None:
    args = ["likert", "budget", "--preset", "card2020-high", "--effect", "0.3", "--items", "10", "20", "40", "80",
            "--workers", "6", "--ratings-per-item", "2", "6", "--cost-per-rating", "0.1", "--sims", "400",
            "--seed", "2", "--jobs", "1", "--json"]
    assert main(args) == 0
    cli = json.loads(capsys.readouterr().out)[0]
    _, api = likert_budget("card2020-high", 0.3, [10, 20, 40, 80], [6], [2, 6], costs=Costs(per_rating=0.1),
                           n_sims=400, seed=2, jobs=1)
    assert (cli["value"], cli["power"], cli["low"], cli["high"]) == (api.value, api.at.power, api.low, api.high)
