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

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .contrasts import family_pairs
from .errors import InputError
from .fitting.ratings import PilotData, read_ratings
from .multiplicity import ADJUSTMENTS, adjusted
from .validation import check_choice

CONTRASTS = ("pairs", "baseline")
BACKENDS = ("lme4", "statsmodels", "bambi")
RANDOM = ("invariant", "maximal", "slopes")
DF_METHODS = ("satterthwaite", "kenward-roger")
#: each df method in words (summary, methods paragraph)
DF_TEXT = {"satterthwaite": "Satterthwaite's method as in lmerTest",
           "kenward-roger": "Kenward and Roger's method as in pbkrtest (standard errors from its adjusted covariance), "
                            "as lmerTest's ddf = \"Kenward-Roger\" and emmeans' lmer.df = \"kenward-roger\""}
DF_NAMES = {"satterthwaite": "Satterthwaite", "kenward-roger": "Kenward-Roger"}
#: each random-effect structure in words (methods paragraph)
RANDOM_TEXT = {
    "invariant": "random intercepts for workers and items and for their interactions with the system, so that every "
                 "system shares the same five variance components whatever the coding",
    "maximal": "by-worker and by-item random intercepts and system slopes with their correlations (the maximal "
               "structure of Barr et al., 2013)",
    "no correlations": "by-worker and by-item random intercepts and system slopes, uncorrelated",
    "slopes": "by-worker and by-item random intercepts and system slopes without correlations (Card et al., 2020)",
}
#: how each adjustment is computed, and its family, in words (summary, report, docs)
ADJUST_TEXT = {
    "holm": "Holm's step-down (family-wise error) over the {n} contrasts; intervals Bonferroni-adjusted",
    "bonferroni": "Bonferroni over the {n} contrasts",
    "fdr": "Benjamini-Hochberg false discovery rate over the {n} contrasts; intervals Bonferroni-adjusted",
    "tukey": "Tukey's studentized range for the {k} means (each contrast with its own df)",
    "dunnett": "single-step multivariate t over the {n} contrasts with their estimated correlation "
               "(emmeans' mvt; Dunnett's test for contrasts with a baseline), Monte Carlo, seed {seed}",
    "none": "none ({n} unadjusted tests)",
}
#: how each adjustment's intervals are adjusted (plot titles): holm and fdr intervals are Bonferroni's
INTERVAL_TEXT = {"holm": "Bonferroni-adjusted", "bonferroni": "Bonferroni-adjusted", "fdr": "Bonferroni-adjusted",
                 "tukey": "Tukey-adjusted", "dunnett": "mvt-adjusted", "none": "unadjusted"}


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

    def records(self) -> list[dict[str, Any]]:
        """One record per contrast (the CLI's ``--json``)."""
        extra = {"adjust": self.adjust, "model": self.model, "backend": self.backend, "df_method": self.df_method}
        return [{**rec, **extra} for rec in self.contrasts.to_dict("records")]

    def methods(self) -> str:
        """A methods paragraph for the paper."""
        o = self.omnibus.iloc[0]
        engine = ("lme4 and lmerTest in R" if self.backend == "lme4"
                  else "humaneval-power's REML solver (the lme4 criterion, without R)")
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
        sections = [f"# Analysis of {Path(self.source).name}", "", self.methods(), ""]
        for title, table in (("Design", self.design), ("Test of all systems equal", self.omnibus),
                             (f"Estimated marginal means ({self.level:.0%} intervals)", self.means),
                             ("Contrasts", self.contrasts), ("Variance components", self.components)):
            sections += [f"## {title}", "", _markdown_table(table), ""]
        if self.scale:
            sections += [f"Scores were rescaled from [{self.scale[0]:g}, {self.scale[1]:g}] to [0, 1].", ""]
        if self.notes:
            sections += ["## Notes", "", *(f"- {n}" for n in self.notes), ""]
        return "\n".join(sections)

    def __str__(self) -> str:
        fmt = {"float_format": lambda v: f"{v:.4g}", "index": False}
        d = dict(zip(self.design.name, self.design.value))
        o = self.omnibus.iloc[0]
        scale = (f"scores rescaled from [{self.scale[0]:g}, {self.scale[1]:g}] to [0, 1]; " if self.scale else "")
        parts = [
            f"{self.source}: {d['ratings']} ratings of {d['systems']} systems by {d['workers']} workers on "
            f"{d['items']} items ({d['crossing']})",
            f"model: {self.model} (REML, {self.backend}){'; singular fit' if self.singular else ''}",
            *(f"ladder: {step}" for step in self.steps),
            f"{scale}effect_size = difference / SD of a single rating",
            "", "variance components:", self.components.to_string(**fmt),
            "", f"all systems equal: F({o.num_df:.0f}, {o.den_df:.4g}) = {o.F:.4g}, p = {o.p_value:.4g} "
            f"({DF_NAMES[self.df_method]} denominator df)",
            "", f"estimated marginal means ({self.level:.0%} intervals):", self.means.to_string(**fmt),
            "", f"contrasts ({self.family}); adjustment: {self.adjustment_text()}:",
            self.contrasts.to_string(**fmt),
        ]
        if self.notes:
            parts += ["", *(f"note: {n}" for n in self.notes)]
        return "\n".join(parts)


def _markdown_table(table: pd.DataFrame) -> str:
    def cell(v: Any) -> str:
        return f"{v:.4g}" if isinstance(v, (float, np.floating)) else str(v)

    lines = ["| " + " | ".join(map(str, table.columns)) + " |", "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join(lines)


# -- input and design ------------------------------------------------------------------------------


def _check_data(data: PilotData) -> None:
    """Refuse what the model cannot analyse (beyond :func:`read_ratings`' checks)."""
    f = data.frame
    per_system = f.groupby("system").size()
    single = sorted(per_system.index[per_system < 2])
    if single:
        raise InputError(f"system(s) with a single rating: {', '.join(single)}; a system needs several ratings")
    if f["score"].nunique() == 1:
        raise InputError(f"every score is {f['score'].iloc[0]:g}: constant scores have no variance to analyse")
    groups = _connected_groups(f)
    if len(groups) > 1:
        raise InputError("the system comparison is disconnected: no item or worker links "
                         + " | ".join(", ".join(g) for g in groups)
                         + "; their differences would rest on between-item comparisons alone")


def _connected_groups(frame: pd.DataFrame) -> list[list[str]]:
    """Systems grouped by the items and workers they share (one group: the comparison is connected)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    sys_codes, systems = pd.factorize(frame["system"], sort=True)
    k = len(systems)
    nodes = [sys_codes]
    offset = k
    for role in ("item", "worker"):
        codes, levels = pd.factorize(frame[role])
        nodes.append(codes + offset)
        offset += len(levels)
    rows = np.concatenate([sys_codes, sys_codes])
    cols = np.concatenate(nodes[1:])
    graph = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(offset, offset))
    _, labels = connected_components(graph, directed=False)
    out: dict[int, list[str]] = {}
    for s, lab in zip(systems, labels[:k]):
        out.setdefault(int(lab), []).append(str(s))
    return list(out.values())


def design_summary(data: PilotData) -> pd.DataFrame:
    """How the ratings are laid out: counts, ratings per item / worker / output, crossing, connectedness."""
    f = data.frame

    def spread(counts: pd.Series) -> str:
        return f"{counts.min()}-{counts.max()} (median {counts.median():g})"

    k = len(data.systems)
    per_output = f.groupby(["item", "system"]).size()
    items_per_system = f.groupby("system")["item"].nunique()
    systems_per_worker = f.groupby("worker")["system"].nunique()
    repeats = int(f.duplicated(["worker", "item", "system"]).sum())  # --duplicates keep
    if len(f) - repeats == f["worker"].nunique() * f["item"].nunique() * k:
        crossing = "fully crossed: every worker rated every system on every item"
    elif (systems_per_worker == k).all():
        crossing = "every worker rated every system, but not every item"
    else:
        crossing = (f"{int((systems_per_worker > 1).sum())} of {len(systems_per_worker)} workers rated more than "
                    "one system")
    if repeats:
        crossing += f"; {repeats} repeated ratings of a (worker, item, system), kept as independent ratings"
    by_items = len(_connected_groups(f.assign(worker=f["item"])))  # items alone
    rows = [
        ("ratings", len(f)), ("systems", k), ("workers", f["worker"].nunique()), ("items", f["item"].nunique()),
        ("ratings per item", spread(f.groupby("item").size())),
        ("ratings per worker", spread(f.groupby("worker").size())),
        ("ratings per item x system output", spread(per_output)),
        ("workers per item", spread(f.groupby("item")["worker"].nunique())),
        ("systems per worker", spread(systems_per_worker)),
        ("items per system", spread(items_per_system)),
        ("crossing", crossing),
        ("connected", "yes" + (" (through shared items)" if by_items == 1 else " (through shared workers only)")),
    ]
    return pd.DataFrame({"name": [r[0] for r in rows], "value": [str(r[1]) for r in rows]})


def _system_rows(design: Any, frame: pd.DataFrame) -> np.ndarray:
    """Row of the fixed-effect model matrix for each system (its mean is row @ beta), systems in design order."""
    rows = []
    for code in range(1, len(design.systems) + 1):
        first = frame.loc[frame["system"] == code].iloc[0]
        rows.append([1.0] + [float(first[c]) for c in design.columns])
    return np.array(rows)


def anova_rows(design: Any, frame: pd.DataFrame) -> np.ndarray:
    """The hypothesis "all systems equal" in lmerTest's basis (its type I = type III rows for one factor).

    contestMD's F does not depend on the basis of the hypothesis but its denominator df does
    (unless the design is balanced): lmerTest takes the rows of the system columns of ``t(L)``,
    ``X'X = LU`` (Doolittle, no pivoting), i.e. the unit lower factor of ``X'X = L D L'``.
    """
    x = np.column_stack([np.ones(len(frame))] + [frame[c].to_numpy(float) for c in design.columns])
    chol = np.linalg.cholesky(x.T @ x)
    lower = chol / np.diag(chol)
    lower[np.abs(lower) < 1e-6] = 0.0  # as lmerTest's doolittle()
    return lower.T[1:]


def _family(systems: Sequence[str], contrasts: str) -> list[tuple[int, int]]:
    """(system, versus) index pairs: each system against the first, or all pairs (later minus earlier)."""
    return [(upper, lower) for lower, upper in family_pairs(contrasts, len(systems))]


# -- the analysis ----------------------------------------------------------------------------------


def _term_values(design: Any, rows: np.ndarray, term: str) -> np.ndarray:
    """The value of a random-effect term in each system's ratings (``rows``: :func:`_system_rows`)."""
    return np.ones(len(rows)) if term == "(Intercept)" else rows[:, 1 + design.columns.index(term)]


def _label(design: Any, group: str, term: str) -> str:
    from .fitting.types import component_label

    return group.replace(":", " x ") if design.random == "invariant" else component_label(design, group, term)


def _components_table(design: Any, raw: Any, rows: np.ndarray) -> tuple[pd.DataFrame, float]:
    """Each variance component (and covariance) with its share of a single rating's variance, and that SD.

    A rating of system s has variance sum_g z_s' Sigma_g z_s + sigma^2 (z_s: its random-effect terms);
    the SD of a single rating is the square root of its mean over systems (for the invariant model the
    sum of the five components), and each row's ``icc`` is its part of that mean.
    """
    sds = {(g, t): float(sd) for g, t, sd in zip(raw.components.group, raw.components.term, raw.components.sd)}
    entries = []
    for g, t in design.components():
        sd = sds.get((g, t), 0.0)
        entries.append((_label(design, g, t), sd, sd**2, float(np.mean(_term_values(design, rows, t) ** 2)) * sd**2))
    for g, t1, t2, cor in raw.correlations[["group", "term1", "term2", "cor"]].itertuples(index=False):
        cov = float(cor) * sds[g, t1] * sds[g, t2]
        share = 2 * float(np.mean(_term_values(design, rows, t1) * _term_values(design, rows, t2))) * cov
        entries.append((f"cov({_label(design, g, t1)}, {_label(design, g, t2)}), cor {float(cor):.3f}", math.nan,
                        cov, share))
    entries.append(("residual", raw.sigma, raw.sigma**2, raw.sigma**2))
    table = pd.DataFrame(entries, columns=["component", "sd", "variance", "icc"])
    total = float(table["icc"].sum())
    table["icc"] = table["icc"] / total
    return table, math.sqrt(total)


#: the convergence ladder of each random-effect structure: (name, Design.random, correlated) steps
LADDER = {
    "maximal": (("maximal", "slopes", True), ("no correlations", "slopes", False), ("invariant", "invariant", False)),
    "slopes": (("slopes", "slopes", False),),
    "invariant": (("invariant", "invariant", False),),
}
#: lme4 warnings that mean the optimiser did not certify its optimum
CONVERGENCE = ("converge", "unidentifiable", "hessian", "eigenvalue")


def singular_parts(design: Any, raw: Any) -> list[str]:
    """The variance components at zero and the correlations at +-1 of a fit, by name."""
    from .fitting.types import ZERO_TOL, zero_components

    parts = [f"{_label(design, g, t)} at zero" for g, t in zero_components(design, raw)]
    sds = {(g, t): float(sd) for g, t, sd in zip(raw.components.group, raw.components.term, raw.components.sd)}
    for g in dict.fromkeys(raw.correlations["group"]):
        terms = [t for h, t in sds if h == g]
        cov = np.diag([sds[g, t] ** 2 for t in terms])
        for h, a, b, c in raw.correlations[["group", "term1", "term2", "cor"]].itertuples(index=False):
            if h == g:
                i, j = terms.index(a), terms.index(b)
                cov[i, j] = cov[j, i] = float(c) * sds[g, a] * sds[g, b]
        rank = int((np.linalg.eigvalsh(cov / raw.sigma**2) > ZERO_TOL**2).sum())
        if rank < len(terms):
            parts.append(f"the {g} covariance matrix ({len(terms)} x {len(terms)}) has rank {rank}")
    parts += [f"correlation of {_label(design, g, a)} and {_label(design, g, b)} at {c:+.4f}"
              for g, a, b, c in raw.correlations[["group", "term1", "term2", "cor"]].itertuples(index=False)
              if abs(float(c)) > 1 - 1e-4]
    return parts


def singular_text(design: Any, raw: Any) -> str:
    """What makes a fit singular, in words (lme4 may call a fit singular with no part below the tolerance)."""
    return "; ".join(singular_parts(design, raw)) or "a random-effect covariance matrix of reduced rank"


def _ladder_reason(design: Any, raw: Any, keep_singular: bool = False) -> str | None:
    """Why a fit of the ladder is not kept (convergence warning, singular fit unless ``keep_singular``), or None."""
    warned = [w for w in raw.warnings if any(key in w.lower() for key in CONVERGENCE)]
    if warned:
        return f"convergence warning ({warned[0].strip()})"
    if raw.singular and not keep_singular:
        return f"singular fit ({singular_text(design, raw)})"
    return None


def _fit_once(frame: pd.DataFrame, spec: Any, backend: str, kenward_roger: bool,
              progress: Callable[[str], None] | None) -> tuple[Any, Any]:
    if backend == "lme4":
        from .fitting.lmer_inference import lme4_inference

        return lme4_inference(frame, spec, kenward_roger, progress)
    from .fitting.lmer_inference import statsmodels_inference

    return statsmodels_inference(frame, spec, progress, kenward_roger)


def _fit_ladder(data: PilotData, random: str, backend: str, kenward_roger: bool,
                report: Callable[[str], None], progress: Callable[[str], None] | None,
                keep_singular: bool = False) -> tuple[Any, ...]:
    """Fit the first step of ``random``'s ladder that converges without a singular fit (``keep_singular``: singular
    or not; the last step is kept whatever it gives); returns design, frame, spec, fit, inference, the steps taken (in words), identifiability notes."""
    from .fitting.model import _identifiable
    from .fitting.types import Design

    ladder = LADDER[random]
    steps: list[str] = []
    for n, (name, structure, correlated) in enumerate(ladder):
        design = Design.for_data(data, structure)
        frame = design.model_frame(data)
        dropped, unidentified = _identifiable(design, frame)
        spec = design.spec(correlated, frozenset((g, t) for g, t, _ in dropped))
        report(f"fitting {spec.formula} ({backend})")
        last = n == len(ladder) - 1
        try:
            raw, inference = _fit_once(frame, spec, backend, kenward_roger, progress)
        except InputError as exc:
            if last:
                raise
            why = f"failed ({exc})"
        else:
            why = None if last else _ladder_reason(design, raw, keep_singular)
            if why is None:
                return design, frame, spec, raw, inference, steps, unidentified
        steps.append(f"{name} model `{_model_text(design, spec)}`: {why}; next: {ladder[n + 1][0]}")
        report(steps[-1])
    raise AssertionError("unreachable: the last step of the ladder is always kept")


def _model_text(design: Any, spec: Any) -> str:
    """The fitted formula as a reader writes it: ``score ~ system``, ``(system | g)`` when maximal, ``||`` for slopes."""
    terms = []
    for g in dict.fromkeys(g for g, _ in spec.components):
        kept = [t for h, t in spec.components if h == g]
        slopes = [t for t in kept if t != "(Intercept)"]
        inner = " + ".join((["1"] if "(Intercept)" in kept else ["0"]) + slopes)
        if spec.correlated and len(kept) > 1:
            terms.append("(system | " + g + ")" if len(slopes) == len(design.columns) and "(Intercept)" in kept
                         else f"({inner} | {g})")
        else:
            terms.append(f"({inner} || {g})" if slopes and len(kept) > 1 else f"({inner} | {g})")
    return "score ~ system" + "".join(f" + {t}" for t in terms)


def _coding_note(design: Any) -> str | None:
    """What the contrast columns of a slope model are (they appear in its formula and component names)."""
    if design.random == "invariant":
        return None
    if design.columns == ("x",):
        return f"x = +1/2 for {design.systems[1]}, -1/2 for {design.systems[0]}"
    return ("treatment coding: " + ", ".join(f"{c} = 1 for {s}" for c, s in zip(design.columns, design.systems[1:]))
            + f" (baseline {design.systems[0]}); the slope model's variances depend on that choice")


def _check_options(random: str, contrasts: str, adjust: str | None, backend: str, df: str, level: float,
                   keep_singular: bool = False) -> str:
    """Refuse option combinations that cannot be computed; the adjustment to use."""
    if keep_singular and random != "maximal":
        raise InputError("--keep-singular applies to --random maximal (the only structure that steps down)")
    check_choice("random-effect structure", random, RANDOM)
    check_choice("contrasts", contrasts, CONTRASTS)
    check_choice("backend", backend, BACKENDS)
    check_choice("df method", df, DF_METHODS)
    if adjust is not None:
        check_choice("adjustment", adjust, ADJUSTMENTS)
    if not (isinstance(level, (int, float)) and 0 < level < 1):
        raise InputError(f"level must lie strictly between 0 and 1, got {level!r}")
    if random == "maximal" and backend != "lme4":
        raise InputError("--random maximal needs --backend lme4 (correlated random slopes; the "
                         f"{backend} backend fits uncorrelated random effects only)")
    if df == "kenward-roger" and backend == "bambi":
        raise InputError("--df kenward-roger does not apply to --backend bambi (a posterior has no df)")
    if backend == "bambi":
        if adjust is not None:
            raise InputError("--adjust does not apply to --backend bambi: a posterior probability is not adjusted "
                             "for multiplicity (the model's joint posterior covers every contrast)")
        return "none"
    adjust = adjust or "holm"
    if adjust == "tukey" and contrasts != "pairs":
        raise InputError("tukey adjusts all pairwise comparisons; for contrasts with a baseline use dunnett")
    return adjust


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
    backend: str = "lme4",
    level: float = 0.95,
    seed: int = 0,
    systems: Sequence[str] | None = None,
    duplicates: str = "error",
    progress: Callable[[str], None] | None = None,
    df: str = "satterthwaite",
    by: str | None = None,
    draws: int = 1000,
    chains: int = 2,
    keep_singular: bool = False,
) -> AnalysisResult | BayesianAnalysis | GroupedAnalysis:
    """Analyse a completed study: F test, marginal means and adjusted contrasts (see the module docs).

    Input as :func:`~humaneval_power.fitting.ratings.read_ratings` (CSV/Parquet/DataFrame,
    ``where`` filters, ``scale`` rescaling to [0, 1], ``duplicates``). ``contrasts``:
    ``pairs`` (every pair, later system minus earlier, the baseline first) or ``baseline``
    (each system minus the baseline). ``seed`` fixes the Monte Carlo of ``adjust="dunnett"``
    and bambi's sampler. ``random``: ``invariant``, ``maximal`` (with its convergence ladder)
    or ``slopes``; ``df``: ``satterthwaite`` or ``kenward-roger`` (pbkrtest's, either backend);
    ``adjust``: default ``holm`` (none with ``backend="bambi"``, whose result is a posterior:
    :class:`BayesianAnalysis`, ``draws`` per chain, ``chains``). ``by``: a column; each of its
    values is analysed separately (:class:`GroupedAnalysis`; adjustments within each group).
    ``keep_singular`` (with ``random="maximal"``): keep a singular maximal fit, as lme4 does, instead of
    stepping down (a fit that did not converge still steps down).
    """
    adjust_used = _check_options(random, contrasts, adjust, backend, df, level, keep_singular)
    if by is not None:
        return _analyze_by(ratings, by, where, dict(
            worker=worker, item=item, system=system, score=score, baseline=baseline, scale=scale, random=random,
            contrasts=contrasts, adjust=adjust, backend=backend, level=level, seed=seed, systems=systems,
            duplicates=duplicates, progress=progress, df=df, draws=draws, chains=chains, keep_singular=keep_singular))
    data = read_ratings(ratings, worker, item, system, score, baseline, systems, where, scale, duplicates)
    _check_data(data)
    report = progress or (lambda message: None)
    if backend == "bambi":
        return _bayesian(data, random, contrasts, level, seed, draws, chains, report)
    design, frame, spec, raw, inference, steps, unidentified = _fit_ladder(
        data, random, backend, df == "kenward-roger", report, progress, keep_singular)
    m = _system_rows(design, frame)
    components, rating_sd = _components_table(design, raw, m)
    names = list(data.systems)
    f_test = inference.f_test(anova_rows(design, frame))
    omnibus = pd.DataFrame([{"test": "all systems equal", **f_test}])

    from scipy import stats

    emm = inference.contrasts(m)
    half = stats.t.ppf(1 - (1 - level) / 2, emm["df"]) * emm["se"]
    counts = data.frame.groupby("system").size()
    means = pd.DataFrame({"system": names, "emmean": emm["estimate"], "se": emm["se"], "df": emm["df"],
                          "ci_low": emm["estimate"] - half, "ci_high": emm["estimate"] + half,
                          "n_ratings": [int(counts[s]) for s in names]})

    pairs = _family(names, contrasts)
    rows = np.array([m[a] - m[b] for a, b in pairs])
    con = inference.contrasts(rows)
    cov = rows @ inference.vcov @ rows.T
    corr = cov / np.outer(np.sqrt(np.diag(cov)), np.sqrt(np.diag(cov)))
    report(f"{adjust_used} adjustment of {len(pairs)} contrasts")
    p_adj, crit = adjusted(con["t"].to_numpy(), con["df"].to_numpy(), con["p_value"].to_numpy(), corr, adjust_used,
                           len(names), level, seed)
    table = pd.DataFrame({"system": [names[a] for a, _ in pairs], "versus": [names[b] for _, b in pairs]})
    table = pd.concat([table, con], axis=1)
    table["p_adjusted"] = p_adj
    table["ci_low"] = table["estimate"] - crit * table["se"]
    table["ci_high"] = table["estimate"] + crit * table["se"]
    table["effect_size"] = table["estimate"] / rating_sd

    notes = list(data.notes) + list(unidentified) + list(raw.warnings)
    coding = _coding_note(design)
    if coding:
        notes.append(coding)
    zeros = singular_parts(design, raw)
    if zeros or raw.singular:
        notes.append(f"singular fit: {singular_text(design, raw)}; the tests treat that source of variation as absent")
    return AnalysisResult(
        design=design_summary(data), components=components, omnibus=omnibus, means=means, contrasts=table,
        model=_model_text(design, spec), backend=backend, adjust=adjust_used, family=contrasts, level=level,
        seed=seed, source=data.source, scale=data.scale, singular=bool(raw.singular or zeros),
        notes=tuple(dict.fromkeys(notes)), versions=dict(raw.versions), df_method=df,
        random=random, steps=tuple(steps), data=data)


# -- the posterior (bambi) -------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class BayesianAnalysis:
    """:func:`analyze` with ``backend="bambi"``: posterior summaries, never p-values (:meth:`tables`, :meth:`records`)."""

    design: pd.DataFrame
    components: pd.DataFrame  #: component, sd (posterior median), variance, icc
    means: pd.DataFrame       #: system, mean, sd, hdi_low, hdi_high (posterior of each system's mean rating)
    contrasts: pd.DataFrame   #: system, versus, estimate, sd, hdi_low, hdi_high, prob_greater, effect_size
    model: str
    level: float
    seed: int
    draws: int
    chains: int
    source: str
    scale: tuple[float, float] | None
    notes: tuple[str, ...] = ()
    versions: dict[str, str] = field(default_factory=dict)
    backend: str = "bambi"

    def tables(self) -> dict[str, pd.DataFrame]:
        """The four tables by name: design, components, means, contrasts."""
        return {"design": self.design, "components": self.components, "means": self.means,
                "contrasts": self.contrasts}

    def records(self) -> list[dict[str, Any]]:
        """One record per contrast (``--json``): posterior summaries, ``inference: posterior``, no p-value fields."""
        extra = {"inference": "posterior", "level": self.level, "model": self.model, "backend": self.backend}
        return [{**rec, **extra} for rec in self.contrasts.to_dict("records")]

    def methods(self) -> str:
        """A methods paragraph for the paper."""
        return (f"We fitted the Bayesian linear mixed model `{self.model}` with bambi's default priors (PyMC, "
                f"{self.chains} chains of {self.draws} draws after as many tuning steps, seed {self.seed}). For each "
                "contrast we report its posterior mean and SD, the "
                f"{self.level:.0%} highest-density interval and the posterior probability that the first system's "
                "mean rating is higher. These are posterior quantities: no p-values, and no multiplicity adjustment. "
                "Effect sizes are the posterior means of the difference divided by the SD of a single rating.")

    def markdown(self) -> str:
        """The Markdown report: methods paragraph, design, posterior means and contrasts, variance components."""
        sections = [f"# Bayesian analysis of {Path(self.source).name}", "", self.methods(), ""]
        for title, table in (("Design", self.design),
                             (f"Posterior of each system's mean rating ({self.level:.0%} HDI)", self.means),
                             ("Posterior of each contrast", self.contrasts),
                             ("Variance components (posterior medians)", self.components)):
            sections += [f"## {title}", "", _markdown_table(table), ""]
        if self.notes:
            sections += ["## Notes", "", *(f"- {n}" for n in self.notes), ""]
        return "\n".join(sections)

    def __str__(self) -> str:
        fmt = {"float_format": lambda v: f"{v:.4g}", "index": False}
        parts = [f"{self.source}: posterior of {self.model} (bambi, {self.chains} x {self.draws} draws, "
                 f"seed {self.seed}); posterior quantities, not p-values",
                 "", "variance components (posterior medians):", self.components.to_string(**fmt),
                 "", f"posterior mean rating of each system ({self.level:.0%} HDI):", self.means.to_string(**fmt),
                 "", f"posterior of each contrast: mean, SD, {self.level:.0%} HDI, prob_greater = "
                 "P(system > versus | data):", self.contrasts.to_string(**fmt)]
        if self.notes:
            parts += ["", *(f"note: {n}" for n in self.notes)]
        return "\n".join(parts)


def _hdi(draws: np.ndarray, level: float) -> tuple[float, float]:
    """The narrowest interval holding ``level`` of the draws (as arviz.hdi for a unimodal posterior)."""
    x = np.sort(draws)
    n = len(x)
    width = int(math.floor(level * n))
    k = int(np.argmin(x[width:] - x[:n - width]))
    return float(x[k]), float(x[k + width])


def _bayesian(data: PilotData, random: str, contrasts: str, level: float, seed: int, draws: int, chains: int,
              report: Callable[[str], None]) -> BayesianAnalysis:
    """The posterior of every system mean and contrast from one bambi fit of the ``random`` structure."""
    from .fitting.bambi_fit import fit_bambi
    from .fitting.model import _identifiable
    from .fitting.types import Design

    design = Design.for_data(data, random)
    frame = design.model_frame(data)
    dropped, unidentified = _identifiable(design, frame)
    spec = design.spec(False, frozenset((g, t) for g, t, _ in dropped))
    report(f"sampling {spec.formula} (bambi, {chains} chains x {draws} draws)")
    raw = fit_bambi(frame.assign(system="s" + frame["system"].astype(str)), spec.formula, "gaussian", draws, chains,
                    seed, every_draw=True)
    post = {k: np.asarray(v) for k, v in (raw.draws or {}).items()}
    beta = np.column_stack([post["b|(Intercept)"]] + [post[f"b|{c}"] for c in design.columns])
    m = _system_rows(design, frame)
    rating_var = post["sigma"] ** 2
    for g, t in spec.components:
        rating_var = rating_var + float(np.mean(_term_values(design, m, t) ** 2)) * post[f"{g}|{t}"] ** 2
    rating_sd = np.sqrt(rating_var)
    names = list(data.systems)

    def summary(values: np.ndarray) -> dict[str, float]:
        lo, hi = _hdi(values, level)
        return {"mean": float(values.mean()), "sd": float(values.std(ddof=1)), "hdi_low": lo, "hdi_high": hi}

    means = pd.DataFrame([{"system": s, **summary(beta @ m[j])} for j, s in enumerate(names)])
    rows = []
    for a, b in _family(names, contrasts):
        diff = beta @ (m[a] - m[b])
        rec = summary(diff)
        rows.append({"system": names[a], "versus": names[b], "estimate": rec.pop("mean"), **rec,
                     "prob_greater": float((diff > 0).mean()), "effect_size": float((diff / rating_sd).mean())})
    components, _ = _components_table(design, raw, m)
    notes = list(data.notes) + list(unidentified) + list(raw.warnings)
    coding = _coding_note(design)
    if coding:
        notes.append(coding)
    return BayesianAnalysis(
        design=design_summary(data), components=components, means=means, contrasts=pd.DataFrame(rows),
        model=_model_text(design, spec), level=level, seed=seed, draws=draws, chains=chains, source=data.source,
        scale=data.scale, notes=tuple(dict.fromkeys(notes)), versions=dict(raw.versions))


# -- one analysis per group (--by) -----------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class GroupedAnalysis:
    """:func:`analyze` with ``by``: one analysis per value of the column ``by``, each with its own family."""

    by: str
    results: dict[str, AnalysisResult | BayesianAnalysis]

    def family_text(self) -> str:
        """Which family each adjustment covers, in words."""
        return (f"each group ({self.by} = {', '.join(self.results)}) is analysed separately: its own model, and each "
                f"adjustment covers the contrasts within one {self.by} only (no adjustment across groups)")

    def records(self) -> list[dict[str, Any]]:
        """Every group's records, each with ``group`` (the value of ``by``)."""
        return [{"group": g, **rec} for g, res in self.results.items() for rec in res.records()]

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
    from .io import apply_filters, read_table

    table, name, _ = read_table(ratings)
    table = apply_filters(table, where)
    if by not in table.columns:
        raise InputError(f"--by column {by!r} not found; columns are: {', '.join(map(str, table.columns))}")
    if table[by].isna().any():
        raise InputError(f"{int(table[by].isna().sum())} rows have no value in the --by column {by!r}")
    values = table[by].astype(str)
    groups = sorted(values.unique())
    results = {}
    report = options.get("progress") or (lambda message: None)
    for g in groups:
        report(f"{by} = {g}")
        try:
            result = analyze(table[values == g], **options)
        except InputError as exc:
            raise InputError(f"{by} = {g}: {exc}") from None
        results[g] = replace(result, source=name)
    return GroupedAnalysis(by, results)
