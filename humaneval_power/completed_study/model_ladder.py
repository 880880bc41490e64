"""The random-effect structure of a completed study's model and its convergence ladder.

``random="invariant"`` is the coding-invariant model (random intercepts for workers, items and their
interactions with the system); ``"slopes"`` is Card et al.'s ``(1 + contrasts || g)``; ``"maximal"``
fits ``(system | worker) + (system | item)`` with correlations and steps down a logged ladder
(maximal -> no correlations -> invariant) when a fit fails, warns of non-convergence or is singular.
Components the design cannot identify are left out before fitting. Also here: each system's
fixed-effect row, the variance components with their share of a rating's variance, and the model
formula as a reader writes it.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError
from ..fitting.model import components_to_drop
from ..fitting.ratings import PilotData
from ..fitting.types import ZERO_TOL, Design, component_label, zero_components
from . import backends

RANDOM = ("invariant", "maximal", "slopes")
#: each random-effect structure in words (methods paragraph)
RANDOM_TEXT = {
    "invariant": "random intercepts for workers and items and for their interactions with the system, so that every "
                 "system shares the same five variance components whatever the coding",
    "maximal": "by-worker and by-item random intercepts and system slopes with their correlations (the maximal "
               "structure of Barr et al., 2013)",
    "no correlations": "by-worker and by-item random intercepts and system slopes, uncorrelated",
    "slopes": "by-worker and by-item random intercepts and system slopes without correlations (Card et al., 2020)",
}
#: the convergence ladder of each random-effect structure: (name, Design.random, correlated) steps
LADDER = {
    "maximal": (("maximal", "slopes", True), ("no correlations", "slopes", False), ("invariant", "invariant", False)),
    "slopes": (("slopes", "slopes", False),),
    "invariant": (("invariant", "invariant", False),),
}
#: lme4 warnings that mean the optimiser did not certify its optimum
CONVERGENCE = ("converge", "unidentifiable", "hessian", "eigenvalue")


def system_rows(design: Any, frame: pd.DataFrame) -> np.ndarray:
    """Row of the fixed-effect model matrix for each system (its mean is row @ beta), systems in design order."""
    rows = []
    for code in range(1, len(design.systems) + 1):
        first = frame.loc[frame["system"] == code].iloc[0]
        rows.append([1.0] + [float(first[c]) for c in design.columns])
    return np.array(rows)


def term_values(design: Any, rows: np.ndarray, term: str) -> np.ndarray:
    """The value of a random-effect term in each system's ratings (``rows``: :func:`system_rows`)."""
    return np.ones(len(rows)) if term == "(Intercept)" else rows[:, 1 + design.columns.index(term)]


def _label(design: Any, group: str, term: str) -> str:
    return group.replace(":", " x ") if design.random == "invariant" else component_label(design, group, term)


def components_table(design: Any, raw: Any, rows: np.ndarray) -> tuple[pd.DataFrame, float]:
    """Each variance component (and covariance) with its share of a single rating's variance, and that SD.

    A rating of system s has variance sum_g z_s' Sigma_g z_s + sigma^2 (z_s: its random-effect terms);
    the SD of a single rating is the square root of its mean over systems (for the invariant model the
    sum of the five components), and each row's ``icc`` is its part of that mean.
    """
    sds = {(g, t): float(sd) for g, t, sd in zip(raw.components.group, raw.components.term, raw.components.sd)}
    entries = []
    for g, t in design.components():
        sd = sds.get((g, t), 0.0)
        entries.append((_label(design, g, t), sd, sd**2, float(np.mean(term_values(design, rows, t) ** 2)) * sd**2))
    for g, t1, t2, cor in raw.correlations[["group", "term1", "term2", "cor"]].itertuples(index=False):
        cov = float(cor) * sds[g, t1] * sds[g, t2]
        share = 2 * float(np.mean(term_values(design, rows, t1) * term_values(design, rows, t2))) * cov
        entries.append((f"cov({_label(design, g, t1)}, {_label(design, g, t2)}), cor {float(cor):.3f}", math.nan,
                        cov, share))
    entries.append(("residual", raw.sigma, raw.sigma**2, raw.sigma**2))
    table = pd.DataFrame(entries, columns=["component", "sd", "variance", "icc"])
    total = float(table["icc"].sum())
    table["icc"] = table["icc"] / total
    return table, math.sqrt(total)


def singular_parts(design: Any, raw: Any) -> list[str]:
    """The variance components at zero and the correlations at +-1 of a fit, by name."""
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


def model_spec(data: PilotData, structure: str, correlated: bool) -> tuple[Design, pd.DataFrame, Any, tuple[str, ...]]:
    """The design, model frame and specification of one random-effect structure (``Design.random``), without the
    components the design cannot identify; and the notes saying which those are."""
    design = Design.for_data(data, structure)
    frame = design.model_frame(data)
    dropped, unidentified = components_to_drop(design, frame)
    return design, frame, design.spec(correlated, frozenset((g, t) for g, t, _ in dropped)), unidentified


@dataclass(frozen=True, eq=False)
class LadderFit:
    """The step of the ladder that was kept: its design, frame, spec, fit and inference; the steps left before it
    (in words) and the identifiability notes."""

    design: Design
    frame: pd.DataFrame
    spec: Any
    raw: Any
    inference: Any
    steps: tuple[str, ...]
    unidentified: tuple[str, ...]


def fit_ladder(data: PilotData, random: str, backend: str, kenward_roger: bool,
               report: Callable[[str], None], progress: Callable[[str], None] | None,
               keep_singular: bool = False) -> LadderFit:
    """Fit the first step of ``random``'s ladder that converges without a singular fit (``keep_singular``: singular
    or not; the last step is kept whatever it gives)."""
    ladder = LADDER[random]
    steps: list[str] = []
    for n, (name, structure, correlated) in enumerate(ladder):
        design, frame, spec, unidentified = model_spec(data, structure, correlated)
        report(f"fitting {spec.formula} ({backend})")
        last = n == len(ladder) - 1
        why: str | None
        try:
            raw, inference = backends.fit_once(frame, spec, backend, kenward_roger, progress)
        except InputError as exc:
            if last:
                raise
            why = f"failed ({exc})"
        else:
            why = None if last else _ladder_reason(design, raw, keep_singular)
            if why is None:
                return LadderFit(design, frame, spec, raw, inference, tuple(steps), unidentified)
        steps.append(f"{name} model `{model_text(design, spec)}`: {why}; next: {ladder[n + 1][0]}")
        report(steps[-1])
    raise AssertionError("unreachable: the last step of the ladder is always kept")


def model_text(design: Any, spec: Any) -> str:
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


def coding_note(design: Any) -> str | None:
    """What the contrast columns of a slope model are (they appear in its formula and component names)."""
    if design.random == "invariant":
        return None
    if design.columns == ("x",):
        return f"x = +1/2 for {design.systems[1]}, -1/2 for {design.systems[0]}"
    return ("treatment coding: " + ", ".join(f"{c} = 1 for {s}" for c, s in zip(design.columns, design.systems[1:]))
            + f" (baseline {design.systems[0]}); the slope model's variances depend on that choice")
