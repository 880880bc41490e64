"""The solver keeps the points it evaluated (``CrossedComponentsModel._evaluate``): the same gamma again returns
the same numbers without recomputing, a point with gradient parts serves a request without them, and a model
with another response or criterion (``with_response``, ``as_ml``) never sees the first model's points."""
from __future__ import annotations

import numpy as np
import pytest

from humaneval_power.fitting import vc_reml
from tests.test_vc_reml import model, sparse_ratings


@pytest.fixture(scope="module")
def base() -> vc_reml.CrossedComponentsModel:
    return model(sparse_ratings(12, 8, 4, seed=5))


def test_same_point_is_not_recomputed_and_equals_a_fresh_evaluation(base, monkeypatch):
    y = base.x @ np.array([1.0, 0.2, -0.1]) + np.random.default_rng(1).normal(size=base.n)
    m = base.with_response(y)
    gamma = np.linspace(0.2, 1.0, m.k)
    first = m._evaluate(gamma, gradient=True)
    for other in range(1, vc_reml.KEPT_POINTS):  # fewer other points than are kept
        m._evaluate(gamma * (1 + other), gradient=True)
    calls = []
    monkeypatch.setattr(m, "_compute", lambda g, gradient: calls.append(g))
    assert m._evaluate(gamma.copy(), gradient=False) is first and not calls
    monkeypatch.undo()
    again = base.with_response(y)._evaluate(gamma, gradient=True)  # a new model: nothing kept, computed anew
    assert again is not first
    assert again.deviance == first.deviance and np.array_equal(again.trace, first.trace)


def test_a_point_without_gradient_is_completed_when_the_gradient_is_asked(base):
    m = base.with_response(np.random.default_rng(2).normal(size=base.n))
    gamma = np.full(m.k, 0.5)
    assert m._evaluate(gamma, gradient=False).trace is None
    assert m._evaluate(gamma, gradient=True).trace is not None
    assert m._evaluate(gamma, gradient=False).trace is not None  # the completed point serves both


def test_other_response_or_criterion_does_not_reuse_points(base):
    gamma = np.full(base.k, 0.7)
    m = base.with_response(np.random.default_rng(3).normal(size=base.n))
    other = m.with_response(np.random.default_rng(4).normal(size=base.n))
    ml = m.as_ml()
    reml_point = m._evaluate(gamma, gradient=True)
    assert other._evaluate(gamma, gradient=True).deviance != reml_point.deviance
    assert ml._evaluate(gamma, gradient=True).deviance != reml_point.deviance
    assert m._evaluate(gamma, gradient=True) is reml_point
