"""Contrast families: which differences between system means a study tests.

One home for every command that compares systems (the planner's per-study analysis, ``analyze``,
the head-to-head analysis, ``bleu test``). A contrast ``(lower, upper)`` is the difference
``mean[upper] - mean[lower]``. Each family names its default adjustment, as emmeans' ``*.emmc``
families do; ours is Holm's step-down wherever a family has more than one contrast, because it is
valid for every model the toolkit fits, the per-study analysis of the planner included (emmeans
defaults to Tukey for all pairs and to Dunnett for each versus a baseline; both are available as
``adjust``: :mod:`humaneval_power.multiplicity`).

>>> family_pairs("pairs", 3)
[(0, 1), (0, 2), (1, 2)]
>>> family_pairs("baseline", 3, first=(1, 2))
[(1, 2), (0, 1), (0, 2)]
>>> treatment_row(3, 1, 2).tolist()
[0.0, -1.0, 1.0]
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from .errors import InputError
from .validation import check_choice

Contrast = tuple[int, int]


@dataclass(frozen=True)
class ContrastFamily:
    """A named family of contrasts between systems and the adjustment it gets unless told otherwise."""

    name: str
    default_adjust: str
    description: str

    def pairs(self, systems: int, pair: Contrast = (0, 1)) -> list[Contrast]:
        """The family's ``(lower, upper)`` pairs among ``systems`` systems (``pair``: the one pair of ``"pair"``)."""
        if self.name == "pair":
            return [pair]
        if self.name == "baseline":
            return [(0, s) for s in range(1, systems)]
        return list(itertools.combinations(range(systems), 2))


#: every family by name; each names its default adjustment
FAMILIES: dict[str, ContrastFamily] = {
    "pair": ContrastFamily("pair", "none", "one pair of systems (the pair of interest)"),
    "baseline": ContrastFamily("baseline", "holm", "each system against the first (the baseline)"),
    "pairs": ContrastFamily("pairs", "holm", "all pairs of systems"),
}
#: the family names, in the order the CLI lists them
COMPARISONS = tuple(FAMILIES)


def get_family(name: str) -> ContrastFamily:
    """The contrast family called ``name`` (one line naming the choices otherwise)."""
    check_choice("comparison", name, COMPARISONS)
    return FAMILIES[name]


def family_pairs(name: str, systems: int, first: Contrast | None = None) -> list[Contrast]:
    """The ``(lower, upper)`` pairs of family ``name``; ``first`` (the pair of interest) leads when given
    and is kept whichever way round the family lists it."""
    if systems < 2:
        raise InputError(f"contrasts need at least two systems, got {systems}")
    pairs = get_family(name).pairs(systems, first or (0, 1))
    if first is None:
        return pairs
    if first[0] == first[1] or not all(0 <= s < systems for s in first):
        raise InputError(f"the pair of interest {first} is not two of the {systems} systems")
    return [first] + [c for c in pairs if c != first and c[::-1] != first]


def treatment_row(systems: int, lower: int, upper: int) -> np.ndarray:
    """The row over treatment-coded fixed effects (intercept = the first system) giving
    ``mean[upper] - mean[lower]``."""
    row = np.zeros(systems)
    row[upper] += 1.0
    row[lower] -= 1.0
    row[0] = 0.0  # the intercept's column stands where the first system's dummy would be
    return row


def treatment_rows(systems: int, pairs: list[Contrast]) -> np.ndarray:
    """:func:`treatment_row` for each pair, one row each."""
    return np.array([treatment_row(systems, a, b) for a, b in pairs]).reshape(len(pairs), systems)


def check_weights(weights: np.ndarray, systems: int) -> np.ndarray:
    """Custom contrasts (rows of weights over the system means, each summing to zero): checked, as floats."""
    w = np.atleast_2d(np.asarray(weights, float))
    if w.shape[1] != systems or not np.isfinite(w).all():
        raise InputError(f"custom contrasts need {systems} finite weights per row, got shape {w.shape}")
    if np.any(np.abs(w.sum(axis=1)) > 1e-9) or np.any(np.abs(w).sum(axis=1) == 0):
        raise InputError("each custom contrast's weights must sum to zero and not all be zero")
    return w


__all__ = ["COMPARISONS", "FAMILIES", "Contrast", "ContrastFamily", "check_weights", "family_pairs", "get_family",
           "treatment_row", "treatment_rows"]
