"""Paired significance tests of a finished comparison, on per-item sufficient statistics.

``paired_randomization`` — approximate randomization (Noreen 1989; Riezler &
Maxwell 2005): each trial swaps each item's two outputs with probability 1/2;
p = (c + 1) / (N + 1) with c the trials whose |score difference| is at least
the observed one (sacrebleu's ``--paired-ar``).
``paired_bootstrap`` — resample items with replacement:
``rule="sacrebleu"``: c counts resamples whose mean-centred |difference| exceeds
the observed |difference|, p = (c + 1) / (N + 1) (sacrebleu's ``--paired-bs``);
``rule="bk2012"``: Berg-Kirkpatrick et al. (2012): c counts resamples with
d(x_i) > 2 d(x), d the signed gain of the system, p = c / N (one-sided, for the
observed direction).
Every trial is a row of a 0/1 (or count) matrix times the statistics, then a
vectorised score: no text is re-scored and no Python loop runs per trial.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError
from ..metrics import ItemStats
from ..validation import check_choice
from .randomization import random_signs

BOOTSTRAP_RULES = ("sacrebleu", "bk2012")


def _check(a: ItemStats, b: ItemStats, trials: int) -> None:
    if a.metric != b.metric or a.n != b.n:
        raise InputError(f"systems differ in metric or length ({a.metric}/{a.n} vs {b.metric}/{b.n} segments)")
    if trials < 1:
        raise InputError(f"the number of trials must be positive, got {trials}")


def paired_randomization(a: ItemStats, b: ItemStats, trials: int = 10_000, seed: int = 0,
                         block: int = 2000) -> dict[str, Any]:
    """Two-sided approximate randomization test of score(B) - score(A)."""
    _check(a, b, trials)
    rng = np.random.default_rng(seed)
    sa, sb = a.stats.sum(axis=0), b.stats.sum(axis=0)
    observed = float(a.score_sums(sb) - a.score_sums(sa))
    moved = b.stats - a.stats
    exact32 = np.abs(moved).sum(axis=0).max() < 2**24 and np.all(moved == np.round(moved))
    moved32 = moved.astype(np.float32) if exact32 else moved
    count, done = 0, 0
    while done < trials:
        m = min(block, trials - done)
        # 0/1 swaps from packed random bits; float32 products of counts are exact below 2^24
        w = (random_signs(rng, (m, a.n)) > 0).astype(np.float32)
        shift = (w.astype(moved32.dtype) @ moved32).astype(float)
        diff = a.score_sums(sb[None, :] - shift) - a.score_sums(sa[None, :] + shift)
        count += int((np.abs(diff) >= abs(observed) - 1e-9 * max(1.0, abs(observed))).sum())
        done += m
    return {"score": float(a.score_sums(sb)), "baseline_score": float(a.score_sums(sa)), "delta": observed,
            "p_value": (count + 1) / (trials + 1), "method": "paired-ar", "trials": trials}


def paired_bootstrap(a: ItemStats, b: ItemStats, samples: int = 1000, seed: int = 0, rule: str = "sacrebleu",
                     level: float = 0.95, block: int = 500) -> dict[str, Any]:
    """Paired bootstrap test of score(B) - score(A), with a percentile interval for the difference."""
    _check(a, b, samples)
    check_choice("bootstrap rule", rule, BOOTSTRAP_RULES)
    rng = np.random.default_rng(seed)
    sa, sb = a.stats.sum(axis=0), b.stats.sum(axis=0)
    observed = float(a.score_sums(sb) - a.score_sums(sa))
    k = a.stats.shape[1]
    both = np.hstack([a.stats, b.stats])
    if np.all(both == np.round(both)) and a.n * np.abs(both).max() < 2**24:
        both = both.astype(np.float32)  # counts: float32 sums stay exact
    diffs = []
    for start in range(0, samples, block):
        m = min(block, samples - start)
        idx = rng.integers(0, a.n, size=(m, a.n))
        flat = (idx + (np.arange(m) * a.n)[:, None]).ravel()
        counts = np.bincount(flat, minlength=m * a.n).reshape(m, a.n).astype(both.dtype)
        sums = counts @ both  # resampled sums of A's and B's statistics side by side
        diffs.append(a.score_sums(sums[:, k:].astype(float)) - a.score_sums(sums[:, :k].astype(float)))
    d = np.concatenate(diffs)
    if rule == "sacrebleu":
        centred = np.abs(d) - np.abs(d).mean()
        p = (int((centred > abs(observed)).sum()) + 1) / (samples + 1)
    else:
        p = float(((d > 2 * observed) if observed >= 0 else (d < 2 * observed)).mean())
    lo, hi = np.quantile(d, [(1 - level) / 2, 1 - (1 - level) / 2])
    return {"score": float(a.score_sums(sb)), "baseline_score": float(a.score_sums(sa)), "delta": observed,
            "p_value": p, "method": f"paired-bs-{rule}", "samples": samples, "delta_ci_low": float(lo),
            "delta_ci_high": float(hi)}


__all__ = ["paired_randomization", "paired_bootstrap", "BOOTSTRAP_RULES"]
