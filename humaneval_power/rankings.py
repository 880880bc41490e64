"""Rankings with uncertainty: each system's rank with an interval and the probability that it is the best, from
draws of the system means (parametric bootstrap draws, or posterior draws), an array draws x systems."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from .errors import InputError


def parametric_draws(estimate: Sequence[float] | np.ndarray, covariance: np.ndarray, n_draws: int = 4000,
                     seed: int | np.random.SeedSequence = 1) -> np.ndarray:
    """Draws (n_draws x systems) of the system means from N(estimate, covariance), the parametric bootstrap of a
    fitted model's estimated means. A singular covariance (e.g. a fixed baseline) is allowed: the draws use its
    symmetric square root, so they stay in its range."""
    mean = np.asarray(estimate, dtype=float)
    cov = np.asarray(covariance, dtype=float)
    if mean.ndim != 1 or cov.shape != (mean.size, mean.size):
        raise InputError(f"need an estimate vector and a matching square covariance; got {mean.shape} and "
                         f"{cov.shape}")
    if not (np.isfinite(mean).all() and np.isfinite(cov).all()):
        raise InputError("the estimate and its covariance must be finite")
    if not np.allclose(cov, cov.T, rtol=1e-10, atol=1e-14 * max(1.0, float(np.abs(cov).max()))):
        raise InputError("the covariance matrix is not symmetric")
    vals, vecs = np.linalg.eigh((cov + cov.T) / 2)
    if vals.min() < -1e-10 * max(1.0, float(vals.max())):
        raise InputError("the covariance matrix is not positive semi-definite")
    if n_draws < 1:
        raise InputError(f"n_draws must be >= 1; got {n_draws}")
    root = vecs * np.sqrt(np.clip(vals, 0, None))
    z = np.random.default_rng(seed).standard_normal((n_draws, mean.size))
    draws: np.ndarray = mean + z @ root.T
    return draws


def rank_table(draws: np.ndarray, systems: Sequence[str], estimate: Sequence[float] | None = None,
               level: float = 0.95, higher_is_better: bool = True) -> pd.DataFrame:
    """Each system's rank (1 = best) with an interval and P(best), from draws x systems of the means.

    ``rank``: the rank of the point estimate (``estimate``; the draws' mean when not given); ``rank_low`` and
    ``rank_high``: the equal-tailed ``level`` interval of the rank over the draws; ``mean_rank``; ``p_best``:
    the share of draws in which the system is the best (ties in a draw share it equally). Rows in rank order.
    """
    d = np.asarray(draws, dtype=float)
    systems = list(systems)
    if d.ndim != 2 or d.shape[1] != len(systems) or d.shape[0] < 1:
        raise InputError(f"draws must be an array draws x systems ({len(systems)} systems); got shape {d.shape}")
    if len(systems) < 2 or len(set(systems)) != len(systems):
        raise InputError("need two or more distinct systems")
    if not np.isfinite(d).all():
        raise InputError("the draws must be finite")
    if not 0 < level < 1:
        raise InputError(f"level must be between 0 and 1; got {level}")
    point = d.mean(axis=0) if estimate is None else np.asarray(estimate, dtype=float)
    if point.shape != (len(systems),):
        raise InputError(f"need one estimate per system; got {point.shape}")
    sign = -1.0 if higher_is_better else 1.0
    score = sign * d
    ranks = (score[:, :, None] < score[:, None, :]).sum(axis=1) + 1  # 1 + systems strictly better, per draw
    best = score == score.min(axis=1, keepdims=True)
    p_best = (best / best.sum(axis=1, keepdims=True)).mean(axis=0)
    low, high = np.quantile(ranks, [(1 - level) / 2, (1 + level) / 2], axis=0, method="inverted_cdf")
    point_rank = (sign * point[None, :] < sign * point[:, None]).sum(axis=1) + 1
    table = pd.DataFrame({"system": systems, "estimate": point, "rank": point_rank, "rank_low": low.astype(int),
                          "rank_high": high.astype(int), "mean_rank": ranks.mean(axis=0), "p_best": p_best})
    return table.sort_values(["rank", "mean_rank"], kind="stable").reset_index(drop=True)
