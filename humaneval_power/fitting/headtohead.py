"""Head-to-head judgments -> logistic GLMM per comparison (system vs baseline)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from .types import Design, FitResult, RawFit
from .ratings import PilotData

FORMULA = "score ~ 1 + (1 | worker) + (1 | item)"


def _fit_one(frame: pd.DataFrame, backend: str, intervals: str, nboot: int, seed: int, draws: int,
             chains: int) -> RawFit:
    if backend == "lme4":
        from .lme4 import fit_glmm

        return fit_glmm(frame, FORMULA, intervals, nboot, seed)
    from .bambi_fit import fit_bambi

    return fit_bambi(frame, FORMULA, "bernoulli", draws, chains, seed)


def fit_judgments(data: PilotData, design: Design, backend: str, intervals: str, nboot: int, seed: int,
                  draws: int, chains: int) -> FitResult:
    """One logistic GLMM per system against the baseline; records in the planner's names."""
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
        if data.extra.get("ties") == "split":
            frame["w"] = sub["w"].to_numpy(float)
        raw = _fit_one(frame, backend, intervals, nboot, seed, draws, chains)
        fits[system] = raw
        co = raw.coefficients.iloc[0]
        comps = raw.components.set_index("group")
        rec: dict[str, Any] = {
            "backend": raw.backend, "system": system, "baseline": design.systems[0],
            "n_ratings": int(len(sub)), "n_workers": int(sub["worker"].nunique()),
            "n_items": int(sub["item"].nunique()), "n_systems": 2,
            "effect": float(co.estimate), "effect_se": float(co.se), "df": math.inf, "p_value": float(co.p_value),
            "p_win": float(1 / (1 + np.exp(-co.estimate))),
            "sd_worker": float(comps.loc["worker", "sd"]), "sd_item": float(comps.loc["item", "sd"]),
            "singular": raw.singular,
            "intervals": {f"sd_{g}": [float(comps.loc[g, "lower"]), float(comps.loc[g, "upper"])] for g in ("worker", "item")},
        }
        records.append(rec)
        coef_rows.append(raw.coefficients.assign(term=system))
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
