"""The analysis seam: what the planner applies to each simulated study (docs/architecture.md).

An analysis is the model the user will fit to the finished study, the tier that
fits it and the test of each contrast of its family. The scenario cell asks it,
and never reads its fields:

* :meth:`Analysis.check` refuses what it cannot do with a number of systems and an effect;
* :meth:`Analysis.record` describes it in the result record;
* :meth:`Analysis.closed_form` names the closed-form analysis that replaces it on a design where one exists;
* :meth:`Analysis.prepare` precomputes what depends only on a design's layout
  (once per cell when every study shares the layout);
* :meth:`Analysis.fit` fits a batch of studies (``y``: one column per study);
* :meth:`Analysis.decide` turns a fit into each study's decisions for the family of contrasts.

``location_invariant`` says whether a fit at one set of system means serves every
other (Gaussian models: the variance estimates do not move with the fixed
effects, so ``decide`` shifts the estimates); otherwise the cell fits the data
simulated at the true means. ``chunk_size`` is the number of studies per chunk
(a few seconds of work: progress and Ctrl-C stay responsive).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from ..designs import Design, Layout
from ..engine import StudyOutcomes
from ..errors import InputError


@dataclass(frozen=True)
class FamilyFit:
    """Per study (rows) and contrast (columns): estimate, SE, df (None for z-type tests), p-values
    where the fit computes them itself (likelihood-ratio tests; else None); per study flags (warned:
    None when the tier has no warnings)."""

    estimate: np.ndarray
    se: np.ndarray
    df: np.ndarray | None
    singular: np.ndarray
    failed: np.ndarray
    warned: np.ndarray | None
    p: np.ndarray | None = None


def check_pair(pair: tuple[int, int], systems: int | None = None) -> None:
    """Refuse a pair of interest naming one system twice or (given ``systems``) a system not planned."""
    if pair[0] == pair[1]:
        raise InputError("the pair of interest must name two different systems")
    if systems is not None and (max(pair) >= systems or min(pair) < 0):
        raise InputError(f"the pair of interest {pair} is not among the {systems} systems")


def fit_each(analysis: Analysis, layouts: list[Layout], ys: list[np.ndarray]) -> FamilyFit:
    """The fits of studies with their own layouts, one by one, as one family fit."""
    fits = [analysis.fit(lay, yj, analysis.prepare(lay)) for lay, yj in zip(layouts, ys, strict=True)]

    def cat(name: str) -> Any:
        parts = [getattr(f, name) for f in fits]
        return None if parts[0] is None else np.concatenate(parts)

    return FamilyFit(*(cat(f) for f in FamilyFit.__dataclass_fields__))


@runtime_checkable
class Analysis(Protocol):
    """The analysis applied to every simulated study of a cell (see the module docs)."""

    name: ClassVar[str]
    location_invariant: ClassVar[bool]

    @property
    def alpha(self) -> float:
        """The significance level of each test."""

    @property
    def pair(self) -> tuple[int, int]:
        """The pair of interest (the effect is B - A of this pair)."""

    @property
    def chunk_size(self) -> int:
        """Studies per chunk of the engine."""

    def check(self, systems: int, effect: float = 0.0) -> None:
        """Refuse (InputError) what this analysis cannot do with ``systems`` systems and this effect."""

    def record(self) -> dict[str, Any]:
        """The analysis's part of the result record (model, method, test, alpha, ...)."""

    def closed_form(self, design: Design, process: Any, means: Any, sufficient: bool = True) -> Analysis | None:
        """The closed-form analysis that computes this one on ``design`` and ``process`` (fixed ``means``:
        None), where ``sufficient`` statistics are allowed; None: every study is fitted in full. Refuses
        (InputError) tiers that exist only in closed form where there is none."""

    def prepare(self, layout: Layout, weights: np.ndarray | None = None) -> Any:
        """What the fits of studies with this layout share (None when nothing)."""

    def fit(self, layout: Layout | list[Layout], y: np.ndarray | list[np.ndarray], prepared: Any = None) -> FamilyFit:
        """Fit every column of ``y`` (N x n): the family's estimates and their uncertainty; or studies with
        their own layouts: a list of layouts and one ``y`` (N_j x 1) each."""

    def decide(self, fit: FamilyFit, means: np.ndarray, fitted_means: np.ndarray) -> StudyOutcomes:
        """Each study's decisions at the true system ``means`` from a fit of data simulated at ``fitted_means``."""
