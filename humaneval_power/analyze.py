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
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from .errors import InputError
from .fitting.ratings import PilotData, read_ratings
from .validation import check_choice

CONTRASTS = ("pairs", "baseline")
ADJUSTMENTS = ("holm", "tukey", "dunnett", "bonferroni", "fdr", "none")
BACKENDS = ("lme4", "statsmodels")
RANDOM = ("invariant",)
#: how each adjustment is computed, and its family, in words (summary, report, docs)
ADJUST_TEXT = {
    "holm": "Holm's step-down (family-wise error) over the {n} contrasts; intervals Bonferroni-adjusted",
    "bonferroni": "Bonferroni over the {n} contrasts",
    "fdr": "Benjamini-Hochberg false discovery rate over the {n} contrasts; intervals Bonferroni-adjusted",
    "tukey": "Tukey's studentized range for the {k} means (each contrast with its own Satterthwaite df)",
    "dunnett": "single-step multivariate t over the {n} contrasts with their estimated correlation "
               "(emmeans' mvt; Dunnett's test for contrasts with a baseline), Monte Carlo, seed {seed}",
    "none": "none ({n} unadjusted tests)",
}
#: the five variance components in report order: (group, label)
COMPONENTS = (("worker", "worker"), ("worker:system", "worker x system"), ("item", "item"),
              ("item:system", "item x system"))


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
    data: PilotData | None = field(default=None, repr=False)  #: the ratings analysed (for the report's design check)

    def tables(self) -> dict[str, pd.DataFrame]:
        """The five tables by name: design, components, omnibus, means, contrasts."""
        return {"design": self.design, "components": self.components, "omnibus": self.omnibus,
                "means": self.means, "contrasts": self.contrasts}

    def adjustment_text(self) -> str:
        """Which family the adjustment covers, in words."""
        return ADJUST_TEXT[self.adjust].format(n=len(self.contrasts), k=len(self.means), seed=self.seed)

    def records(self) -> list[dict[str, Any]]:
        """One record per contrast (the CLI's ``--json``)."""
        extra = {"adjust": self.adjust, "model": self.model, "backend": self.backend}
        return [{**rec, **extra} for rec in self.contrasts.to_dict("records")]

    def methods(self) -> str:
        """A methods paragraph for the paper."""
        o = self.omnibus.iloc[0]
        engine = ("lme4 and lmerTest in R" if self.backend == "lme4"
                  else "humaneval-power's REML solver (the lme4 criterion, without R)")
        return (f"We fitted the linear mixed model `{self.model}` by REML ({engine}), with random intercepts for "
                "workers and items and for their interactions with the system, so that every system shares the "
                "same five variance components whatever the coding. We tested whether all systems have the same "
                f"mean rating with an F test (F({o.num_df:.0f}, {o.den_df:.1f}) = {o.F:.2f}, p = {o.p_value:.3g}), "
                "its denominator degrees of freedom by Satterthwaite's method as in lmerTest. We compared "
                + ("every pair of systems" if self.family == "pairs" else f"each system with {self.contrasts.versus.iloc[0]}")
                + " by t tests with per-contrast Satterthwaite degrees of freedom, adjusting p-values and "
                f"{self.level:.0%} intervals by {self.adjustment_text()}. Effect sizes are differences in mean "
                "rating divided by the SD of a single rating (the square root of the sum of all variance components).")

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
            f"{scale}effect_size = difference / SD of a single rating",
            "", "variance components:", self.components.to_string(**fmt),
            "", f"all systems equal: F({o.num_df:.0f}, {o.den_df:.4g}) = {o.F:.4g}, p = {o.p_value:.4g} "
            "(Satterthwaite denominator df)",
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
    full = len(f) == f["worker"].nunique() * f["item"].nunique() * k and not f.duplicated(
        ["worker", "item", "system"]).any()
    if full:
        crossing = "fully crossed: every worker rated every system on every item"
    elif (systems_per_worker == k).all():
        crossing = "every worker rated every system, on some items"
    else:
        crossing = (f"{int((systems_per_worker > 1).sum())} of {len(systems_per_worker)} workers rated more than "
                    "one system")
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
    if contrasts == "baseline":
        return [(j, 0) for j in range(1, len(systems))]
    return [(j, i) for i, j in itertools.combinations(range(len(systems)), 2)]


# -- adjustments -----------------------------------------------------------------------------------


def emmeans_df(df: np.ndarray) -> np.ndarray:
    """The integer df emmeans hands to mvtnorm (``.fix.df``): at least 1, rounded at .75; 0 (normal) above 9999."""
    df = np.maximum(np.asarray(df, float), 1.0)
    return np.where(np.isfinite(df) & (df <= 9999), np.floor(df + 0.25), 0.0)


#: Monte Carlo draws of the largest |t| of a family (dunnett): its p-values have a Monte Carlo SE of at most
#: 0.0005 (0.0002 near p = 0.05); mvtnorm's default in emmeans is an absolute error of 0.001
MVT_DRAWS = 1_000_000


def max_abs_t(corr: np.ndarray, dfs: Sequence[float], seed: int, draws: int = MVT_DRAWS) -> dict[float, np.ndarray]:
    """Draws of max_j |T_j|, T multivariate t with correlation ``corr``, for each df in ``dfs`` (0: normal).

    The correlation may be singular (all pairs of k means have rank k - 1): T = B z / sqrt(w / df),
    ``corr = B B'`` over its positive eigenvalues, z standard normal, w chi-square. The normal part is
    shared by every df; everything is reproducible from ``seed``.
    """
    values, vectors = np.linalg.eigh(corr)
    keep = values > 1e-10 * values.max()
    b = vectors[:, keep] * np.sqrt(values[keep])
    rng = np.random.default_rng([seed, 0])
    top = np.empty(draws)
    step = max(1, (1 << 22) // max(b.shape[0], 1))
    for i in range(0, draws, step):
        z = rng.standard_normal((min(step, draws - i), b.shape[1]))
        top[i:i + step] = np.abs(z @ b.T).max(axis=1)
    out = {}
    for df in dict.fromkeys(dfs):
        w = np.random.default_rng([seed, 1, int(df)]).chisquare(df, draws) / df if df else 1.0
        out[df] = top / np.sqrt(w)
    return out


def adjusted(t: np.ndarray, df: np.ndarray, p: np.ndarray, corr: np.ndarray, adjust: str, n_means: int,
             level: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Adjusted p-values and critical values (half-width / SE) of a family of contrasts, as emmeans computes them."""
    from scipy import stats

    n = len(t)
    if adjust == "none" or n == 1:
        return p, stats.t.ppf(1 - (1 - level) / 2, df)
    if adjust in ("holm", "bonferroni", "fdr"):
        from .analyses import adjust_pvalues

        return adjust_pvalues(p, adjust), stats.t.ppf(1 - (1 - level) / n / 2, df)
    if adjust == "tukey":
        return (stats.studentized_range.sf(math.sqrt(2) * np.abs(t), n_means, df),
                stats.studentized_range.ppf(level, n_means, df) / math.sqrt(2))
    fixed = emmeans_df(df)
    dist = max_abs_t(corr, fixed, seed)
    p_adj = np.array([np.mean(dist[d] >= abs(tj)) for tj, d in zip(t, fixed)])
    return p_adj, np.array([np.quantile(dist[d], level) for d in fixed])


# -- the analysis ----------------------------------------------------------------------------------


def _components_table(raw: Any) -> tuple[pd.DataFrame, float]:
    comp = raw.components.set_index("group")["sd"]
    rows = [(label, float(comp.get(group, 0.0))) for group, label in COMPONENTS] + [("residual", raw.sigma)]
    table = pd.DataFrame(rows, columns=["component", "sd"])
    table["variance"] = table["sd"] ** 2
    total = float(table["variance"].sum())
    table["icc"] = table["variance"] / total
    return table, math.sqrt(total)


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
    adjust: str = "holm",
    backend: str = "lme4",
    level: float = 0.95,
    seed: int = 0,
    systems: Sequence[str] | None = None,
    duplicates: str = "error",
    progress: Callable[[str], None] | None = None,
) -> AnalysisResult:
    """Analyse a completed study: F test, marginal means and adjusted contrasts (see the module docs).

    Input as :func:`~humaneval_power.fitting.ratings.read_ratings` (CSV/Parquet/DataFrame,
    ``where`` filters, ``scale`` rescaling to [0, 1], ``duplicates``). ``contrasts``:
    ``pairs`` (every pair, later system minus earlier, the baseline first) or ``baseline``
    (each system minus the baseline). ``seed`` fixes the Monte Carlo of ``adjust="dunnett"``.
    """
    from .fitting.model import _identifiable
    from .fitting.types import Design

    check_choice("random-effect structure", random, RANDOM)
    check_choice("contrasts", contrasts, CONTRASTS)
    check_choice("adjustment", adjust, ADJUSTMENTS)
    check_choice("backend", backend, BACKENDS)
    if not (isinstance(level, (int, float)) and 0 < level < 1):
        raise InputError(f"level must lie strictly between 0 and 1, got {level!r}")
    if adjust == "tukey" and contrasts != "pairs":
        raise InputError("tukey adjusts all pairwise comparisons; for contrasts with a baseline use dunnett")
    data = read_ratings(ratings, worker, item, system, score, baseline, systems, where, scale, duplicates)
    _check_data(data)
    design = Design.for_data(data, random)
    frame = design.model_frame(data)
    report = progress or (lambda message: None)
    dropped, unidentified = _identifiable(design, frame)
    spec = design.spec(False, frozenset((g, t) for g, t, _ in dropped))
    report(f"fitting {spec.formula} ({backend})")
    if backend == "lme4":
        from .fitting.lmer_inference import lme4_inference

        raw, inference = lme4_inference(frame, spec)
    else:
        from .fitting.lmer_inference import statsmodels_inference

        raw, inference = statsmodels_inference(frame, spec, progress)
    components, rating_sd = _components_table(raw)

    m = _system_rows(design, frame)
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
    report(f"{adjust} adjustment of {len(pairs)} contrasts")
    p_adj, crit = adjusted(con["t"].to_numpy(), con["df"].to_numpy(), con["p_value"].to_numpy(), corr, adjust,
                           len(names), level, seed)
    table = pd.DataFrame({"system": [names[a] for a, _ in pairs], "versus": [names[b] for _, b in pairs]})
    table = pd.concat([table, con], axis=1)
    table["p_adjusted"] = p_adj
    table["ci_low"] = table["estimate"] - crit * table["se"]
    table["ci_high"] = table["estimate"] + crit * table["se"]
    table["effect_size"] = table["estimate"] / rating_sd

    notes = list(data.notes) + list(unidentified) + list(raw.warnings)
    zeros = components.loc[components["sd"] <= 1e-4 * raw.sigma, "component"].tolist()
    if zeros:
        notes.append(f"singular fit: {', '.join(zeros)} estimated at zero; the tests treat that source of "
                     "variation as absent")
    return AnalysisResult(
        design=design_summary(data), components=components, omnibus=omnibus, means=means, contrasts=table,
        model=spec.formula.replace("score ~ 1" + "".join(f" + {c}" for c in design.columns), "score ~ system"),
        backend=backend, adjust=adjust, family=contrasts, level=level, seed=seed, source=data.source,
        scale=data.scale, singular=bool(raw.singular or zeros), notes=tuple(dict.fromkeys(notes)),
        versions=dict(raw.versions), data=data)
