"""The report of ``hepower analyze``: Markdown or self-contained HTML, with its figure and a design check.

:func:`design_check` measures, by simulation with the crowd-design planner
(:func:`~humaneval_power.scenarios.likert.likert_power` / ``likert_mde`` on the
study's own layout, :class:`~humaneval_power.designs.PilotDesign`, and its fitted
variance components), the Type-I error of the analysis' test of one pair on this
design and the study's sensitivity: the smallest difference its adjusted test
detected with 80% power. :func:`report_sections` lays out design, model, ANOVA,
marginal means, contrasts, variance components, that check, warnings and a
methods paragraph; :func:`render` writes them as Markdown or HTML (the figure
embedded as a base64 PNG: no external file). :func:`analysis_figure` is the
means + forest plot (``--plot``).
"""
from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError
from .backends import get_backend
from .inference import DF_NAMES, INTERVAL_TEXT
from .model_ladder import RANDOM_TEXT

REPORT_FORMATS = (".md", ".html")
#: fewer workers than this: the worker components rest on few levels, and the report says so
FEW_WORKERS = 10
#: fewest simulated studies of a design check
MIN_SIMS = 20
#: the design check simulates with the planner's batched fits, whose cost grows with the cube of the worker and
#: worker x system effects: above this many it is skipped, with a note (DialSummEval AMT, 4 systems: 869 effects,
#: a 40-study check took 140 s on a loaded machine; all 14 systems: 2,526 effects, hours)
MAX_WORKER_EFFECTS = 1000
#: target power of the sensitivity (MDE) in the report
TARGET_POWER = 0.8

#: a report section: its title and its blocks (a paragraph, a DataFrame or a matplotlib figure)
Section = tuple[str, Sequence[Any]]


@dataclass(frozen=True)
class DesignCheck:
    """Type-I error and sensitivity of a finished study's design, simulated from its fitted components."""

    pair: tuple[str, str]      #: the pair the planner tests (baseline, last system; others evenly between)
    alpha: float
    n_sims: int
    type1: float
    type1_low: float
    type1_high: float
    adjust: str                #: the adjustment of the sensitivity's test (over the analysis' family)
    family: str
    mde: float | None          #: difference (analysis scale) detected with TARGET_POWER, None if not attainable
    mde_low: float | None
    mde_high: float | None
    mde_reason: str
    rating_sd: float

    def sentences(self) -> str:
        """The check in words (the report's section and its methods paragraph)."""
        a, b = self.pair
        text = (f"Simulating {self.n_sims} studies with this study's own layout (who rated which item under which "
                "system) and its fitted variance components, all systems equal, the unadjusted t test of one pair "
                f"({b} vs {a}) rejected at alpha = {self.alpha:g} in {self.type1:.3f} of them "
                f"(95% Clopper-Pearson interval {self.type1_low:.3f} to {self.type1_high:.3f}).")
        family = "all pairs" if self.family == "pairs" else "the comparisons with the baseline"
        adj = ("unadjusted test of that pair" if self.adjust == "none"
               else f"test of that pair, {self.adjust}-adjusted over {family}")
        if self.mde is None:
            return text + f" The sensitivity could not be established: {self.mde_reason}."
        return text + (f" The study had {TARGET_POWER:.0%} power to detect a difference of {self.mde:.3g} "
                       f"({self.mde / self.rating_sd:.2f} SD of a single rating) between {b} and {a} by the "
                       f"{adj} (other systems evenly between; {_mc_range(self.mde_low, self.mde_high)}).")


def _mc_range(low: float | None, high: float | None) -> str:
    """The MDE's Monte Carlo range in words (an end the search did not bracket is said so)."""
    if low is not None and high is not None:
        return f"Monte Carlo range {low:.3g} to {high:.3g}"
    if low is not None:
        return f"Monte Carlo range from {low:.3g}, its upper end beyond the search"
    return "Monte Carlo range not bracketed by the search"


def check_skipped(result: Any) -> str:
    """Why the design check of ``result`` is skipped, or '': the planner simulates the invariant model's
    Satterthwaite test of a single analysis, on a layout with at most MAX_WORKER_EFFECTS worker effects."""
    if getattr(result, "data", None) is None or not hasattr(result, "omnibus"):
        return ("design check not run: it simulates a single frequentist analysis (not --by groups or a "
                "posterior)")
    if result.fitted_structure != "invariant" or result.df_method != "satterthwaite":
        return (f"design check not run: the planner simulates the invariant model's Satterthwaite tests, this "
                f"analysis fitted the {result.fitted_structure} structure with {result.df_method} df")
    f = result.data.frame
    effects = f["worker"].nunique() + len(f.groupby(["worker", "system"]))
    if effects <= MAX_WORKER_EFFECTS:
        return ""
    return (f"design check skipped: this layout has {effects:,} worker and worker x system effects (more than "
            f"{MAX_WORKER_EFFECTS:,}), too many for the planner's simulated fits in reasonable time; simulate a "
            "subset of the systems with `hepower likert power --design-from`")


def design_check(result: Any, n_sims: int = 100, seed: int = 0, progress: Callable[[str], None] | None = None
                 ) -> DesignCheck:
    """Simulate the analysed design under its fitted components: Type-I error of one pair's t test and the
    MDE at 80% power of the analysis' adjusted test (``holm``/``bonferroni``/``none`` as analysed; the
    others, which the planner does not simulate, by Bonferroni, a conservative stand-in)."""
    from ..designs import PilotDesign
    from ..multiplicity import PER_STUDY
    from ..planning import SolveResult
    from ..processes import InvariantProcess
    from ..scenarios.likert import likert_mde, likert_power

    if result.data is None:
        raise InputError("the design check needs the analysed ratings (an AnalysisResult from analyze())")
    if n_sims < MIN_SIMS:
        raise InputError(f"the design check needs at least {MIN_SIMS} simulated studies, got {n_sims}")
    skipped = check_skipped(result)
    if skipped:
        raise InputError(skipped)
    data = result.data
    sd = dict(zip(result.components["component"], result.components["sd"]))
    k = len(data.systems)
    process = InvariantProcess(sd["worker"], sd["worker x system"], sd["item"], sd["item x system"],
                               max(sd["residual"], 1e-12), k, float(result.means["emmean"].mean()),
                               f"{Path(result.source).name} (fitted)")
    design = PilotDesign.from_ratings(data.frame, systems=list(data.systems), source=data.source)
    alpha = round(1 - result.level, 12)
    report = progress or (lambda message: None)
    report(f"design check: Type-I error on this layout ({n_sims} simulated studies)")
    null = likert_power(process, 0, design.items, 0.0, design_from=design, alpha=alpha, n_sims=n_sims, seed=seed,
                        jobs=1)
    adjust = result.adjust if result.adjust in PER_STUDY else "bonferroni"
    report(f"design check: sensitivity ({TARGET_POWER:.0%} power, {adjust}, {n_sims} simulated studies per effect)")
    mde = likert_mde(process, 0, design.items, target_power=TARGET_POWER, alpha=alpha, n_sims=n_sims, seed=seed,
                     design_from=design, compare=result.family, adjust=adjust)
    assert isinstance(mde, SolveResult)  # one analysis (never model="both")
    total = math.sqrt(float(result.components["variance"].sum()))
    row = null.iloc[0]
    return DesignCheck((data.systems[0], data.systems[-1]), alpha, n_sims, float(row.power), float(row.ci_low),
                       float(row.ci_high), adjust, result.family, mde.value if mde.attainable else None,
                       mde.low, mde.high, "" if mde.attainable else mde.reason, total)


# -- figure ----------------------------------------------------------------------------------------


def analysis_figure(result: Any) -> Any:
    """Marginal means (left) and the contrasts with their adjusted intervals (right, a forest plot)."""
    from ..plots import plot_intervals

    unit = "score (rescaled to [0, 1])" if result.scale else "score"
    label = result.contrasts["system"] + " - " + result.contrasts["versus"]
    if not hasattr(result, "omnibus"):  # the posterior: HDIs, filled where P(greater) is beyond the level
        hdi = {"hdi_low": "ci_low", "hdi_high": "ci_high"}
        means = _with_letters(result.means, result).rename(columns={"system": "label", "mean": "estimate", **hdi})
        p = result.contrasts["prob_greater"]
        con = result.contrasts.rename(columns=hdi).assign(label=label, significant=(p >= result.level) |
                                                          (p <= 1 - result.level))
        return plot_intervals([(means, f"posterior means, {result.level:.0%} HDI", unit, None),
                               (con, f"contrasts, {result.level:.0%} HDI", f"difference in {unit}", 0.0)],
                              title=Path(result.source).name)
    alpha = 1 - result.level
    means = _with_letters(result.means, result).rename(columns={"system": "label", "emmean": "estimate"})
    letters = " (right: letters; shared letter = not significantly different)" if "letters" in means else ""
    if "letters" in means:
        means = means.assign(annotation=means["letters"])
    con = result.contrasts.assign(label=label, significant=result.contrasts["p_adjusted"] <= alpha)
    return plot_intervals([
        (means, f"estimated marginal means, {result.level:.0%} CIs{letters}", unit, None),
        (con, f"contrasts, {INTERVAL_TEXT[result.adjust]} {result.level:.0%} CIs (filled: p_adj <= {alpha:g})",
         f"difference in {unit}", 0.0)], title=Path(result.source).name)


def category_figure(probabilities: pd.DataFrame, title: str = "") -> Any:
    """Stacked bars of the category probabilities of each system (``--family ordinal``): for each system the
    model's (``probability``: typical worker and item), averaged over the random effects (``population``) and the
    observed shares (``observed``), one bar each, the categories stacked from the lowest rating up."""
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    systems = list(dict.fromkeys(probabilities["system"]))
    ratings = list(dict.fromkeys(probabilities["rating"]))
    kinds = [("probability", "typical"), ("population", "population"), ("observed", "observed")]
    fig = Figure(figsize=(6.4, min(1.4 + 0.55 * len(systems), 40.0)), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    cmap = colormaps["RdYlGn"]
    labels: list[str] = []
    positions: list[float] = []
    y = 0.0
    for s in systems:
        rows = probabilities[probabilities["system"] == s].set_index("rating")
        for column, kind in kinds:
            left = 0.0
            for j, r in enumerate(ratings):
                width = float(rows.loc[r, column])
                ax.barh(y, width, left=left, height=0.8, color=cmap(j / max(len(ratings) - 1, 1)),
                        edgecolor="white", linewidth=0.5, label=str(r) if (s == systems[0] and column == "probability")
                        else None)
                left += width
            positions.append(y)
            labels.append(f"{s} ({kind})")
            y -= 1.0
        y -= 0.5
    ax.set_yticks(positions, labels, fontsize=8)
    ax.set_xlim(0, 1)
    ax.set_xlabel("probability of each rating")
    ax.legend(title="rating", ncols=len(ratings), loc="lower center", bbox_to_anchor=(0.5, 1.0), fontsize=8,
              title_fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=9)
    return fig


def _with_letters(means: pd.DataFrame, result: Any) -> pd.DataFrame:
    """The means table with each system's compact letters (when the analysis has them), in its own order."""
    paper = getattr(result, "paper", None)
    if paper is None or "letters" not in paper.systems:
        return means
    return means.assign(letters=means["system"].map(dict(zip(paper.systems["system"], paper.systems["letters"]))))


def paper_sections(result: Any) -> list[Section]:
    """The report's "Agreement and reliability" and "Ranking" sections (none for an analysis without them)."""
    paper = getattr(result, "paper", None)
    if paper is None:
        return []
    agreement = [paper.text(), *(t for t in (paper.agreement, paper.reliability) if len(t))]
    ranking = [paper.systems, *(t for t in (paper.letters_text, paper.ranks_text) if t)]
    return [("Agreement and reliability", agreement),
            ("Ranking" + (" and significance groups" if paper.letters_text else ""), ranking)]


def figure_png(fig: Any, dpi: float = 110) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


# -- sections ------------------------------------------------------------------------------------------


def warnings_of(result: Any, check: DesignCheck | None, skipped: str = "") -> list[str]:
    """What a reader should know before trusting the tests: singular fits, few workers, a liberal test, notes."""
    d = dict(zip(result.design["name"], result.design["value"]))
    out = []
    if result.singular:
        out.append("Singular fit: at least one variance component is estimated at zero (see the variance "
                   "components); the tests treat that source of variation as absent, which can make them liberal "
                   "if it is merely small.")
    workers = int(d["workers"])
    measured = (f" The measured Type-I error of one pair's test on this design is {check.type1:.3f} "
                f"[{check.type1_low:.3f}, {check.type1_high:.3f}] at alpha = {check.alpha:g}." if check else
                "" if skipped else
                " Run the report's design check (sims > 0) to measure the test's Type-I error on this design.")
    if workers < FEW_WORKERS:
        out.append(f"Few workers ({workers}): the worker components rest on {workers} levels, so their estimates "
                   "and the Satterthwaite df are uncertain." + measured)
    if check and check.type1_low > check.alpha:
        out.append(f"The test is liberal on this design: its simulated Type-I error {check.type1:.3f} "
                   f"[{check.type1_low:.3f}, {check.type1_high:.3f}] exceeds alpha = {check.alpha:g}.")
    if check and check.mde is None:
        out.append(f"Sensitivity: {check.mde_reason}.")
    if skipped:
        out.append(skipped[0].upper() + skipped[1:] + ".")
    out += [n for n in result.notes if not n.startswith("singular fit")]
    return out


def _model_paragraph(result: Any) -> str:
    """The report's "Model and why" paragraph."""
    engine = get_backend(result.backend).report_text or result.backend
    fitted = result.fitted_structure
    why = (" The model is coding-invariant: every system shares the same five variance components, whichever "
           "system is the baseline." if fitted == "invariant" else
           " System slopes per worker and per item let each worker and each item favour some systems with their own "
           "variance per contrast.")
    ladder = f" The {result.random} structure did not fit: {'; '.join(result.steps)}." if result.steps else ""
    return (f"`{result.model}`, fitted by REML ({engine}), with {RANDOM_TEXT[fitted]}.{ladder} Ratings by one "
            "worker, and ratings of one item, are correlated: random effects for workers and items take that into "
            f"account, and their interactions with the system let each worker and each item favour some systems.{why}"
            f" The F test and the contrasts use {DF_NAMES[result.df_method]} degrees of freedom; the means and "
            "contrasts are emmeans' estimated marginal means.")


def report_sections(result: Any, check: DesignCheck | None = None, skipped: str = "") -> tuple[str, list[Section]]:
    """Title and sections of the report of any analysis (``--family binomial``, ``--by`` and bambi included)."""
    own: Callable[[DesignCheck | None], tuple[str, list[Section]]] | None = getattr(result, "report_sections", None)
    if own is not None:
        return own(check)
    if hasattr(result, "results"):  # --by: each group's sections, titled with its group
        sections: list[Section] = [("Groups", [f"Analysed by {result.by}: {result.family_text()}."])]
        for g, res in result.results.items():
            _, inner = report_sections(res, None, skipped)
            sections += [(f"{result.by} = {g}: {name}", blocks) for name, blocks in inner]
        return f"Analysis of {Path(next(iter(result.results.values())).source).name} by {result.by}", sections
    if not hasattr(result, "omnibus"):  # the posterior (bambi)
        sections = [("Methods (for the paper)", [result.methods()]), ("Design", [result.design]),
                    (f"Posterior of each system's mean rating ({result.level:.0%} HDI)",
                     [result.means, analysis_figure(result)]),
                    ("Posterior of each contrast", [result.contrasts]),
                    ("Variance components (posterior medians)", [result.components]), *paper_sections(result)]
        sections += warnings_section(result.notes)
        return f"Bayesian analysis of {Path(result.source).name}", sections
    o = result.omnibus.iloc[0]
    model_text = _model_paragraph(result)
    methods = result.methods() + (" " + check.sentences() if check else "")
    means = _with_letters(result.means, result).rename(columns={"emmean": "mean"})
    scale = (f" Scores were rescaled from [{result.scale[0]:g}, {result.scale[1]:g}] to [0, 1]."
             if result.scale else "")
    sections = [
        ("Methods (for the paper)", [methods]),
        ("Design", [result.design]),
        ("Model and why", [model_text]),
        ("ANOVA: all systems equal", [result.omnibus.rename(columns={"test": "hypothesis"}),
                                      (f"F({o.num_df:.0f}, {o.den_df:.4g}) = {o.F:.4g}, p = {o.p_value:.3g} "
                                      f"({DF_NAMES[result.df_method]} denominator df).")]),
        (f"Estimated marginal means ({result.level:.0%} intervals)", [means, analysis_figure(result)]),
        ("Contrasts", [f"Family: {result.family}; adjustment: {result.adjustment_text()}. effect_size = difference "
                       "/ SD of a single rating." + scale, result.contrasts,
                       ("The figure above shows the contrasts' adjusted intervals (right; filled: significant "
                       "after adjustment).")]),
        ("Variance components", [result.components]),
        *paper_sections(result),
    ]
    if check:
        sections.append(("Design check: Type-I error and sensitivity", [check.sentences()]))
    sections += warnings_section(warnings_of(result, check, skipped))
    return f"Analysis of {Path(result.source).name}", sections


# -- rendering -------------------------------------------------------------------------------------


def check_report_path(path: str | Path, option: str = "--report") -> Path:
    """A report path: .md or .html (else one line, exit 2)."""
    suffix = Path(path).suffix.lower()
    if suffix not in REPORT_FORMATS:
        raise InputError(f"{option} must end in {' or '.join(REPORT_FORMATS)}, got {Path(path).name!r}")
    return Path(path)


def markdown_table(table: pd.DataFrame) -> str:
    """A DataFrame as a Markdown table (floats to 4 significant digits; a ``|`` in a cell, as in a threshold
    ``1|2``, escaped so that it does not split the cell)."""
    def escaped(v: Any) -> str:
        return str(v).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")

    def cell(v: Any) -> str:
        return f"{v:.4g}" if isinstance(v, (float, np.floating)) else escaped(v)

    lines = ["| " + " | ".join(map(escaped, table.columns)) + " |", "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join(lines)


def markdown_sections(title: str, methods: str, tables: Sequence[tuple[str, pd.DataFrame]],
                      notes: Sequence[str] = (), extra: Sequence[str] = ()) -> str:
    """A result's short Markdown report (its ``markdown()``): ``# title``, the methods paragraph, a ``##`` section
    per (title, table), the ``extra`` paragraphs, then the notes as a bulleted ``## Notes`` section."""
    out = [f"# {title}", "", methods, ""]
    for name, table in tables:
        out += [f"## {name}", "", markdown_table(table), ""]
    for paragraph in extra:
        out += [paragraph, ""]
    if notes:
        out += ["## Notes", "", bullets(notes), ""]
    return "\n".join(out)


def bullets(lines: Sequence[str]) -> str:
    """Markdown bullets, one per line."""
    return "\n".join(f"- {line}" for line in lines)


def text_table(table: pd.DataFrame) -> str:
    """A table in a printed summary: floats to 4 significant digits, no index."""
    return str(table.to_string(float_format=lambda v: f"{v:.4g}", index=False))


def note_lines(notes: Sequence[str]) -> list[str]:
    """The notes closing a printed summary (a blank line, then ``note: ...`` each); none without notes."""
    return ["", *(f"note: {n}" for n in notes)] if notes else []


def warnings_section(warnings: Sequence[str]) -> list[tuple[str, list[Any]]]:
    """The report's "Warnings" section (bulleted), or none without warnings."""
    return [("Warnings", [bullets(warnings)])] if warnings else []


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.4g}"
    return str(v)


def render(title: str, sections: Sequence[Section], fmt: str) -> str:
    """The report as Markdown (``md``) or a self-contained HTML page (``html``)."""
    if fmt == "md":
        out = [f"# {title}", ""]
        for name, blocks in sections:
            out += [f"## {name}", ""]
            for b in blocks:
                if isinstance(b, pd.DataFrame):
                    out += [markdown_table(b), ""]
                elif isinstance(b, str):
                    out += [b, ""]
                else:
                    png = base64.b64encode(figure_png(b)).decode()
                    out += [f"![{name}](data:image/png;base64,{png})", ""]
        return "\n".join(out)
    body = [f"<h1>{html.escape(title)}</h1>"]
    for name, blocks in sections:
        body.append(f"<h2>{html.escape(name)}</h2>")
        for b in blocks:
            if isinstance(b, pd.DataFrame):
                body.append(b.to_html(index=False, border=0, formatters=dict.fromkeys(b.columns, _cell), escape=True))
            elif isinstance(b, str):
                lines = b.split("\n")
                if all(line.startswith("- ") for line in lines):
                    body.append("<ul>" + "".join(f"<li>{html.escape(line[2:])}</li>" for line in lines) + "</ul>")
                else:
                    body.append(f"<p>{html.escape(b)}</p>")
            else:
                png = base64.b64encode(figure_png(b)).decode()
                body.append(f'<img alt="{html.escape(name)}" src="data:image/png;base64,{png}">')
    style = ("body{font-family:sans-serif;max-width:60em;margin:2em auto;line-height:1.4}"
             "table{border-collapse:collapse;font-size:0.85em;margin:0.5em 0}"
             "td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}img{max-width:100%}")
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + html.escape(title) + "</title><style>"
            + style + "</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def report_text(result: Any, path: str | Path, check: DesignCheck | None = None, skipped: str = "") -> str:
    """The report of ``result`` in the format of ``path``'s suffix (.md or .html); ``skipped``: why the
    design check was not run (:func:`check_skipped`)."""
    fmt = check_report_path(path).suffix.lower().lstrip(".")
    title, sections = report_sections(result, check, skipped)
    return render(title, sections, fmt)


def figure_of(result: Any) -> Any:
    """The ``--plot`` figure of either kind of analysis."""
    own = getattr(result, "figure", None)
    return own() if own else analysis_figure(result)
