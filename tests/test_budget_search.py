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
from humaneval_power.planning import (
    SEQUENTIAL_ERROR,
    sequential_bound,
    sequential_cells,
)
from humaneval_power.processes import InvariantProcess
from humaneval_power.scenarios.crowd import cell_factory
from humaneval_power.scenarios.likert import likert_budget, optimistic_power

from .conftest import mc_tolerance


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
    wrong = sum(early for _, early in runs) / reps
    assert wrong <= SEQUENTIAL_ERROR + mc_tolerance(SEQUENTIAL_ERROR, reps)
    low = sequential_cells([Coin(0.3, i) for i in range(20)], 500, target, seed=1, jobs=1)
    assert all(early and r.n_sims == 50 for r, early in low)
    full = [(c, r) for c, (r, early) in zip(at_target[:40], runs) if not early]
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


def test_sequential_results_do_not_depend_on_jobs() -> None:
    cells = [Coin(p, i) for i, p in enumerate((0.6, 0.75, 0.8, 0.9))]
    one = sequential_cells(cells, 400, 0.8, seed=3, jobs=1)
    two = sequential_cells(cells, 400, 0.8, seed=3, jobs=2)
    assert [(r.power, r.n_sims, e) for r, e in one] == [(r.power, r.n_sims, e) for r, e in two]


@pytest.mark.slow
def test_optimistic_power_bounds_simulated_power() -> None:
    """The analytic screen settles a design only when an upper bound of its power falls short: checked
    against simulation on crowd designs of both processes it was not tuned on (balanced and crossed)."""
    for params, effect in ((InvariantProcess(0.2, 0.25, 0.2, 0.1, 0.7), 0.3), ("card2020-low", 0.25)):
        make = cell_factory(params)
        cells = [make(i, 8, k, 1, effect) for i, k in itertools.product((20, 60), (2, 8))]
        for c, r in zip(cells, run_cells(cells, 200, seed=5, jobs=1)):
            assert r.power <= optimistic_power(c) + mc_tolerance(r.power, 200), c.cell()


def _full_search(params: Any, effect: float, grid: dict[str, list[int]], costs: Costs, target: float,
                 n_sims: int, seed: int) -> float | None:
    """The cheapest cost whose full-precision power reaches the target, every design simulated."""
    make = cell_factory(params, costs=costs)
    cells = [make(i, w, k, 1, effect) for i, w, k in itertools.product(*grid.values()) if k <= w]
    ok = [c.cell()["cost"] for c, r in zip(cells, run_cells(cells, n_sims, seed=seed, jobs=1)) if r.power >= target]
    return min(ok) if ok else None


@pytest.mark.parametrize("params, effect, grid", [
    pytest.param("card2020-high", 0.3, {"items": [10, 20, 40, 80], "workers": [6], "ratings_per_item": [2, 3, 6]},
                 marks=pytest.mark.slow),
    pytest.param(InvariantProcess(0.3, 0.15, 0.3, 0.15, 0.8), 0.4,
                 {"items": [20, 40, 80], "workers": [8], "ratings_per_item": [1, 8]}, marks=pytest.mark.slow),
])
def test_cheapest_design_equals_the_full_search(params: Any, effect: float, grid: dict[str, list[int]]) -> None:
    costs = Costs(per_rating=0.1)
    table, best = likert_budget(params, effect, **grid, costs=costs, n_sims=400, seed=2, jobs=1)
    assert best.value == _full_search(params, effect, grid, costs, 0.8, 400, 2)
    if best.attainable:
        assert best.at.n_sims in (0, 400) and best.at.extra["settled"] in ("full", "exact")
    early = "stopped early (upper bound below target)"
    assert best.at is not None and set(table.settled) <= {"analytic screen", early, "full", "exact"}


def test_budget_cli_equals_api(capsys) -> None:
    args = ["likert", "budget", "--preset", "card2020-high", "--effect", "0.3", "--items", "10", "20", "40", "80",
            "--workers", "6", "--ratings-per-item", "2", "6", "--cost-per-rating", "0.1", "--sims", "400",
            "--seed", "2", "--jobs", "1", "--json"]
    assert main(args) == 0
    cli = json.loads(capsys.readouterr().out)[0]
    _, api = likert_budget("card2020-high", 0.3, [10, 20, 40, 80], [6], [2, 6], costs=Costs(per_rating=0.1),
                           n_sims=400, seed=2, jobs=1)
    assert (cli["value"], cli["power"], cli["low"], cli["high"]) == (api.value, api.at.power, api.low, api.high)
