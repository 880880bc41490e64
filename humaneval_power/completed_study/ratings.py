"""Analyse a completed human evaluation: one mixed model across all systems, adjusted contrasts.

:func:`analyze` fits the coding-invariant model

    score ~ system + (1 | worker) + (1 | worker:system) + (1 | item) + (1 | item:system)

by REML (lme4 + lmerTest, or the no-R solver) and gives what lmerTest + emmeans
give for it: the F test of "all systems equal" with Satterthwaite denominator df
(lmerTest's ``anova``), the estimated marginal mean of every system with its
interval, and contrasts (all pairs, or each system against the baseline) with
per-contrast Satterthwaite df and p-values adjusted over the family of
contrasts (``holm``, ``bonferroni``, ``fdr`` (Benjamini-Hochberg), ``tukey``
(studentized range, all pairs only), ``dunnett`` (emmeans' ``mvt``: the
multivariate t with the contrasts' own correlation), ``none``). Intervals are
adjusted as emmeans adjusts them: tukey and dunnett by their own quantiles,
bonferroni, holm and fdr by Bonferroni's (a step-down or FDR interval does not exist).
Every contrast also gets a standardised effect: its difference divided by the SD
of a single rating (the square root of the sum of the five variance components).

``random="maximal"`` fits ``(system | worker) + (system | item)`` with correlations and steps
down a logged ladder (maximal -> no correlations -> invariant) when a fit fails, warns of
non-convergence or is singular; ``random="slopes"`` is Card et al.'s ``(1 + contrasts || g)``.
``df="kenward-roger"`` is pbkrtest's (its own with lme4, recomputed without R). ``by`` analyses each group of a column
separately (:class:`GroupedAnalysis`); ``backend="bambi"`` gives posteriors (:class:`BayesianAnalysis`).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..contrasts import get_family
from ..errors import InputError
from ..fitting.clmm import BARTLETT_DRAWS
from ..fitting.ratings import PilotData, read_ratings
from ..multiplicity import ADJUSTMENTS
from ..rankings import parametric_draws
from ..validation import check_choice
from .backends import REGISTRY, get_backend, posterior_sampling
from .bayesian import BayesianAnalysis, bayesian_analysis
from .inference import (
    ADJUST_TEXT,
    CONTRASTS,
    DF_METHODS,
    DF_NAMES,
    DF_TEXT,
    anova_rows,
    contrast_table,
    marginal_means,
)
from .layout import check_data, design_summary
from .model_ladder import (
    LADDER,
    RANDOM,
    RANDOM_TEXT,
    coding_note,
    components_table,
    fit_ladder,
    model_text,
    singular_parts,
    singular_text,
    system_rows,
)
from .ordinal import POSTERIOR_BACKEND, OrdinalAnalysis, OrdinalPosterior, analyze_ordinal, check_ordinal_options
from .paper import N_RANK_DRAWS, PaperTables, check_paper_options, paper_tables
from .report import markdown_sections, note_lines, text_table


@dataclass(frozen=True, eq=False)
class AnalysisResult:
    """What :func:`analyze` found: tables (:meth:`tables`), contrast records (:meth:`records`), a summary (``str``)."""

    design: pd.DataFrame      #: one row per design quantity: name, value
    components: pd.DataFrame  #: component, sd, variance, icc (share of a single rating's variance)
    omnibus: pd.DataFrame     #: one row: test, F, num_df, den_df, p_value
    means: pd.DataFrame       #: system, emmean, se, df, ci_low, ci_high, n_ratings
    contrasts: pd.DataFrame   #: system, versus, estimate, se, df, t, p_value, p_adjusted, ci_low, ci_high, effect_size
    model: str
    backend: str
    adjust: str
    family: str               #: "pairs" or "baseline"
    level: float
    seed: int
    source: str
    scale: tuple[float, float] | None
    singular: bool
    notes: tuple[str, ...] = ()
    versions: dict[str, str] = field(default_factory=dict)
    df_method: str = "satterthwaite"  #: "satterthwaite" or "kenward-roger"
    random: str = "invariant"         #: the structure asked for (``model`` is the one fitted)
    steps: tuple[str, ...] = ()       #: the convergence ladder's steps, in words (maximal)
    data: PilotData | None = field(default=None, repr=False)  #: the ratings analysed (the report's design check)
    means_covariance: np.ndarray | None = field(default=None, repr=False)  #: the means' covariance (m V m')
    agreement_metric: str = "interval"   #: Krippendorff's alpha's metric (interval or ordinal)
    reliability_target: float = 0.8      #: the reliability whose ratings per item the paper tables give

    @cached_property
    def paper(self) -> PaperTables | None:
        """Agreement, reliability, letters, clusters and ranks (:mod:`.paper`), computed on first use (None without
        the ratings or the means' covariance)."""
        if self.data is None or self.means_covariance is None:
            return None
        draws = parametric_draws(self.means["emmean"].to_numpy(float), self.means_covariance, N_RANK_DRAWS, self.seed)
        return paper_tables(self.data.frame, self.components, self.means, "emmean", self.contrasts, self.family,
                            self.adjust, self.level, self.seed, draws,
                            f"{N_RANK_DRAWS} parametric draws of the means from their estimated covariance (a normal "
                            f"approximation; seed {self.seed})", self.agreement_metric, self.reliability_target)

    @property
    def fitted_structure(self) -> str:
        """The step of the ladder that was kept (``random`` unless the ladder stepped down)."""
        ladder = LADDER[self.random]
        return ladder[len(self.steps)][0]

    def tables(self) -> dict[str, pd.DataFrame]:
        """The five tables by name: design, components, omnibus, means, contrasts."""
        return {"design": self.design, "components": self.components, "omnibus": self.omnibus,
                "means": self.means, "contrasts": self.contrasts}

    def adjustment_text(self) -> str:
        """Which family the adjustment covers, in words."""
        return ADJUST_TEXT[self.adjust].format(n=len(self.contrasts), k=len(self.means), seed=self.seed)

    def records(self, paper: bool = False) -> list[dict[str, Any]]:
        """One record per contrast (the CLI's ``--json``); with ``paper``, each marked ``record: contrast`` and
        followed by the ``agreement``, ``reliability`` and ``system`` (letters, cluster, rank) records."""
        extra = {"adjust": self.adjust, "model": self.model, "backend": self.backend, "df_method": self.df_method}
        contrasts = [{**rec, **extra} for rec in self.contrasts.to_dict("records")]
        if not paper:
            return contrasts
        return [{"record": "contrast", **rec} for rec in contrasts] + (self.paper.records() if self.paper else [])

    def methods(self) -> str:
        """A methods paragraph for the paper."""
        o = self.omnibus.iloc[0]
        engine = get_backend(self.backend).methods_text
        ladder = (f" (the {self.random} structure did not fit: " + "; ".join(self.steps) + ")") if self.steps else ""
        return (f"We fitted the linear mixed model `{self.model}` by REML ({engine}), with "
                f"{RANDOM_TEXT[self.fitted_structure]}{ladder}. We tested whether all systems have the same "
                f"mean rating with an F test (F({o.num_df:.0f}, {o.den_df:.1f}) = {o.F:.2f}, p = {o.p_value:.3g}), "
                f"its denominator degrees of freedom by {DF_TEXT[self.df_method]}. We compared "
                + ("every pair of systems" if self.family == "pairs" else f"each system with {self.contrasts.versus.iloc[0]}")
                + " by t tests with per-contrast degrees of freedom (the same method), adjusting p-values and "
                f"{self.level:.0%} intervals by {self.adjustment_text()}. Effect sizes are differences in mean "
                "rating divided by the SD of a single rating (the square root of the sum of all variance components"
                + ("" if self.fitted_structure == "invariant" else ", averaged over the systems") + ").")

    def markdown(self) -> str:
        """A short Markdown report: methods paragraph, design, the F test, means, contrasts, variance components."""
        return markdown_sections(
            f"Analysis of {Path(self.source).name}", self.methods(),
            [("Design", self.design), ("Test of all systems equal", self.omnibus),
             (f"Estimated marginal means ({self.level:.0%} intervals)", self.means), ("Contrasts", self.contrasts),
             ("Variance components", self.components)], self.notes,
            [f"Scores were rescaled from [{self.scale[0]:g}, {self.scale[1]:g}] to [0, 1]."] if self.scale else [])

    def __str__(self) -> str:
        d = dict(zip(self.design.name, self.design.value))
        o = self.omnibus.iloc[0]
        scale = (f"scores rescaled from [{self.scale[0]:g}, {self.scale[1]:g}] to [0, 1]; " if self.scale else "")
        parts = [
            (f"{self.source}: {d['ratings']} ratings of {d['systems']} systems by {d['workers']} workers on "
            f"{d['items']} items ({d['crossing']})"),
            f"model: {self.model} (REML, {self.backend}){'; singular fit' if self.singular else ''}",
            *(f"ladder: {step}" for step in self.steps),
            f"{scale}effect_size = difference / SD of a single rating",
            "", "variance components:", text_table(self.components),
            "", (f"all systems equal: F({o.num_df:.0f}, {o.den_df:.4g}) = {o.F:.4g}, p = {o.p_value:.4g} "
            f"({DF_NAMES[self.df_method]} denominator df)"),
            "", f"estimated marginal means ({self.level:.0%} intervals):", text_table(self.means),
            "", f"contrasts ({self.family}); adjustment: {self.adjustment_text()}:",
            text_table(self.contrasts),
        ]
        if self.paper is not None:
            parts += self.paper.summary()
        return "\n".join(parts + note_lines(self.notes))



# -- the analysis ------------------------------------------------------------------------------

#: the families of ratings ``analyze`` takes: interval data (a linear mixed model) or ordered categories (a CLMM)
FAMILIES = ("gaussian", "ordinal")


def _check_options(random: str, contrasts: str, adjust: str | None, backend: str, df: str, level: float,
                   keep_singular: bool = False) -> str:
    """Refuse option combinations that cannot be computed; the adjustment to use."""
    if keep_singular and random != "maximal":
        raise InputError("--keep-singular applies to --random maximal (the only structure that steps down)")
    check_choice("random-effect structure", random, RANDOM)
    check_choice("contrasts", contrasts, CONTRASTS)
    chosen = get_backend(backend)
    check_choice("df method", df, DF_METHODS)
    if adjust is not None:
        check_choice("adjustment", adjust, ADJUSTMENTS)
    if not (isinstance(level, (int, float)) and 0 < level < 1):
        raise InputError(f"level must lie strictly between 0 and 1, got {level!r}")
    if random == "maximal" and not chosen.maximal:
        raise InputError("--random maximal needs --backend " + " or ".join(b.name for b in REGISTRY.values() if b.maximal)
                         + f" (correlated random slopes; the {backend} backend fits uncorrelated random effects only)")
    if chosen.posterior:
        if df == "kenward-roger":
            raise InputError(f"--df kenward-roger does not apply to --backend {backend} (a posterior has no df)")
        if adjust is not None:
            raise InputError(f"--adjust does not apply to --backend {backend}: a posterior probability is not "
                             "adjusted for multiplicity (the model's joint posterior covers every contrast)")
        return "none"
    if df == "kenward-roger" and chosen.kenward_roger is None:
        raise InputError(f"--df kenward-roger is not offered by --backend {backend}")
    return _family_adjust(contrasts, adjust)


def _family_adjust(contrasts: str, adjust: str | None) -> str:
    """The adjustment of the family of contrasts (its default when None): tukey for all pairs only."""
    adjust = adjust or get_family(contrasts).default_adjust
    if adjust == "tukey" and contrasts != "pairs":
        raise InputError("tukey adjusts all pairwise comparisons; for contrasts with a baseline use dunnett")
    return adjust


def _check_ordinal(contrasts: str, adjust: str | None, level: float, options: tuple[Any, ...]) -> tuple[str, str, str]:
    """``family="ordinal"``: the ordinal refusals (:func:`.ordinal.check_ordinal_options`), then the contrasts,
    adjustment and level as for ratings; (adjust, backend, link)."""
    backend, link = check_ordinal_options(*options)
    check_choice("contrasts", contrasts, CONTRASTS)
    if adjust is not None:
        check_choice("adjustment", adjust, ADJUSTMENTS)
    if not (isinstance(level, (int, float)) and 0 < level < 1):
        raise InputError(f"level must lie strictly between 0 and 1, got {level!r}")
    if backend == POSTERIOR_BACKEND:
        if adjust is not None:
            raise InputError(f"--adjust does not apply to --backend {backend}: a posterior probability is not "
                             "adjusted for multiplicity (the model's joint posterior covers every contrast)")
        return "none", backend, link
    return _family_adjust(contrasts, adjust), backend, link


def analyze(
    ratings: str | Path | pd.DataFrame,
    worker: str | None = None,
    item: str | None = None,
    system: str | None = None,
    score: str | None = None,
    where: dict[str, str] | None = None,
    baseline: str | None = None,
    scale: tuple[float, float] | None = None,
    random: str = "invariant",
    contrasts: str = "pairs",
    adjust: str | None = None,
    backend: str | None = None,
    level: float = 0.95,
    seed: int = 0,
    systems: Sequence[str] | None = None,
    duplicates: str = "error",
    progress: Callable[[str], None] | None = None,
    df: str = "satterthwaite",
    by: str | None = None,
    draws: int | None = None,
    chains: int | None = None,
    keep_singular: bool = False,
    agreement_metric: str = "interval",
    reliability_target: float = 0.8,
    family: str = "gaussian",
    link: str | None = None,
    bootstrap: int | None = None,
) -> AnalysisResult | BayesianAnalysis | OrdinalAnalysis | OrdinalPosterior | GroupedAnalysis:
    """Analyse a completed study: F test, marginal means and adjusted contrasts (see the module docs).

    Input as :func:`~humaneval_power.fitting.ratings.read_ratings` (CSV/Parquet/DataFrame,
    ``where`` filters, ``scale`` rescaling to [0, 1], ``duplicates``). ``contrasts``:
    ``pairs`` (every pair, later system minus earlier, the baseline first) or ``baseline``
    (each system minus the baseline). ``seed`` fixes the Monte Carlo of ``adjust="dunnett"``
    and bambi's sampler. ``random``: ``invariant``, ``maximal`` (with its convergence ladder)
    or ``slopes``; ``df``: ``satterthwaite`` or ``kenward-roger`` (pbkrtest's, either backend);
    ``adjust``: default ``holm`` (none with ``backend="bambi"``, whose result is a posterior:
    :class:`BayesianAnalysis`, ``draws`` per chain (default 1000), ``chains`` (default 2); both refused with another
    backend). ``by``: a column; each of its
    values is analysed separately (:class:`GroupedAnalysis`; adjustments within each group).
    ``keep_singular`` (with ``random="maximal"``): keep a singular maximal fit, as lme4 does, instead of
    stepping down (a fit that did not converge still steps down). The result also holds (``paper``) Krippendorff's
    alpha of the ratings (``agreement_metric``: ``interval`` or ``ordinal``), the reliability of the mean of k
    ratings from the components with the ratings per item that reach ``reliability_target``, letters and clusters
    (``contrasts="pairs"``) and ranks with intervals and P(best) (:mod:`.paper`). ``backend``: default lme4.

    ``family="ordinal"``: integer ratings as ordered categories (``scale`` = LOWEST, HIGHEST names them, no
    rescaling), a cumulative-link mixed model (``link`` logit, the default, or probit) fitted by ``backend`` clmm
    (R ``ordinal::clmm``, the default) or laplace (no R): likelihood-ratio and Wald tests, latent, mean-rating and
    category-probability marginal means, latent contrasts (:class:`.ordinal.OrdinalAnalysis`; ``df``: satterthwaite,
    the latent working model's t, or asymptotic, emmeans' z), the Bartlett-corrected LRT from ``bootstrap``
    parametric-bootstrap draws (default 200, seeded by ``seed``; 0: none); or
    bambi: their posterior with P(better) (:class:`.ordinal.OrdinalPosterior`, ``draws`` per chain, ``chains``).
    """
    if family == "binomial":
        raise InputError("family 'binomial': head-to-head judgments are analysed by analyze_judgments (hepower analyze "
                         "--family binomial); analyze takes ratings (gaussian or ordinal)")
    check_choice("family", family, FAMILIES)
    if bootstrap is not None and (isinstance(bootstrap, bool) or not isinstance(bootstrap, int) or bootstrap < 0):
        raise InputError(f"bootstrap must be a non-negative whole number of draws, got {bootstrap!r}")
    if family == "ordinal":
        adjust_used, backend, link = _check_ordinal(contrasts, adjust, level, (
            random, df, backend, link, keep_singular, agreement_metric, reliability_target))
    elif link is not None or bootstrap is not None:
        raise InputError(f"{'--link' if link is not None else '--bootstrap'} applies to --family ordinal")
    else:
        backend = backend or "lme4"
        adjust_used = _check_options(random, contrasts, adjust, backend, df, level, keep_singular)
    check_paper_options(agreement_metric, reliability_target)
    sampling = posterior_sampling(backend, draws, chains)  # refused before the file is read
    if by is not None:
        return _analyze_by(ratings, by, where, {
            "worker": worker, "item": item, "system": system, "score": score, "baseline": baseline, "scale": scale, "random": random,
            "contrasts": contrasts, "adjust": adjust, "backend": backend, "level": level, "seed": seed, "systems": systems,
            "duplicates": duplicates, "progress": progress, "df": df, "draws": draws, "chains": chains, "keep_singular": keep_singular,
            "agreement_metric": agreement_metric, "reliability_target": reliability_target, "family": family, "link": link,
            "bootstrap": bootstrap})
    draws, chains = sampling
    if family == "ordinal":
        assert backend is not None and link is not None
        return analyze_ordinal(ratings, worker, item, system, score, where, baseline, scale, systems, duplicates,
                               contrasts, adjust_used, backend, link, level, seed, progress, draws, chains, df,
                               BARTLETT_DRAWS if bootstrap is None else bootstrap)
    data = read_ratings(ratings, worker, item, system, score, baseline, systems, where, scale, duplicates)
    check_data(data)
    report = progress or (lambda message: None)
    if get_backend(backend).posterior:
        return bayesian_analysis(data, random, contrasts, level, seed, draws, chains, report, agreement_metric,
                                 reliability_target)
    fit = fit_ladder(data, random, backend, df == "kenward-roger", report, progress, keep_singular)
    design, raw = fit.design, fit.raw
    m = system_rows(design, fit.frame)
    components, rating_sd = components_table(design, raw, m)
    names = list(data.systems)
    omnibus = pd.DataFrame([{"test": "all systems equal", **fit.inference.f_test(anova_rows(design, fit.frame))}])
    means = marginal_means(fit.inference, m, names, data.frame.groupby("system").size(), level)
    table = contrast_table(fit.inference, m, names, contrasts, adjust_used, level, seed, rating_sd, report)
    cov = m @ fit.inference.vcov @ m.T

    notes = list(data.notes) + list(fit.unidentified) + list(raw.warnings)
    coding = coding_note(design)
    if coding:
        notes.append(coding)
    zeros = singular_parts(design, raw)
    if zeros or raw.singular:
        notes.append(f"singular fit: {singular_text(design, raw)}; the tests treat that source of variation as absent")
    return AnalysisResult(
        design=design_summary(data), components=components, omnibus=omnibus, means=means, contrasts=table,
        model=model_text(design, fit.spec), backend=backend, adjust=adjust_used, family=contrasts, level=level,
        seed=seed, source=data.source, scale=data.scale, singular=bool(raw.singular or zeros),
        notes=tuple(dict.fromkeys(notes)), versions=dict(raw.versions), df_method=df,
        random=random, steps=fit.steps, data=data, means_covariance=(cov + cov.T) / 2,
        agreement_metric=agreement_metric, reliability_target=reliability_target)


# -- one analysis per group (--by) -----------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class GroupedAnalysis:
    """:func:`analyze` with ``by``: one analysis per value of the column ``by``, each with its own family."""

    by: str
    results: dict[str, AnalysisResult | BayesianAnalysis | OrdinalAnalysis | OrdinalPosterior]

    def family_text(self) -> str:
        """Which family each adjustment covers, in words."""
        return (f"each group ({self.by} = {', '.join(self.results)}) is analysed separately: its own model, and each "
                f"adjustment covers the contrasts within one {self.by} only (no adjustment across groups)")

    def records(self, paper: bool = False) -> list[dict[str, Any]]:
        """Every group's records, each with ``group`` (the value of ``by``); ``paper`` as each group's."""
        return [{"group": g, **rec} for g, res in self.results.items() for rec in res.records(paper)]

    def tables(self) -> dict[str, pd.DataFrame]:
        """Each table of every group stacked, with a ``group`` column first."""
        out: dict[str, list[pd.DataFrame]] = {}
        for g, res in self.results.items():
            for name, table in res.tables().items():
                out.setdefault(name, []).append(table.assign(group=g)[["group", *table.columns]])
        return {name: pd.concat(parts, ignore_index=True) for name, parts in out.items()}

    def markdown(self) -> str:
        """Each group's report under its own heading, after a line on the families."""
        parts = [f"Analysed by {self.by}: {self.family_text()}.", ""]
        for g, res in self.results.items():
            parts += [res.markdown().replace("\n# ", "\n## ").replace("# ", f"# {self.by} = {g}: ", 1), ""]
        return "\n".join(parts)

    def __str__(self) -> str:
        parts = [f"by {self.by}: {self.family_text()}"]
        for g, res in self.results.items():
            parts += ["", f"=== {self.by} = {g} ===", str(res)]
        return "\n".join(parts)


def _analyze_by(ratings: str | Path | pd.DataFrame, by: str, where: dict[str, str] | None,
                options: dict[str, Any]) -> GroupedAnalysis:
    """:func:`analyze` of each value of the column ``by`` (after ``where``), in sorted order."""
    from ..io import apply_filters, read_table

    table, name, _ = read_table(ratings)
    table = apply_filters(table, where)
    if by not in table.columns:
        raise InputError(f"--by column {by!r} not found; columns are: {', '.join(map(str, table.columns))}")
    if table[by].isna().any():
        raise InputError(f"{int(table[by].isna().sum())} rows have no value in the --by column {by!r}")
    values = table[by].astype(str)
    groups = sorted(values.unique())
    results: dict[str, AnalysisResult | BayesianAnalysis | OrdinalAnalysis | OrdinalPosterior] = {}
    report = options.get("progress") or (lambda message: None)
    for g in groups:
        report(f"{by} = {g}")
        try:
            result = analyze(table[values == g], **options)
        except InputError as exc:
            raise InputError(f"{by} = {g}: {exc}") from None
        assert not isinstance(result, GroupedAnalysis)  # options hold no ``by``
        results[g] = replace(result, source=name)
    return GroupedAnalysis(by, results)
