"""Head-to-head (pairwise preference) studies: B against A, win / tie / lose.

Independent judgments (:class:`IndependentJudgments`): n judgments, each a win
with probability p_win, a tie with p_tie, else a loss; the exact sign test
(ties dropped or split). Effect = p_win - p_lose; estimate (W - L) / n.
Power by exact summation (``exact``) or simulation (``simulate``).

Repeated judgments (:class:`MixedJudgments`): W workers, I items, each item
judged by k workers (item i by workers i*k .. i*k + k - 1 mod W; k = W is fully
crossed); each judgment is a tie with probability p_tie (the parameter file's,
from the pilot), else logit P(B preferred) = b0 + u[worker] + v[item] with SDs
from a parameter file. Effect = b0 (log-odds that B wins a decisive judgment,
for a typical worker and item); ``--effect`` gives it as that probability.
Ties are analysed as the pilot's fit did: dropped, or split (half a win, half a
loss: the analysed log-odds is then logit((1 - p_tie) p + p_tie / 2), towards 0,
and Type-M is relative to it). Every study is analysed by the logistic GLMM
:class:`~humaneval_power.analyses.glmm.JudgmentGLMM` (glmer Wald ``z``, ``lrt`` or
``t``; the batched Laplace fit ``fast`` or glmer inside R ``lme4``).
"""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from ..analyses import Analysis, JudgmentGLMM, get_analysis
from ..assurance import DEFAULT_DRAWS, ParamDraws, apply_draws, assured
from ..designs import Layout
from ..engine import PowerResult, StudyOutcomes
from ..errors import InputError
from ..executors import Jobs, one_executor
from ..params import H2HParams
from ..planning import SolveResult, as_list, power_grid, solve
from ..progress import Progress
from ..significance.binomial import TIE_POLICIES, check_probabilities, exact_power, sign_test
from ..validation import check_alpha, check_choice, check_count

INDEPENDENT_METHODS = ("exact", "simulate")


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
        return json.dumps(["h2h-independent", self.n, self.p_tie])  # not p_win: common random numbers

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


@one_executor
def h2h_power(
    n: Sequence[int] | int,
    p_win: Sequence[float] | float,
    p_tie: Sequence[float] | float = 0.0,
    ties: str = "drop",
    method: str = "exact",
    alpha: float = 0.05,
    n_sims: int = 10_000,
    seed: int = 0,
    jobs: Jobs = None,
    progress: Progress | None = None,
    assurance: ParamDraws | None = None,
    draws: int | None = DEFAULT_DRAWS,
    target_power: float = 0.8,
) -> pd.DataFrame:
    """Power of the sign test over n x p_win x p_tie (one row per cell).

    With ``assurance`` (draws of ``p_win`` and/or ``p_tie``, e.g. from a Beta prior: see
    :mod:`humaneval_power.assurance`) ``power`` is the assurance, the probability of a
    significant win for B averaged over the draws; p_win / p_tie are the point estimates.

    >>> h2h_power([25, 100], 0.65).power.round(4).tolist()
    [0.3061, 0.8276]
    """
    make = _independent(ties, method, alpha, assurance, draws, n_sims, seed, jobs, target_power, progress)
    return power_grid(make, {"n": as_list(n), "p_win": as_list(p_win), "p_tie": as_list(p_tie)}, n_sims,
                      seed=seed, jobs=jobs, progress=progress)


def _independent(ties: str, method: str, alpha: float, assurance: ParamDraws | None, draws: int | None, n_sims: int,
                 seed: int, jobs: Jobs, target_power: float, progress: Progress | None) -> Any:
    """``make(n, p_win, p_tie)``: one cell, or with ``assurance`` the assurance cell over the draws."""
    def make_for(over: dict[str, float]) -> Any:
        def make(n: int, p_win: float, p_tie: float) -> IndependentJudgments:
            return IndependentJudgments(n, over.get("p_win", p_win), over.get("p_tie", p_tie), ties, method, alpha)
        return make

    if assurance is None:
        return make_for({})
    sample = assurance.thin(draws, seed)
    unknown = [k for k in sample.values if k not in ("p_win", "p_tie")]
    if unknown:
        raise InputError(f"{sample.source}: independent judgments have the parameters p_win and p_tie, not "
                         f"{', '.join(unknown)}")
    return assured(make_for, {}, sample.rows(), n_sims, seed, target_power, sample.source, jobs, progress)


def h2h_sample_size(p_win: float, p_tie: float = 0.0, target_power: float = 0.8, ties: str = "drop",
                    alpha: float = 0.05, max_n: int = 10_000_000, assurance: ParamDraws | None = None,
                    draws: int | None = DEFAULT_DRAWS, target_assurance: float | None = None,
                    seed: int = 0) -> SolveResult:
    """Smallest n whose exact power reaches the target.

    Discreteness makes power saw-toothed in n: ``value`` (= ``low``) is the first
    n that reaches the target, ``high`` the n from which it stays there. With
    ``assurance`` (draws of p_win / p_tie) the smallest n whose assurance reaches
    ``target_assurance`` (default ``target_power``; ``detail`` holds the plain answer as
    ``conditional_value``); the search stops at ``max_n``.

    >>> r = h2h_sample_size(0.65)
    >>> r.value, r.high
    (90, 97)
    """
    cell = IndependentJudgments(1, p_win, p_tie, ties, "exact", alpha)
    if cell.effect == 0:
        raise InputError("p_win equals p_lose: no effect to detect")
    if assurance is None:
        return solve(lambda k: replace(cell, n=k), "n", 1, max_n, target_power, n_sims=1, sawtooth=True)
    plain = h2h_sample_size(p_win, p_tie, target_power, ties, alpha, max_n)
    make = _independent(ties, "exact", alpha, assurance, draws, 1, seed, None, target_power, None)
    target = target_power if target_assurance is None else target_assurance
    cells = make(1, p_win, p_tie).draws
    limit = float(np.mean([np.sign(c.effect) == np.sign(cell.effect) for c in cells]))
    if target > limit:  # as n grows a draw's success tends to 1 on the planned side, 0 on the other
        reason = (f"the assurance cannot exceed {limit:.3f}, the share of draws in which "
                  f"{'B' if cell.effect > 0 else 'A'} is better (it tends to that as n grows)")
        return SolveResult("n", target, None, None, None, False, reason, None, math.nan, limit,
                           {"conditional_value": plain.value, "conditional_low": plain.low,
                            "conditional_high": plain.high})
    result = solve(lambda k: make(k, p_win, p_tie), "n", 1, max_n, target, n_sims=1, sawtooth=True, limit=(
        limit, f"as n grows the assurance tends to {limit:.3f}, the share of draws on the planned side"))
    return replace(result, detail={**result.detail, "conditional_value": plain.value, "conditional_low": plain.low,
                                   "conditional_high": plain.high})


def h2h_mde(n: int, p_tie: float = 0.0, target_power: float = 0.8, ties: str = "drop",
            alpha: float = 0.05) -> SolveResult:
    """Smallest p_win (> p_lose) whose exact power with n judgments reaches the target; the
    record's ``effect`` is p_win - p_lose.

    >>> round(h2h_mde(100).value, 4)
    0.6451
    """
    check_count("n", n)
    check_probabilities(0.5 * (1 - p_tie) if p_tie < 1 else 0.5, p_tie)
    lo, hi = (1 - p_tie) / 2, 1 - p_tie

    def make(p_win: float) -> IndependentJudgments:
        return IndependentJudgments(n, p_win, p_tie, ties, "exact", alpha)

    return solve(make, "p_win", lo + 1e-9, hi - 1e-9, target_power, integer=False, n_sims=1,
                 why="even a certain win leaves the test short: increase n")


# ----------------------------------------------------------------- repeated judgments (GLMM)

def _logit(p: float) -> float:
    return math.log(p / (1 - p))


@dataclass(frozen=True)
class MixedJudgments:
    """W workers x I items, k judgments per item, analysed by a GLMM (an instance or a registered name;
    default: the logistic GLMM with worker and item intercepts, fast tier, z test)."""

    params: H2HParams
    workers: int
    items: int
    log_odds: float
    per_item: int | None = None  #: judgments per item; None = every worker judges every item
    analysis: Analysis = field(default_factory=JudgmentGLMM)

    def __post_init__(self) -> None:
        check_count("workers", self.workers, 2)
        check_count("items", self.items, 2)
        if self.per_item is not None:
            check_count("judgments per item", self.per_item)
            if self.per_item > self.workers:
                raise InputError(f"judgments per item ({self.per_item}) exceed the workers ({self.workers})")
        if not math.isfinite(self.log_odds):
            raise InputError("the effect must be finite")
        if isinstance(self.analysis, str):
            object.__setattr__(self, "analysis", get_analysis(self.analysis))
        self.analysis.check(2, self.log_odds)

    @property
    def effect(self) -> float:
        """The log-odds the analysis estimates: b0, or with split ties that of the mean score."""
        pt = self.params.p_tie
        if self.params.ties == "drop" or pt == 0:
            return self.log_odds
        return _logit((1 - pt) / (1 + math.exp(-self.log_odds)) + pt / 2)

    @property
    def k(self) -> int:
        return self.per_item or self.workers

    @property
    def chunk_size(self) -> int:
        return self.analysis.chunk_size

    def study_bytes(self) -> int:
        """Memory one simulated study needs: its judgments, in several copies (R's included)."""
        return self.items * self.k * 8 * 20

    def cell(self) -> dict[str, Any]:
        ties = {"p_tie": self.params.p_tie, "ties": self.params.ties} if self.params.p_tie else {}
        return {"workers": self.workers, "items": self.items, "judgments_per_item": self.k,
                "effect": self.effect, "p_win": 1 / (1 + math.exp(-self.log_odds)), **ties,
                **self.analysis.record()}

    def stream_key(self) -> str:
        ties = [self.params.p_tie] if self.params.p_tie else []  # not the policy: drop and split see the same studies
        return json.dumps(["h2h-glmm", self.workers, self.items, self.k, self.params.sd_worker, self.params.sd_item,
                           *ties])

    def design(self) -> tuple[np.ndarray, np.ndarray]:
        """(worker, item) indices of every judgment: item i by workers i*k .. i*k+k-1 (mod W)."""
        items = np.repeat(np.arange(self.items), self.k)
        workers = (items * self.k + np.tile(np.arange(self.k), self.items)) % self.workers
        return workers, items

    def responses(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n simulated studies' judgments (n x judgments, 1 = B preferred) in the order of :meth:`design`."""
        w, i = self.design()
        u = rng.normal(0, self.params.sd_worker, (n, self.workers))
        v = rng.normal(0, self.params.sd_item, (n, self.items))
        eta = self.log_odds + u[:, w] + v[:, i]
        y = (rng.random(eta.shape) < 1 / (1 + np.exp(-eta))).astype(float)
        if self.params.p_tie:
            y[rng.random(eta.shape) < self.params.p_tie] = np.nan if self.params.ties == "drop" else 0.5
        return y

    def layout(self) -> Layout:
        """The judgments as a layout (:meth:`design`; every judgment compares system B with A)."""
        w, i = self.design()
        return Layout(w, i, np.ones_like(i), self.workers, self.items, 2)

    def simulate(self, n: int, rng: np.random.Generator) -> StudyOutcomes:
        means = np.array([0.0, self.log_odds])
        layout = self.layout()
        fit = self.analysis.fit(layout, self.responses(n, rng).T, self.analysis.prepare(layout))
        return self.analysis.decide(fit, means, means)

    def exact(self) -> None:
        return None


def mixed_effect_note(params: H2HParams) -> str:
    """What a GLMM plan's effect columns mean, with the ties it simulates."""
    if not params.p_tie:
        return "effect: log-odds that B is preferred (p_win: the same as a probability); no ties"
    how = ("dropped before the fit" if params.ties == "drop" else
           "split as half a win and half a loss; effect: the log-odds of the mean score, logit((1 - p_tie) p_win + "
           "p_tie/2), which the split analysis estimates")
    return (f"p_win: P(B preferred) in a decisive judgment for a typical worker and item; ties: {params.p_tie:.3g} "
            f"of the judgments, {how}" + ("; effect: log-odds of p_win" if params.ties == "drop" else ""))


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


@one_executor
def h2h_mixed_power(
    params: H2HParams,
    workers: Sequence[int] | int,
    items: Sequence[int] | int,
    log_odds: Sequence[float] | float,
    per_item: Sequence[int | None] | int | None = None,
    test: str = "z",
    alpha: float = 0.05,
    n_sims: int = 500,
    seed: int = 0,
    jobs: Jobs = None,
    progress: Progress | None = None,
    store: str | None = None,
    assurance: ParamDraws | None = None,
    draws: int | None = DEFAULT_DRAWS,
    target_power: float = 0.8,
    method: str = "fast",
) -> pd.DataFrame:
    """GLMM power over workers x items x judgments per item x effect (``method``: fast Laplace refits or
    lme4's glmer); with ``assurance`` (draws of sd_worker / sd_item) the assurance over ``draws`` of them."""
    if assurance is not None and store:
        raise InputError("a result store does not cover assurance runs (each design cell runs its draws at once)")
    make = _mixed(params, test, alpha, assurance, draws, n_sims, seed, jobs, target_power, progress, method)
    axes = {"workers": as_list(workers), "items": as_list(items), "per_item": as_list(per_item),
            "log_odds": as_list(log_odds)}
    return power_grid(make, axes, n_sims, seed=seed, jobs=jobs, progress=progress,
                      store=store)


def _mixed(params: H2HParams, test: str, alpha: float, assurance: ParamDraws | None, draws: int | None, n_sims: int,
           seed: int, jobs: Jobs, target_power: float, progress: Progress | None, method: str = "fast") -> Any:
    """``make(workers, items, per_item, log_odds)``: one GLMM cell, or the assurance cell over the draws."""
    analysis = JudgmentGLMM(method, test, alpha)
    def make_for(p: H2HParams) -> Any:
        def make(workers: int, items: int, per_item: int | None, log_odds: float) -> MixedJudgments:
            return MixedJudgments(p, workers, items, log_odds, per_item, analysis)
        return make

    if assurance is None:
        return make_for(params)
    sample = assurance.thin(draws, seed)
    return assured(make_for, params, apply_draws(params, sample), n_sims, seed, target_power, sample.source, jobs,
                   progress)


@one_executor
def h2h_mixed_sample_size(params: H2HParams, log_odds: float, workers: int, per_item: int | None = None,
                          target_power: float = 0.8, test: str = "z", alpha: float = 0.05, n_sims: int = 300,
                          seed: int = 0, jobs: Jobs = None, max_items: int = 2000,
                          progress: Progress | None = None, assurance: ParamDraws | None = None,
                          draws: int | None = DEFAULT_DRAWS, target_assurance: float | None = None,
                          method: str = "fast") -> SolveResult:
    """Smallest number of items reaching the target power with the workers fixed (``method``: fast or lme4); with
    ``assurance``, the smallest whose assurance reaches ``target_assurance`` (default ``target_power``)."""
    if log_odds == 0:
        raise InputError("the sample size for a zero effect is undefined")
    cells = _mixed(params, test, alpha, assurance, draws, n_sims, seed, jobs, target_power, progress, method)
    if assurance is not None and target_assurance is not None:
        target_power = target_assurance

    def make(items: int) -> MixedJudgments:
        return cells(workers, items, per_item, log_odds)

    why = (f"with {workers} workers the worker SD ({params.sd_worker:g}) bounds the information about a "
           "typical worker's preference; add workers")
    return solve(make, "items", 2, max_items, target_power, n_sims=n_sims, seed=seed, jobs=jobs,
                 progress=progress, why=why)


__all__ = [
    "IndependentJudgments",
    "MixedJudgments",
    "effect_to_log_odds",
    "h2h_mde",
    "h2h_mixed_power",
    "h2h_mixed_sample_size",
    "h2h_power",
    "h2h_sample_size",
]
