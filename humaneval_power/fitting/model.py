"""Pilot data -> crossed mixed model -> planner parameters.

Gaussian (Likert ratings): ``score ~ contrasts + (1 + contrasts || worker) +
(1 + contrasts || item)``. With two systems the contrast is x = -1/2
(baseline), +1/2 (other): the planner's own parameterisation. With more, one
treatment contrast per system (1 for that system, 0 otherwise) with its own
random slopes: each coefficient is the difference from the baseline and each
slope SD the SD of that difference across workers / items, as in the planner;
the exported intercept SD of a comparison is that of the two systems' mean,
sqrt(sd_int^2 + sd_slope^2/4) (+ the covariance term when correlated).

Binomial (head-to-head): for each system against the baseline,
``won ~ 1 + (1 | worker) + (1 | item)``, logistic; the intercept is the
log-odds that the system beats the baseline for a typical worker and item.

Backends are found in :mod:`.registry`; shared types live in :mod:`.types`.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pandas as pd

from ..errors import InputError
from . import registry
from .ratings import PilotData
from .types import GROUPS, Design, FitOptions, FitResult, RawFit, component_label, unreliable_wald, zero_components

BACKENDS = tuple(registry.REGISTRY)
#: a Gaussian model with more variance components than this is announced as slow before it is fitted
MANY_COMPONENTS = 12
INTERVALS = registry.interval_methods()

__all__ = ["BACKENDS", "INTERVALS", "FitResult", "build_records", "fit_pilot"]


def _coef(raw: RawFit, term: str) -> pd.Series:
    co = raw.coefficients.set_index("term")
    return co.loc[term]


def _component(raw: RawFit, group: str, term: str) -> tuple[float, float, float]:
    c = raw.components
    hit = c[(c.group == group) & (c.term == term)]
    if hit.empty:
        return 0.0, math.nan, math.nan  # dropped: fixed at zero
    r = hit.iloc[0]
    return float(r.sd), float(r.lower), float(r.upper)


def _correlation(raw: RawFit, group: str, term: str) -> float:
    c = raw.correlations
    if c.empty:
        return 0.0
    hit = c[(c.group == group) & (((c.term1 == "(Intercept)") & (c.term2 == term)) | ((c.term2 == "(Intercept)") & (c.term1 == term)))]
    return float(hit.iloc[0].cor) if len(hit) else 0.0


def _pair_intervals(design: Design, raw: RawFit, group: str, system: str) -> dict[str, list[float]]:
    """Intervals of a pair's intercept and slope SDs where each is one component's SD (times a constant)."""
    nan = [math.nan, math.nan]
    if design.random == "invariant":
        _, lo, hi = _component(raw, f"{group}:system", "(Intercept)")
        return {"intercept": nan, "slope": [math.sqrt(2) * lo, math.sqrt(2) * hi]}
    if design.random == "per-system":
        return {"intercept": nan, "slope": nan}
    col = design.columns[design.systems.index(system) - 1]
    intercept = list(_component(raw, group, "(Intercept)")[1:]) if design.columns == ("x",) else nan
    return {"intercept": intercept, "slope": list(_component(raw, group, col)[1:])}


def build_records(data: PilotData, design: Design, raw: RawFit, correlated: bool) -> list[dict[str, Any]]:
    """One record per comparison (system vs baseline), planner names and conventions (see :meth:`Design.pair_moments`)."""
    counts = data.counts()
    records = []
    b0 = float(_coef(raw, "(Intercept)").estimate)
    zeros = set(zero_components(design, raw))

    def sd(group: str, term: str) -> float:
        return _component(raw, group, term)[0]

    for col, system in zip(design.columns, design.systems[1:]):
        co = _coef(raw, col)
        rec: dict[str, Any] = {
            "backend": raw.backend, "system": system, "baseline": design.systems[0], **counts,
            "effect": float(co.estimate), "effect_se": float(co.se), "df": float(co.df), "p_value": float(co.p_value),
        }
        intervals: dict[str, list[float]] = {}
        corr: dict[str, float] = {}
        notes: list[str] = []
        for g in GROUPS:
            cov = _correlation(raw, g, col) * sd(g, "(Intercept)") * sd(g, col) if design.random == "slopes" else 0.0
            var_int, var_slope, cov_pair = design.pair_moments(sd, system, g, cov)
            rec[f"sd_{g}_intercept"], rec[f"sd_{g}_slope"] = math.sqrt(var_int), math.sqrt(var_slope)
            rho = cov_pair / math.sqrt(var_int * var_slope) if var_int > 0 and var_slope > 0 else 0.0
            for which, ci in _pair_intervals(design, raw, g, system).items():
                intervals[f"sd_{g}_{which}"] = ci
            if correlated:
                corr[g] = rho
            elif abs(rho) > 1e-6:
                notes.append(f"under the {design.random} model the {g} intercept and slope of {system} vs "
                             f"{design.systems[0]} are correlated (rho = {rho:.3f}); the planner simulates them "
                             "uncorrelated")
        driven = [component_label(design, g, t) for g, t in design.contrast_components(system) if (g, t) in zeros]
        if driven:
            notes.append(f"the df of {system} vs {design.systems[0]} ({float(co.df):.4g}) rest on a variance component "
                         f"estimated at zero ({'; '.join(driven)}): the test treats that source of variation as "
                         "absent, so its p-value can be far too small with few raters; compare with another --random "
                         "structure")
        rec["sd_residual"] = raw.sigma
        intervals["sd_residual"] = list(raw.sigma_interval)
        rec["intercept"] = b0 if design.columns == ("x",) else b0 + float(co.estimate) / 2
        rec["singular"] = raw.singular
        rec["intervals"] = intervals
        rec["notes"] = notes
        if correlated:
            rec["correlations"] = corr
        records.append(rec)
    return records


def fit_pilot(
    data: PilotData,
    backend: str = "lme4",
    correlated: bool = False,
    simplify: bool = False,
    intervals: str | None = None,
    n_boot: int = 500,
    seed: int = 1,
    draws: int | None = None,
    chains: int = 2,
    progress: Callable[[str], None] | None = None,
    random: str | None = None,
) -> FitResult:
    """Fit the crossed mixed model to validated pilot data.

    ``intervals``: ``wald`` (lme4 and statsmodels default; log-SD scale from lmerTest's Hessian),
    ``profile``, ``boot`` (parametric, ``n_boot``), ``posterior`` (bambi), ``none``.
    ``simplify`` drops zero variance components one at a time (after first
    dropping correlations) and records what was dropped and why.
    ``progress`` receives a line of text at each stage of a long fit.
    ``draws``: parameter draws stored for planning with assurance: bambi's posterior draws per
    chain (default 1000); for lme4 / statsmodels Gaussian fits, ``draws`` parametric-bootstrap
    refits (default none).
    ``random``: the random-effect structure (:class:`~.types.Design`): ``slopes`` (Card et al.;
    the default for two systems), ``invariant`` (the default for more), ``per-system``.
    """
    spec = registry.REGISTRY.get(backend)
    intervals = spec.resolve_intervals(data.family, intervals)
    design = Design.for_data(data, random)
    bootstrap = draws if backend != "bambi" else None
    draws = draws or 1000  # bambi: posterior draws per chain (the other backends do not read it)
    options = FitOptions(intervals, n_boot, seed, draws, chains, progress=progress)
    if data.family == "binomial":
        if correlated or simplify:
            raise InputError("--correlated and --simplify apply to Likert (gaussian) fits only")
        if bootstrap:
            raise InputError("parameter draws of head-to-head fits come from --backend bambi (its posterior); "
                             "the GLMM's parametric bootstrap is not offered")
        from .judgments import fit_judgments

        return fit_judgments(data, design, backend, intervals, n_boot, seed, draws, chains)
    if bootstrap and correlated:
        raise InputError("parameter draws (--draws) need uncorrelated random effects: the planner simulates "
                         "no correlations")
    if correlated and design.random == "invariant":
        raise InputError("--correlated needs several terms per group: use --random slopes or per-system")
    if correlated and not spec.correlated:
        raise InputError(f"the {backend} backend fits uncorrelated random effects only; use --backend lme4")
    if correlated and intervals == "wald":
        raise InputError("wald intervals need uncorrelated random effects; use --intervals profile or boot")
    fitter = spec.gaussian_fitter()
    frame = design.model_frame(data)
    n_comp = len(design.components())
    if design.random != "invariant" and n_comp > MANY_COMPONENTS:
        options.report(f"warning: the {design.random} model has {n_comp} variance components; with lme4 its cost grows "
                       "steeply with their number (a 21-system crowd study, 42 components, did not finish in 50 min); "
                       "the default invariant model has 4 whatever the number of systems")
    options.report("checking which variance components the design identifies")
    dropped, unident = components_to_drop(design, frame)

    def fit_once(corr: bool, drop: frozenset) -> RawFit:
        options.report(f"fitting {design.formula(corr, drop)} ({backend})")
        raw = fitter(frame, design.spec(corr, drop), options)
        return unreliable_wald(design, raw) if intervals == "wald" else raw

    steps: list[str] = []
    raw = fit_once(correlated, frozenset((g, t) for g, t, _ in dropped))
    while simplify and raw.singular:
        if correlated:
            correlated = False
            steps.append("random-effect correlations dropped first (singular fit)")
            raw = fit_once(False, frozenset((g, t) for g, t, _ in dropped))
            continue
        zeros = zero_components(design, raw)
        if not zeros:
            break
        if len(design.components()) - len(dropped) <= 1:
            steps.append("kept the last variance component although it is at zero "
                         "(without random effects the model is no longer a mixed model)")
            break
        comp = raw.components.set_index(["group", "term"])
        g, t = min(zeros, key=lambda gt: float(comp.loc[gt, "sd"]))
        why = f"estimated SD {float(comp.loc[(g, t), 'sd']):.3g} (at the boundary)"
        dropped.append((g, t, why))
        steps.append(f"dropped {component_label(design, g, t)}: {why}")
        raw = fit_once(False, frozenset((a, b) for a, b, _ in dropped))
    if bootstrap:
        from .statsmodels_lmm import bootstrap_param_draws

        options.report(f"{bootstrap} parametric-bootstrap refits (parameter draws for --assurance)")
        kept, failed = bootstrap_param_draws(frame, design.spec(False, frozenset((g, t) for g, t, _ in dropped)), raw,
                                             bootstrap, seed)
        note = (f"{failed} of {bootstrap} bootstrap refits did not converge (kept)",) if failed else ()
        raw = replace(raw, draws=kept, warnings=raw.warnings + note)
    return FitResult(data, design, raw, correlated, intervals, tuple(dropped), tuple(steps),
                     build_records(data, design, raw, correlated), unident)


def components_to_drop(design: Design, frame: pd.DataFrame) -> tuple[list[tuple[str, str, str]], tuple[str, ...]]:
    """Components to leave out because the design cannot separate them (``dropped`` entries), and why, in words.

    Checked before fitting (:mod:`.identifiability`): fitting them anyway gives an
    arbitrary split of one variance between them, different from optimiser to optimiser.
    """
    from .identifiability import RESIDUAL, unidentified

    found = unidentified(frame, design.columns, tuple(design.components()))
    if found and design.random == "per-system":
        raise InputError("per-system SDs are not identifiable in this design (" + "; ".join(
            ", ".join("residual" if c == RESIDUAL else component_label(design, *c) for c in f.components)
            for f in found) + " are confounded, e.g. each output is rated once): use --random invariant")
    dropped, texts = [], []
    for f in found:
        names = ["the residual" if c == RESIDUAL else component_label(design, *c) for c in f.components]
        left = component_label(design, *f.dropped)
        why = (f"not identifiable: {', '.join(names)} are confounded in this design (e.g. every item x system output "
               "rated once), so only their total is estimated")
        dropped.append((*f.dropped, why))
        texts.append(f"{', '.join(names)} are confounded by the design: fitted without {left}, whose variance the "
                     f"others absorb (exported as 0). A plan with the same design is exact; with more ratings per "
                     f"output the true split matters and is unknown (the plan is then optimistic)")
    return dropped, tuple(texts)
