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
here with :func:`register` (docs/architecture.md, "Adding an analysis").
"""
from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from ..errors import InputError
from ..validation import check_choice
from .base import Analysis, FamilyFit
from .crossed import CrossedSlopes
from .glmm import JudgmentGLMM
from .lmm import InvariantLMM, SlopesLMM
from .ordinal import OrdinalCLMM

REGISTRY: dict[str, Any] = {}  #: name -> analysis class


def register(cls: Any) -> Any:
    """Add (or replace) an analysis class (a frozen dataclass following :class:`Analysis`) under its ``name``."""
    REGISTRY[cls.name] = cls
    return cls


def get_analysis(analysis: str | Analysis, **options: Any) -> Analysis:
    """The analysis named ``analysis`` built with ``options`` (tier, test, alpha, ...), or the instance
    given (with ``options`` replacing its fields); InputError naming the choices for an unknown name."""
    if isinstance(analysis, str):
        check_choice("analysis model", analysis, tuple(REGISTRY))
    cls: Any = REGISTRY[analysis] if isinstance(analysis, str) else type(analysis)
    unknown = sorted(set(options) - {f.name for f in fields(cls)})
    if unknown:
        raise InputError(f"the {cls.name} analysis has no option {', '.join(unknown)}")
    if not isinstance(analysis, str):
        return replace(analysis, **options) if options else analysis  # type: ignore[type-var]
    made: Analysis = cls(**options)
    return made


for _cls in (InvariantLMM, SlopesLMM, CrossedSlopes, JudgmentGLMM, OrdinalCLMM):
    register(_cls)

__all__ = ["REGISTRY", "Analysis", "CrossedSlopes", "FamilyFit", "InvariantLMM", "JudgmentGLMM", "OrdinalCLMM",
           "SlopesLMM", "get_analysis", "register"]
