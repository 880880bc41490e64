"""Swap effects of real system outputs and the P0 / b0 fit of Card et al. App. G.

For two systems scored on the same n sentences (per-sentence sufficient
statistics A and B, corpus difference D = score(sum B) - score(sum A)), the
swap effect of sentence i is the change of D when its two outputs are
exchanged: delta_i = [score(B - b_i + a_i) - score(A - a_i + b_i)] - D.
All n effects come from 2n vectorised scores of summed statistics: O(n).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError
from ..metrics import ItemStats, check_paired


def swap_effects(a: ItemStats, b: ItemStats) -> np.ndarray:
    """Per-sentence swap effects delta_i on score(B) - score(A)."""
    check_paired(a, b)
    sa, sb = a.stats.sum(axis=0), b.stats.sum(axis=0)
    diff = a.score_sums(sb) - a.score_sums(sa)
    moved = b.stats - a.stats
    return (a.score_sums(sb[None, :] - moved) - a.score_sums(sa[None, :] + moved)) - diff


def subset_swap_check(a: ItemStats, b: ItemStats, effects: np.ndarray, subsets: int = 200, fraction: float = 0.5,
                      seed: int = 0) -> dict[str, float]:
    """Additivity (App. G, Fig. 15): sum of single-swap effects vs swapping whole random subsets at once.

    Returns the correlation and the RMS and largest absolute gap between
    sum_{i in S} delta_i and R(S) - D over random subsets S.
    """
    check_paired(a, b)
    rng = np.random.default_rng(seed)
    w = (rng.random((subsets, a.n)) < fraction).astype(float)
    sa, sb = a.stats.sum(axis=0), b.stats.sum(axis=0)
    diff = a.score_sums(sb) - a.score_sums(sa)
    moved = w @ (b.stats - a.stats)
    actual = a.score_sums(sb[None, :] - moved) - a.score_sums(sa[None, :] + moved) - diff
    predicted = w @ effects
    gap = predicted - actual
    return {"subsets": subsets, "fraction": fraction, "correlation": float(np.corrcoef(predicted, actual)[0, 1]),
            "rms_gap": float(np.sqrt(np.mean(gap**2))), "max_gap": float(np.abs(gap).max()),
            "sd_subset_effect": float(actual.std())}


def fit_laplace(effects: np.ndarray, zero_tol: float = 1e-9) -> dict[str, float]:
    """P0 (share of exact zeros) and the Laplace MLE of the rest (median, mean absolute deviation); b0 = b n."""
    e = np.asarray(effects, dtype=float)
    n = len(e)
    nonzero = e[np.abs(e) > zero_tol]
    if len(nonzero) < 2:
        raise InputError("fewer than two sentences change the difference when swapped: nothing to fit")
    loc = float(np.median(nonzero))
    scale = float(np.mean(np.abs(nonzero - loc)))
    return {"p0": 1 - len(nonzero) / n, "mu": loc, "b": scale, "b0": scale * n}


def estimate_swap_parameters(a: ItemStats, b: ItemStats, n_boot: int = 1000, level: float = 0.95,
                             seed: int = 0) -> dict[str, Any]:
    """Corpus scores, their difference, P0 and b0 with percentile bootstrap intervals (resampling sentences),
    and the additivity check of :func:`subset_swap_check` (``additivity_correlation``, ``additivity_rms_gap``)."""
    effects = swap_effects(a, b)
    check = subset_swap_check(a, b, effects, seed=seed)
    fit = fit_laplace(effects)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(effects), size=(n_boot, len(effects)))
    boot = effects[idx]
    nz = np.abs(boot) > 1e-9
    p0s = 1 - nz.mean(axis=1)
    b0s = []
    for row, mask in zip(boot, nz):
        v = row[mask]
        b0s.append(np.mean(np.abs(v - np.median(v))) * len(effects))
    lo, hi = (1 - level) / 2, 1 - (1 - level) / 2
    score_a, score_b = a.corpus_score(), b.corpus_score()
    return {"metric": a.metric, "n": a.n, f"{a.metric}_a": score_a, f"{a.metric}_b": score_b,
            "delta": score_b - score_a, "p0": fit["p0"], "p0_ci_low": float(np.quantile(p0s, lo)),
            "p0_ci_high": float(np.quantile(p0s, hi)), "b0": fit["b0"], "b0_ci_low": float(np.quantile(b0s, lo)),
            "b0_ci_high": float(np.quantile(b0s, hi)), "mu": fit["mu"], "sum_effects_over_minus2": float(-effects.sum() / 2),
            "additivity_correlation": check["correlation"], "additivity_rms_gap": check["rms_gap"]}


__all__ = ["estimate_swap_parameters", "fit_laplace", "subset_swap_check", "swap_effects"]
