"""humaneval-power: statistical power analysis for NLP evaluations.

The public names below are imported on first use (PEP 562), so that the
command line starts without loading scipy and pandas.
"""
from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "PowerResult": "engine",
    "SolveResult": "planning",
    "power_grid": "planning",
    "solve": "planning",
    "run_cells": "engine",
    "BackendUnavailableError": "errors",
    "HepowerError": "errors",
    "InputError": "errors",
    "PRESETS": "params",
    "LikertParams": "params",
    "get_preset": "params",
    "load_params": "params",
    "save_params": "params",
    "CrossedLikertScenario": "scenarios.crossed",
    "likert_power": "scenarios.likert",
    "likert_sample_size": "scenarios.likert",
    "likert_mde": "scenarios.likert",
    "likert_budget": "scenarios.likert",
    "CrowdDesign": "designs",
    "PilotDesign": "designs",
    "Costs": "designs",
    "InvariantProcess": "processes",
    "ParamDraws": "assurance",
    "Prior": "assurance",
    "load_draws": "assurance",
    "Alpha": "agreement",
    "krippendorff_alpha": "agreement",
    "alpha_table": "agreement",
    "Reliability": "rating_reliability",
    "reliability": "rating_reliability",
    "ratings_needed": "rating_reliability",
    "compact_letters": "significance_groups",
    "wmt_clusters": "significance_groups",
    "rank_table": "rankings",
    "parametric_draws": "rankings",
    "booktabs_table": "latex",
    "analyze": "completed_study",
    "analyze_judgments": "completed_study",
}
__all__ = sorted(_EXPORTS)  # noqa: PLE0605 (a list built from the table of exports)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
