"""Comparing two classifiers on accuracy (Card et al. 2020, section 3 and App. C, E).

Paired (McNemar): on a test set of n items, model B is right where A is wrong
with probability p01 and the reverse with p10; the models agree with
probability Pa. Effect Δ = p01 - p10 (difference in accuracy), so
p01 = (1 - Pa + Δ)/2 and p10 = (1 - Pa - Δ)/2, which needs Pa + |Δ| <= 1.

Methods: ``exact`` — the exact conditional test (binomial test on the
discordant pairs; statsmodels' ``mcnemar`` default), power by summation;
``midp`` — its mid-p version (Fagerland et al. 2013); ``unconditional`` — the
exact unconditional test of Suissa & Shuster (1991), the z statistic
(n01 - n10)/sqrt(n01 + n10) with its critical value maximised over the
unknown discordance, power by summation; ``normal`` — the normal
approximation used by R's MESS ``power_mcnemar_test`` (Connor 1987);
``simulate`` — the exact conditional test on simulated tables.
Unpaired: ``prop_test_power`` / ``solve_prop_test`` match R's ``power.prop.test``.
No prior: Lachenbruch (1992) bounds from the marginal accuracies alone.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize, stats

from ..engine import PowerResult, StudyOutcomes
from ..errors import InputError, NotAttainableError
from ..planning import SolveResult, as_list, power_grid, solve
from ..progress import ProgressFn, as_progress
from ..significance.binomial import exact_power, sign_test
from ..validation import check_alpha, check_choice, check_count, check_number, check_target_power

METHODS = ("exact", "midp", "unconditional", "normal", "simulate")


def discordant(delta: float, agreement: float) -> tuple[float, float]:
    """(p01, p10): B right & A wrong, A right & B wrong."""
    check_number("delta", delta)
    check_number("agreement", agreement)
    if not 0 <= agreement <= 1:
        raise InputError(f"agreement must be in [0, 1], got {agreement}")
    if agreement + abs(delta) > 1 + 1e-12:
        raise InputError(f"agreement + |delta| = {agreement + abs(delta):g} exceeds 1: impossible table")
    return max((1 - agreement + delta) / 2, 0.0), max((1 - agreement - delta) / 2, 0.0)


def from_table(both_right: float, a_only: float, b_only: float, both_wrong: float) -> tuple[float, float]:
    """(delta, agreement) from a 2x2 table of probabilities (A right & B right, A only, B only, both wrong)."""
    cells = (both_right, a_only, b_only, both_wrong)
    for name, v in zip(("both_right", "a_only", "b_only", "both_wrong"), cells):
        check_number(name, v)
        if v < 0:
            raise InputError(f"table probability {name} must be >= 0, got {v}")
    if abs(sum(cells) - 1) > 1e-6:
        raise InputError(f"the four table probabilities must sum to 1, got {sum(cells):g}")
    return b_only - a_only, both_right + both_wrong


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
    #: follows the exact summation of a large n (not part of the cell; never sent to workers)
    progress: ProgressFn | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        check_count("n", self.n)
        if discordant(self.delta, self.agreement) == (0.0, 0.0):
            raise InputError("agreement 1: the two models agree on every item, so there are no discordant items "
                             "and McNemar's test never rejects; give an agreement below 1")
        check_alpha(self.alpha)
        check_choice("method", self.method, METHODS)

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
            p01, _ = discordant(self.delta, self.agreement)
            power, type_s, type_m = exact_power(self.n, p01, self.agreement, "drop", self.alpha,
                                                test=self.method, progress=as_progress(self.progress))
        return PowerResult.closed_form(self.cell(), power, type_s, type_m)


def mcnemar_power(n: Sequence[int] | int, delta: Sequence[float] | float, agreement: Sequence[float] | float,
                  method: str = "exact", alpha: float = 0.05, n_sims: int = 10_000, seed: int = 0,
                  jobs: int | None = None, progress: ProgressFn | None = None) -> pd.DataFrame:
    """McNemar power, Type-S and Type-M over n x delta x agreement (one row per cell).

    >>> mcnemar_power(500, 0.02, 0.9).power.round(3).tolist()
    [0.249]
    """
    def make(n: int, delta: float, agreement: float) -> McNemarScenario:
        return McNemarScenario(n, delta, agreement, method, alpha, None if method == "simulate" else progress)

    axes = {"n": as_list(n), "delta": as_list(delta), "agreement": as_list(agreement)}
    return power_grid(make, axes, n_sims, seed=seed, jobs=jobs, progress=progress)


def mcnemar_sample_size(delta: float, agreement: float, target_power: float = 0.8, method: str = "normal",
                        alpha: float = 0.05) -> SolveResult:
    """Smallest test-set size n reaching the target power.

    ``normal``: the answer is the unrounded n of MESS's ``power_mcnemar_test``
    rounded up (``detail["n_unrounded"]``). The exact tests' power is saw-toothed
    in n: for ``exact`` and ``midp`` the result gives the first n reaching the
    target and the n from which it stays there; for ``unconditional`` (whose
    critical value is costly per n) the n where the search crossed the target.

    >>> round(mcnemar_sample_size(0.125, 0.625, 0.9).detail["n_unrounded"], 4)
    247.9973
    """
    check_target_power(target_power, alpha)
    if delta == 0:
        raise InputError("the sample size for a zero difference is undefined")
    discordant(delta, agreement)
    check_choice("sample size method", method, [m for m in METHODS if m != "simulate"])

    def make(n: int) -> McNemarScenario:
        return McNemarScenario(n, delta, agreement, method, alpha)

    result = solve(make, "n", 1, 100_000_000, target_power, n_sims=1, sawtooth=method in ("exact", "midp"))
    if method == "normal" and result.attainable:
        n = optimize.brentq(lambda k: normal_power(k, delta, agreement, alpha) - target_power, 1e-6, 1e12)
        result = replace(result, detail={"n_unrounded": n})
    return result


def paired_difference_interval(n01: int, n10: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Interval for p01 - p10 of n paired items (n01 where only B is right, n10 only A): Agresti & Min
    (2005), the Wald interval with half a count added to each cell of the 2x2 table, so it never has
    zero width (plain Wald gives [-1, -1] on one item and [0, 0] without discordant items)."""
    z = stats.norm.isf((1 - level) / 2)
    q01, q10 = (n01 + 0.5) / (n + 2), (n10 + 0.5) / (n + 2)
    centre = q01 - q10
    se = math.sqrt((q01 + q10 - centre**2) / (n + 2))
    return max(centre - z * se, -1.0), min(centre + z * se, 1.0)


def estimate_accuracy(source: Any, model_a: str, model_b: str, item: str = "item", model: str = "model",
                      correct: str = "correct", level: float = 0.95) -> dict[str, Any]:
    """Δacc, agreement and the discordant probabilities of two models from per-item correctness.

    ``source``: long CSV/Parquet/DataFrame with columns item, model, correct (0/1).
    Both models must cover the same items. Intervals: Agresti-Min (Wald with half a count added
    to each cell) for the paired difference, Wilson for the agreement; ``p_value`` is the exact
    McNemar test.
    """
    import pandas as pd

    from ..io import read_table, resolve_column

    if model_a == model_b:
        raise InputError(f"model A and model B are both {model_a!r}; name two different models")
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
    delta_low, delta_high = paired_difference_interval(n01, n10, n, level)
    centre = (agree + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(agree * (1 - agree) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    p_value = float(stats.binomtest(n01, n01 + n10, 0.5).pvalue) if n01 + n10 else 1.0
    return {"n": n, "model_a": model_a, "model_b": model_b, "accuracy_a": float(a.mean()),
            "accuracy_b": float(b.mean()), "delta": delta, "delta_ci_low": delta_low,
            "delta_ci_high": delta_high, "agreement": agree, "agreement_ci_low": centre - half,
            "agreement_ci_high": centre + half, "b_right_a_wrong": n01, "a_right_b_wrong": n10,
            "p_value": p_value}


#: Card et al. (2020) overlap (agreement) regressions: Pa = a + b * baseline + c * delta
OVERLAP_PRIORS: dict[str, tuple[float, float, float]] = {
    "glue": (0.41422307, 0.58187475, -0.46624237),
    "squad2": (0.4339, 0.5932, -1.2849),
}


def prior_agreement(prior: str, baseline: float, delta: float) -> float:
    """Agreement implied by a historical overlap regression (Tables 5-6)."""
    a, b, c = _overlap(prior)
    return a + b * baseline + c * delta


def accuracy_mde(n: int, baseline: float, prior: str = "glue", target_power: float = 0.8, method: str = "normal",
                 alpha: float = 0.05) -> SolveResult:
    """Smallest accuracy gain ``delta`` over ``baseline`` reaching the target power, agreement from the prior.

    ``prior``: ``glue`` or ``squad2`` (overlap regressions, Tables 5-6), or
    ``lachenbruch`` (no prior: the normal-approximation midpoint, with the lower
    and upper bounds in ``detail``, see :func:`lachenbruch_mde`). Gains are
    bounded so that the new accuracy stays <= 1 and the implied table exists;
    when none reaches the target the result is not attainable and says why.

    >>> round(accuracy_mde(1725, 0.92).value, 4)
    0.0162
    """
    check_count("n", n)
    if not 0 < baseline < 1:
        raise InputError(f"baseline accuracy must be in (0, 1), got {baseline}")
    check_target_power(target_power, alpha)
    detail = {"baseline": baseline, "prior": prior}
    if prior == "lachenbruch":
        if method != "normal":
            raise InputError("the Lachenbruch bounds use the normal approximation (--method normal)")
        return _lachenbruch_result(n, baseline, target_power, alpha, detail)
    check_choice("MDE method", method, [m for m in METHODS if m != "simulate"])
    a, b, c = _overlap(prior)
    # feasible gains d: baseline + d <= 1, Pa + d <= 1 and Pa >= 0, with Pa = a + b baseline + c d
    base = a + b * baseline
    hi = 1 - baseline
    if 1 + c > 0:
        hi = min(hi, (1 - base) / (1 + c))
    if c < 0:
        hi = min(hi, base / -c)
    if hi <= 0 or base > 1:
        at = McNemarScenario(n, 0.0, min(max(base, 0.0), 1.0), method, alpha).exact()
        assert at is not None  # method is not "simulate" (checked above)
        return SolveResult("delta", target_power, None, None, None, False,
                           f"the {prior} prior implies no valid table at baseline {baseline:g}", at, at.power,
                           detail=detail)

    def make(d: float) -> McNemarScenario:
        pa = min(max(prior_agreement(prior, baseline, d), 0.0), 1.0 - d)
        return McNemarScenario(n, d, pa, method, alpha)

    return replace(solve(make, "delta", 1e-6, hi * (1 - 1e-9), target_power, integer=False, n_sims=1, grid=32,
                         why="the prior's agreement shrinks as the gain grows, so no gain reaches it"),
                   detail=detail)


def _lachenbruch_result(n: int, baseline: float, target_power: float, alpha: float,
                        detail: dict[str, Any]) -> SolveResult:
    """Lachenbruch's midpoint MDE as a solve result (its bounds in ``detail``)."""
    lach = lachenbruch_mde(n, baseline, target_power, alpha)
    detail = {**detail, "delta_low": lach["mde_low"], "delta_high": lach["mde_high"]}
    d = lach["mde"]
    if d is None:
        return SolveResult("delta", target_power, None, None, None, False, lach["reason"], None, math.nan,
                           detail=detail)
    pa = 1 - (d + _max_discordance(baseline, baseline + d)) / 2
    at = McNemarScenario(n, d, pa, "normal", alpha).exact()
    assert at is not None  # the normal method is exact
    return SolveResult("delta", target_power, d, d, d, True, "", at, at.power, detail=detail)


def _overlap(prior: str) -> tuple[float, float, float]:
    try:
        return OVERLAP_PRIORS[prior]
    except KeyError:
        raise InputError(f"unknown prior {prior!r}; choose one of {', '.join(OVERLAP_PRIORS)}, lachenbruch") from None


def _z_sum(target_power: float, alpha: float) -> float:
    check_alpha(alpha)
    check_target_power(target_power, alpha)
    return float(stats.norm.isf(alpha / 2) + stats.norm.ppf(target_power))


def _max_discordance(p1: float, p2: float) -> float:
    """Largest P(models disagree) that marginal accuracies p1, p2 allow (Lachenbruch's upper bound)."""
    return min(p1 + p2, 2 - p1 - p2)


def lachenbruch_sample_size(p1: float, p2: float, target_power: float = 0.8, alpha: float = 0.05) -> dict[str, Any]:
    """Lachenbruch (1992): n from the marginal accuracies alone, for the extreme and middle agreement.

    With d = |p2 - p1| and discordance pd, n = (z_{alpha/2} + z_beta)^2 pd / d^2.
    pd ranges from d (the models agree as much as possible: ``n_low``) to
    min(p1 + p2, 2 - p1 - p2) (as little as possible: ``n_high``); ``n_mid`` uses the midpoint.

    >>> lachenbruch_sample_size(0.8, 0.9, 0.9)["n_required"]
    [106, 211, 316]
    """
    for name, p in (("p1", p1), ("p2", p2)):
        check_number(name, p)
        if not 0 <= p <= 1:
            raise InputError(f"{name} must be in [0, 1], got {p}")
    d = abs(p2 - p1)
    if d == 0:
        raise InputError("the sample size for equal accuracies is undefined")
    z2 = _z_sum(target_power, alpha) ** 2
    pd_high = _max_discordance(p1, p2)
    ns = [z2 * pd / d**2 for pd in (d, (d + pd_high) / 2, pd_high)]
    return {"p1": p1, "p2": p2, "power": target_power, "n_low": ns[0], "n_mid": ns[1], "n_high": ns[2],
            "n_required": [math.ceil(v - 1e-9) for v in ns], "method": "lachenbruch"}


def lachenbruch_mde(n: int, baseline: float, target_power: float = 0.8, alpha: float = 0.05) -> dict[str, Any]:
    """MDE without a prior (Lachenbruch 1992): ``mde`` at the middle agreement, ``mde_low``/``mde_high`` at the extremes.

    Solves n d^2 = z^2 pd(d) for d with pd = d (closed form), the midpoint and
    the largest discordance allowed by accuracies (baseline, baseline + d) (root finding).
    """
    check_count("n", n)
    z2 = _z_sum(target_power, alpha) ** 2 / n
    low = z2  # pd = d
    top = 1 - baseline  # largest gain keeping the new accuracy <= 1

    def solve(pd: Callable[[float], float]) -> float:
        return optimize.brentq(lambda d: d * d - z2 * pd(d), 1e-15, top) if top * top >= z2 * pd(top) else math.nan

    def pd_high(d: float) -> float:
        return _max_discordance(baseline, baseline + d)

    high = solve(pd_high)
    mid = solve(lambda d: (d + pd_high(d)) / 2)
    ok = [v for v in (low, mid, high) if v == v and v <= top]
    rec: dict[str, Any] = {"mde": mid if mid == mid else None, "mde_low": low if low <= top else None,
           "mde_high": high if high == high else None, "power_at_mde": target_power if ok else None}
    if rec["mde"] is None:
        rec["reason"] = (f"no gain up to {top:g} (accuracy 1) reaches power {target_power:g} with n = {n} at the middle "
                         "agreement: increase n")
    return rec


def solve_prop_test(n: float | None = None, p1: float | None = None, p2: float | None = None,
                    power: float | None = None, alpha: float = 0.05) -> dict[str, Any]:
    """Unpaired accuracies (R ``power.prop.test``): give all but one of n, p2, power and get it.

    ``n`` is per group (test-set size for each model); ``p2`` is solved above ``p1``.

    >>> round(solve_prop_test(n=50, p1=0.5, p2=0.75)["power"], 7)
    0.7401659
    """
    missing = [k for k, v in (("n", n), ("p2", p2), ("power", power)) if v is None]
    if p1 is None or len(missing) != 1:
        raise InputError("give p1 and exactly two of n, p2, power")
    if power is not None:
        check_target_power(power, alpha)
    if n is not None and not n > 0:
        raise InputError(f"n must be positive, got {n}")
    first = p1
    if missing == ["power"]:
        assert n is not None and p2 is not None
        power = prop_test_power(n, p1, p2, alpha)
    elif missing == ["n"]:
        assert p2 is not None and power is not None
        if p1 == p2:
            raise InputError("the sample size for equal accuracies is undefined")
        prop_test_power(1.0, p1, p2, alpha)
        second, target = p2, power
        n = optimize.brentq(lambda k: prop_test_power(k, first, second, alpha) - target, 1e-6, 1e12)
    else:
        assert n is not None and power is not None
        hi = 1 - 1e-12
        if prop_test_power(n, p1, hi, alpha) < power:
            raise NotAttainableError(f"no p2 up to 1 reaches power {power:g} with n = {n:g}")
        size, target = n, power
        p2 = optimize.brentq(lambda q: prop_test_power(size, first, q, alpha) - target, p1 + 1e-12, hi, xtol=1e-12)
    return {"n": n, "p1": p1, "p2": p2, "delta": p2 - p1, "power": power, "method": "prop_test"}


#: Card et al. Tables 7-8: expected next SOTA gain from the baseline accuracy.
#: GLUE (Table 7, in points): 24.342 - 0.264 baseline + task effect (MNLI-m is the reference);
#: SQuAD 2.0 (Table 8, proportions): 0.1331 - 0.1408 baseline.
GAIN_PRIORS: dict[str, dict[str, Any]] = {
    "glue": {"scale": 100.0, "const": 24.342, "slope": -0.264,
             "task": {"MNLI-m": 0.0, "MNLI-mm": 0.150, "MRPC": 0.023, "QNLI": 2.139, "QQP": -0.195,
                      "RTE": 1.018, "SST-2": 1.536, "WNLI": -0.520}},
    "squad2": {"scale": 1.0, "const": 0.1331, "slope": -0.1408, "task": {"SQuAD 2.0": 0.0}},
}


def expected_gain(prior: str, baseline: float, task: str | None = None) -> float:
    """Predicted accuracy gain of the next SOTA (Tables 7-8), as a proportion.

    The GLUE regression needs the task; coefficients are the papers' rounded ones.
    """
    try:
        g = GAIN_PRIORS[prior]
    except KeyError:
        raise InputError(f"no effect-size prior for {prior!r}; choose one of {', '.join(GAIN_PRIORS)}") from None
    if task is None:
        task = next(iter(g["task"])) if len(g["task"]) == 1 else None
    if task not in g["task"]:
        raise InputError(f"the {prior} effect-size prior needs a task: {', '.join(g['task'])}")
    scale = g["scale"]
    return (g["const"] + g["slope"] * baseline * scale + g["task"][task]) / scale


#: Card et al. Table 2 / Table 9: test size and SOTA accuracy per task, with the prior family
BENCHMARK_TASKS: dict[str, tuple[int, float, str]] = {
    "WNLI": (147, 0.945, "glue"), "MRPC": (1725, 0.920, "glue"), "SST-2": (1821, 0.972, "glue"),
    "RTE": (3000, 0.917, "glue"), "QNLI": (5463, 0.975, "glue"), "MNLI-m": (9796, 0.916, "glue"),
    "MNLI-mm": (9847, 0.913, "glue"), "QQP": (390965, 0.910, "glue"), "SQuAD 2.0": (8862, 0.90724, "squad2"),
}


def mde_table(prior: str = "glue", methods: Sequence[str] = ("normal",), target_power: float = 0.8,
              alpha: float = 0.05) -> list[dict[str, Any]]:
    """Table 2 / Table 9 of Card et al.: per task, the MDE under the overlap prior for each method,
    the unpaired (``power.prop.test``) MDE, Lachenbruch's midpoint and bounds, and the expected gain."""
    tasks = {t: v for t, v in BENCHMARK_TASKS.items() if v[2] == prior}
    if not tasks:
        raise InputError(f"no tasks for prior {prior!r}; choose one of {', '.join(sorted(GAIN_PRIORS))}")
    rows = []
    for task, (n, sota, _) in tasks.items():
        lach = lachenbruch_mde(n, sota, target_power, alpha)
        try:
            unpaired = solve_prop_test(n=n, p1=sota, power=target_power, alpha=alpha)["delta"]
        except NotAttainableError:
            unpaired = None
        extra = {"mde_unpaired": unpaired, "mde_lachenbruch": lach["mde"], "mde_lachenbruch_low": lach["mde_low"],
                 "mde_lachenbruch_high": lach["mde_high"], "expected_gain": expected_gain(prior, sota, task)}
        for method in methods:
            r = accuracy_mde(n, sota, prior, target_power, method, alpha)
            rows.append({"task": task, "n": n, "sota": sota, "method": method, "mde": r.value,
                         "power_at_mde": r.at.power if r.attainable and r.at else None, "reason": r.reason,
                         **extra})
    return rows


__all__: list[str] = [
    "BENCHMARK_TASKS",
    "GAIN_PRIORS",
    "OVERLAP_PRIORS",
    "McNemarScenario",
    "accuracy_mde",
    "discordant",
    "estimate_accuracy",
    "expected_gain",
    "from_table",
    "lachenbruch_mde",
    "lachenbruch_sample_size",
    "mcnemar_power",
    "mcnemar_sample_size",
    "mde_table",
    "normal_power",
    "prior_agreement",
    "prop_test_power",
    "solve_prop_test",
]
