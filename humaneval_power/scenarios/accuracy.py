"""Comparing two classifiers on accuracy (Card et al. 2020, section 3 and App. C, E).

Paired (McNemar): on a test set of n items, model B is right where A is wrong
with probability p01 and the reverse with p10; the models agree with
probability Pa. Effect Δ = p01 - p10 (difference in accuracy), so
p01 = (1 - Pa + Δ)/2 and p10 = (1 - Pa - Δ)/2, which needs Pa + |Δ| <= 1.

Methods: ``exact`` — the exact conditional test (binomial test on the
discordant pairs; statsmodels' ``mcnemar`` default), power by summation;
``midp`` — its mid-p version (Fagerland et al. 2013); ``normal`` — the normal
approximation used by R's MESS ``power_mcnemar_test`` (Connor 1987);
``simulate`` — the exact test on simulated tables.
Unpaired: ``prop_test_power`` matches R's ``power.prop.test``.

Not yet here (open in issue 5): the exact unconditional test, priors from
validation predictions and Lachenbruch's bounds, plots, the predictions file.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize, stats

from ..engine import PowerResult, StudyOutcomes
from ..errors import InputError, NotAttainableError
from ..significance.binomial import exact_power, sign_test
from ..validation import check_alpha, check_count, check_number

METHODS = ("exact", "midp", "normal", "simulate")


def discordant(delta: float, agreement: float) -> tuple[float, float]:
    """(p01, p10): B right & A wrong, A right & B wrong."""
    check_number("delta", delta)
    check_number("agreement", agreement)
    if not 0 <= agreement <= 1:
        raise InputError(f"agreement must be in [0, 1], got {agreement}")
    if agreement + abs(delta) > 1 + 1e-12:
        raise InputError(f"agreement + |delta| = {agreement + abs(delta):g} exceeds 1: impossible table")
    return max((1 - agreement + delta) / 2, 0.0), max((1 - agreement - delta) / 2, 0.0)


def normal_power(n: float, delta: float, agreement: float, alpha: float = 0.05) -> float:
    """McNemar power, normal approximation (MESS ``power_mcnemar_test(method = "normal")``)."""
    p01, p10 = discordant(delta, agreement)
    pd = p01 + p10
    if delta == 0 or pd == 0:
        return alpha if delta == 0 else 1.0
    z = stats.norm.isf(alpha / 2)
    return float(stats.norm.cdf((abs(delta) * math.sqrt(n) - z * math.sqrt(pd)) / math.sqrt(pd - delta**2)))


def prop_test_power(n: float, p1: float, p2: float, alpha: float = 0.05) -> float:
    """Two independent proportions, n per group (R ``power.prop.test``, two-sided, strict = FALSE)."""
    for name, p in (("p1", p1), ("p2", p2)):
        if not 0 < p < 1:
            raise InputError(f"{name} must be in (0, 1), got {p}")
    q1, q2 = 1 - p1, 1 - p2
    z = stats.norm.isf(alpha / 2)
    num = math.sqrt(n) * abs(p1 - p2) - z * math.sqrt((p1 + p2) * (q1 + q2) / 2)
    return float(stats.norm.cdf(num / math.sqrt(p1 * q1 + p2 * q2)))


@dataclass(frozen=True)
class McNemarScenario:
    """n paired predictions with accuracy difference ``delta`` and agreement ``agreement``."""

    n: int
    delta: float
    agreement: float
    method: str = "exact"
    alpha: float = 0.05

    def __post_init__(self) -> None:
        check_count("n", self.n)
        discordant(self.delta, self.agreement)
        check_alpha(self.alpha)
        if self.method not in METHODS:
            raise InputError(f"unknown method {self.method!r}; choose one of {', '.join(METHODS)}")

    @property
    def effect(self) -> float:
        return self.delta

    chunk_size = 100_000

    def cell(self) -> dict[str, Any]:
        return {"n": self.n, "delta": self.delta, "agreement": self.agreement, "effect": self.delta,
                "method": self.method, "test": "mcnemar", "alpha": self.alpha}

    def stream_key(self) -> str:
        return json.dumps(["mcnemar", self.n, self.agreement])

    def simulate(self, n: int, rng: np.random.Generator) -> StudyOutcomes:
        p01, p10 = discordant(self.delta, self.agreement)
        counts = rng.multinomial(self.n, [p01, self.agreement, p10], size=n)
        _, sig = sign_test(counts[:, 0], counts[:, 1], counts[:, 2], "drop", self.alpha)
        zeros = np.zeros(n, dtype=bool)
        return StudyOutcomes((counts[:, 0] - counts[:, 2]) / self.n, sig, zeros, zeros)

    def exact(self) -> PowerResult | None:
        if self.method == "simulate":
            return None
        if self.method == "normal":
            power, type_s, type_m = normal_power(self.n, self.delta, self.agreement, self.alpha), math.nan, math.nan
        else:
            p01, p10 = discordant(self.delta, self.agreement)
            power, type_s, type_m = exact_power(self.n, p01, self.agreement, "drop", self.alpha,
                                                mid_p=self.method == "midp")
        return PowerResult.closed_form(self.cell(), power, type_s, type_m)


def mcnemar_sample_size(delta: float, agreement: float, target_power: float = 0.8, method: str = "normal",
                        alpha: float = 0.05) -> dict[str, Any]:
    """n reaching the target power: unrounded for ``normal`` (as MESS), integer for ``exact``."""
    if not 0 < target_power < 1:
        raise InputError(f"target power must be in (0, 1), got {target_power}")
    if delta == 0:
        raise InputError("the sample size for a zero difference is undefined")
    discordant(delta, agreement)
    if method == "normal":
        n = optimize.brentq(lambda k: normal_power(k, delta, agreement, alpha) - target_power, 1e-6, 1e12)
        return {"n": n, "n_required": math.ceil(n - 1e-9), "delta": delta, "agreement": agreement,
                "power": target_power, "method": method}
    if method != "exact":
        raise InputError("sample size is computed by the normal or exact method")
    from ..engine import smallest_n

    n = smallest_n(lambda k: McNemarScenario(k, delta, agreement, "exact", alpha).exact().power >= target_power,
                   1, 100_000_000)
    if n is None:
        raise NotAttainableError("target power not reached up to n = 1e8")
    return {"n": n, "n_required": n, "delta": delta, "agreement": agreement,
            "power": McNemarScenario(n, delta, agreement, "exact", alpha).exact().power, "method": method}


def estimate_accuracy(source: Any, model_a: str, model_b: str, item: str = "item", model: str = "model",
                      correct: str = "correct", level: float = 0.95) -> dict[str, Any]:
    """Δacc, agreement and the discordant probabilities of two models from per-item correctness.

    ``source``: long CSV/Parquet/DataFrame with columns item, model, correct (0/1).
    Both models must cover the same items. Intervals: Wald for the paired
    difference, Wilson for the agreement; ``p_value`` is the exact McNemar test.
    """
    import pandas as pd

    from ..io import read_table, resolve_column

    frame, name, _ = read_table(source)
    cols = {role: resolve_column(frame, role, given) for role, given in
            (("item", item), ("model", model), ("correct", correct))}
    f = pd.DataFrame({k: frame[c] for k, c in cols.items()})
    f["model"] = f["model"].astype(str)
    known = sorted(f["model"].unique())
    for m in (model_a, model_b):
        if m not in known:
            raise InputError(f"model {m!r} not in {name}; models: {', '.join(known)}")
    values = pd.to_numeric(f["correct"], errors="coerce")
    if values.isna().any() or not values.isin([0, 1]).all():
        raise InputError(f"column {cols['correct']!r} must hold 0/1 correctness")
    f["correct"] = values.astype(int)
    a = f[f["model"] == model_a].set_index("item")["correct"]
    b = f[f["model"] == model_b].set_index("item")["correct"]
    for m, s_ in ((model_a, a), (model_b, b)):
        if s_.index.duplicated().any():
            raise InputError(f"model {m!r} has several rows for one item")
    if set(a.index) != set(b.index):
        only = sorted(set(a.index) ^ set(b.index), key=str)[:5]
        raise InputError(f"the two models cover different items ({len(set(a.index) ^ set(b.index))} differ, "
                         f"e.g. {', '.join(map(str, only))})")
    b = b.loc[a.index]
    n = len(a)
    n01 = int(((a == 0) & (b == 1)).sum())
    n10 = int(((a == 1) & (b == 0)).sum())
    p01, p10 = n01 / n, n10 / n
    delta, agree = p01 - p10, 1 - p01 - p10
    z = stats.norm.isf((1 - level) / 2)
    se = math.sqrt(max(p01 + p10 - delta**2, 0.0) / n)
    centre = (agree + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(agree * (1 - agree) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    p_value = float(stats.binomtest(n01, n01 + n10, 0.5).pvalue) if n01 + n10 else 1.0
    return {"n": n, "model_a": model_a, "model_b": model_b, "accuracy_a": float(a.mean()),
            "accuracy_b": float(b.mean()), "delta": delta, "delta_ci_low": delta - z * se,
            "delta_ci_high": delta + z * se, "agreement": agree, "agreement_ci_low": centre - half,
            "agreement_ci_high": centre + half, "b_right_a_wrong": n01, "a_right_b_wrong": n10,
            "p_value": p_value}


#: Card et al. (2020) overlap (agreement) regressions: Pa = a + b * baseline + c * delta
OVERLAP_PRIORS: dict[str, tuple[float, float, float]] = {
    "glue": (0.41422307, 0.58187475, -0.46624237),
    "squad2": (0.4339, 0.5932, -1.2849),
}


def prior_agreement(prior: str, baseline: float, delta: float) -> float:
    """Agreement implied by a historical overlap regression (Tables 5-6)."""
    try:
        a, b, c = OVERLAP_PRIORS[prior]
    except KeyError:
        raise InputError(f"unknown prior {prior!r}; choose one of {', '.join(OVERLAP_PRIORS)}") from None
    return a + b * baseline + c * delta


def accuracy_mde(n: int, baseline: float, prior: str = "glue", target_power: float = 0.8, method: str = "normal",
                 alpha: float = 0.05) -> dict[str, Any]:
    """Smallest accuracy gain over ``baseline`` reaching the target power, agreement from the prior.

    Gains are bounded so that the new accuracy stays <= 1 and the implied
    table exists; when none reaches the target, ``mde`` is None and ``reason`` says why.
    """
    if not 0 < baseline < 1:
        raise InputError(f"baseline accuracy must be in (0, 1), got {baseline}")

    def power(d: float) -> float:
        pa = prior_agreement(prior, baseline, d)
        cell = McNemarScenario(n, d, min(max(pa, 0.0), 1.0), method, alpha)
        return cell.exact().power

    def feasible(d: float) -> bool:
        pa = prior_agreement(prior, baseline, d)
        return 0 <= pa <= 1 and pa + d <= 1 and baseline + d <= 1

    grid = [d for d in np.linspace(1e-5, 1 - baseline, 2001) if feasible(d)]
    best = max(grid, key=power) if grid else None
    rec = {"n": n, "baseline": baseline, "prior": prior, "method": method}
    if best is None or power(best) < target_power:
        top = power(best) if best is not None else math.nan
        return {**rec, "mde": None, "power_at_mde": None,
                "reason": f"no gain up to {1 - baseline:.4f} reaches power {target_power:g} under this prior "
                          f"(highest {top:.3f}): the prior's agreement shrinks as the gain grows"}
    first = next(d for d in grid if power(d) >= target_power)
    lo = max([d for d in grid if d < first], default=1e-9)
    mde = optimize.brentq(lambda d: power(d) - target_power, lo, first) if lo < first else first
    return {**rec, "mde": mde, "power_at_mde": power(mde), "agreement": prior_agreement(prior, baseline, mde)}


#: Card et al. Table 2: test size and SOTA accuracy per GLUE task
GLUE_TABLE2: dict[str, tuple[int, float]] = {
    "WNLI": (147, 0.945), "MRPC": (1725, 0.920), "SST-2": (1821, 0.972), "RTE": (3000, 0.917),
    "QNLI": (5463, 0.975), "MNLI-m": (9796, 0.916), "MNLI-mm": (9847, 0.913), "QQP": (390965, 0.910),
}


def glue_table(method: str = "normal", target_power: float = 0.8) -> list[dict[str, Any]]:
    """Table 2 of Card et al.: MDE per GLUE task under the GLUE overlap prior."""
    return [{"task": task, **accuracy_mde(n, sota, "glue", target_power, method)} for task, (n, sota) in GLUE_TABLE2.items()]


__all__: list[str] = ["estimate_accuracy", "McNemarScenario", "discordant", "normal_power", "prop_test_power", "mcnemar_sample_size",
                      "accuracy_mde", "glue_table", "prior_agreement", "OVERLAP_PRIORS"]
