"""The posterior of a completed study (``backend="bambi"``): every system mean and contrast from one bambi fit."""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..fitting.ratings import PilotData
from .inference import family_indices
from .layout import design_summary
from .model_ladder import (
    coding_note,
    components_table,
    model_spec,
    model_text,
    system_rows,
    term_values,
)
from .paper import RELIABILITY_TARGET, PaperTables, paper_tables
from .report import markdown_sections, note_lines, text_table


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
    paper: PaperTables | None = field(default=None, repr=False)  #: agreement, reliability, ranks (no letters)

    def tables(self) -> dict[str, pd.DataFrame]:
        """The four tables by name: design, components, means, contrasts."""
        return {"design": self.design, "components": self.components, "means": self.means,
                "contrasts": self.contrasts}

    def records(self, paper: bool = False) -> list[dict[str, Any]]:
        """One record per contrast (``--json``): posterior summaries, ``inference: posterior``, no p-value fields;
        with ``paper``, marked ``record: contrast`` and followed by the agreement, reliability and rank records."""
        extra = {"inference": "posterior", "level": self.level, "model": self.model, "backend": self.backend}
        contrasts = [{**rec, **extra} for rec in self.contrasts.to_dict("records")]
        if not paper:
            return contrasts
        return [{"record": "contrast", **rec} for rec in contrasts] + (self.paper.records() if self.paper else [])

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
        return markdown_sections(
            f"Bayesian analysis of {Path(self.source).name}", self.methods(),
            [("Design", self.design), (f"Posterior of each system's mean rating ({self.level:.0%} HDI)", self.means),
             ("Posterior of each contrast", self.contrasts),
             ("Variance components (posterior medians)", self.components)], self.notes)

    def __str__(self) -> str:
        parts = [(f"{self.source}: posterior of {self.model} (bambi, {self.chains} x {self.draws} draws, "
                 f"seed {self.seed}); posterior quantities, not p-values"),
                 "", "variance components (posterior medians):", text_table(self.components),
                 "", f"posterior mean rating of each system ({self.level:.0%} HDI):", text_table(self.means),
                 "", (f"posterior of each contrast: mean, SD, {self.level:.0%} HDI, prob_greater = "
                 "P(system > versus | data):"), text_table(self.contrasts)]
        if self.paper is not None:
            parts += self.paper.summary()
        return "\n".join(parts + note_lines(self.notes))


def hdi(draws: np.ndarray, level: float) -> tuple[float, float]:
    """The narrowest interval holding ``level`` of the draws (as arviz.hdi for a unimodal posterior)."""
    x = np.sort(draws)
    n = len(x)
    width = math.floor(level * n)
    k = int(np.argmin(x[width:] - x[:n - width]))
    return float(x[k]), float(x[k + width])


def bayesian_analysis(data: PilotData, random: str, contrasts: str, level: float, seed: int, draws: int, chains: int,
                      report: Callable[[str], None], metric: str = "interval",
                      target: float = RELIABILITY_TARGET) -> BayesianAnalysis:
    """The posterior of every system mean and contrast from one bambi fit of the ``random`` structure."""
    from ..fitting.bambi_fit import fit_bambi

    design, frame, spec, unidentified = model_spec(data, random, False)
    report(f"sampling {spec.formula} (bambi, {chains} chains x {draws} draws)")
    raw = fit_bambi(frame.assign(system="s" + frame["system"].astype(str)), spec.formula, "gaussian", draws, chains,
                    seed, every_draw=True)
    post = {k: np.asarray(v) for k, v in (raw.draws or {}).items()}
    beta = np.column_stack([post["b|(Intercept)"]] + [post[f"b|{c}"] for c in design.columns])
    m = system_rows(design, frame)
    rating_var = post["sigma"] ** 2
    for g, t in spec.components:
        rating_var = rating_var + float(np.mean(term_values(design, m, t) ** 2)) * post[f"{g}|{t}"] ** 2
    rating_sd = np.sqrt(rating_var)
    names = list(data.systems)

    def summary(values: np.ndarray) -> dict[str, float]:
        lo, hi = hdi(values, level)
        return {"mean": float(values.mean()), "sd": float(values.std(ddof=1)), "hdi_low": lo, "hdi_high": hi}

    means = pd.DataFrame([{"system": s, **summary(beta @ m[j])} for j, s in enumerate(names)])
    rows = []
    for a, b in family_indices(names, contrasts):
        diff = beta @ (m[a] - m[b])
        rec = summary(diff)
        rows.append({"system": names[a], "versus": names[b], "estimate": rec.pop("mean"), **rec,
                     "prob_greater": float((diff > 0).mean()), "effect_size": float((diff / rating_sd).mean())})
    components, _ = components_table(design, raw, m)
    paper = paper_tables(data.frame, components, means, "mean", pd.DataFrame(rows), contrasts, "none", level, seed,
                         beta @ m.T, f"the {len(beta)} posterior draws of the means", metric, target)
    notes = list(data.notes) + list(unidentified) + list(raw.warnings)
    coding = coding_note(design)
    if coding:
        notes.append(coding)
    return BayesianAnalysis(
        design=design_summary(data), components=components, means=means, contrasts=pd.DataFrame(rows),
        model=model_text(design, spec), level=level, seed=seed, draws=draws, chains=chains, source=data.source,
        scale=data.scale, notes=tuple(dict.fromkeys(notes)), versions=dict(raw.versions), paper=paper)
