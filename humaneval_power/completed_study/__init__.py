"""The analysis of a completed study: real ratings or judgments, one model fitted once, a report.

Not to be confused with :mod:`humaneval_power.analyses`, the analysis the planner applies to each
*simulated* study. Modules:

* :mod:`.ratings` -- :func:`analyze`: F test, marginal means and adjusted contrasts of a rating study
  (:class:`AnalysisResult`; :class:`GroupedAnalysis` with ``by``);
* :mod:`.model_ladder` -- random-effect structures, identifiable components, the convergence ladder;
* :mod:`.backends` -- the table of backends (lme4, the no-R solver ``statsmodels``, bambi) and their fitters;
* :mod:`.inference` -- lmerTest's Satterthwaite and pbkrtest's Kenward-Roger inference, emmeans' means and
  contrasts (families from :mod:`humaneval_power.contrasts`, adjustments from :mod:`humaneval_power.multiplicity`);
* :mod:`.bayesian` -- the posterior with ``backend="bambi"`` (:class:`BayesianAnalysis`);
* :mod:`.layout` -- what the model refuses, and the design table;
* :mod:`.judgments` -- :func:`analyze_judgments`: a head-to-head study, per-pair GLMMs and Bradley-Terry;
* :mod:`.paper` -- agreement, reliability, letters, clusters and ranks of an analysis (``paper``), LaTeX tables
  (:func:`write_latex`) and :func:`agreement` (``hepower agreement``);
* :mod:`.report` -- the Markdown/HTML report, its figure and the design check by the planner.
"""
from __future__ import annotations

from .backends import BACKENDS
from .bayesian import BayesianAnalysis
from .inference import CONTRASTS, DF_METHODS
from .judgments import JudgmentAnalysis, analyze_judgments, bradley_terry, read_pairwise
from .layout import design_summary
from .model_ladder import RANDOM
from .paper import AgreementResult, PaperTables, agreement, latex_text, write_latex
from .ratings import AnalysisResult, GroupedAnalysis, analyze
from .report import (
    MIN_SIMS,
    REPORT_FORMATS,
    DesignCheck,
    analysis_figure,
    check_report_path,
    check_skipped,
    design_check,
    figure_of,
    markdown_table,
    render,
    report_sections,
    report_text,
)

__all__ = [
    "BACKENDS",
    "CONTRASTS",
    "DF_METHODS",
    "MIN_SIMS",
    "RANDOM",
    "REPORT_FORMATS",
    "AgreementResult",
    "AnalysisResult",
    "BayesianAnalysis",
    "DesignCheck",
    "GroupedAnalysis",
    "JudgmentAnalysis",
    "PaperTables",
    "agreement",
    "analysis_figure",
    "analyze",
    "analyze_judgments",
    "bradley_terry",
    "check_report_path",
    "check_skipped",
    "design_check",
    "design_summary",
    "figure_of",
    "latex_text",
    "markdown_table",
    "read_pairwise",
    "render",
    "report_sections",
    "report_text",
    "write_latex",
]
