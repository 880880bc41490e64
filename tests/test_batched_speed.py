"""The batched fit's speed-ups of issue 27 keep its answers: the Armijo halvings tried several at a time accept
the step that halving one at a time accepts, and a fit that does not depend on which studies share its batch
(a study fitted alone, from the same start, gives the batch's optimum within the fit's tolerance)."""
from __future__ import annotations

import numpy as np
import pytest

from humaneval_power.analyses import InvariantLMM
from humaneval_power.designs import CrowdDesign
from humaneval_power.fitting.batched import fit_many, optimizer
from humaneval_power.fitting.batched.deviance import stacked as optimizer_stacked
from humaneval_power.processes import InvariantProcess


@pytest.fixture(scope="module")
def studies() -> tuple:
    """30 crowd studies (12 workers x 30 items, k = 3) with small system-by-worker and -item SDs: many fits
    end on the boundary, where the step is cut back most."""
    rng = np.random.default_rng(27)
    process = InvariantProcess(0.4, 0.05, 0.5, 0.05, 0.9, systems=2, intercept=3.0)
    layout = CrowdDesign(30, 12, 3, 2, "balanced").draw(rng, 1)
    design = InvariantLMM().component_design(layout)
    return design, process.simulate(layout, np.r_[0.0, 0.2], 30, rng), InvariantLMM().contrast_rows(2)


def test_stacked_halvings_accept_the_same_steps(studies: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    design, y, rows = studies
    calls = []
    monkeypatch.setattr(optimizer, "stacked", lambda bt, r: calls.append(r) or optimizer_stacked(bt, r))
    stacked = fit_many(design, y, rows)
    assert calls  # halvings were stacked
    monkeypatch.setattr(optimizer, "STACKED_HALVINGS", 1)
    one_by_one = fit_many(design, y, rows)
    for name in ("estimate", "se", "df", "theta", "sigma", "deviance", "iterations", "converged"):
        assert np.array_equal(getattr(stacked, name), getattr(one_by_one, name)), name
    assert stacked.singular.any()  # the boundary was reached


def test_a_study_alone_reaches_its_batch_optimum(studies: tuple) -> None:
    design, y, rows = studies
    batch = fit_many(design, y, rows)
    start = np.median(batch.theta**2, axis=0)
    for j in (0, 7, 23):
        alone = fit_many(design, y[:, [j]], rows, start=start)
        assert alone.deviance[0] == pytest.approx(batch.deviance[j], abs=1e-7)
        np.testing.assert_allclose(alone.sds[0], batch.sds[j], atol=1e-5)
        assert alone.df[0, 0] == pytest.approx(batch.df[j, 0], rel=1e-4)
