"""Fits of the planner's analyses shared between the runs of one test (e.g. a search with ``model="both"`` and each
analysis's search alone on the same studies).

``share_analysis_fits(monkeypatch, cls)``: ``cls.fit(layout, y, prepared)`` answers a call on the same analysis
(its repr), the same layout and the same ratings once per test process; the fits are deterministic functions of
these (``prepared`` is derived from the layout). Other studies, designs or analyses are other calls, fitted
afresh, so a comparison of two runs still fails when they simulate or analyse differently. Unlike
``conftest.share_calls`` it keys on the study's data, not on the fitter's arguments (the linear analysis's batched
fitter takes a design object built anew per cell).
"""
from __future__ import annotations

from typing import Any

import pytest

from .conftest import call_key

#: fits by (analysis class, analysis repr, layout, ratings)
_FITS: dict[tuple, Any] = {}


def share_analysis_fits(monkeypatch: pytest.MonkeyPatch, cls: type) -> None:
    """``cls.fit`` answers each (analysis, layout, ratings) once per process (see the module docs)."""
    fit = cls.fit

    def shared(self: Any, layout: Any, y: Any, prepared: Any = None) -> Any:
        key = (cls.__name__, repr(self), call_key(layout), call_key(y))
        if key not in _FITS:
            _FITS[key] = fit(self, layout, y, prepared)
        return _FITS[key]

    monkeypatch.setattr(cls, "fit", shared)
