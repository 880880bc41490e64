"""What the searches' progress counts: a budget search's reports count designs (a bar read "4/20 sims" while
20 was the number of designs), a size or MDE search's count the simulated studies of the current step (a bar
read "5 sims" after 5 steps)."""
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


@settings(max_examples=3, deadline=None)
@given(n_sims=st.sampled_from([40, 70]), effect=st.sampled_from([0.4, 0.6]))
def test_a_size_search_counts_the_studies_of_its_step(n_sims: int, effect: float) -> None:
    """Property: every report of ``likert_sample_size`` counts the current step's studies (total the step's
    simulations, done within it) under a label naming the step and its value. (Effects that 10 workers find at
    tens of items: at 0.2 the search fitted designs of up to 5,000 items, 12 CPU s, for the same reports.)"""
    from humaneval_power.scenarios.likert import likert_sample_size

    calls: list[tuple[int, int, str]] = []
    likert_sample_size(PRESETS["card2020-high"], effect, workers=10, ratings_per_item=3, n_sims=n_sims, jobs=1,
                       progress=lambda d, t, label="": calls.append((d, t, label)))
    assert calls
    assert all(t == n_sims and 0 <= d <= t and label.startswith("solving for items, step ") for d, t, label in calls)
    finals = [label for d, _, label in calls if ": power " in label]
    assert finals and all(d == n_sims for d, _, label in calls if ": power " in label)
