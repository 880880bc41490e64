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
from collections.abc import Callable
from functools import lru_cache

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from scipy import optimize, stats

from ..errors import InputError
from ..progress import Progress, check_work
from ..validation import TIE_POLICIES, check_choice, check_memory, check_number

#: tests of the discordant (non-tied) counts: exact conditional, its mid-p version,
#: and the exact unconditional test of Suissa & Shuster (1991)
SIGN_TESTS = ("exact", "midp", "unconditional")


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


#: Exact binomial terms are taken every _BLOCK steps; one-step recursions fill in
#: between, so rounding grows over at most _BLOCK steps (relative error ~1e-12 at most).
_BLOCK = 256


def _anchored_products(steps: np.ndarray) -> np.ndarray:
    """In place, along each row of ``steps`` (anchor, r1, r2, ...): (anchor, anchor r1, anchor r1 r2, ...)."""
    return np.multiply.accumulate(steps, axis=1, out=steps)


def _binom_pmf_rows(n: int, p: np.ndarray, start: np.ndarray, width: int) -> np.ndarray:
    """Bin(n, p) pmf at start .. start + width - 1, one row per (p, start); 0 beyond n.

    Exact at every ``_BLOCK``-th value; in between by pmf(s) = pmf(s - 1) (n - s + 1) p / (s (1 - p)).
    """
    p, start = np.asarray(p, dtype=float), np.asarray(start)

    def exact(rows: np.ndarray | slice) -> np.ndarray:
        return stats.binom.pmf(start[rows, None] + np.arange(width), n, p[rows, None])

    if width <= _BLOCK:
        return exact(slice(None))
    span = _BLOCK * -(-width // _BLOCK)
    first = int(start.min())
    s = np.arange(first, int(start.max()) + span, dtype=float)
    inner = (p > 0) & (p < 1)
    odds = np.where(inner, p, 0.0) / np.where(inner, 1 - p, 1.0)
    steps = sliding_window_view(np.maximum(n + 1 - s, 0.0) / np.maximum(s, 1.0), span)[start - first]
    steps *= odds[:, None]
    blocks = steps.reshape(-1, _BLOCK)
    blocks[:, 0] = stats.binom.pmf(start[:, None] + np.arange(0, span, _BLOCK), n, p[:, None]).ravel()
    out = _anchored_products(blocks).reshape(len(p), span)[:, :width]
    if not inner.all():  # p = 0 or 1: a point mass, no recursion
        out[~inner] = exact(~inner)
    return out


def _z_cut(m: np.ndarray, z: float, root_m: np.ndarray | None = None) -> np.ndarray:
    """Lower critical count floor((m - z sqrt m) / 2) of the unconditional test: reject iff W <= it or W >= m - it."""
    return np.floor((m - z * (np.sqrt(m) if root_m is None else root_m)) / 2 + 1e-9)


def _two_sided(cdf: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Two-sided tail 2 F(k; m) of Bin(m, 1/2) from its lower CDF, capped at 1; 0 for m = 0."""
    return np.where(m > 0, np.minimum(1.0, 2 * cdf), 0.0)


def _two_sided_tails(n: int, z: float) -> np.ndarray:
    """P(|2W - m| >= z sqrt(m)) for W ~ Bin(m, 1/2), m = 0..n; 0 for m = 0.

    With k(m) = floor((m - z sqrt m) / 2) that is 2 F(k(m); m), F the Bin(m, 1/2)
    CDF. Once m >= z^2, k(m) is >= 0 and steps by 0 or 1, and along m
    F(k; m+1) = F(k; m) - f(k; m)/2, F(k+1; m+1) = F(k; m) + f(k+1; m)/2, with
    f the pmf (itself a one-step ratio); exact CDFs anchor every ``_BLOCK`` steps.
    """
    m_rec = min(n + 1, _BLOCK * math.ceil((z * z + 2.0) / _BLOCK))  # recursion from here on
    blocks = -(-(n + 1 - m_rec) // _BLOCK)
    m = np.arange(m_rec + blocks * _BLOCK + 1, dtype=float)
    k = _z_cut(m, z)
    cdf = np.empty(len(m) - 1)
    cdf[:m_rec] = stats.binom.cdf(k[:m_rec], m[:m_rec], 0.5)
    if blocks:
        mr, kr = m[m_rec:-1], k[m_rec:-1]
        up = k[m_rec + 1:] > kr
        # pmf ratio f(k'; m+1) / f(k; m) and the CDF step over f(k; m) for the two moves
        ratio = (mr + 1) / (2 * np.where(up, kr + 1, mr + 1 - kr))
        step = np.where(up, (mr - kr) / (2 * (kr + 1)), -0.5)
        mb, kb = mr[::_BLOCK], kr[::_BLOCK]
        pmf = np.empty((blocks, _BLOCK))  # f(k; m), each row from its exact first value
        pmf[:, 0] = stats.binom.pmf(kb, mb, 0.5)
        pmf[:, 1:] = ratio.reshape(blocks, _BLOCK)[:, :-1]
        rows = _anchored_products(pmf) * step.reshape(blocks, _BLOCK)  # the CDF's steps
        rows[:, 1:] = rows[:, :-1]
        rows[:, 0] = stats.binom.cdf(kb, mb, 0.5)
        cdf[m_rec:] = np.add.accumulate(rows, axis=1, out=rows).ravel()
    return _two_sided(cdf[: n + 1], m[: n + 1])


class _UnconditionalSize:
    """Size of "reject iff |W - L| / sqrt(W + L) >= z" maximised over the discordance pi = P(W or L).

    Under H0 the n pairs are discordant with unknown probability pi and split
    evenly, so the size is sup_pi sum_m Bin(m; n, pi) P(|2W - m| >= z sqrt m | m).
    The binomial weights on a grid of pi are computed once per n; the
    supremum over the grid is refined around its three best points. Successive
    calls (a root search) recompute the tails only where the cut-off moved.
    """

    def __init__(self, n: int, grid: int = 1000) -> None:
        self.n = n
        self.pis = np.linspace(1.0 / grid, 1.0, grid)
        self.start, stop = _support_bounds(n, self.pis)
        self.width = int((stop - self.start).max()) + 1
        self.weight = _binom_pmf_rows(n, self.pis, self.start, self.width)
        self.weight[np.arange(self.width) > (stop - self.start)[:, None]] = 0.0
        self.m = np.arange(n + 1, dtype=float)
        self.root_m = np.sqrt(self.m)
        self._cut: np.ndarray | None = None
        self._tail = np.zeros(n + 1 + self.width)  # tails for m = 0..n, zero-padded for the windows
        self._pmfs: dict[float, tuple[int, np.ndarray]] = {}

    def tails(self, z: float) -> np.ndarray:
        """P(|2W - m| >= z sqrt(m)) for m = 0..n followed by ``width`` zeros."""
        cut = _z_cut(self.m, z, self.root_m)
        moved = None if self._cut is None else np.flatnonzero(cut != self._cut)
        if moved is not None and 16 * len(moved) <= len(cut):  # few moved: exact CDFs there
            m = self.m[moved]
            self._tail[moved] = _two_sided(stats.binom.cdf(cut[moved], m, 0.5), m)
        else:
            self._tail[: self.n + 1] = _two_sided_tails(self.n, z)
        self._cut = cut
        return self._tail

    def __call__(self, z: float) -> float:
        tail = self.tails(z)
        values = np.array([w @ tail[s : s + self.width] for w, s in zip(self.weight, self.start)])

        def size(pi: float) -> float:
            lo, weight = self._pmf(pi)
            return float(weight @ tail[lo : lo + len(weight)])

        return refined_max(self.pis, values, size)

    def _pmf(self, pi: float) -> tuple[int, np.ndarray]:
        """First value and pmf of Bin(n, pi) over its support, kept: the refinement probes recur between steps."""
        if pi not in self._pmfs:
            if len(self._pmfs) >= 4096:
                self._pmfs.clear()
            lo, hi = _support_bounds(self.n, pi)
            self._pmfs[pi] = lo, _binom_pmf_rows(self.n, np.array([pi]), np.array([lo]), hi - lo + 1)[0]
        return self._pmfs[pi]


def refined_max(pis: np.ndarray, values: np.ndarray, size: Callable[[float], float]) -> float:
    """Largest of the grid ``values`` = size(pis) and of the local maxima of ``size`` around the three best."""
    best = float(values.max())
    step = pis[1] - pis[0] if len(pis) > 1 else 1.0
    for i in np.argsort(values)[-3:]:
        lo, hi = max(pis[i] - step, 1e-12), min(pis[i] + step, 1.0)
        res = optimize.minimize_scalar(lambda p: -size(p), bounds=(lo, hi), method="bounded",
                                       options={"xatol": 1e-9})
        best = max(best, -float(res.fun))
    return best


@lru_cache(maxsize=256)
def unconditional_critical_z(n: int, alpha: float) -> float:
    """Smallest z with exact unconditional size <= alpha (Suissa & Shuster 1991), to 1e-8."""
    # one size object: its binomial weights and tails serve every step of the bisection, then go
    return bisect_critical_z(_UnconditionalSize(n), n, alpha)


def bisect_critical_z(size: Callable[[float], float], n: int, alpha: float) -> float:
    """Smallest z (to 1e-8) with ``size(z) <= alpha``, by bisection from the normal cut-off; inf if none <= sqrt(n) + 1."""
    z_normal = float(stats.norm.isf(alpha / 2))
    lo, hi = 0.9 * z_normal, 1.1 * z_normal
    if size(lo) <= alpha:
        lo = 0.0
    while size(hi) > alpha:  # tiny n: widen until (almost) nothing is rejected
        lo, hi = hi, hi * 2
        if hi > math.sqrt(n) + 1:
            return math.inf
    for _ in range(60):
        mid = (lo + hi) / 2
        if size(mid) <= alpha:
            hi = mid
        else:
            lo = mid
        if hi - lo < 1e-8:
            break
    return hi


def critical_counts(m: np.ndarray, n: int, alpha: float, test: str = "exact") -> np.ndarray:
    """Lower critical count k per number of non-tied pairs m: reject iff W <= k or W >= m - k.

    ``exact`` and ``midp`` are conditional on m; ``unconditional`` rejects iff
    |W - L| / sqrt(m) >= z*, with z* fixed by n (see ``unconditional_critical_z``).
    """
    check_choice("test", test, SIGN_TESTS)
    m = np.asarray(m, dtype=float)
    if test != "unconditional":
        return lower_critical(m, alpha, mid_p=test == "midp")
    z = unconditional_critical_z(int(n), float(alpha))
    if math.isinf(z):
        return np.full(m.shape, -1.0)
    return np.where(m > 0, np.minimum(_z_cut(m, z), np.floor((m - 1) / 2)), -1.0)


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


def _support_bounds(n: int, p):
    """First and last value of Bin(n, p) carrying all but ~1e-30 of the mass (arrays for array p)."""
    sd = np.sqrt(n * p * (1 - p))
    lo = np.maximum(0, np.floor(n * p - 12.0 * sd - 2)).astype(int)
    hi = np.minimum(n, np.ceil(n * p + 12.0 * sd + 2)).astype(int)
    return (lo, hi) if np.ndim(p) else (int(lo), int(hi))


def _support(n: int, p: float) -> np.ndarray:
    """Values of Bin(n, p) carrying all but ~1e-30 of the mass."""
    lo, hi = _support_bounds(n, p)
    return np.arange(lo, hi + 1)


def _tail_mean(m: np.ndarray, q: float, a: np.ndarray) -> np.ndarray:
    """E[W 1{W >= a}] for W ~ Bin(m, q): m q P(Bin(m - 1, q) >= a - 1)."""
    return m * q * stats.binom.sf(a - 2, np.maximum(m - 1, 0), q)


#: binomial terms per second of :func:`exact_power` (measured 6e4 on 2 cores; optimistic) and per block
EXACT_TERMS_PER_SECOND = 2e5
_TERMS_PER_BLOCK = 1 << 16


def exact_power(n: int, p_win: float, p_tie: float, ties_policy: str = "drop", alpha: float = 0.05,
                test: str = "exact", progress: Progress | None = None):
    """Power (significant with the sign of p_win - p_lose), Type-S and Type-M by exact summation.

    Returns (power, type_s, type_m); with p_win = p_lose power is the rejection rate.
    ``test`` (ties dropped only): ``exact`` conditional binomial test, its
    ``midp`` version, or the ``unconditional`` test (see ``critical_counts``).
    Cost: O(sqrt(n)) binomial terms for ``drop`` (in blocks, reported to ``progress(done, total,
    label)``), one FFT of length ~n for ``split``.

    >>> [round(v, 4) for v in exact_power(100, 0.65, 0.0)[:1] + exact_power(25, 0.65, 0.0)[:1]]
    [0.8276, 0.3061]
    """
    p_lose = check_probabilities(p_win, p_tie)
    check_choice("ties policy", ties_policy, TIE_POLICIES)
    if test != "exact" and ties_policy != "drop":
        raise InputError(f"the {test} test is defined here for ties dropped")
    effect = p_win - p_lose
    if abs(effect) < 1e-12:
        effect = 0.0
    if ties_policy == "drop":
        lo, hi = _support_bounds(n, 1 - p_tie) if p_tie > 0 else (n, n)
        check_work(f"the exact power for n = {n:,}", (hi - lo + 1) / EXACT_TERMS_PER_SECOND,
                   "use --method normal (or simulate)")
        q = p_win / (p_win + p_lose) if p_win + p_lose > 0 else 0.5
        p_up = p_down = abs_sum = 0.0
        for start in range(lo, hi + 1, _TERMS_PER_BLOCK):  # blocks: bounded memory, Ctrl-C and progress between
            ms = np.arange(start, min(start + _TERMS_PER_BLOCK, hi + 1))
            pm = stats.binom.pmf(ms, n, 1 - p_tie) if p_tie > 0 else np.array([1.0])
            k = critical_counts(ms, n, alpha, test)
            hi_cut = ms - k  # reject upward iff W >= m - k
            up = stats.binom.sf(hi_cut - 1, ms, q)
            down = stats.binom.cdf(k, ms, q)
            # E|W - L| on each tail: |2W - m|
            e_up = 2 * _tail_mean(ms, q, hi_cut) - ms * up
            e_down = ms * down - 2 * (ms * q - _tail_mean(ms, q, k + 1))
            p_up, p_down = p_up + float(pm @ up), p_down + float(pm @ down)
            abs_sum += float(pm @ (e_up + e_down))
            if progress is not None:
                progress(int(ms[-1] - lo + 1), hi - lo + 1, f"exact power, n = {n:,}: binomial terms")
    else:
        d, prob = _difference_distribution(n, p_win, p_tie, p_lose)
        x = (n + d) / 2
        x = np.where(x > n / 2, np.floor(x), np.ceil(x))  # as in sign_test(..., "split")
        k_split = float(lower_critical(np.array([n]), alpha)[0])
        sig = (x <= k_split) | (x >= n - k_split)
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
    size = 1 << math.ceil(math.log2(2 * n + 1))
    check_memory(f"the exact split-ties distribution for n = {n:,}", 56 * size)  # ~7 float arrays of that length
    base = np.zeros(size)
    base[1], base[0], base[-1] = p_win, p_tie, p_lose
    dist = np.fft.irfft(np.fft.rfft(base) ** n, size)
    d = np.arange(-n, n + 1)
    prob = np.clip(dist[d % size], 0.0, None)
    return d, prob / prob.sum()
