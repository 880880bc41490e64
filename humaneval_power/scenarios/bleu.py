"""BLEU (or any corpus metric) power by simulated swap effects (Card et al. section 4, App. G).

Each of n test sentences has a swap effect delta_i, the change in the
difference B - A when that sentence's two outputs are exchanged: 0 with
probability P0, otherwise Laplace(mu, b0 / n) with mu = -2 dB / (n (1 - P0)),
so that the observed difference -1/2 sum(delta_i) has mean dB. The
randomization test swaps a random half: its p-value is
P(|sum eps_i delta_i| >= |sum delta_i|) over Rademacher eps (see
``significance.randomization``). Power counts significant studies with the
sign of dB; Type-S and Type-M as everywhere else.

Methods: ``randomization`` (Monte-Carlo permutations, ``permutations`` per
study, p = (c + 1) / (P + 1)), ``saddlepoint`` and ``normal`` (approximate
p-values without permutations; see docs/bleu.md for when they are safe).
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..engine import PowerResult, StudyOutcomes
from ..errors import InputError
from ..planning import SolveResult, as_list, power_grid, solve
from ..progress import Progress, ProgressFn, check_work
from ..significance.randomization import APPROXIMATIONS, approximate_pvalues, montecarlo_pvalues
from ..validation import check_alpha, check_choice, check_count, check_number, check_target_power

METHODS = ("randomization",) + APPROXIMATIONS
#: sentences x permutations per second of ``montecarlo_pvalues``, optimistic (measured 0.4-5e9 on 2 cores)
FLIPS_PER_SECOND = 5e9
#: sentences x permutations per chunk of studies: a few seconds, so progress and Ctrl-C stay responsive
FLIPS_PER_CHUNK = 2e10
_PERMUTATION_HINT = "ask for fewer --permutations or --sims, or --method saddlepoint"


BLEU_MAX = 100.0  #: BLEU (and chrF) points run from 0 to 100


def check_swap_parameters(p0: float, b0: float) -> None:
    check_number("p0", p0)
    check_number("b0", b0)
    if not 0 <= p0 < 1:
        raise InputError(f"p0 must be in [0, 1), got {p0}")
    if not 0 < b0 <= BLEU_MAX:
        raise InputError(f"b0 is in BLEU points (0-{BLEU_MAX:g}): it must be in (0, {BLEU_MAX:g}], got {b0}")


def check_difference(delta: float) -> float:
    """A BLEU difference: BLEU is 0-100, so two systems differ by at most 100 points."""
    if abs(check_number("delta", delta)) > BLEU_MAX:
        raise InputError(f"delta is in BLEU points (0-{BLEU_MAX:g}): two systems differ by at most "
                         f"{BLEU_MAX:g}, got {delta}")
    return float(delta)


def draw_swap_effects(n: int, delta: float, p0: float, b0: float, studies: int,
                      rng: np.random.Generator) -> np.ndarray:
    """Swap effects of ``studies`` simulated test sets (studies x n).

    The zero pattern and the standardised Laplace draws do not depend on
    ``delta``, so cells differing only in the effect share them (smooth curves).
    """
    zero = rng.random((studies, n)) < p0
    lap = rng.laplace(0.0, 1.0, (studies, n))
    mu = -2.0 * delta / (n * (1.0 - p0))
    return np.where(zero, 0.0, mu + (b0 / n) * lap)


@dataclass(frozen=True)
class BleuScenario:
    """A test set of n sentences, expected difference ``delta`` (BLEU points, B - A)."""

    n: int
    delta: float
    p0: float
    b0: float
    method: str = "randomization"
    permutations: int = 10_000
    alpha: float = 0.05

    def __post_init__(self) -> None:
        check_count("n", self.n)
        check_number("delta", self.delta)
        check_swap_parameters(self.p0, self.b0)
        check_alpha(self.alpha)
        check_count("permutations", self.permutations)
        check_choice("method", self.method, METHODS)
        if self.method == "randomization":
            check_work(f"one simulated study of {self.n:,} sentences with {self.permutations:,} permutations",
                       self.study_flips() / FLIPS_PER_SECOND, _PERMUTATION_HINT, warn=False)

    @property
    def effect(self) -> float:
        return self.delta

    def study_flips(self) -> int:
        """Work of one simulated study: sentences x permutations (0 without permutations)."""
        return self.n * self.permutations if self.method == "randomization" else 0

    @property
    def chunk_size(self) -> int:
        # about 50 million swap effects per chunk (memory ~0.4 GB in float64 at most)
        size = min(1000, 50_000_000 // (self.n * (4 if self.method == "randomization" else 8)))
        return max(1, min(size, int(FLIPS_PER_CHUNK // max(1, self.study_flips()))))

    def study_bytes(self) -> int:
        """Memory one simulated study needs (its swap effects; permutation signs in blocks of 2,000)."""
        return self.n * (40 + (5 * min(2000, self.permutations) if self.method == "randomization" else 0))

    def cell(self) -> dict[str, Any]:
        return {"n": self.n, "delta": self.delta, "p0": self.p0, "b0": self.b0, "effect": self.delta,
                "method": self.method, "permutations": self.permutations if self.method == "randomization" else 0,
                "test": "randomization", "alpha": self.alpha}

    def stream_key(self) -> str:
        return json.dumps(["bleu", self.n, self.p0, self.b0])

    def simulate(self, n: int, rng: np.random.Generator) -> StudyOutcomes:
        deltas = draw_swap_effects(self.n, self.delta, self.p0, self.b0, n, rng)
        observed = -0.5 * deltas.sum(axis=1)
        if self.method == "randomization":
            p = montecarlo_pvalues(deltas, self.permutations, rng)
        else:
            p = approximate_pvalues(deltas, self.method)
        zeros = np.zeros(n, dtype=bool)
        return StudyOutcomes(observed, p <= self.alpha, zeros, zeros)

    def exact(self) -> PowerResult | None:
        return None


def bleu_power(n: Sequence[int] | int, delta: Sequence[float] | float, p0: Sequence[float] | float,
               b0: Sequence[float] | float, method: str = "randomization", permutations: int = 10_000,
               alpha: float = 0.05, n_sims: int = 1000, seed: int = 0, jobs: int | None = None,
               progress: Progress | None = None,
               store: str | None = None) -> pd.DataFrame:
    """Power, Type-S and Type-M of the randomization test over n x delta x p0 x b0 (one row per cell)."""
    def make(n: int, delta: float, p0: float, b0: float) -> BleuScenario:
        return BleuScenario(n, delta, p0, b0, method, permutations, alpha)

    axes = {"n": as_list(n), "delta": as_list(delta), "p0": as_list(p0), "b0": as_list(b0)}
    for d in axes["delta"]:
        check_difference(d)
    if method == "randomization":
        flips = sum(k * permutations for k in axes["n"]) * len(axes["delta"]) * len(axes["p0"]) * len(axes["b0"])
        check_work(f"{n_sims:,} simulated studies per cell with {permutations:,} permutations each",
                   flips * n_sims / FLIPS_PER_SECOND, _PERMUTATION_HINT, warn=False)  # the engine warns
    return power_grid(make, axes, n_sims, seed=seed, jobs=jobs, progress=progress,
                      store=store)


def bleu_mde(n: int, p0: float, b0: float, target_power: float = 0.8, method: str = "saddlepoint",
             permutations: int = 10_000, alpha: float = 0.05, n_sims: int = 2000, seed: int = 0,
             jobs: int | None = None, progress: Progress | None = None) -> SolveResult:
    """Smallest dB (BLEU points) whose simulated power reaches the target.

    The same simulated swap patterns are used for every dB (common random
    numbers), so power is a monotone step function of dB.
    """
    check_count("n", n)
    check_swap_parameters(p0, b0)
    check_target_power(target_power, alpha)
    sd = b0 / n * math.sqrt(2 * n * (1 - p0)) / 2  # SD of the observed difference

    def make(delta: float) -> BleuScenario:
        return BleuScenario(n, delta, p0, b0, method, permutations, alpha)

    result = solve(make, "delta", 1e-6 * sd, sd, target_power, integer=False, n_sims=n_sims, seed=seed, jobs=jobs,
                   progress=progress, grow=True)
    if result.value is not None and result.value > BLEU_MAX:
        result = result.noted(f"this difference is beyond the {BLEU_MAX:g} points BLEU can differ by: no "
                              "possible difference is detectable with this test set")
    return result


def bleu_sample_size(delta: float, p0: float, b0: float, target_power: float = 0.8, method: str = "saddlepoint",
                     permutations: int = 10_000, alpha: float = 0.05, n_sims: int = 2000, seed: int = 0,
                     jobs: int | None = None, max_n: int = 10_000_000,
                     progress: Progress | None = None) -> SolveResult:
    """Smallest test-set size whose simulated power for ``delta`` reaches the target."""
    check_difference(delta)
    check_swap_parameters(p0, b0)
    check_target_power(target_power, alpha)
    if delta == 0:
        raise InputError("the sample size for a zero difference is undefined")

    def make(n: int) -> BleuScenario:
        return BleuScenario(n, delta, p0, b0, method, permutations, alpha)

    return solve(make, "n", 10, max_n, target_power, n_sims=n_sims, seed=seed, jobs=jobs, progress=progress)


__all__ = ["METHODS", "BleuScenario", "bleu_mde", "bleu_power", "bleu_sample_size", "draw_swap_effects"]


# ---- paired tests and swap effects of real outputs (files: one segment per line) --------------------------

def system_name(path: str | Path) -> str:
    """A system's name from its output file's name: ``system.HW-TSC.txt`` -> ``HW-TSC``."""
    return Path(path).name.removeprefix("system.").removesuffix(".txt")


def _stats_reader(references: Sequence[str | Path], metric: str) -> tuple[int, Callable[[str | Path], Any]]:
    """The number of references and a function: a system's output file -> its sentence statistics."""
    from ..metrics import corpus_stats, read_lines

    refs = [read_lines(path, "reference") for path in references]
    return len(refs), lambda path: corpus_stats(read_lines(path, "system output"), refs, metric)


def bleu_estimate(references: Sequence[str | Path], sys_a: str | Path, sys_b: str | Path, n_boot: int = 1000,
                  metric: str = "bleu", seed: int = 0) -> dict[str, Any]:
    """Swap effects of two systems' outputs (files, one segment per line, against one or several reference
    files): P0 and b0 with bootstrap intervals (:func:`~humaneval_power.fitting.swap_effects.
    estimate_swap_parameters`), one record naming the systems by their files (:func:`system_name`)."""
    from ..fitting.swap_effects import estimate_swap_parameters

    n_refs, stats_of = _stats_reader(references, metric)
    swap = estimate_swap_parameters(stats_of(sys_a), stats_of(sys_b), n_boot, seed=seed)
    return {"system_a": system_name(sys_a), "system_b": system_name(sys_b), "references": n_refs, **swap}


def bleu_test(references: Sequence[str | Path], baseline: str | Path, systems: Sequence[str | Path],
              paired_bs: bool = False, trials: int | None = None, adjust: str = "holm", rule: str = "sacrebleu",
              metric: str = "bleu", seed: int = 0, progress: ProgressFn | None = None) -> pd.DataFrame:
    """Paired tests of systems' outputs against a baseline's (files, one segment per line): approximate
    randomization, or the paired bootstrap (``paired_bs``), p-values adjusted over the systems
    (:func:`~humaneval_power.significance.paired.compare_with_baseline`); one record per system, named by
    its file (:func:`system_name`)."""
    from ..significance.paired import compare_with_baseline

    n_refs, stats_of = _stats_reader(references, metric)
    names = [system_name(path) for path in systems]
    if len(set(names)) < len(names):
        raise InputError(f"--systems names a system twice: {', '.join(sorted(n for n in set(names) if names.count(n) > 1))}")
    outputs = {name: stats_of(path) for name, path in zip(names, systems)}
    rows = compare_with_baseline(stats_of(baseline), outputs, "bootstrap" if paired_bs else "randomization", trials,
                                 seed, rule, progress, adjust)
    return pd.DataFrame([{**r, "baseline": system_name(baseline), "metric": metric, "references": n_refs}
                         for r in rows])
