"""The analysis applied to each simulated study, one class per model, found by name.

The protocol is :class:`~.base.Analysis`; the registered models are

==================  =====================================================  ===========================
name                model                                                  module
==================  =====================================================  ===========================
``invariant``       coding-invariant LMM, any number of systems            :mod:`.lmm`
``slopes``          Card et al.'s slope LMM, two systems                   :mod:`.lmm`
``crossed-slopes``  the slope LMM of the fully crossed cell, closed form   :mod:`.crossed`
``judgment-glmm``   logistic GLMM of head-to-head judgments                :mod:`.glmm`
``ordinal``         cumulative-link mixed model of ordinal ratings         :mod:`.ordinal`
==================  =====================================================  ===========================

A new model is a class with the protocol's methods in its own module, registered
here with :func:`register` (``rating_model=True`` when users choose it for ratings:
:data:`RATING_MODELS`; docs/architecture.md, "Adding an analysis model").
"""
from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from ..errors import InputError
from ..registry import Registry
from .base import Analysis, FamilyFit
from .crossed import CrossedSlopes
from .glmm import JudgmentGLMM
from .lmm import InvariantLMM, SlopesLMM
from .ordinal import OrdinalCLMM

#: the analysis classes by name, in registration order
REGISTRY: Registry[type[Analysis]] = Registry("analysis model")
#: the analyses a user chooses by name to analyse ratings (``hepower likert --model``, ``cell_factory(model=...)``;
#: iterating gives the names): the others are chosen for the user (``crossed-slopes``, the slope model's closed
#: form) or analyse other data (``judgment-glmm``)
RATING_MODELS: Registry[type[Analysis]] = Registry("rating model")


def register(cls: type[Analysis], rating_model: bool = False) -> type[Analysis]:
    """Add (or replace) an analysis class (a frozen dataclass following :class:`Analysis`) under its ``name``;
    ``rating_model``: users choose it by name to analyse ratings (:data:`RATING_MODELS`)."""
    REGISTRY.register(cls.name, cls)
    if rating_model:
        RATING_MODELS.register(cls.name, cls)
    else:
        RATING_MODELS.unregister(cls.name)
    return cls


def get_analysis(analysis: str | Analysis, **options: Any) -> Analysis:
    """The analysis named ``analysis`` built with ``options`` (tier, test, alpha, ...), or the instance
    given (with ``options`` replacing its fields); InputError naming the choices for an unknown name."""
    cls: Any = REGISTRY.get(analysis) if isinstance(analysis, str) else type(analysis)
    unknown = sorted(set(options) - {f.name for f in fields(cls)})
    if unknown:
        raise InputError(f"the {cls.name} analysis has no option {', '.join(unknown)}")
    if not isinstance(analysis, str):
        return replace(analysis, **options) if options else analysis  # type: ignore[type-var]
    made: Analysis = cls(**options)
    return made


for _cls, _rates in ((InvariantLMM, True), (SlopesLMM, True), (CrossedSlopes, False), (JudgmentGLMM, False),
                     (OrdinalCLMM, True)):
    register(_cls, _rates)

__all__ = ["RATING_MODELS", "REGISTRY", "Analysis", "CrossedSlopes", "FamilyFit", "InvariantLMM", "JudgmentGLMM",
           "OrdinalCLMM", "SlopesLMM", "get_analysis", "register"]
