"""pymer4 interop (optional): formulas and data it accepts, and export of its fitted ``Lmer``.

pymer4 is not a dependency: fitting through it is ~4x slower than the lme4
backend and its newest release needs an R package Debian lacks. A model
fitted with pymer4 (old ``Lmer`` with ``.model_obj`` or new ``lmer`` with
``.r_model``) holds an lme4 fit; it is read with the same R code as
``--backend lme4``, so the export is identical.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import pandas as pd

from ..errors import InputError
from .model import build_records
from .ratings import PilotData
from .types import Design, FitResult


def pymer4_formula(data: PilotData, correlated: bool = False) -> str:
    """The formula to give pymer4 for ``data`` (Gaussian ratings)."""
    return Design.for_data(data).formula(correlated)


def pymer4_frame(data: PilotData) -> pd.DataFrame:
    """The data frame to give pymer4: contrast columns, worker/item as strings (factors in R)."""
    frame = Design.for_data(data).model_frame(data)
    frame["worker"] = "w" + frame["worker"].astype(str)
    frame["item"] = "i" + frame["item"].astype(str)
    return frame


def from_pymer4(model: Any, data: PilotData, intervals: str = "wald") -> FitResult:
    """Export a fitted pymer4 model of :func:`pymer4_formula` on :func:`pymer4_frame`."""
    from .lme4 import extract_lmm

    if data.family != "gaussian":
        raise InputError("pymer4 interop covers Likert (gaussian) fits")
    r_model = getattr(model, "r_model", None)
    if r_model is None:
        r_model = getattr(model, "model_obj", None)
    if r_model is None or not getattr(model, "fitted", True):
        raise InputError("not a fitted pymer4 model (no .model_obj / .r_model): call .fit() first")
    formula = str(getattr(model, "formula", "")).replace(" ", "")
    correlated = False
    for corr in (False, True):
        if formula == pymer4_formula(data, corr).replace(" ", ""):
            correlated = corr
            break
    else:
        raise InputError(f"the pymer4 model's formula {formula!r} is not the one for these data; "
                         f"fit pymer4_formula(data) = {pymer4_formula(data)!r} on pymer4_frame(data)")
    design = Design.for_data(data)
    raw = extract_lmm(r_model, intervals)
    raw = replace(raw, backend="pymer4 (lme4)")
    return FitResult(data, design, raw, correlated, intervals, (), (), build_records(data, design, raw, correlated))
