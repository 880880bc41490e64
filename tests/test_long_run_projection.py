"""The "this run needs about ... more" warning projects the time left from the cost of the chunks run so far,
not their number of studies: with several workers the costliest chunks run first, so a count of studies would
overestimate what is left (and chunks reused from a store took no time)."""
from __future__ import annotations

import time
import warnings

import pytest

from humaneval_power.engine import _warn_if_long
from humaneval_power.progress import LongRunWarning


def _state(elapsed: float, studies_done: int, cost_done: float, cost_total: float) -> dict:
    return {"started": time.monotonic() - elapsed, "warned": False, "done": studies_done, "cost_done": cost_done,
            "cost_total": cost_total}


@pytest.mark.parametrize(("cost_done", "warns"), [(900.0, False), (1.0, True)])
def test_the_projection_follows_the_cost_run(cost_done: float, warns: bool) -> None:
    """100 s for 10 of 1,000 studies would project 9,900 s by count; by cost, 90% done projects 11 s (no
    warning) and 0.1% done 99,900 s (a warning)."""
    state = _state(100.0, 10, cost_done, 1000.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _warn_if_long(state, 1000)
    assert any(issubclass(w.category, LongRunWarning) for w in caught) == warns
    assert state["warned"]


def test_nothing_is_projected_before_any_chunk_of_this_run() -> None:
    """Chunks reused from a store (studies done, no cost run) give no pace: no warning yet, none spent."""
    state = _state(100.0, 500, 0.0, 1000.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _warn_if_long(state, 1000)
    assert not state["warned"]
