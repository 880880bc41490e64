"""What a paper reports beside the contrasts: rater agreement, reliability, significance groups, ranks, LaTeX.

:func:`paper_tables` gathers, for one analysis, Krippendorff's alpha of the analysed ratings
(:mod:`humaneval_power.agreement`; a unit is an item's output of one system), the reliability of the mean of k
ratings from the fitted variance components (:mod:`humaneval_power.rating_reliability`: target = item +
item x system, rater = worker + worker x system, residual), the compact letters and WMT-style clusters of the
adjusted pairwise p-values (:mod:`humaneval_power.significance_groups`) and each system's rank with an interval
and P(best) (:mod:`humaneval_power.rankings`; parametric draws from the estimated means' covariance, or the
posterior draws). :func:`write_latex` writes them as booktabs tables; :func:`agreement` is ``hepower agreement``.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..agreement import METRICS, alpha_table
from ..errors import InputError
from ..latex import booktabs_table, escape
from ..rankings import rank_table
from ..rating_reliability import KINDS, anova_components, ratings_needed, reliability
from ..significance_groups import compact_letters, wmt_clusters
from .report import text_table

#: bootstrap resamples of alpha's interval and draws of the ranks (fixed: the intervals' Monte Carlo error is small)
N_BOOT = 1000
N_RANK_DRAWS = 4000
#: the components that make a target's (an item's output of a system) true score, and a rater's offset
TARGET_PARTS = ("item", "item x system")
RATER_PARTS = ("worker", "worker x system")
#: the reliability a planned study aims at, by default
RELIABILITY_TARGET = 0.8


@dataclass(frozen=True, eq=False)
class PaperTables:
    """Agreement, reliability, letters, clusters and ranks of one analysis, with what each rests on, in words."""

    agreement: pd.DataFrame    #: metric, alpha, lower, upper, level, units, pairable, raters (one row)
    reliability: pd.DataFrame  #: kind, k, icc1, icck, target, ratings_needed (empty: see reliability_text)
    systems: pd.DataFrame      #: system, mean, letters, cluster, rank, rank_low, rank_high, mean_rank, p_best
    letters_text: str          #: what the letters and clusters rest on ('' when not computed)
    reliability_text: str
    ranks_text: str

    agreement_text: str = ""   #: why alpha was not computed ('' when it was)

    def text(self) -> str:
        """The section in plain text (the summary) and Markdown (the report)."""
        if self.agreement_text:
            return f"{self.agreement_text} {self.reliability_text}"
        a = self.agreement.iloc[0]
        return (f"Krippendorff's alpha ({a.metric}) of the ratings (a unit: an item's output of one system) = "
                f"{a.alpha:.3f}, {a.level:.0%} bootstrap interval [{a.lower:.3f}, {a.upper:.3f}] ({N_BOOT} resamples "
                f"of the units); {a.units} units, {a.raters} raters. {self.reliability_text}")

    def summary(self) -> list[str]:
        """The lines of the text summary (after the contrasts)."""
        return ["", "agreement and reliability: " + self.text(), "",
                "ranking" + (" and significance groups" if self.letters_text else "") + ":",
                text_table(self.systems), *(t for t in (self.letters_text, self.ranks_text) if t)]

    def records(self) -> list[dict[str, Any]]:
        """Records of kinds ``agreement``, ``reliability`` and ``system`` (letters, cluster, rank)."""
        return ([{"record": "agreement", **r} for r in self.agreement.to_dict("records")]
                + [{"record": "reliability", **r} for r in self.reliability.to_dict("records")]
                + [{"record": "system", **r} for r in self.systems.to_dict("records")])


def agreement_row(frame: pd.DataFrame, metric: str, level: float, seed: int) -> tuple[pd.DataFrame, str]:
    """Krippendorff's alpha of the analysed ratings (unit: item x system; rater: worker), with its interval; or an
    empty table and why it is not defined for these ratings (no unit rated twice, a worker rating a unit twice)."""
    try:
        table = alpha_table(frame, by=(), metric=metric, unit=["item", "system"], rater="worker", score="score",
                            n_boot=N_BOOT, level=level, seed=seed)
    except InputError as exc:
        return pd.DataFrame(), f"Krippendorff's alpha is not computed for these ratings: {exc}."
    return table, ""


def reliability_records(sds: tuple[float, float, float], k: int, target: float) -> list[dict[str, Any]]:
    """Per kind (agreement, consistency): k, the ICC of one rating, of the mean of k, and the ratings per item that
    reach ``target`` (NaN when none does: no target variance), from the target, rater and residual SDs."""
    rel = reliability(*sds, k=k)
    rows = []
    for kind in KINDS:
        one, mean = (rel.icc1, rel.icck) if kind == "agreement" else (rel.icc1_consistency, rel.icck_consistency)
        try:
            needed: float = ratings_needed(*sds, target=target, kind=kind)
        except InputError:  # no target variance: no k reaches it
            needed = np.nan
        rows.append({"kind": kind, "k": k, "icc1": one, "icck": mean, "target": target, "ratings_needed": needed})
    return rows


def reliability_rows(components: pd.DataFrame, k: int, target: float) -> tuple[pd.DataFrame, str]:
    """Reliability of one rating and of the mean of ``k`` from the invariant model's components, and the ratings
    per item that reach ``target`` (absolute agreement and consistency); with the text that says so."""
    var = dict(zip(components["component"], components["variance"]))
    if not set(TARGET_PARTS + RATER_PARTS) >= set(var) - {"residual"}:
        return (pd.DataFrame(columns=["kind", "k", "icc1", "icck", "target", "ratings_needed"]),
                ("Reliability from the variance components needs the invariant model's five components; this fit "
                 "has system-specific ones, so it is not derived."))
    target_sd, rater_sd = (float(np.sqrt(sum(var.get(c, 0.0) for c in parts))) for parts in (TARGET_PARTS, RATER_PARTS))
    sds = (target_sd, rater_sd, float(np.sqrt(var["residual"])))
    table = pd.DataFrame(reliability_records(sds, k, target))
    a = table.iloc[0]
    reach = (f"{int(a.ratings_needed)} ratings per item output" if np.isfinite(a.ratings_needed)
             else "no number of ratings (the item variance is zero)")
    text = (f"From the fitted variance components (target: item + item x system; rater: worker + worker x system; "
            f"residual), the reliability of a single rating is {a.icc1:.3f} (absolute agreement, ICC(2,1)-style; "
            f"consistency {table.icc1.iloc[1]:.3f}) and of the mean of this study's {k} ratings per item output "
            f"{a.icck:.3f} (ICC(2,k)); a reliability of {target:g} needs {reach}. The same components plan the next "
            "study: `hepower fit` of these ratings gives them as a parameter file for `hepower likert --params` "
            "(with `--design-from` for this study's layout).")
    return table, text


def systems_table(means: pd.DataFrame, estimate: str, contrasts: pd.DataFrame, family: str, adjust: str,
                  level: float, draws: np.ndarray, draws_text: str) -> tuple[pd.DataFrame, str, str]:
    """Each system's mean, letters and cluster (all pairs only) and rank with interval and P(best), best first."""
    ranks = rank_table(draws, list(means["system"]), estimate=means[estimate].to_numpy(float), level=level)
    table = ranks.rename(columns={"estimate": "mean"})
    ranks_text = f"Ranks (1 = best) with {level:.0%} intervals and P(best) from {draws_text}."
    letters_text = ""
    if family == "pairs" and "p_adjusted" in contrasts:
        alpha = 1 - level
        order = list(table["system"])
        try:
            letters = compact_letters(contrasts, systems=order, alpha=alpha)
            clusters = wmt_clusters(pd.Series(table["mean"].to_numpy(), index=order), contrasts, alpha=alpha)
        except InputError as exc:  # e.g. a contrast without a p-value
            return table, f"No letters or clusters: {exc}.", ranks_text
        table.insert(2, "letters", [letters[s] for s in order])
        table.insert(3, "cluster", clusters.set_index("system").loc[order, "cluster"].to_numpy())
        letters_text = (f"Letters: systems sharing a letter are not significantly different (Piepho's compact letter "
                        f"display, as multcompView) by the {adjust}-adjusted p-values of all pairs at alpha = "
                        f"{alpha:g}; `a` marks the group of the best mean. Clusters (WMT style): an ordered "
                        "partition where every system is significantly better than every system of every later "
                        "cluster (the finest such cut of the ranking, by the same p-values).")
    return table, letters_text, ranks_text


def paper_tables(frame: pd.DataFrame, components: pd.DataFrame, means: pd.DataFrame, estimate: str,
                 contrasts: pd.DataFrame, family: str, adjust: str, level: float, seed: int, draws: np.ndarray,
                 draws_text: str, metric: str = "interval", target: float = RELIABILITY_TARGET) -> PaperTables:
    """Everything :class:`PaperTables` holds, for one analysis (``frame``: its ratings, with worker, item, system,
    score; ``draws``: draws x systems of the means, in ``means`` order)."""
    agreement_, agreement_text = agreement_row(frame, metric, level, seed)
    k = round(float(frame.groupby(["item", "system"]).size().median()))
    rel, rel_text = reliability_rows(components, k, target)
    systems, letters_text, ranks_text = systems_table(means, estimate, contrasts, family, adjust, level, draws,
                                                      draws_text)
    return PaperTables(agreement_, rel, systems, letters_text, rel_text, ranks_text, agreement_text)


def check_paper_options(metric: str, target: float) -> None:
    """Refuse an unknown agreement metric or a reliability target outside (0, 1)."""
    if metric not in ("interval", "ordinal"):
        raise InputError(f"unknown agreement metric {metric!r} for an analysis; choose interval or ordinal")
    if not (isinstance(target, (int, float)) and 0 < target < 1):
        raise InputError(f"the target reliability must lie strictly between 0 and 1, got {target!r}")


# -- LaTeX ---------------------------------------------------------------------------------------------------


def _latex_text(text: str) -> str:
    """Markdown-ish text as LaTeX: `code` as \\texttt, the rest escaped."""
    parts = re.split(r"``?([^`]+)``?", text)
    return "".join(escape(p) if i % 2 == 0 else r"\texttt{" + escape(p) + "}" for i, p in enumerate(parts))


def _latex_tables(result: Any, digits: int) -> list[str]:
    """The booktabs tables and methods paragraph of one frequentist analysis."""
    paper: PaperTables | None = result.paper
    if paper is None:
        raise InputError("this analysis has no agreement, letters or ranks (analyse again with this version)")
    means = result.means[["system", "emmean", "ci_low", "ci_high"]].merge(
        paper.systems.drop(columns=["mean", "mean_rank"]), on="system")
    means = means.set_index("system").loc[paper.systems["system"]].reset_index()
    p = dict.fromkeys(("emmean", "ci_low", "ci_high", "p_best"), digits)
    head = {"emmean": "Mean", "ci_low": "CI low", "ci_high": "CI high", "rank_low": "rank low",
            "rank_high": "rank high", "p_best": "P(best)"}
    cons = result.contrasts[["system", "versus", "estimate", "se", "df", "t", "p_adjusted", "ci_low", "ci_high",
                             "effect_size"]]
    pc = dict.fromkeys(("estimate", "se", "t", "ci_low", "ci_high", "effect_size"), digits) | {"df": 1, "p_adjusted": 4}
    comp = result.components.rename(columns={"icc": "share"})
    blocks = [
        f"% means ({result.level:.0%} intervals), letters, clusters and ranks; numbers to {digits} decimals",
        booktabs_table(means, p, header=head),
        f"% contrasts ({result.family}); adjustment: {escape(result.adjustment_text())}",
        booktabs_table(cons, pc, header={"p_adjusted": "$p_{adj}$", "effect_size": "effect size"}),
        "% variance components", booktabs_table(comp, {"sd": digits, "variance": digits, "share": digits}),
    ]
    if len(paper.agreement):
        agree = paper.agreement[["metric", "alpha", "lower", "upper", "units", "raters"]]
        blocks += ["% agreement (Krippendorff's alpha with its bootstrap interval)",
                   booktabs_table(agree, {"alpha": digits, "lower": digits, "upper": digits})]
    if len(paper.reliability):
        blocks += ["% reliability from the variance components",
                   booktabs_table(paper.reliability.astype({"ratings_needed": float}),
                                  {"icc1": digits, "icck": digits, "target": 2, "ratings_needed": 0})]
    methods = " ".join(t for t in (result.methods(), paper.letters_text, paper.ranks_text, paper.text()) if t)
    blocks += ["% methods paragraph", _latex_text(methods), ""]
    return blocks


def latex_text(result: Any, digits: int = 3) -> str:
    """The LaTeX of :func:`write_latex` (booktabs tables and the methods paragraph; needs ``\\usepackage{booktabs}``)."""
    if not isinstance(digits, int) or isinstance(digits, bool) or not 0 <= digits <= 10:
        raise InputError(f"the LaTeX precision must be a whole number of decimals from 0 to 10, got {digits!r}")
    if hasattr(result, "results"):
        blocks = []
        for g, res in result.results.items():
            blocks += [f"% ===== {escape(result.by)} = {escape(g)} =====", *latex_tables_of(res, digits)]
    else:
        blocks = latex_tables_of(result, digits)
    return "% written by hepower analyze; \\input in a document with \\usepackage{booktabs}\n" + "\n".join(blocks)


def latex_tables_of(result: Any, digits: int) -> list[str]:
    """One analysis' LaTeX blocks (frequentist analyses only)."""
    if not hasattr(result, "omnibus"):
        raise InputError("LaTeX tables are written for the frequentist analysis of ratings (not --backend bambi "
                         "or --family binomial)")
    return _latex_tables(result, digits)


def write_latex(result: Any, path: str | Path, digits: int = 3) -> None:
    """Write :func:`latex_text` to ``path`` (``.tex``), atomically: all or nothing."""
    from ..io import write_outputs

    if Path(path).suffix.lower() != ".tex":
        raise InputError(f"--latex needs a .tex file, got {path}")
    text = latex_text(result, digits)
    def write(tmp: Path) -> None:
        tmp.write_text(text, encoding="utf-8")

    write_outputs([(path, write)])


# -- hepower agreement ------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class AgreementResult:
    """``hepower agreement``: alpha per dimension (``by``) and per system, ICCs from ANOVA components."""

    alpha: pd.DataFrame        #: per group: by..., metric, alpha, lower, upper, level, units, pairable, raters
    alpha_system: pd.DataFrame  #: per group and system
    icc: pd.DataFrame          #: per group: targets, raters, kind, icc1, icck, k, target, ratings_needed
    source: str
    notes: tuple[str, ...] = ()

    def records(self) -> list[dict[str, Any]]:
        """Records of kinds ``alpha``, ``alpha_system`` and ``icc``."""
        return [{"record": name, **r} for name, t in (("alpha", self.alpha), ("alpha_system", self.alpha_system),
                                                      ("icc", self.icc)) for r in t.to_dict("records")]

    def __str__(self) -> str:
        parts = [(f"{self.source}: Krippendorff's alpha (unit: an item's output of one system; cluster bootstrap "
                  "over units)"), text_table(self.alpha), "", "alpha per system:", text_table(self.alpha_system),
                 "", ("ICC from the ANOVA components of the complete targets x raters table (target: item x system; "
                      "agreement = psych's ICC2/ICC2k, consistency = ICC3/ICC3k):"), text_table(self.icc)]
        return "\n".join(parts + [f"note: {n}" for n in self.notes])


def agreement(ratings: str | Path | pd.DataFrame, worker: str = "worker", item: str = "item", system: str = "system",
              score: str = "score", by: Sequence[str] = ("dimension",), where: dict[str, str] | None = None,
              metric: str = "interval", levels: Sequence[float] | None = None, n_boot: int = N_BOOT,
              level: float = 0.95, seed: int = 0, target: float = RELIABILITY_TARGET) -> AgreementResult:
    """Krippendorff's alpha per group of ``by`` (a column absent from the data is skipped with a note) and per
    system, and the ICCs from the ANOVA components of each group's targets x raters table.

    ICCs from ANOVA mean squares, not a model fit: psych::ICC's definition, closed form (milliseconds), and equal
    to REML's components on a complete table unless a component is at zero. A group whose table is incomplete
    (a rater missing a target) is refused: its REML components come from ``hepower analyze``.
    """
    from ..io import apply_filters, read_table

    if metric not in METRICS:
        raise InputError(f"unknown metric {metric!r} for Krippendorff's alpha; choose one of {', '.join(METRICS)}")
    table, name, _ = read_table(ratings)
    table = apply_filters(table, where)
    columns = {worker: "worker", item: "item", system: "system", score: "score"}
    absent = [c for c in columns if c not in table.columns]
    if absent:
        raise InputError(f"the ratings have no column {absent[0]!r} (columns: {', '.join(map(str, table.columns))})")
    groups = [c for c in by if c in table.columns]
    notes = tuple(f"no column {c!r}: not grouped by it" for c in by if c not in table.columns)
    frame = table.rename(columns=columns)[[*groups, "worker", "item", "system", "score"]]
    opts = {"metric": metric, "unit": ["item", "system"], "levels": levels, "n_boot": n_boot, "level": level,
            "seed": seed}
    per_group = alpha_table(frame, groups, **opts)  # type: ignore[arg-type]
    per_system = alpha_table(frame, [*groups, "system"], **{**opts, "unit": "item"})  # type: ignore[arg-type]
    rows = []
    for key, g in (frame.groupby(groups, sort=True) if groups else [((), frame)]):
        key = key if isinstance(key, tuple) else (key,)
        wide = g.pivot_table(index=["item", "system"], columns="worker", values="score", aggfunc="first")
        if wide.isna().any().any():
            label = ", ".join(f"{c} = {v}" for c, v in zip(groups, key)) or "the ratings"
            raise InputError(f"{label}: not every worker rated every item output (ICCs here need a complete table; "
                             "`hepower analyze` gives the reliability from REML components)")
        comp = anova_components(wide.to_numpy(float))
        rows += [{**dict(zip(groups, key)), "targets": comp.targets, "raters": comp.raters, **rec}
                 for rec in reliability_records(comp.two_way, comp.raters, target)]
    return AgreementResult(per_group, per_system, pd.DataFrame(rows), name, notes)
