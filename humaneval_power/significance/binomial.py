"""Exact sign (binomial) tests of head-to-head judgments and their power by summation.

Judgments are wins W, ties T and losses L of system B against A (W + T + L = n).
The effect is the net preference p_win - p_lose; its estimate (W - L) / n.

``drop``   ties are dropped: exact two-sided binomial test of W among m = W + L
           at p = 1/2 (what ``scipy.stats.binomtest`` does).
``split``  each tie is half a win and half a loss: x = W + T/2 is tested
           against Bin(n, 1/2); a half-integer x is rounded towards n/2
           (conservative). Only D = W - L matters: x = (n + D) / 2.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats

from ..errors import InputError
from ..validation import check_number

TIE_POLICIES = ("drop", "split")


def check_probabilities(p_win: float, p_tie: float) -> float:
    """Validate (p_win, p_tie) and return p_lose."""
    check_number("p_win", p_win)
    check_number("p_tie", p_tie)
    if not 0 < p_win < 1:
        raise InputError(f"p_win must be in (0, 1), got {p_win}")
    if not 0 <= p_tie < 1:
        raise InputError(f"p_tie must be in [0, 1), got {p_tie}")
    p_lose = 1.0 - p_win - p_tie
    if p_lose < -1e-12:
        raise InputError(f"p_win + p_tie = {p_win + p_tie:g} exceeds 1")
    return max(p_lose, 0.0)


def lower_critical(m: np.ndarray, alpha: float, mid_p: bool = False) -> np.ndarray:
    """Largest k whose two-sided p-value at Bin(m, 1/2) is <= alpha (-1 if none).

    Reject iff W <= k or W >= m - k. The exact p-value is 2 P(X <= k); the
    mid-p value 2 (P(X < k) + P(X = k)/2).
    """
    m = np.asarray(m, dtype=float)
    k = stats.binom.ppf(alpha / 2, m, 0.5) + (1 if mid_p else 0)

    def pval(j: np.ndarray) -> np.ndarray:
        full = stats.binom.cdf(j, m, 0.5)
        return 2 * (full - stats.binom.pmf(j, m, 0.5) / 2) if mid_p else 2 * full

    for _ in range(3):  # step down to the last k that still rejects
        k = np.where((pval(k) > alpha * (1 + 1e-12)) & (k >= 0), k - 1, k)
    return np.where(m > 0, np.minimum(k, np.floor((m - 1) / 2)), -1.0)


def sign_test(wins: np.ndarray, ties: np.ndarray, losses: np.ndarray, ties_policy: str, alpha: float):
    """p-values and significance of simulated or observed counts (arrays)."""
    w, t, lo = (np.asarray(a, dtype=float) for a in (wins, ties, losses))
    if ties_policy == "drop":
        m, x = w + lo, w
    else:
        m = w + t + lo
        x = w + t / 2
        x = np.where(x > m / 2, np.floor(x), np.ceil(x))  # towards m/2
    small = np.minimum(x, m - x)
    p = np.minimum(1.0, 2 * stats.binom.cdf(small, m, 0.5))
    p = np.where(m > 0, p, 1.0)
    return p, p <= alpha


def _support(n: int, p: float, width: float = 12.0) -> np.ndarray:
    """Values of Bin(n, p) carrying all but ~1e-30 of the mass."""
    sd = math.sqrt(n * p * (1 - p))
    lo = max(0, int(math.floor(n * p - width * sd - 2)))
    hi = min(n, int(math.ceil(n * p + width * sd + 2)))
    return np.arange(lo, hi + 1)


def _tail_mean(m: np.ndarray, q: float, a: np.ndarray) -> np.ndarray:
    """E[W 1{W >= a}] for W ~ Bin(m, q): m q P(Bin(m - 1, q) >= a - 1)."""
    return m * q * stats.binom.sf(a - 2, np.maximum(m - 1, 0), q)


def exact_power(n: int, p_win: float, p_tie: float, ties_policy: str = "drop", alpha: float = 0.05,
                mid_p: bool = False):
    """Power (significant with the sign of p_win - p_lose), Type-S and Type-M by exact summation.

    Returns (power, type_s, type_m); with p_win = p_lose power is the rejection rate.
    ``mid_p`` (ties dropped only) uses the mid-p version of the test.
    Cost: O(sqrt(n)) binomial terms for ``drop``, one FFT of length ~n for ``split``.

    >>> [round(v, 4) for v in exact_power(100, 0.65, 0.0)[:1] + exact_power(25, 0.65, 0.0)[:1]]
    [0.8276, 0.3061]
    """
    p_lose = check_probabilities(p_win, p_tie)
    if ties_policy not in TIE_POLICIES:
        raise InputError(f"ties must be one of {', '.join(TIE_POLICIES)}")
    if mid_p and ties_policy != "drop":
        raise InputError("the mid-p test is defined here for ties dropped")
    effect = p_win - p_lose
    if abs(effect) < 1e-12:
        effect = 0.0
    if ties_policy == "drop":
        ms = _support(n, 1 - p_tie) if p_tie > 0 else np.array([n])
        pm = stats.binom.pmf(ms, n, 1 - p_tie) if p_tie > 0 else np.array([1.0])
        q = p_win / (p_win + p_lose) if p_win + p_lose > 0 else 0.5
        k = lower_critical(ms, alpha, mid_p)
        hi_cut = ms - k  # reject upward iff W >= m - k
        up = stats.binom.sf(hi_cut - 1, ms, q)
        down = stats.binom.cdf(k, ms, q)
        # E|W - L| on each tail: |2W - m|
        e_up = 2 * _tail_mean(ms, q, hi_cut) - ms * up
        e_down = ms * down - 2 * (ms * q - _tail_mean(ms, q, k + 1))
        p_up, p_down = float(pm @ up), float(pm @ down)
        abs_sum = float(pm @ (e_up + e_down))
    else:
        d, prob = _difference_distribution(n, p_win, p_tie, p_lose)
        x = (n + d) / 2
        x = np.where(x > n / 2, np.floor(x), np.ceil(x))  # as in sign_test(..., "split")
        k = float(lower_critical(np.array([n]), alpha)[0])
        sig = (x <= k) | (x >= n - k)
        p_up, p_down = float(prob[sig & (d > 0)].sum()), float(prob[sig & (d < 0)].sum())
        abs_sum = float((prob * np.abs(d))[sig].sum())
    p_sig = p_up + p_down
    if effect == 0:
        return p_sig, math.nan, math.nan
    correct, wrong = (p_up, p_down) if effect > 0 else (p_down, p_up)
    type_m = abs_sum / n / abs(effect) / p_sig if p_sig > 0 else math.nan
    return correct, wrong / p_sig if p_sig > 0 else math.nan, type_m


def _difference_distribution(n: int, p_win: float, p_tie: float, p_lose: float):
    """P(W - L = d), d = -n..n, by FFT of the per-judgment distribution on {-1, 0, +1}."""
    size = 1 << int(math.ceil(math.log2(2 * n + 1)))
    base = np.zeros(size)
    base[1], base[0], base[-1] = p_win, p_tie, p_lose
    dist = np.fft.irfft(np.fft.rfft(base) ** n, size)
    d = np.arange(-n, n + 1)
    prob = np.clip(dist[d % size], 0.0, None)
    return d, prob / prob.sum()
