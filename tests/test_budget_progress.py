"""The budget search's progress counts designs, and both front ends say so (a bar read "4/20 sims" while
20 was the number of designs)."""
from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from humaneval_power.designs import Costs
from humaneval_power.params import PRESETS
from humaneval_power.scenarios.likert import likert_budget


@settings(max_examples=4, deadline=None)
@given(items=st.sets(st.sampled_from([20, 40, 80]), min_size=1, max_size=2),
       workers=st.sets(st.sampled_from([3, 6]), min_size=1), ks=st.sets(st.sampled_from([1, 2, 3]), min_size=1))
def test_progress_counts_the_designs_of_the_grid(items: set[int], workers: set[int], ks: set[int]) -> None:
    """Property: every report's total is the grid's number of designs (a cost per worker keeps the pools
    apart), done never exceeds it nor decreases, and the label names designs (no report when the analytic
    screen settles every design)."""
    _check_progress(items, workers, ks)


def test_a_simulating_search_reports_its_designs() -> None:
    assert _check_progress({20, 40, 80}, {3, 6}, {1, 2, 3}) > 0


def _check_progress(items: set[int], workers: set[int], ks: set[int]) -> int:
    """The budget search's progress reports checked; their number."""
    calls: list[tuple[int, int, str]] = []
    likert_budget(PRESETS["card2020-high"], 0.3, sorted(items), sorted(workers), sorted(ks),
                  costs=Costs(per_rating=0.1, per_worker=1.0), n_sims=40, jobs=1,
                  progress=lambda d, t, label="": calls.append((d, t, label)))
    designs = sum(1 for _, w, k in itertools.product(items, workers, ks) if k <= w)
    assert all(t == designs and 0 <= d <= t and "designs" in label for d, t, label in calls)
    assert [d for d, _, _ in calls] == sorted(d for d, _, _ in calls)
    return len(calls)
