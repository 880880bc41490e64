"""Randomization-test power for F1 (Card et al. 2020, App. F), from per-class contingency assumptions.

Binary labels: a test item is positive with probability ``p_positive``. For each true class,
``table_*`` gives the joint probabilities of the two models' predictions in the order (both
negative, only M1 positive, only M2 positive, both positive): the cells of the paper's Table 11.
The effect is the population F1 (of the positive class) of M2 minus M1.

Each simulated test set is scored with the paired approximate randomization test of App. F:
every trial swaps each item's two predictions with probability 1/2, ``permutations`` trials,
p = (c + 1) / (permutations + 1) where c counts trials at least as extreme. Only the discordant
items move under a swap, and F1 depends on the predictions only through TP, FP and FN, so a
trial's statistic depends on two counts: how many of the positive discordant items (X) and of
the negative discordant items (Y) end up predicted positive by M2, Binomial(a + b, 1/2) and
Binomial(c + d, 1/2). :func:`permutation_tail` sums that product distribution (the exact
permutation p-value, the limit of infinitely many trials); c is then Binomial(permutations, q),
drawn once per study: the same distribution as running the trials, at no cost per trial.
"""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from ..engine import PowerResult, StudyOutcomes
from ..errors import InputError
from ..planning import SolveResult, as_list, power_grid, solve
from ..progress import ProgressFn
from ..validation import check_alpha, check_count, check_number, check_target_power

Table = tuple[float, float, float, float]
#: the 8 (label, M1, M2) categories, in table order within each class: positive class first
M1 = np.array([0, 1, 0, 1] * 2)
M2 = np.array([0, 0, 1, 1] * 2)
LABEL = np.array([1] * 4 + [0] * 4)
#: binomial mass left out of :func:`permutation_tail`'s sums (both tails of each count)
TAIL = 1e-15
#: the largest test set planned: a study's exact permutation tail costs about sqrt(n) (0.03 s at 10^8 items,
#: 4 s at 10^12), and each distinct count of discordant items caches its binomial support
MAX_N = 10**8


def check_n(name: str, n: Any) -> int:
    """A test-set size in 1..:data:`MAX_N` (an InputError beyond: the work would be unbounded)."""
    if check_count(name, n) > MAX_N:
        raise InputError(f"{name} {int(n):,} is more items than f1 plans for (at most {MAX_N:,}: a simulated "
                         "study's permutation tail grows with the square root of n)")
    return int(n)


def f1_from_sums(sums: np.ndarray) -> np.ndarray:
    """F1 from summed [TP, FP, FN] (0 when there is nothing to score)."""
    s = np.asarray(sums, dtype=float)
    tp, fp, fn = s[..., 0], s[..., 1], s[..., 2]
    denom = 2 * tp + fp + fn
    return np.where(denom > 0, 2 * tp / np.where(denom > 0, denom, 1), 0.0)


def check_table(name: str, table: Sequence[float]) -> Table:
    """Four non-negative probabilities summing to 1 (to 1e-6), returned normalised."""
    try:
        t = np.asarray(table, dtype=float)
    except (TypeError, ValueError):
        raise InputError(f"{name} needs four probabilities, got {table!r}") from None
    if t.shape != (4,) or not np.isfinite(t).all() or (t < 0).any() or abs(t.sum() - 1) > 1e-6:
        raise InputError(f"{name} needs four non-negative probabilities summing to 1 (both negative, only M1 "
                         f"positive, only M2 positive, both positive), got {t.ravel().tolist()}")
    t = t / t.sum()
    return float(t[0]), float(t[1]), float(t[2]), float(t[3])


def check_prevalence(p_positive: float) -> float:
    """A share of positive items in (0, 1)."""
    if not 0 < check_number("p_positive", p_positive) < 1:
        raise InputError(f"p_positive must be in (0, 1), got {p_positive}")
    return float(p_positive)


def category_probabilities(p_positive: float, table_positive: Table, table_negative: Table) -> np.ndarray:
    """Probabilities of the 8 (label, M1, M2) categories."""
    return np.concatenate([p_positive * np.asarray(table_positive), (1 - p_positive) * np.asarray(table_negative)])


def model_sums(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(M1's, M2's) summed [TP, FP, FN] of category counts or probabilities (last axis: the 8 categories)."""
    def sums(pred: np.ndarray) -> np.ndarray:
        stats = np.column_stack([pred * LABEL, pred * (1 - LABEL), (1 - pred) * LABEL]).astype(float)
        return np.asarray(weights, dtype=float) @ stats

    return sums(M1), sums(M2)


def f1_difference(p_positive: float, table_positive: Table, table_negative: Table) -> float:
    """Population F1 of M2 minus M1."""
    s1, s2 = model_sums(category_probabilities(p_positive, table_positive, table_negative))
    return float(f1_from_sums(s2) - f1_from_sums(s1))


@lru_cache(maxsize=4096)
def _support(m: int) -> tuple[np.ndarray, np.ndarray]:
    """Values and probabilities of Binomial(m, 1/2) within m/2 +- sqrt(m log(2 / TAIL) / 2): Hoeffding's
    bound puts less than TAIL of the mass outside."""
    from scipy import stats

    half = math.sqrt(m * math.log(2 / TAIL) / 2)
    k = np.arange(max(0, math.floor(m / 2 - half)), min(m, math.ceil(m / 2 + half)) + 1)
    return k, stats.binom.pmf(k, m, 0.5)


def permutation_tail(counts: Sequence[int]) -> tuple[float, float]:
    """(observed F1 of M2 - M1, P(|difference| >= |observed|) over the item swaps) of one test set.

    ``counts``: items of each of the 8 (label, M1, M2) categories. The tail counts ties as in
    :func:`~humaneval_power.significance.paired.randomization_test` (a relative 1e-9). The difference
    falls as M2 gets more of the negative discordant items (more false positives for M2, fewer for
    M1), so for each x the extreme y form a prefix (difference >= t) and a suffix (<= -t), found by
    bisection: the cost grows with the square root of n, not with n.
    """
    c = np.asarray(counts, dtype=np.int64)
    positives, tp_both, fp_both = int(c[:4].sum()), int(c[3]), int(c[7])
    m_pos, m_neg = int(c[1] + c[2]), int(c[5] + c[6])

    def f1(tp: np.ndarray, fp: np.ndarray) -> np.ndarray:
        """F1 = 2 TP / (2 TP + FP + FN), with FN = positives - TP (0 without a true positive)."""
        return np.where(tp > 0, 2 * tp / np.maximum(tp + positives + fp, 1), 0.0)

    def diff(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """F1 of M2 - M1 when M2 predicts x positive-class and y negative-class discordant items positive."""
        return f1(tp_both + x, fp_both + y) - f1(tp_both + m_pos - x, fp_both + m_neg - y)

    observed = float(diff(np.array(c[2]), np.array(c[6])))
    threshold = abs(observed) - 1e-9 * max(1.0, abs(observed))
    if threshold <= 0:
        return observed, 1.0
    (x, px), (y, py) = _support(m_pos), _support(m_neg)
    below = np.concatenate([[0.0], np.cumsum(py)])  # below[k]: mass of the first k values of y

    def first(holds: Any) -> np.ndarray:
        """Per x, the first index of y where ``holds(x, y)`` fails (it holds on a prefix of y)."""
        lo, hi = np.zeros(len(x), dtype=np.int64), np.full(len(x), len(y), dtype=np.int64)
        while (open_ := lo < hi).any():
            mid = (lo + hi) // 2
            ok = holds(x, y[np.minimum(mid, len(y) - 1)])
            lo, hi = np.where(open_ & ok, mid + 1, lo), np.where(open_ & ~ok, mid, hi)
        return lo

    high = below[first(lambda a, b: diff(a, b) >= threshold)]
    low = below[-1] - below[first(lambda a, b: diff(a, b) > -threshold)]
    return observed, float(min(px @ (high + low), 1.0))


@dataclass(frozen=True)
class F1Scenario:
    """n items; per-class joint prediction tables (both negative, only M1, only M2, both positive)."""

    n: int
    p_positive: float
    table_positive: Table
    table_negative: Table
    permutations: int = 10_000
    alpha: float = 0.05

    def __post_init__(self) -> None:
        check_n("n", self.n)
        check_prevalence(self.p_positive)
        check_table("table_positive", self.table_positive)
        check_table("table_negative", self.table_negative)
        check_count("permutations", self.permutations)
        check_alpha(self.alpha)

    def _probabilities(self) -> np.ndarray:
        return category_probabilities(self.p_positive, check_table("table_positive", self.table_positive),
                                      check_table("table_negative", self.table_negative))

    @property
    def effect(self) -> float:
        s1, s2 = model_sums(self._probabilities())
        return float(f1_from_sums(s2) - f1_from_sums(s1))

    chunk_size = 500

    def cell(self) -> dict[str, Any]:
        return {"n": self.n, "p_positive": self.p_positive, "table_positive": list(self.table_positive),
                "table_negative": list(self.table_negative), "effect": self.effect, "method": "randomization",
                "permutations": self.permutations, "test": "randomization", "alpha": self.alpha}

    def stream_key(self) -> str:
        # not the tables: cells differing only in them share their test sets (common random numbers)
        return json.dumps(["f1", self.n, self.p_positive, self.permutations])

    def simulate(self, n: int, rng: np.random.Generator) -> StudyOutcomes:
        counts = rng.multinomial(self.n, self._probabilities(), size=n)
        est, tail = np.array([permutation_tail(c) for c in counts]).reshape(n, 2).T
        extreme = rng.binomial(self.permutations, tail)
        sig = (extreme + 1) / (self.permutations + 1) <= self.alpha
        zeros = np.zeros(n, dtype=bool)
        return StudyOutcomes(est, sig, zeros, zeros)

    def exact(self) -> PowerResult | None:
        return None


def f1_power(n: Sequence[int] | int, p_positive: Sequence[float] | float, table_positive: Sequence[float],
             table_negative: Sequence[float], permutations: int = 10_000, alpha: float = 0.05, n_sims: int = 1000,
             seed: int = 0, jobs: int | None = None, progress: ProgressFn | None = None,
             store: str | None = None) -> pd.DataFrame:
    """Power, Type-S and Type-M of the randomization test of F1 over n x p_positive (one row per cell).

    >>> f1_power(500, 0.3, (0.1, 0.05, 0.15, 0.7), (0.9, 0.05, 0.03, 0.02), n_sims=200).power.round(2).tolist()
    [0.84]
    """
    pos, neg = check_table("table_positive", table_positive), check_table("table_negative", table_negative)
    for size in as_list(n):
        check_n("n", size)

    def make(n: int, p_positive: float) -> F1Scenario:
        return F1Scenario(n, p_positive, pos, neg, permutations, alpha)

    axes = {"n": as_list(n), "p_positive": as_list(p_positive)}
    return power_grid(make, axes, n_sims, seed=seed, jobs=jobs, progress=progress, store=store)


def f1_size(p_positive: float, table_positive: Sequence[float], table_negative: Sequence[float],
            target_power: float = 0.8, permutations: int = 10_000, alpha: float = 0.05, n_sims: int = 2000,
            seed: int = 0, jobs: int | None = None, max_n: int = 10_000_000,
            progress: ProgressFn | None = None) -> SolveResult:
    """Smallest test-set size whose simulated power for the tables' F1 difference reaches the target."""
    pos, neg = check_table("table_positive", table_positive), check_table("table_negative", table_negative)
    check_target_power(target_power, alpha)
    check_n("max_n", max_n)
    if f1_difference(check_prevalence(p_positive), pos, neg) == 0:
        raise InputError("the tables give both models the same F1: the sample size for a zero difference is "
                         "undefined")

    def make(n: int) -> F1Scenario:
        return F1Scenario(n, p_positive, pos, neg, permutations, alpha)

    return solve(make, "n", 10, max_n, target_power, n_sims=n_sims, seed=seed, jobs=jobs, progress=progress)


def scaled_tables(table_positive: Table, table_negative: Table, scale: float) -> tuple[Table, Table]:
    """The tables with each class's discordant cells (only M1, only M2) moved apart ``scale`` times as far
    as given from their mean; the concordant cells (each class's agreement) are kept. Scale 0: the two
    models are exchangeable (no difference); 1: the tables given."""
    def one(t: Table) -> Table:
        mid, half = (t[1] + t[2]) / 2, (t[2] - t[1]) / 2
        return t[0], max(mid - scale * half, 0.0), max(mid + scale * half, 0.0), t[3]

    return one(table_positive), one(table_negative)


def f1_mde(n: int, p_positive: float, table_positive: Sequence[float], table_negative: Sequence[float],
           target_power: float = 0.8, permutations: int = 10_000, alpha: float = 0.05, n_sims: int = 2000,
           seed: int = 0, jobs: int | None = None, progress: ProgressFn | None = None) -> SolveResult:
    """Smallest F1 difference (M2 - M1) whose simulated power reaches the target, in the direction of the tables.

    The difference varies as in :func:`scaled_tables`: each class keeps its agreement and the given
    tables' direction (M2 better), while the imbalance of its discordant cells grows from none to the
    largest the tables allow; the record's ``scale`` is the answer as a multiple of the given imbalance.
    The same simulated test sets serve every difference (common random numbers).
    """
    check_n("n", n)
    check_prevalence(p_positive)
    check_target_power(target_power, alpha)
    pos, neg = check_table("table_positive", table_positive), check_table("table_negative", table_negative)
    halves = [abs(t[2] - t[1]) / 2 for t in (pos, neg)]
    if not any(halves):
        raise InputError("the tables give the models the same discordant cells (only M1 = only M2 in each class): "
                         "they have no direction in which to grow a difference")
    top = min((t[1] + t[2]) / 2 / h for t, h in zip((pos, neg), halves) if h)

    def effect(scale: float) -> float:
        return f1_difference(p_positive, *scaled_tables(pos, neg, scale))

    scales = np.linspace(0, top, 257)
    effects = np.array([effect(s) for s in scales])
    if effects[-1] <= 0:
        raise InputError("in the tables' direction M1 has the higher F1; give M2 the better model (swap the "
                         "only-M1 and only-M2 cells)")
    if (np.diff(effects) <= 0).any():
        raise InputError("the F1 difference does not grow steadily in the tables' direction (the two classes' "
                         "changes pull F1 opposite ways); use f1_power over a grid of tables instead")

    def scale_of(delta: float) -> float:
        from scipy import optimize

        return float(optimize.brentq(lambda s: effect(s) - delta, 0.0, top, xtol=1e-14))

    def make(delta: float) -> F1Scenario:
        return F1Scenario(n, p_positive, *scaled_tables(pos, neg, scale_of(delta)), permutations, alpha)

    result = solve(make, "delta", 1e-6 * effects[-1], float(effects[-1]), target_power, integer=False, n_sims=n_sims,
                   seed=seed, jobs=jobs, progress=progress)
    if result.value is None:
        return replace(result, reason=f"no F1 difference up to the largest the tables' agreement allows "
                                      f"({effects[-1]:.4g}) reaches power {target_power:g} with n = {n:,} (the "
                                      f"highest power is {result.highest_power:.3f}); give a larger n")
    return replace(result, detail={**result.detail, "scale": scale_of(result.value)})


__all__ = ["MAX_N", "F1Scenario", "category_probabilities", "check_n", "check_table", "f1_difference", "f1_from_sums", "f1_mde",
           "f1_power", "f1_size", "model_sums", "permutation_tail", "scaled_tables"]
