"""Many systems (issue 17.4): a simulated 15,000-rating, 20-system sparse crowd study fits end to end with
the default coding-invariant model, with both backends, within two minutes of CPU, with progress, and
equal to R on the same model: lme4 typed directly (estimates, SEs, SDs, REML criterion) and lmerTest's
Satterthwaite df and p-values.

lmerTest's df of this model cost 24 CPU s of numerical derivatives per fit. The lme4 backend is lmerTest on the
same model (our contrast coding), so its fit carries them: the no-R backend's analytic df and p-values are
checked against the lme4 backend's (lmerTest's), and the lme4 backend's against the no-R backend's (an
independent computation), while the optimum, the estimates and SEs of both are checked against lme4 typed
directly on the raw factors (which pins the contrast coding and the system each number belongs to). Before:
lmerTest typed directly was a third fit with the same derivatives (the group measured 99 CPU s; now 59). The df of
lmerTest typed directly equal the lme4 backend's on smaller data (test_fit_multisystem, to 1e-3).
"""
from __future__ import annotations

import time

import pytest

from humaneval_power.fitting.model import fit_pilot
from humaneval_power.fitting.ratings import read_ratings
from tests.crowd import crowd_ratings
from tests.lmm_reference import lme4_typed_directly
from tests.test_fit_multisystem import INVARIANT

#: the acceptance bar: CPU seconds (R runs inside this process, so its time counts); on 2 idle cores the
#: wall time is at most this (a threaded BLAS only adds CPU)
CPU_SECONDS = 120.0
BACKENDS = ("lme4", "statsmodels")


@pytest.fixture(scope="module")
def crowd20(lme4_backend) -> tuple:
    """The study, lme4's fit of it typed directly (factor coding, no contrast columns of ours), and each backend's
    fit with its CPU seconds and progress messages (made by the first test that asks)."""
    data = read_ratings(crowd_ratings())
    fits: dict[str, tuple] = {}

    def fit(backend: str) -> tuple:
        if backend not in fits:
            messages: list[str] = []
            wall, cpu = time.perf_counter(), time.process_time()
            result = fit_pilot(data, backend, progress=messages.append)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            print(f"{backend}: {wall:.1f} s wall, {cpu:.1f} s CPU")
            fits[backend] = (result, cpu, messages)
        return fits[backend]

    return data, lme4_typed_directly(data, INVARIANT), fit


@pytest.mark.slow
@pytest.mark.r
@pytest.mark.xdist_group("fit_scale")  # one worker: the reference and both fits (crowd20) are made once
@pytest.mark.parametrize("backend", BACKENDS)
def test_twenty_system_crowd_fits_in_two_minutes_and_equals_lmertest(crowd20: tuple, backend: str) -> None:
    """250 items x 20 systems, each output rated by 3 of 100 workers.

    Tolerances: lme4 stops short of its optimum here (its own warning: max|grad| 0.0038), so its estimates are
    those of a point up to ~1e-3 deviance units off. Effects within 1e-4 (their SE is 0.05), SEs and SDs within
    1e-3 relative, df within 1e-2 (df ~ 1,600: the t quantile moves by < 1e-5), p within 1e-2 relative; the
    criterion never above lme4's, and within 1e-2 of it.
    """
    data, ref, fit_of = crowd20
    assert len(data.frame) == 15_000 and len(data.systems) == 20
    fit, cpu, messages = fit_of(backend)
    assert cpu <= CPU_SECONDS, cpu
    assert any(m.startswith("fitting score ~") and backend in m for m in messages), messages
    assert fit.design.random == "invariant" and not fit.unidentified
    other = {r["system"]: r for r in fit_of(next(b for b in BACKENDS if b != backend))[0].records}
    assert len(fit.records) == len(other) == 19
    for rec in fit.records:
        est, se, _ = ref["coef"][rec["system"]]
        assert rec["effect"] == pytest.approx(est, abs=1e-4)
        assert rec["effect_se"] == pytest.approx(se, rel=1e-3)
        # lmerTest's df and p (the lme4 backend's) against the no-R backend's analytic ones
        assert rec["df"] == pytest.approx(other[rec["system"]]["df"], rel=1e-2)
        assert rec["p_value"] == pytest.approx(other[rec["system"]]["p_value"], rel=1e-2, abs=1e-8)
    comp = fit.raw.components.set_index("group")["sd"]
    for g in ("worker", "worker:system", "item", "item:system"):
        assert comp[g] == pytest.approx(ref["sd"][g], rel=1e-3), g
    assert fit.raw.sigma == pytest.approx(ref["sd"]["Residual"], rel=1e-3)
    assert ref["reml"] - 1e-2 < fit.raw.criterion <= ref["reml"] + 1e-6


def test_slope_model_on_many_systems_is_announced_before_fitting() -> None:
    """Card's slopes on 7 systems: 14 components; the cost warning comes before the fit starts."""
    messages: list[str] = []
    data = read_ratings(crowd_ratings(items=12, systems=7, raters=2, pool=8, seed=4))
    fit_pilot(data, "statsmodels", random="slopes", progress=messages.append)
    assert messages[0].startswith("warning: the slopes model has 14 variance components")
    messages.clear()
    fit_pilot(data, "statsmodels", progress=messages.append)
    assert not any(m.startswith("warning") for m in messages)
