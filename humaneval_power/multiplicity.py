"""Multiplicity: adjusted p-values and critical values for a family of contrasts.

One home for every adjustment the toolkit offers (the planner's per-study analysis, ``analyze``,
the head-to-head analysis, ``bleu test``): Holm's step-down and Bonferroni (family-wise error),
Benjamini-Hochberg (``fdr``, false discovery rate) and ``none``, which need only the p-values, and
Tukey's studentized range and the single-step multivariate t (``dunnett``, emmeans' ``mvt``), which
need the contrasts' joint distribution. The contrast families and their default adjustments are in
:mod:`humaneval_power.contrasts`.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .validation import check_choice

#: every adjustment, in the order the CLI lists them
ADJUSTMENTS = ("holm", "tukey", "dunnett", "bonferroni", "fdr", "none")
#: the adjustments computed from the p-values alone (:func:`adjust_pvalues`): any family of tests
SEPARATE = ("holm", "bonferroni", "fdr", "none")
#: the adjustments the planner applies to each simulated study's family of tests
PER_STUDY = ("holm", "bonferroni", "none")
#: the adjustments that need the contrasts' joint t distribution (:func:`adjusted`): one model's contrasts
SIMULTANEOUS = ("tukey", "dunnett")


def adjust_pvalues(p: np.ndarray, method: str) -> np.ndarray:
    """Adjusted p-values along the last axis: Holm's step-down, Bonferroni (family-wise error) or
    ``fdr`` (Benjamini-Hochberg's step-up, false discovery rate).

    >>> adjust_pvalues(np.array([0.01, 0.04, 0.03]), "holm").round(2).tolist()
    [0.03, 0.06, 0.06]
    >>> adjust_pvalues(np.array([0.01, 0.04, 0.03]), "fdr").round(2).tolist()
    [0.03, 0.04, 0.04]
    """
    check_choice("adjustment", method, SEPARATE)
    p = np.asarray(p, float)
    m = p.shape[-1]
    if method == "none" or m == 1:
        return p
    if method == "bonferroni":
        bonferroni: np.ndarray = np.minimum(p * m, 1.0)
        return bonferroni
    order = np.argsort(p, axis=-1)
    ranked = np.take_along_axis(p, order, axis=-1)
    if method == "holm":
        ranked = np.minimum(np.maximum.accumulate(ranked * (m - np.arange(m)), axis=-1), 1.0)
    else:  # Benjamini-Hochberg: p_(i) m / i, the running minimum from the largest down
        ranked = ranked * m / np.arange(1, m + 1)
        ranked = np.minimum(np.flip(np.minimum.accumulate(np.flip(ranked, -1), axis=-1), -1), 1.0)
    out = np.empty_like(p)
    np.put_along_axis(out, order, ranked, axis=-1)
    return out



def emmeans_df(df: np.ndarray) -> np.ndarray:
    """The integer df emmeans hands to mvtnorm (``.fix.df``): at least 1, rounded at .75; 0 (normal) above 9999."""
    df = np.maximum(np.asarray(df, float), 1.0)
    return np.where(np.isfinite(df) & (df <= 9999), np.floor(df + 0.25), 0.0)


#: Monte Carlo draws of the largest |t| of a family (dunnett): its p-values have a Monte Carlo SE of at most
#: 0.0005 (0.0002 near p = 0.05); mvtnorm's default in emmeans is an absolute error of 0.001
MVT_DRAWS = 1_000_000


def max_abs_t(corr: np.ndarray, dfs: Sequence[float] | np.ndarray, seed: int, draws: int = MVT_DRAWS) -> dict[float, np.ndarray]:
    """Draws of max_j |T_j|, T multivariate t with correlation ``corr``, for each df in ``dfs`` (0: normal).

    The correlation may be singular (all pairs of k means have rank k - 1): T = B z / sqrt(w / df),
    ``corr = B B'`` over its positive eigenvalues, z standard normal, w chi-square. The normal part is
    shared by every df; everything is reproducible from ``seed``.
    """
    values, vectors = np.linalg.eigh(corr)
    keep = values > 1e-10 * values.max()
    b = vectors[:, keep] * np.sqrt(values[keep])
    rng = np.random.default_rng([seed, 0])
    top = np.empty(draws)
    step = max(1, (1 << 22) // max(b.shape[0], 1))
    for i in range(0, draws, step):
        z = rng.standard_normal((min(step, draws - i), b.shape[1]))
        top[i:i + step] = np.abs(z @ b.T).max(axis=1)
    out = {}
    for df in dict.fromkeys(dfs):
        w = np.random.default_rng([seed, 1, int(df)]).chisquare(df, draws) / df if df else 1.0
        out[df] = top / np.sqrt(w)
    return out


def adjusted(t: np.ndarray, df: np.ndarray, p: np.ndarray, corr: np.ndarray, adjust: str, n_means: int,
             level: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Adjusted p-values and critical values (half-width / SE) of a family of contrasts, as emmeans computes them."""
    from scipy import stats

    n = len(t)
    if adjust == "none" or n == 1:
        return p, stats.t.ppf(1 - (1 - level) / 2, df)
    if adjust in ("holm", "bonferroni", "fdr"):
        return adjust_pvalues(p, adjust), stats.t.ppf(1 - (1 - level) / n / 2, df)
    if adjust == "tukey":
        return (stats.studentized_range.sf(math.sqrt(2) * np.abs(t), n_means, df),
                stats.studentized_range.ppf(level, n_means, df) / math.sqrt(2))
    fixed = emmeans_df(df)
    dist = max_abs_t(corr, fixed, seed)
    p_adj = np.array([np.mean(dist[d] >= abs(tj)) for tj, d in zip(t, fixed)])
    return p_adj, np.array([np.quantile(dist[d], level) for d in fixed])


__all__ = ["ADJUSTMENTS", "MVT_DRAWS", "PER_STUDY", "SEPARATE", "SIMULTANEOUS", "adjust_pvalues", "adjusted", "emmeans_df", "max_abs_t"]
