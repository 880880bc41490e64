"""Fits shared between cells of the crowd and head-to-head tests that see the same simulated studies."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from humaneval_power.fitting import glmm_laplace

from .conftest import call_key

#: the fields of a Laplace fit a test of the intercept reads (every test but the LRT)
WALD_FIELDS = ("estimate", "se", "p", "p_t", "singular", "failed", "fallback")


def laplace_fits_with_the_lrt(monkeypatch: pytest.MonkeyPatch) -> None:
    """``fit_glmm_laplace`` answers a call without the LRT from the same call with it made before in this test
    (run the cells with ``jobs=1``): a GLMM ``lrt`` cell and a ``z`` cell of the same stream then fit their
    studies once. The fit with the LRT carries the fit without it (:func:`same_wald_fields` checks that)."""
    fit = glmm_laplace.fit_glmm_laplace
    with_lrt: dict[object, Any] = {}

    def shared(*args: Any, lrt: bool = False, **kwargs: Any) -> Any:
        key = call_key((args, sorted(kwargs.items())))
        if not lrt and key in with_lrt:
            return with_lrt[key]
        result = fit(*args, lrt=lrt, **kwargs)
        if lrt:
            with_lrt[key] = result
        return result

    monkeypatch.setattr(glmm_laplace, "fit_glmm_laplace", shared)


def same_wald_fields(worker: np.ndarray, item: np.ndarray, y: np.ndarray) -> None:
    """The Laplace fits of ``y`` with and without the LRT agree bit for bit in :data:`WALD_FIELDS`."""
    a, b = (glmm_laplace.fit_glmm_laplace(worker, item, y, lrt=lrt) for lrt in (True, False))
    for name in WALD_FIELDS:
        assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), name
