"""Randomization-test power for F1 (Card et al. App. F), from per-class contingency assumptions.

Binary labels: a test item is positive with probability ``p_positive``. For
each true class, ``table_*`` gives the joint probabilities of the two models'
predictions (M1 negative & M2 negative, M1 pos. only, M2 pos. only, both
positive), as in the paper's Table 11. Each simulated test set of n items is
scored with F1 of the positive class from per-item sufficient statistics
(TP, FP, FN); the paired randomization test swaps each item's two predictions
with probability 1/2. The effect is the population F1 difference M2 - M1.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..engine import PowerResult, StudyOutcomes
from ..errors import InputError
from ..significance.paired import randomization_test
from ..validation import check_alpha, check_count, check_number


def f1_from_sums(sums: np.ndarray) -> np.ndarray:
    """F1 from summed [TP, FP, FN] (0 when there is nothing to score)."""
    s = np.asarray(sums, dtype=float)
    tp, fp, fn = s[..., 0], s[..., 1], s[..., 2]
    denom = 2 * tp + fp + fn
    return np.where(denom > 0, 2 * tp / np.where(denom > 0, denom, 1), 0.0)


def _check_table(name: str, table: tuple[float, float, float, float]) -> np.ndarray:
    t = np.asarray(table, dtype=float)
    if t.shape != (4,) or not np.isfinite(t).all() or (t < 0).any() or abs(t.sum() - 1) > 1e-6:
        raise InputError(f"{name} needs four non-negative probabilities summing to 1, got {table}")
    return t / t.sum()


@dataclass(frozen=True)
class F1Scenario:
    """n items; per-class joint prediction tables (neg/neg, M1 only, M2 only, both positive)."""

    n: int
    p_positive: float
    table_positive: tuple[float, float, float, float]
    table_negative: tuple[float, float, float, float]
    permutations: int = 1000
    alpha: float = 0.05

    def __post_init__(self) -> None:
        check_count("n", self.n)
        check_number("p_positive", self.p_positive)
        if not 0 < self.p_positive < 1:
            raise InputError(f"p_positive must be in (0, 1), got {self.p_positive}")
        _check_table("table_positive", self.table_positive)
        _check_table("table_negative", self.table_negative)
        check_count("permutations", self.permutations)
        check_alpha(self.alpha)

    def _categories(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Probabilities of the 8 (label, M1, M2) combinations and their per-model (TP, FP, FN)."""
        pos, neg = _check_table("", self.table_positive), _check_table("", self.table_negative)
        probs = np.concatenate([self.p_positive * pos, (1 - self.p_positive) * neg])
        m1 = np.array([0, 1, 0, 1] * 2)  # predictions of M1 in table order
        m2 = np.array([0, 0, 1, 1] * 2)
        label = np.array([1] * 4 + [0] * 4)

        def stats(pred: np.ndarray) -> np.ndarray:
            return np.column_stack([pred * label, pred * (1 - label), (1 - pred) * label]).astype(float)

        return probs, stats(m1), stats(m2)

    @property
    def effect(self) -> float:
        probs, s1, s2 = self._categories()
        return float(f1_from_sums(probs @ s2) - f1_from_sums(probs @ s1))

    chunk_size = 100

    def cell(self) -> dict[str, Any]:
        return {"n": self.n, "p_positive": self.p_positive, "table_positive": list(self.table_positive),
                "table_negative": list(self.table_negative), "effect": self.effect, "method": "randomization",
                "permutations": self.permutations, "test": "randomization", "alpha": self.alpha}

    def stream_key(self) -> str:
        return json.dumps(["f1", self.cell()])

    def simulate(self, n: int, rng: np.random.Generator) -> StudyOutcomes:
        probs, s1, s2 = self._categories()
        est, sig = np.empty(n), np.empty(n, dtype=bool)
        for k in range(n):
            cat = rng.choice(8, size=self.n, p=probs)
            est[k], p = randomization_test(s1[cat], s2[cat], f1_from_sums, self.permutations, rng)
            sig[k] = p <= self.alpha
        zeros = np.zeros(n, dtype=bool)
        return StudyOutcomes(est, sig, zeros, zeros)

    def exact(self) -> PowerResult | None:
        return None


__all__ = ["F1Scenario", "f1_from_sums"]
