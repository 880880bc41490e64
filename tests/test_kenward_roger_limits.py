"""--df kenward-roger is dense in the ratings: refused above a stated size with its estimated cost (issue 23, item 6)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from humaneval_power.completed_study.backends import (
    KR_MAX_RATINGS,
    check_kenward_roger,
    kenward_roger_cost,
)
from humaneval_power.errors import InputError


@settings(max_examples=300, deadline=None)
@given(n=st.integers(10, 60_000), parameters=st.integers(2, 12), backend=st.sampled_from(sorted(KR_MAX_RATINGS)))
def test_refusal_states_the_cost_and_recommends_only_a_path_that_runs(n: int, parameters: int, backend: str) -> None:
    memory, seconds = kenward_roger_cost(n, parameters, backend)
    assert memory >= 8.0 * n * n * 4 and seconds > 0  # at least four dense n x n double matrices
    if n <= KR_MAX_RATINGS[backend]:
        assert f"{n} x {n}" in check_kenward_roger(n, parameters, backend)
        return
    with pytest.raises(InputError) as err:
        check_kenward_roger(n, parameters, backend)
    text = str(err.value)
    assert f"{n} x {n}" in text and " GB" in text and f"{KR_MAX_RATINGS[backend]:,}" in text
    assert "--df satterthwaite" in text
    for other, limit in KR_MAX_RATINGS.items():  # another backend is suggested only where it would run
        assert (f"--backend {other}" in text) == (other != backend and n <= limit)


def _ratings(workers: int, items: int, systems: int = 3, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    w, i, s = (a.ravel() for a in np.meshgrid(np.arange(workers), np.arange(items), np.arange(systems), indexing="ij"))
    return pd.DataFrame({"worker": w, "item": i, "system": np.array(list("ABCDE"))[s],
                         "score": rng.normal(size=len(w)) + rng.normal(size=items)[i]})


@pytest.mark.parametrize("backend", ["lme4", "statsmodels"])
def test_analyze_refuses_before_fitting(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Above the limit the refusal comes before R or the no-R solver starts (no 150 s, 4 GB start, 135 s stop)."""
    from humaneval_power import completed_study as analyze_module
    from humaneval_power.fitting import lme4, statsmodels_lmm

    def never(*args, **kwargs):
        raise AssertionError("fitting started")

    monkeypatch.setattr(lme4, "r_session", never)
    monkeypatch.setattr(statsmodels_lmm, "fit_components", never)
    n = KR_MAX_RATINGS[backend] + 30
    with pytest.raises(InputError, match=r"dense \d+ x \d+ matrices .* GB"):
        analyze_module.analyze(_ratings(10, n // 30), backend=backend, df="kenward-roger")
