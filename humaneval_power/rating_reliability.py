"""Reliability of ratings from variance components: ICCs, the reliability of a mean of k ratings, and the number
of ratings per item a target reliability needs (Spearman-Brown).

A rating of target t (the thing rated: an item's output of a system) by rater w is
``y = mu + t + w + e`` with variances ``target_sd^2``, ``rater_sd^2`` and ``residual_sd^2``. Then

- ``icc1`` (one rating, absolute agreement) = target^2 / (target^2 + rater^2 + residual^2);
- ``icck`` (the mean of k ratings by k raters) = target^2 / (target^2 + (rater^2 + residual^2) / k);
- the *consistency* versions leave ``rater_sd`` out (raters' offsets do not count as error).

From a fitted crossed model ``(1 | item) + (1 | worker)`` these are psych's ICC2 and ICC2k (absolute agreement,
random raters); from the one-way model ``(1 | item)`` (the rater's offset is part of the residual, pass
``rater_sd=0``) they are psych's ICC1 and ICC1k; consistency from the crossed model is ICC3 and ICC3k. On a
complete targets x raters table the REML components equal the ANOVA ones (:func:`anova_components`) unless a
component is at zero, so the values equal psych's ANOVA formulas (docs/agreement.md).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import InputError

KINDS = ("agreement", "consistency")


@dataclass(frozen=True)
class Reliability:
    """ICC of one rating and reliability of the mean of ``k`` ratings (agreement and consistency)."""

    k: int
    icc1: float  #: one rating, absolute agreement
    icck: float  #: mean of k ratings, absolute agreement
    icc1_consistency: float
    icck_consistency: float

    def __str__(self) -> str:
        return (f"ICC of one rating {self.icc1:.3f} (consistency {self.icc1_consistency:.3f}); "
                f"reliability of the mean of {self.k} ratings {self.icck:.3f} "
                f"(consistency {self.icck_consistency:.3f})")


def _variances(target_sd: float, rater_sd: float, residual_sd: float) -> tuple[float, float, float]:
    sds = (target_sd, rater_sd, residual_sd)
    if not all(math.isfinite(s) and s >= 0 for s in sds):
        raise InputError(f"variance component SDs must be finite and >= 0; got {sds}")
    if target_sd == 0 and rater_sd == 0 and residual_sd == 0:
        raise InputError("all variance components are zero: reliability is undefined")
    return target_sd**2, rater_sd**2, residual_sd**2


def _share(t: float, error: float, k: float) -> float:
    return t / (t + error / k) if t + error > 0 else math.nan


def reliability(target_sd: float, rater_sd: float, residual_sd: float, k: int = 1) -> Reliability:
    """ICCs and the reliability of the mean of ``k`` ratings per target from the components' SDs."""
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
        raise InputError(f"k (ratings per item) must be a whole number >= 1; got {k!r}")
    t, r, e = _variances(target_sd, rater_sd, residual_sd)
    return Reliability(int(k), _share(t, r + e, 1), _share(t, r + e, k), _share(t, e, 1), _share(t, e, k))


def ratings_needed(target_sd: float, rater_sd: float, residual_sd: float, target: float,
                   kind: str = "agreement") -> int:
    """The fewest ratings per item whose mean reaches reliability ``target`` (Spearman-Brown on the components):
    the smallest k with target^2 / (target^2 + error / k) >= ``target``, i.e. k >= R / (1 - R) * error / target^2.
    """
    if kind not in KINDS:
        raise InputError(f"unknown reliability kind {kind!r}; choose one of {', '.join(KINDS)}")
    if not (isinstance(target, (int, float)) and 0 < target < 1):
        raise InputError(f"the target reliability must be between 0 and 1 (exclusive); got {target!r}")
    t, r, e = _variances(target_sd, rater_sd, residual_sd)
    error = r + e if kind == "agreement" else e
    if error == 0:
        return 1
    if t == 0:
        raise InputError("the target (item) variance is zero: no number of ratings reaches a positive reliability")
    exact = target / (1 - target) * error / t
    k = max(1, math.ceil(exact - 1e-9 * exact))  # a k equal to the bound up to rounding reaches the target
    return k


@dataclass(frozen=True)
class AnovaComponents:
    """Method-of-moments components of a complete targets x raters table (SDs; negative estimates -> 0).

    ``one_way``: target and within-target SDs of ``y = mu + t + e'``; ``two_way``: target, rater and residual
    SDs of ``y = mu + t + w + e``. ``mean_squares``: MSB (targets), MSJ (raters), MSE, MSW (within targets).
    """

    one_way: tuple[float, float]
    two_way: tuple[float, float, float]
    mean_squares: dict[str, float]
    targets: int
    raters: int


def anova_components(scores: np.ndarray) -> AnovaComponents:
    """Variance components of a complete targets x raters table from its ANOVA mean squares (equal to REML's
    when no component is at zero)."""
    y = np.asarray(scores, dtype=float)
    if y.ndim != 2 or y.shape[0] < 2 or y.shape[1] < 2:
        raise InputError(f"need a targets x raters table with at least 2 of each; got shape {y.shape}")
    if not np.isfinite(y).all():
        raise InputError("the targets x raters table must be complete (no missing ratings)")
    n, k = y.shape
    grand = y.mean()
    ssb = k * ((y.mean(axis=1) - grand) ** 2).sum()
    ssj = n * ((y.mean(axis=0) - grand) ** 2).sum()
    sse = ((y - grand) ** 2).sum() - ssb - ssj
    ms = {"MSB": ssb / (n - 1), "MSJ": ssj / (k - 1), "MSE": sse / ((n - 1) * (k - 1)),
          "MSW": (ssj + sse) / (n * (k - 1))}

    def sd(v: float) -> float:
        return math.sqrt(max(v, 0.0))

    one_way = (sd((ms["MSB"] - ms["MSW"]) / k), sd(ms["MSW"]))
    two_way = (sd((ms["MSB"] - ms["MSE"]) / k), sd((ms["MSJ"] - ms["MSE"]) / n), sd(ms["MSE"]))
    return AnovaComponents(one_way, two_way, ms, n, k)
