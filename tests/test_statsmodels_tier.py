"""The statsmodels tier (no R) against the fast tier: same power within Monte-Carlo error."""
from __future__ import annotations

import pytest

from humaneval_power.engine import run_cells
from humaneval_power.params import get_preset
from humaneval_power.scenarios.crossed import CrossedLikertScenario

from .conftest import mc_tolerance, share_calls


@pytest.mark.slow
@pytest.mark.xdist_group("statsmodels_tier")  # one worker: the two tests share the statsmodels fits
@pytest.mark.parametrize("test", ["z", "satterthwaite"])
def test_statsmodels_and_fast_power_agree(test: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both tests refit the same 600 studies (REML; the test is not in the stream key) and differ only in the
    decision taken from each fit: the fits are made once (``share_calls``), each test decides from them."""
    from humaneval_power.fitting import statsmodels_lmm

    share_calls(monkeypatch, statsmodels_lmm, "fit_crossed_many")
    params = get_preset("card2020-high").with_sds(sd_worker_intercept=0.1, sd_item_intercept=0.1)
    fast = run_cells([CrossedLikertScenario(params, 5, 12, 0.3, "fast", test)], 20_000, seed=1, jobs=1)[0]
    slow = run_cells([CrossedLikertScenario(params, 5, 12, 0.3, "statsmodels", test)], 600, seed=1, jobs=1)[0]
    tol = mc_tolerance(fast.power, fast.n_sims) + mc_tolerance(slow.power, slow.n_sims)
    assert abs(fast.power - slow.power) < tol, (fast.power, slow.power)
    assert slow.n_failed == 0
