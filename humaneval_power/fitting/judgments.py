"""Head-to-head judgments -> logistic GLMM per comparison (system vs baseline).

A split tie has score 1/2 and enters the likelihood as half a win plus half a
loss: ``score * eta - log(1 + exp(eta))`` per judgment (a weighted likelihood).
lme4 fits it exactly (binomial counts out of 2 at prior weight 1/2); bambi has
no weighted likelihood and refuses split ties.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError
from .ratings import PilotData
from .types import Design, FitResult, RawFit

FORMULA = "score ~ 1 + (1 | worker) + (1 | item)"
#: quasi-separation: a log-odds (intercept) or a log-odds SD beyond this, or lme4's note that
#: conditional fitted probabilities reached 0 or 1 (within 1e-6: |eta| > 13.8, see r_bridge/fit.R)
MAX_LOG_ODDS = 10.0
FITTED_AT_BOUNDS = "fitted probabilities numerically 0 or 1"
#: a pair's Wald SE below this share of the SE with independent judgments, 1 / sqrt(n p (1 - p)), marks a
#: degenerate Hessian (random effects only add variance: cu-zeman vs Shef-wproa in WMT13 gave 0.00085 for 0.058)
MIN_SE_RATIO = 0.5


def withheld_reason(n: int, win_rate: float, se: float, separation: str | None) -> str | None:
    """Why a pair's GLMM must not be reported as a test (quasi-separation, or an SE too small to be real), or None.

    A quasi-separated fit's log-odds and SDs run off to unbounded values, and its Wald SE with them: the
    p-value (1e-35 and below) and the interval describe the optimiser's stopping point, not the data.
    """
    if separation:
        return separation
    floor = 1 / np.sqrt(n * max(win_rate * (1 - win_rate), 1 / n))
    if not se >= MIN_SE_RATIO * floor:
        return (f"degenerate fit: Wald SE {se:.2g} is below {MIN_SE_RATIO:g} x the SE with independent judgments "
                f"({floor:.2g}), which random effects should only raise")
    return None


def separation_reason(raw: RawFit) -> str | None:
    """Why a logistic fit looks quasi-separated, or None."""
    why = []
    est = float(raw.coefficients.iloc[0].estimate)
    if abs(est) > MAX_LOG_ODDS:
        why.append(f"log-odds {est:.3g} (|.| > {MAX_LOG_ODDS:g})")
    for group, sd in zip(raw.components["group"], raw.components["sd"]):
        if sd > MAX_LOG_ODDS:
            why.append(f"{group} SD {sd:.3g} on the log-odds scale (> {MAX_LOG_ODDS:g})")
    why += [w for w in raw.warnings if FITTED_AT_BOUNDS in w]
    if not why:
        return None
    return ("quasi-separated (items or workers won or lost unanimously drive the log-odds and SDs to extreme "
            "or unbounded values, unusable for planning): " + "; ".join(why))


def _fit_one(frame: pd.DataFrame, backend: str, intervals: str, n_boot: int, seed: int, draws: int,
             chains: int) -> RawFit:
    split = bool((frame["score"] == 0.5).any())
    if backend == "lme4":
        from .lme4 import fit_glmm

        if split and intervals == "boot":
            raise InputError("--intervals boot simulates from the model, which has no ties: with split ties "
                             "use --intervals profile or none, or --ties drop")
        return fit_glmm(frame, FORMULA, intervals, n_boot, seed)
    if split:
        raise InputError("the bambi backend has no weighted likelihood for split ties (half a win and half a "
                         "loss): use --ties drop, or --backend lme4")
    from .bambi_fit import fit_bambi

    return fit_bambi(frame, FORMULA, "bernoulli", draws, chains, seed)


def _record(data: PilotData, design: Design, system: str, sub: pd.DataFrame, raw: RawFit) -> dict[str, Any]:
    co = raw.coefficients.iloc[0]
    comps = raw.components.set_index("group")
    rec: dict[str, Any] = {
        "backend": raw.backend, "system": system, "baseline": design.systems[0],
        "n_ratings": len(sub), "n_workers": int(sub["worker"].nunique()),
        "n_items": int(sub["item"].nunique()), "n_systems": 2,
        "effect": float(co.estimate), "effect_se": float(co.se), "df": float(co.df), "p_value": float(co.p_value),
        "p_win": float(1 / (1 + np.exp(-co.estimate))),
        "sd_worker": float(comps.loc["worker", "sd"]), "sd_item": float(comps.loc["item", "sd"]),
        "singular": raw.singular,
        "p_tie": float(data.extra.get("p_tie", {}).get(system, 0.0)), "ties": str(data.extra.get("ties", "drop")),
        "intervals": {f"sd_{g}": [float(comps.loc[g, "lower"]), float(comps.loc[g, "upper"])] for g in ("worker", "item")},
    }
    if "p_direction" in raw.coefficients:  # a posterior: no p-value, but P(direction) and a credible interval
        rec["p_direction"] = float(co.p_direction)
        rec["intervals"]["effect"] = [float(co.lower), float(co.upper)]
    reason = separation_reason(raw)
    rec["separation"] = reason is not None
    if reason:
        rec["separation_reason"] = reason
    # the rule of `hepower analyze`: no Wald test or interval for a quasi-separated or degenerate fit
    withheld = withheld_reason(len(sub), float(sub["score"].mean()), float(co.se), reason)
    if withheld:
        rec.update(effect_se=math.nan, p_value=math.nan, withheld_reason=withheld)
        rec["intervals"].pop("effect", None)
    return rec


def fit_judgments(data: PilotData, design: Design, backend: str, intervals: str, n_boot: int, seed: int,
                  draws: int, chains: int) -> FitResult:
    """One logistic GLMM per system against the baseline; records in the planner's names.

    A quasi-separated comparison is flagged in its record (``separation``, ``separation_reason``),
    in the warnings and in its parameter file, which the planner then refuses unless forced; a
    quasi-separated or degenerate one (:func:`withheld_reason`, the rule of ``hepower analyze``) has
    no SE, p-value or interval (missing; ``withheld_reason`` in its record).
    """
    if intervals == "wald":
        intervals = "none"  # glmer has no Hessian of the variance parameters to offer
    fits: dict[str, RawFit] = {}
    records: list[dict[str, Any]] = []
    coef_rows, comp_rows, warnings_, all_draws = [], [], [], {}
    for system in design.systems[1:]:
        sub = data.frame[data.frame["system"] == system]
        frame = pd.DataFrame({
            "worker": pd.factorize(sub["worker"])[0] + 1,
            "item": pd.factorize(sub["item"])[0] + 1,
            "score": sub["score"].to_numpy(float),
        })
        raw = _fit_one(frame, backend, intervals, n_boot, seed, draws, chains)
        fits[system] = raw
        rec = _record(data, design, system, sub, raw)
        records.append(rec)
        coefs = raw.coefficients.assign(term=system)
        if "withheld_reason" in rec:  # the estimate stands (the parameter file's intercept), not its Wald test
            coefs.loc[:, [c for c in coefs if c not in ("term", "estimate", "df")]] = math.nan
            warnings_.append(f"{system}: {rec['withheld_reason']}; its SE, test and interval are withheld (missing)")
        coef_rows.append(coefs)
        comp_rows.append(raw.components.assign(term=system))
        warnings_ += [f"{system}: {w}" for w in raw.warnings]
        for k, v in (raw.draws or {}).items():
            all_draws[f"{system}:{k}"] = v
    first = next(iter(fits.values()))
    combined = RawFit(
        backend=first.backend,
        coefficients=pd.concat(coef_rows, ignore_index=True),
        components=pd.concat(comp_rows, ignore_index=True),
        correlations=first.correlations,
        sigma=math.nan,
        sigma_interval=(math.nan, math.nan),
        singular=any(f.singular for f in fits.values()),
        warnings=tuple(warnings_),
        versions=first.versions,
        criterion=sum(f.criterion for f in fits.values()),
        draws=all_draws or None,
    )
    return FitResult(data, design, combined, False, intervals, (), (), records)
