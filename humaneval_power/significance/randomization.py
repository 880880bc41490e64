"""Randomization tests of sums of per-item effects (Card et al. section 4, App. F, G).

A study's observed difference is D = -1/2 sum(delta_i) (each delta_i is the
change of the difference when item i is swapped). Swapping a random half of
the items gives the randomization null: D* = 1/2 sum(eps_i delta_i) with
Rademacher eps_i, so the two-sided p-value is P(|sum eps_i delta_i| >= |sum delta_i|).

``montecarlo_pvalues``: that probability from random sign matrices, many
studies at once as one matrix product per chunk, p = (c + 1) / (P + 1).
``saddlepoint_pvalues``: Lugannani-Rice on the cumulant generating function
K(s) = sum log cosh(s delta_i) (exact tails, no permutation noise);
``normal_pvalues``: the normal approximation with variance sum delta_i^2.
"""
from __future__ import annotations

import numpy as np
from scipy import stats

APPROXIMATIONS = ("saddlepoint", "normal")


def random_signs(rng: np.random.Generator, shape: tuple[int, int], dtype: type = np.float32) -> np.ndarray:
    """A matrix of independent +-1 (from packed random bits: one bit per sign)."""
    count = shape[0] * shape[1]
    bits = np.unpackbits(rng.integers(0, 256, size=(count + 7) // 8, dtype=np.uint8))[:count]
    return (bits.astype(dtype) * 2 - 1).reshape(shape)


def montecarlo_pvalues(deltas: np.ndarray, permutations: int, rng: np.random.Generator,
                       block: int = 2000) -> np.ndarray:
    """Two-sided Monte-Carlo randomization p-values, one per row of ``deltas`` (studies x items)."""
    d = np.asarray(deltas, dtype=np.float32)
    observed = np.abs(d.sum(axis=1, dtype=np.float64))
    count = np.zeros(d.shape[0], dtype=np.int64)
    done = 0
    while done < permutations:
        m = min(block, permutations - done)
        signs = random_signs(rng, (d.shape[1], m))
        null = np.abs(d @ signs)  # studies x m
        # float32 products: a relative slack keeps exact ties (e.g. all signs +) counted
        count += (null >= observed[:, None] * (1 - 1e-5)).sum(axis=1)
        done += m
    return (count + 1) / (permutations + 1)


def normal_pvalues(deltas: np.ndarray) -> np.ndarray:
    d = np.asarray(deltas, dtype=float)
    sd = np.sqrt((d * d).sum(axis=1))
    z = np.abs(d.sum(axis=1)) / np.where(sd > 0, sd, 1)
    return np.where(sd > 0, 2 * stats.norm.sf(z), 1.0)


def _log_cosh(x: np.ndarray) -> np.ndarray:
    ax = np.abs(x)
    return ax + np.log1p(np.exp(-2 * ax)) - np.log(2.0)


def saddlepoint_pvalues(deltas: np.ndarray, iterations: int = 50) -> np.ndarray:
    """Two-sided p-values of sum(eps_i delta_i) >= |sum delta_i| by the Lugannani-Rice formula."""
    d = np.asarray(deltas, dtype=float)
    t = np.abs(d.sum(axis=1))
    var = (d * d).sum(axis=1)
    safe_var = np.where(var > 0, var, 1.0)
    s = t / safe_var
    for _ in range(iterations):  # Newton on K'(s) = t, K' increasing and bounded by sum |delta|
        th = np.tanh(s[:, None] * d)
        k1 = (d * th).sum(axis=1)
        k2 = (d * d * (1 - th * th)).sum(axis=1)
        step = (k1 - t) / np.maximum(k2, 1e-300)
        s_new = np.maximum(s - step, s / 2)
        if np.all(np.abs(s_new - s) <= 1e-12 * np.maximum(s, 1e-300)):
            s = s_new
            break
        s = s_new
    k = _log_cosh(s[:, None] * d).sum(axis=1)
    th = np.tanh(s[:, None] * d)
    k2 = (d * d * (1 - th * th)).sum(axis=1)
    w = np.sqrt(np.maximum(2 * (s * t - k), 0.0))
    u = s * np.sqrt(k2)
    with np.errstate(divide="ignore", invalid="ignore"):
        tail = stats.norm.sf(w) + stats.norm.pdf(w) * (1 / u - 1 / w)
    z = t / np.sqrt(safe_var)
    near = z < 0.05  # the formula is 0/0 at the mean: the normal tail is exact enough there
    tail = np.where(near | ~np.isfinite(tail), stats.norm.sf(z), tail)
    total = np.abs(d).sum(axis=1)
    p = np.clip(2 * tail, 0.0, 1.0)
    # |sum| = sum |delta| is the largest attainable value: its probability is at least 2^-m
    return np.where(var > 0, np.where(t >= total * (1 - 1e-12), np.maximum(p, 0.0), p), 1.0)


def approximate_pvalues(deltas: np.ndarray, method: str = "saddlepoint") -> np.ndarray:
    if method == "saddlepoint":
        return saddlepoint_pvalues(deltas)
    if method == "normal":
        return normal_pvalues(deltas)
    raise ValueError(method)


__all__ = [
    "APPROXIMATIONS",
    "approximate_pvalues",
    "montecarlo_pvalues",
    "normal_pvalues",
    "random_signs",
    "saddlepoint_pvalues",
]
