"""The no-R CLMM on random sparse designs whose random terms the ratings barely or do not identify.

Property (fitting/clmm.py ``fit_clmm``): on any such design the fit either refuses with the one-line
``InputError`` (an unused category, or SDs run to where the Laplace likelihood cannot be evaluated) or
returns finite, increasing thresholds, finite SDs and a log-likelihood that the objective re-evaluated
from zero conditional modes reproduces (``laplace_loglik``) — never another exception, never NaN.
Designs: a worker term with one level per rating (each worker rates one output: confounded with the
latent residual), with one level per item (confounded with the item term), or pairs of ratings per worker;
random SDs up to 4 (the real-data case: tests/test_ordinal_fit.py::test_laplace_refuses_sds_the_ratings_do_not_identify).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from humaneval_power.errors import InputError
from humaneval_power.fitting.clmm import fit_clmm, laplace_loglik, simulate_clmm, treatment_design

CUTS = np.array([-1.5, -0.3, 0.8, 2.0])


def _design(kind: str, items: int, per: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Grouping arrays of ``items`` items x 2 systems x ``per`` ratings each: worker, item, item:system."""
    item = np.repeat(np.arange(items), 2 * per)
    system = np.tile(np.repeat([0, 1], per), items)
    n = len(item)
    worker = {"singleton": np.arange(n),  # one level per rating
              "item": item.copy(),  # the worker term is the item term
              "pairs": rng.permutation(np.arange(n) // 2)}[kind]  # each worker rates two random outputs
    return {"worker": worker, "item": item, "item:system": item * 2 + system, "system": system}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["singleton", "item", "pairs"]), items=st.integers(5, 14), per=st.integers(1, 3),
       sds=st.tuples(*[st.floats(0.0, 4.0)] * 3), delta=st.floats(-1.0, 1.0), seed=st.integers(0, 2**16))
def test_fit_refuses_or_returns_a_reproducible_finite_fit(kind: str, items: int, per: int,
                                                          sds: tuple[float, float, float], delta: float,
                                                          seed: int) -> None:
    rng = np.random.default_rng(seed)
    g = _design(kind, items, per, rng)
    system = g.pop("system")
    X, _ = treatment_design(system)
    y = simulate_clmm(X, g, np.concatenate([CUTS, [delta], sds])[None, :], rng=rng, lowest=1)[:, 0]
    try:
        fit = fit_clmm(y, X, g, scale=(1, 5))
    except InputError as exc:
        msg = str(exc)
        assert "\n" not in msg and ("cannot be evaluated" in msg or "never used" in msg
                                    or "three categories" in msg), msg
        return
    assert np.all(np.isfinite(fit.thresholds)) and np.all(np.diff(fit.thresholds) > 0)
    assert np.all(np.isfinite(fit.beta)) and np.all(np.isfinite(fit.sds)) and np.all(fit.sds >= 0)
    assert np.isfinite(fit.loglik)
    again = laplace_loglik(y, X, g, fit.thresholds, fit.beta, fit.sds, scale=(1, 5))
    assert again == pytest.approx(fit.loglik, rel=1e-6, abs=1e-6) or any("depends on the start" in w
                                                                          for w in fit.warnings)
