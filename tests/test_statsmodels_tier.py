"""The statsmodels tier (no R) against the fast tier: same power (tests/tier_pairing.py)."""
from __future__ import annotations

import pytest

from humaneval_power.params import get_preset

from .conftest import share_calls
from .tier_pairing import full_data_closed_form_equals_the_fast_tier, refits_equal_the_closed_form

#: statsmodels-tier studies: each is compared fit by fit with the closed form on the same data, so the tier's
#: power needs no Monte-Carlo tolerance of its own (before: 600 studies, within both cells' error of the fast
#: tier's power, +-0.07)
SIMS = 150


@pytest.mark.slow
@pytest.mark.xdist_group("statsmodels_tier")  # one worker: the two tests share the statsmodels fits
@pytest.mark.parametrize("test", ["z", "satterthwaite"])
def test_statsmodels_and_fast_power_agree(test: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both tests refit the same studies (REML; the test is not in the stream key) and differ only in the
    decision taken from each fit: the fits are made once (``share_calls``), each test decides from them. Each
    refit equals the closed form to 1e-6 (as test_lme4.test_statsmodels_backend_matches_closed_form), df and
    p-values included."""
    from humaneval_power.fitting import statsmodels_lmm

    share_calls(monkeypatch, statsmodels_lmm, "fit_crossed_many")
    params = get_preset("card2020-high").with_sds(sd_worker_intercept=0.1, sd_item_intercept=0.1)
    refits_equal_the_closed_form(monkeypatch, statsmodels_lmm, "fit_crossed_many", "statsmodels", params, 5, 12, 0.3,
                                 test, 1, SIMS, rtol_se=1e-6, rtol_df=1e-6, atol_p=1e-6)
    full_data_closed_form_equals_the_fast_tier(params, 5, 12, 0.3, test, 1)
