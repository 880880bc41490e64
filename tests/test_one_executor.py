"""One executor per command: the cells of an assurance grid, the steps of a solve and the
rounds of a budget search share one pool of workers (and their R), with the same results.

Before the fix every assurance cell ran its draws through ``run_cells(jobs=<number>)`` and so
started a worker pool of its own: a grid of C cells started C pools, a solve one per step.
"""
from __future__ import annotations

import inspect
import itertools
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from typing import Any

import pandas as pd
import pytest

from humaneval_power.assurance import AssuranceCell, Prior
from humaneval_power.designs import Costs
from humaneval_power.engine import results_table
from humaneval_power.executors import Executor, local, one_executor
from humaneval_power.scenarios import likert
from humaneval_power.scenarios.headtohead import h2h_power
from humaneval_power.scenarios.likert import (
    likert_budget,
    likert_power,
    likert_sample_size,
)

DRAWS = Prior(("sd_worker_slope=lognormal:0.2,0.5",)).sample(3, 5)
#: a crowd design on the batched fast tier: one chunk (of 50 studies: what is compared is the pools and the
#: bits, not a power) per inner cell, so each assurance cell has 4 chunks (the point and 3 draws), enough to start
#: a pool; the grid runs its 2 cells as 2 sweeps of 4 tasks, the budget search 2 rounds of 4, as at 200 studies
CROWD = {"ratings_per_item": 3, "n_sims": 50, "seed": 3, "assurance": DRAWS, "draws": None}


@pytest.fixture
def pools(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the local worker pools started (one entry per pool)."""
    started: list[int] = []

    class Counting(ProcessPoolExecutor):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            started.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(local, "ProcessPoolExecutor", Counting)
    return started


@pytest.mark.slow
def test_an_assurance_grid_starts_one_pool_and_gives_the_bits_of_one_process(pools: list[int],
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    two = likert_power("card2020-high", 15, [30, 40], 0.3, jobs=2, **CROWD)
    assert len(pools) == 1  # 2 assurance cells: 2 pools before the fix
    one = likert_power("card2020-high", 15, [30, 40], 0.3, jobs=1, **CROWD)
    assert len(pools) == 1
    pd.testing.assert_frame_equal(one, two, check_exact=True)
    # the former path: each assurance cell evaluated on its own (its draws on a pool of their own)
    cells = list(_cells_of(monkeypatch, likert_power, "card2020-high", 15, [30, 40], 0.3, **CROWD))
    assert all(isinstance(c, AssuranceCell) for c in cells) and len(cells) == 2
    alone = results_table([replace(c, jobs=1).exact() for c in cells])
    pd.testing.assert_frame_equal(alone, two, check_exact=True)


@pytest.mark.slow
def test_a_solve_over_assurance_starts_one_pool(pools: list[int]) -> None:
    """A crossed design (fast tier, one chunk per inner cell): the power limit, the plain solve and the
    assurance solve, each of several steps, on one pool."""
    kw = {"n_sims": 200, "seed": 3, "assurance": DRAWS, "draws": None}
    two = likert_sample_size("card2020-high", 0.4, workers=3, jobs=2, **kw)
    assert len(pools) == 1
    one = likert_sample_size("card2020-high", 0.4, workers=3, jobs=1, **kw)
    assert (one.value, one.low, one.high, one.detail) == (two.value, two.low, two.high, two.detail)
    assert one.at is not None and two.at is not None and one.at.record() == two.at.record()


@pytest.mark.slow
def test_a_budget_search_over_assurance_starts_one_pool(pools: list[int]) -> None:
    kw = {**CROWD, "items": [30, 40], "workers": [15], "ratings_per_item": [3], "costs": Costs(per_rating=1.0)}
    table2, best2 = likert_budget("card2020-high", 0.4, jobs=2, **kw)
    assert len(pools) == 1
    table1, best1 = likert_budget("card2020-high", 0.4, jobs=1, **kw)
    pd.testing.assert_frame_equal(table1, table2, check_exact=True)
    assert best1.value == best2.value


@pytest.mark.slow
def test_simulated_sign_test_assurance_grid_starts_one_pool(pools: list[int]) -> None:
    prior = Prior(("p_win=beta:13,7",)).sample(3, 2)
    args = ([20, 40], 0.65)
    kw = {"method": "simulate", "n_sims": 200_001, "seed": 1, "assurance": prior, "draws": None}
    two = h2h_power(*args, jobs=2, **kw)  # type: ignore[arg-type]
    assert len(pools) == 1
    pd.testing.assert_frame_equal(h2h_power(*args, jobs=1, **kw), two, check_exact=True)  # type: ignore[arg-type]


def test_one_executor_opens_jobs_once_and_keeps_the_signature() -> None:
    seen: list[Any] = []

    @one_executor
    def plan(x: int, jobs: Any = 1, **design: Any) -> Any:
        """Doc."""
        seen.append(jobs)
        return jobs

    given = local.LocalProcesses(1)
    assert plan(1, jobs=given) is given  # an executor given is used as is, left open
    assert isinstance(plan(1), Executor) and isinstance(plan(1, 2, extra=3), Executor)
    assert seen[1] is not seen[2] and seen[2].workers == 2
    assert list(inspect.signature(likert_power).parameters)[-1] == "design"  # the CLI / serve read it
    assert likert_power.__doc__ and "Power over workers" in likert_power.__doc__


def _cells_of(monkeypatch: pytest.MonkeyPatch, fn: Any, *args: Any, **kwargs: Any) -> list[Any]:
    """The cells a planning function builds (captured from its grid instead of running it)."""
    captured: list[Any] = []

    def capture(make: Any, axes: Any, *a: Any, **k: Any) -> None:
        captured.extend(make(**dict(zip(axes, combo))) for combo in itertools.product(*axes.values()))

    with monkeypatch.context() as m:
        m.setattr(likert, "power_grid", capture)
        fn(*args, jobs=1, **kwargs)
    return captured
