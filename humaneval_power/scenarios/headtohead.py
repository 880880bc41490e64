"""Head-to-head (pairwise preference) studies: B against A, win / tie / lose.

Independent judgments (:class:`IndependentJudgments`): n judgments, each a win
with probability p_win, a tie with p_tie, else a loss; the exact sign test
(ties dropped or split). Effect = p_win - p_lose; estimate (W - L) / n.
Power by exact summation (``exact``) or simulation (``simulate``).

Repeated judgments (:class:`MixedJudgments`): W workers, I items, each item
judged by k workers (item i by workers i*k .. i*k + k - 1 mod W; k = W is fully
crossed); logit P(B preferred) = b0 + u[worker] + v[item] with SDs from a
parameter file. Effect = b0 (log-odds for a typical worker and item);
``--effect`` gives it as that probability. Tests: glmer Wald ``z`` or ``lrt``
(against b0 = 0), simulated and refitted with lme4 inside R.
"""
from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from ..engine import (
    PowerResult,
    Progress,
    SampleSizeResult,
    StudyOutcomes,
    results_table,
    run_cells,
    solve_sample_size,
)
from ..errors import InputError, NotAttainableError
from ..params import H2HParams
from ..significance.binomial import TIE_POLICIES, check_probabilities, exact_power, sign_test
from ..validation import check_alpha, check_choice, check_count

INDEPENDENT_METHODS = ("exact", "simulate")
MIXED_TESTS = ("z", "lrt")


@dataclass(frozen=True)
class IndependentJudgments:
    """n independent judgments with outcome probabilities (p_win, p_tie, 1 - p_win - p_tie)."""

    n: int
    p_win: float
    p_tie: float = 0.0
    ties: str = "drop"
    method: str = "exact"
    alpha: float = 0.05

    def __post_init__(self) -> None:
        check_count("n", self.n)
        check_probabilities(self.p_win, self.p_tie)
        check_alpha(self.alpha)
        check_choice("ties policy", self.ties, TIE_POLICIES)
        check_choice("method", self.method, INDEPENDENT_METHODS)

    @property
    def effect(self) -> float:
        e = self.p_win - check_probabilities(self.p_win, self.p_tie)
        return 0.0 if abs(e) < 1e-12 else e

    chunk_size = 100_000

    def cell(self) -> dict[str, Any]:
        return {"n": self.n, "p_win": self.p_win, "p_tie": self.p_tie, "effect": self.effect, "ties": self.ties,
                "method": self.method, "test": "sign", "alpha": self.alpha}

    def stream_key(self) -> str:
        return json.dumps(["h2h-independent", self.n, self.p_win, self.p_tie])

    def simulate(self, n: int, rng: np.random.Generator) -> StudyOutcomes:
        p_lose = check_probabilities(self.p_win, self.p_tie)
        counts = rng.multinomial(self.n, [self.p_win, self.p_tie, p_lose], size=n)
        _, sig = sign_test(counts[:, 0], counts[:, 1], counts[:, 2], self.ties, self.alpha)
        est = (counts[:, 0] - counts[:, 2]) / self.n
        zeros = np.zeros(n, dtype=bool)
        return StudyOutcomes(est, sig, zeros, zeros)

    def exact(self) -> PowerResult | None:
        if self.method != "exact":
            return None
        power, type_s, type_m = exact_power(self.n, self.p_win, self.p_tie, self.ties, self.alpha)
        return PowerResult.closed_form(self.cell(), power, type_s, type_m)


def h2h_power(
    n: Sequence[int],
    p_win: Sequence[float],
    p_tie: Sequence[float] = (0.0,),
    ties: str = "drop",
    method: str = "exact",
    alpha: float = 0.05,
    n_sims: int = 10_000,
    seed: int = 0,
    jobs: int | None = None,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """Power of the sign test over n x p_win x p_tie (one row per cell).

    >>> h2h_power([25, 100], [0.65]).power.round(4).tolist()
    [0.3061, 0.8276]
    """
    cells = [IndependentJudgments(k, w, t, ties, method, alpha) for k, w, t in itertools.product(n, p_win, p_tie)]
    return results_table(run_cells(cells, n_sims, seed=seed, jobs=jobs, progress=progress))


def h2h_sample_size(p_win: float, p_tie: float = 0.0, target_power: float = 0.8, ties: str = "drop",
                    alpha: float = 0.05, max_n: int = 10_000_000) -> SampleSizeResult:
    """Smallest n whose exact power reaches the target.

    Discreteness makes power saw-toothed in n: ``n`` is the first n that
    reaches the target, ``n_high`` the n from which it stays there (checked
    over the following 20%, at most 2,000 values).
    """
    cell = IndependentJudgments(1, p_win, p_tie, ties, "exact", alpha)
    if cell.effect == 0:
        raise InputError("p_win equals p_lose: no effect to detect")

    def power(k: int) -> PowerResult:
        return run_cells([replace(cell, n=k)], 1)[0]

    result = solve_sample_size(power, target_power, "n", 1, max_n, 1.0, "")
    if result.n is None:
        return result
    first = result.n
    for k in range(max(1, first - 2 * int(math.sqrt(first)) - 10), first):  # the bisection may skip a tooth
        if power(k).power >= target_power:
            first = k
            break
    stable = first
    for k in range(first, first + min(int(first * 0.2) + 10, 2000)):
        if power(k).power < target_power:
            stable = k + 1
    return replace(result, n=first, n_low=first, n_high=stable, at_n=power(first))


def h2h_mde(n: int, p_tie: float = 0.0, target_power: float = 0.8, ties: str = "drop", alpha: float = 0.05) -> dict[str, Any]:
    """Smallest p_win (> p_lose) whose exact power at n reaches the target, with its effect."""
    check_count("n", n)
    check_probabilities(0.5 * (1 - p_tie) if p_tie < 1 else 0.5, p_tie)
    lo, hi = (1 - p_tie) / 2, 1 - p_tie

    def power(p: float) -> float:
        return exact_power(n, p, p_tie, ties, alpha)[0]

    if power(hi - 1e-9) < target_power:
        raise NotAttainableError(f"no p_win reaches power {target_power:g} with n = {n}",
                                 "even a certain win leaves the test short: increase n")
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if power(mid) < target_power else (lo, mid)
    p_lose = 1 - hi - p_tie
    return {"n": n, "p_tie": p_tie, "ties": ties, "p_win": hi, "mde": hi - p_lose, "power_at_mde": power(hi)}


# ----------------------------------------------------------------- repeated judgments (GLMM)

def _logit(p: float) -> float:
    return math.log(p / (1 - p))


@dataclass(frozen=True)
class MixedJudgments:
    """W workers x I items, k judgments per item, logistic GLMM with worker and item intercepts."""

    params: H2HParams
    workers: int
    items: int
    log_odds: float
    per_item: int | None = None  #: judgments per item; None = every worker judges every item
    test: str = "z"
    alpha: float = 0.05
    method: str = "lme4"

    def __post_init__(self) -> None:
        check_count("workers", self.workers, 2)
        check_count("items", self.items, 2)
        if self.per_item is not None:
            check_count("judgments per item", self.per_item)
            if self.per_item > self.workers:
                raise InputError(f"judgments per item ({self.per_item}) exceed the workers ({self.workers})")
        if not math.isfinite(self.log_odds):
            raise InputError("the effect must be finite")
        if self.test not in MIXED_TESTS:
            raise InputError(f"test must be one of {', '.join(MIXED_TESTS)}")
        if self.method != "lme4":
            raise InputError("repeated judgments are simulated and refitted with lme4 (--method lme4)")
        check_alpha(self.alpha)

    @property
    def effect(self) -> float:
        return self.log_odds

    @property
    def k(self) -> int:
        return self.per_item or self.workers

    chunk_size = 10  # a few seconds of glmer refits: progress and Ctrl-C stay responsive

    def study_bytes(self) -> int:
        """Memory one simulated study needs: its judgments, in several copies (R's included)."""
        return self.items * self.k * 8 * 20

    def cell(self) -> dict[str, Any]:
        return {"workers": self.workers, "items": self.items, "judgments_per_item": self.k,
                "effect": self.log_odds, "p_win": 1 / (1 + math.exp(-self.log_odds)),
                "method": self.method, "test": self.test, "alpha": self.alpha}

    def stream_key(self) -> str:
        return json.dumps(["h2h-glmm", self.workers, self.items, self.k, self.params.sd_worker, self.params.sd_item])

    def design(self) -> tuple[np.ndarray, np.ndarray]:
        """(worker, item) indices of every judgment: item i by workers i*k .. i*k+k-1 (mod W)."""
        items = np.repeat(np.arange(self.items), self.k)
        workers = (items * self.k + np.tile(np.arange(self.k), self.items)) % self.workers
        return workers, items

    def simulate(self, n: int, rng: np.random.Generator) -> StudyOutcomes:
        from ..fitting.lme4 import refit_glmm_many

        w, i = self.design()
        u = rng.normal(0, self.params.sd_worker, (n, self.workers))
        v = rng.normal(0, self.params.sd_item, (n, self.items))
        eta = self.log_odds + u[:, w] + v[:, i]
        y = (rng.random(eta.shape) < 1 / (1 + np.exp(-eta))).astype(float)
        res = refit_glmm_many({"worker": w + 1, "item": i + 1}, y.T, lrt=self.test == "lrt")
        est, se = res["estimate"].to_numpy(), res["se"].to_numpy()
        p = res["p_lrt"].to_numpy() if self.test == "lrt" else 2 * stats.norm.sf(np.abs(est / se))
        return StudyOutcomes(est, p <= self.alpha, res["failed"].to_numpy() > 0, res["singular"].to_numpy() > 0,
                             res["warned"].to_numpy() > 0)

    def exact(self) -> None:
        return None


def effect_to_log_odds(p_win: float | None, log_odds: float | None) -> float:
    """The GLMM effect from a probability (typical worker and item) or a log-odds."""
    if p_win is None and log_odds is None:
        raise InputError("give the effect as a probability (--effect / p_win) or as --log-odds")
    if p_win is not None and log_odds is not None:
        raise InputError("give the effect as a probability (--effect / p_win) or as --log-odds, not both")
    if log_odds is not None:
        return float(log_odds)
    assert p_win is not None
    if not 0 < p_win < 1:
        raise InputError(f"the effect as a probability must be in (0, 1), got {p_win}")
    return _logit(p_win)


def h2h_mixed_power(
    params: H2HParams,
    workers: Sequence[int],
    items: Sequence[int],
    log_odds: Sequence[float],
    per_item: Sequence[int | None] = (None,),
    test: str = "z",
    alpha: float = 0.05,
    n_sims: int = 500,
    seed: int = 0,
    jobs: int | None = None,
    progress: Progress | None = None,
    checkpoint: str | None = None,
) -> pd.DataFrame:
    """GLMM power over workers x items x judgments per item x effect (lme4 refits)."""
    cells = [MixedJudgments(params, w, i, e, k, test, alpha)
             for w, i, k, e in itertools.product(workers, items, per_item, log_odds)]
    return results_table(run_cells(cells, n_sims, seed=seed, jobs=jobs, progress=progress, checkpoint=checkpoint))


def h2h_mixed_sample_size(params: H2HParams, log_odds: float, workers: int, per_item: int | None = None,
                          target_power: float = 0.8, test: str = "z", alpha: float = 0.05, n_sims: int = 300,
                          seed: int = 0, jobs: int | None = None, max_items: int = 2000) -> SampleSizeResult:
    """Smallest number of items reaching the target power with the workers fixed (lme4 refits)."""
    if log_odds == 0:
        raise InputError("the sample size for a zero effect is undefined")

    def power(n: int) -> PowerResult:
        return run_cells([MixedJudgments(params, workers, n, log_odds, per_item, test, alpha)], n_sims,
                         seed=seed, jobs=jobs)[0]

    reason = (f"with {workers} workers the worker SD ({params.sd_worker:g}) bounds the information about a "
              "typical worker's preference; add workers")
    return solve_sample_size(power, target_power, "items", 2, max_items, math.nan, reason)


__all__ = [
    "IndependentJudgments", "MixedJudgments", "h2h_power", "h2h_sample_size", "h2h_mde", "h2h_mixed_power",
    "h2h_mixed_sample_size", "effect_to_log_odds",
]
