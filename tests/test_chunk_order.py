"""Chunk order (issue 27 item 4): with several workers the engine hands out the costliest chunks first
(largest-first scheduling, so the workers finish together); the order changes where chunks run, never
the results, their seeds or the order of the results."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from humaneval_power.engine import _task_cost, results_table, run_cells
from humaneval_power.executors import Executor, costliest_first
from humaneval_power.scenarios.bleu import BleuScenario


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 5)), st.integers(1, 6))
def test_costliest_first_hands_out_every_task_once_the_costliest_of_its_lookahead(costs: list[int],
                                                                                  lookahead: int) -> None:
    tasks = list(enumerate(costs))  # (position, cost)
    pulled: list[int] = []

    def lazy() -> Iterable[tuple[int, int]]:
        for t in tasks:
            pulled.append(t[0])
            yield t

    order = []
    for task in costliest_first(lazy(), lambda t: t[1], lookahead):
        assert len(pulled) <= len(order) + lookahead + 1  # lazy: never more than the lookahead ahead
        left = [t for t in tasks if t not in order]
        window = left[:lookahead + 1] if len(pulled) < len(tasks) else left
        best = max(t[1] for t in window)
        assert task == next(t for t in window if t[1] == best)  # the costliest; ties in the given order
        order.append(task)
    assert sorted(order) == tasks
    if lookahead >= len(tasks):  # the whole list in view: largest first, exactly
        assert order == sorted(tasks, key=lambda t: (-t[1], t[0]))


class _Recording(Executor):
    """Two 'workers' that run the tasks here, in the order handed out, and record it."""

    workers = 2

    def __init__(self) -> None:
        self.order: list[tuple[int, int]] = []

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any], on_done: Callable[[Any, Any], None]) -> None:
        for task in tasks:
            self.order.append((task[0], task[3]))  # (cell, chunk)
            on_done(task, fn(task))


def test_several_workers_run_the_costliest_chunks_first_with_the_results_of_one_process() -> None:
    cells = [BleuScenario(n, 0.5, 0.13, 25.8, permutations=100) for n in (40, 120, 80)]  # 3 chunks of 1000, 1000, 500
    recording = _Recording()
    ordered = results_table(run_cells(cells, 2500, seed=7, jobs=recording))
    pd.testing.assert_frame_equal(ordered, results_table(run_cells(cells, 2500, seed=7, jobs=1)), check_exact=True)
    chunks = [(i, j) for i in range(3) for j in range(3)]
    costs = {(i, j): _task_cost((i, cells[i], 7, j, 500 if j == 2 else 1000)) for i, j in chunks}
    assert recording.order == sorted(chunks, key=lambda c: (-costs[c], c))  # ties (a cell's chunks) in the given order
    assert recording.order[:2] == [(1, 0), (1, 1)]  # the largest cell's full chunks first, though listed second
    assert recording.order[-1] == (0, 2)  # the smallest chunk last
