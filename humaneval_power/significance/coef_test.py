"""Tests of one fixed-effect coefficient from its estimate, SE and df."""
from __future__ import annotations

import numpy as np
from scipy import stats

from ..errors import InputError
from ..validation import check_choice

#: Tests offered for a mixed-model coefficient.
#: ``satterthwaite``: REML fit, two-sided t-test with Satterthwaite df (lmerTest; default).
#: ``card2020``: ML fit, significant iff t > z_{1-alpha/2} (Card et al. 2020: t > 1.96).
#: ``z``: REML fit, two-sided Wald z-test.
COEFFICIENT_TESTS = ("satterthwaite", "card2020", "z")


def check_test(test: str) -> str:
    """Validate a test name."""
    check_choice("test", test, COEFFICIENT_TESTS)
    return test


def uses_reml(test: str) -> bool:
    """Whether the model behind ``test`` is fitted by REML (else ML)."""
    return check_test(test) != "card2020"


def critical_value(test: str, alpha: float, df: np.ndarray | float = np.inf) -> np.ndarray:
    """Critical |t| of the test (one-sided cut-off for card2020)."""
    check_test(test)
    if test == "satterthwaite":
        return stats.t.isf(alpha / 2, df)
    return np.asarray(stats.norm.isf(alpha / 2))


def coefficient_test(
    estimate: np.ndarray, se: np.ndarray, df: np.ndarray | None, test: str, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """p-values and significance decisions.

    Two-sided tests are significant iff p <= alpha. ``card2020`` counts only
    positive detections, t > z_{1-alpha/2}, and reports the one-sided p-value.

    >>> p, sig = coefficient_test(np.array([0.3]), np.array([0.1]), None, "z", 0.05)
    >>> bool(sig[0]), round(float(p[0]), 4)
    (True, 0.0027)
    """
    check_test(test)
    t = np.asarray(estimate, float) / np.asarray(se, float)
    if test == "satterthwaite":
        if df is None:
            raise InputError("the satterthwaite test needs degrees of freedom")
        p = 2.0 * stats.t.sf(np.abs(t), df)
        return p, p <= alpha
    if test == "z":
        p = 2.0 * stats.norm.sf(np.abs(t))
        return p, p <= alpha
    return stats.norm.sf(t), t > stats.norm.isf(alpha / 2)
