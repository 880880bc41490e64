"""Checks at the API boundary, shared by every scenario: clear InputErrors."""
from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from .errors import InputError

#: what to do with tied head-to-head judgments: ``drop`` them, or ``split`` each into half a win and half a loss
TIE_POLICIES = ("drop", "split")


def check_count(name: str, value: Any, minimum: int = 1) -> int:
    """An integer >= ``minimum`` (booleans refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_number(name: str, value: Any) -> float:
    """A finite number (booleans refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) or not math.isfinite(value):
        raise InputError(f"{name} must be a finite number, got {value!r}")
    return float(value)


#: the largest size of a model parameter (an SD, a mean): its square and the square of a variance
#: (Satterthwaite's df, information matrices) stay well inside double precision (about 1e308)
MAX_MAGNITUDE = 1e50


def check_magnitude(name: str, value: float) -> float:
    """A finite number no larger than :data:`MAX_MAGNITUDE` in size."""
    if not abs(check_number(name, value)) <= MAX_MAGNITUDE:
        raise InputError(f"{name} {value:g} is too large: the model's variances would overflow (the limit is "
                         f"{MAX_MAGNITUDE:g}); rescale the ratings")
    return float(value)


#: the range of the scores' SD in which the fits give the same answer at every scale (their tolerances are
#: absolute): ``analyze``/``fit`` of the expert ratings times 10^k keep df, p and estimates / 10^k within
#: 1e-6 (relative) of k = 0 with the statsmodels backend, and within lme4's own convergence noise (2e-3)
#: with lme4, for SDs in this range; outside, the df drift (SD 1.5e-6: 9.0 vs 8.9; 1.5e-8: 900)
#: (tests/test_score_scale.py)
SCORE_SPREAD = (1e-3, 1e3)


def check_spread(what: str, sd: float, remedy: str) -> None:
    """Refuse an SD outside :data:`SCORE_SPREAD`, where the fits' absolute tolerances make results
    depend on the unit of the scores; ``remedy`` says what to rescale."""
    lo, hi = SCORE_SPREAD
    if 0 < sd < lo:
        raise InputError(f"{what} vary by only {sd:.2g} (SD): multiply {remedy} by a power of ten (the fits' "
                         f"tolerances are absolute; results are reliable for SDs in [{lo:g}, {hi:g}])")
    if sd > hi:
        raise InputError(f"{what} vary by {sd:.2g} (SD): divide {remedy} by a power of ten (the fits' "
                         f"tolerances are absolute; results are reliable for SDs in [{lo:g}, {hi:g}])")


def check_scores(scores: Any, column: str, systems: Any = None) -> None:
    """Scores a mixed model can fit: not all equal, nor constant within each system (no variance to
    estimate: lme4 would report SDs of 1e-15 and t of 1e15), none beyond :data:`MAX_MAGNITUDE`
    (its variances would overflow), an SD within :data:`SCORE_SPREAD` (scale-invariant results)."""
    values = np.asarray(scores, dtype=float)
    if values.size and np.all(values == values[0]):
        raise InputError(f"every score in column {column!r} is {values[0]:g}: constant scores have no variance "
                         "to fit")
    if values.size and systems is not None:
        import pandas as pd

        if pd.Series(values).groupby(np.asarray(systems)).nunique().max() == 1:
            raise InputError(f"the scores in column {column!r} never vary within a system: there is no "
                             "variance to fit (every rating of a system is the same)")
    if values.size and np.max(np.abs(values)) > MAX_MAGNITUDE:
        raise InputError(f"scores in column {column!r} reach {np.max(np.abs(values)):g}, beyond "
                         f"{MAX_MAGNITUDE:g}: the model's variances would overflow; rescale them (--scale MIN MAX)")
    if values.size > 1:
        dev = values - np.mean(values)
        top = float(np.max(np.abs(dev)))  # the SD without underflow (1e-300 squared is 0)
        check_spread(f"the scores in column {column!r}", top * float(np.std(dev / top)) if top else 0.0, "them")


def check_alpha(alpha: Any) -> float:
    """A significance level in (0, 1)."""
    a = check_number("alpha", alpha)
    if not 0 < a < 1:
        raise InputError(f"alpha must be in (0, 1), got {alpha!r}")
    return a


def check_target_power(value: Any, alpha: float | None = None) -> float:
    """A target power in (0, 1), and above ``alpha`` when given: a test at level alpha has power alpha
    with no effect at all, so every effect (or none) reaches a target at or below it."""
    p = check_number("target power", value)
    if not 0 < p < 1:
        raise InputError(f"target power must be in (0, 1), got {value}")
    if alpha is not None and p <= alpha:
        raise InputError(f"target power {p:g} is at or below alpha {alpha:g}: a test has power alpha with no "
                         "effect at all, so there is nothing to solve for; give a target above alpha")
    return p


def check_choice(what: str, value: Any, choices: Any) -> Any:
    """One of ``choices`` (any iterable of allowed values)."""
    if value not in choices:
        raise InputError(f"unknown {what} {value!r}; choose one of {', '.join(map(str, choices))}")
    return value


def available_memory() -> int:
    """Bytes of memory available to this run (Linux: MemAvailable; elsewhere: physical memory)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_memory(what: str, need: float) -> None:
    """Refuse, before any work, a computation that needs ``need`` bytes at once when less is available."""
    available = available_memory()
    if need > available:
        raise InputError(f"{what} needs about {need / 2**30:.3g} GiB of memory, more than the "
                         f"{available / 2**30:.3g} GiB available; choose a smaller design")
