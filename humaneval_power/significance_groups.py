"""Significance groups of systems from adjusted pairwise tests: a compact letter display and WMT-style clusters.

Both take the pairwise results as a long frame (``system``, ``versus``, ``p_adjusted``: the contrasts table of
the analysis) or a square frame of p-values (or of significance flags, True = significantly different).
A pair is significantly different when its adjusted p-value is below ``alpha`` (strictly, as multcompView).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from .errors import InputError


def significance_matrix(pairwise: pd.DataFrame, systems: Sequence[str] | None = None, alpha: float = 0.05,
                        p_column: str = "p_adjusted") -> pd.DataFrame:
    """A symmetric systems x systems frame of flags: True where the pair is significantly different.

    ``pairwise``: long (``system``, ``versus``, ``p_column``) or square (p-values, or booleans). Systems in
    ``systems`` (default: all named, in order of first appearance, ``versus`` before ``system`` in each row, so
    the analysis' ``B - A, C - A, ...`` gives ``A, B, C, ...``) must have every pair tested exactly once.
    """
    if not 0 < alpha < 1:
        raise InputError(f"alpha must be between 0 and 1; got {alpha}")
    if {"system", "versus"} <= set(pairwise.columns):
        if p_column not in pairwise.columns:
            raise InputError(f"the pairwise table has no {p_column!r} column")
        names = list(dict.fromkeys(n for pair in zip(pairwise["versus"], pairwise["system"]) for n in pair))
        p = pd.DataFrame(np.nan, index=names, columns=names, dtype=float)
        for s, v, value in zip(pairwise["system"], pairwise["versus"], pairwise[p_column]):
            if s == v or not np.isnan(p.at[s, v]):
                raise InputError(f"the pair {s!r} - {v!r} appears twice or compares a system with itself")
            p.at[s, v] = p.at[v, s] = float(value)
        square = p
    else:
        square = pairwise
        if list(square.index) != list(square.columns):
            raise InputError("a square pairwise table needs the same systems as rows and columns, in one order")
        names = list(square.index)
    systems = names if systems is None else list(systems)
    unknown = [s for s in systems if s not in names]
    if unknown:
        raise InputError(f"system {unknown[0]!r} is not in the pairwise table")
    if len(set(systems)) != len(systems) or len(systems) < 2:
        raise InputError(f"need two or more distinct systems; got {systems}")
    square = square.loc[systems, systems]
    values = square.to_numpy()
    off = ~np.eye(len(systems), dtype=bool)
    if values.dtype == bool:
        flags = values
    else:
        numbers = values.astype(float)
        if np.isnan(numbers[off]).any():
            i, j = np.argwhere(np.isnan(numbers) & off)[0]
            raise InputError(f"no p-value for the pair {systems[i]!r} - {systems[j]!r}")
        if ((numbers[off] < 0) | (numbers[off] > 1)).any():
            raise InputError("p-values must be between 0 and 1")
        flags = numbers < alpha
    if not (flags == flags.T).all():
        raise InputError("the pairwise table is not symmetric")
    return pd.DataFrame(flags & off, index=systems, columns=systems)


def _absorb(columns: list[np.ndarray]) -> list[np.ndarray]:
    """Drop every letter whose systems all share another letter (multcompView's absorb, in its order)."""
    changed = True
    while changed:
        changed = False
        for i in range(len(columns) - 1):
            for j in range(i + 1, len(columns)):
                if columns[i][columns[j]].all():
                    del columns[j]
                elif columns[j][columns[i]].all():
                    del columns[i]
                else:
                    continue
                changed = True
                break
            if changed:
                break
    return columns


def _letter_names(count: int) -> list[str]:
    """a..z, A..Z, then two-character names (more than 52 letters are rare)."""
    base = [chr(c) for c in range(ord("a"), ord("z") + 1)] + [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    names = list(base)
    for first in base:
        if len(names) >= count:
            break
        names += [first + second for second in base]
    return names[:count]


def compact_letters(pairwise: pd.DataFrame, systems: Sequence[str] | None = None, alpha: float = 0.05,
                    p_column: str = "p_adjusted") -> pd.Series:
    """Compact letter display: systems sharing a letter are not significantly different.

    Piepho's (2004) insert-and-absorb algorithm as R's ``multcompView::multcompLetters`` runs it (the same
    order of pairs, so the same letters as sets of systems): start with one letter for all systems; for each
    significant pair, split every letter holding both into a copy without each; drop letters contained in
    another. Letters are then named in order of their first system, so pass ``systems`` best first (by mean)
    for the usual display where ``a`` marks the best group. Returns a Series: system -> letters.
    """
    flags = significance_matrix(pairwise, systems, alpha, p_column)
    names = list(flags.index)
    n = len(names)
    columns: list[np.ndarray] = [np.ones(n, dtype=bool)]
    for j in range(n - 1):  # multcompView's order: the lower triangle, column by column
        for i in range(j + 1, n):
            if not flags.iat[i, j]:
                continue
            both = [c for c in columns if c[i] and c[j]]
            if not both:
                continue
            copies = [c.copy() for c in both]
            for c in copies:
                c[j] = False
            for c in both:
                c[i] = False
            columns = _absorb(columns + copies)
    columns.sort(key=lambda c: (int(np.argmax(c)), [-int(x) for x in c]))
    letters = _letter_names(len(columns))
    return pd.Series(["".join(letter for letter, c in zip(letters, columns) if c[k]) for k in range(n)],
                     index=pd.Index(names, name="system"), name="letters")


def letter_sets(letters: Mapping[str, str] | pd.Series) -> frozenset[frozenset[str]]:
    """The letter display as a set of groups (the systems carrying each letter): equal displays whatever the
    names of the letters. Letters are single characters here (as with up to 52 letters)."""
    groups: dict[str, set[str]] = {}
    for system, code in dict(letters).items():
        for letter in code:
            groups.setdefault(letter, set()).add(system)
    return frozenset(frozenset(g) for g in groups.values())


def wmt_clusters(means: Mapping[str, float] | pd.Series, pairwise: pd.DataFrame, alpha: float = 0.05,
                 p_column: str = "p_adjusted", higher_is_better: bool = True) -> pd.DataFrame:
    """WMT-style clusters: an ordered partition of the systems (best cluster first).

    Definition: order the systems by their means (best first). A boundary is drawn between positions p and
    p + 1 exactly when every system ranked 1..p is significantly better (significantly different and with a
    better mean) than every system ranked p+1..n. Clusters are the runs between boundaries, so every system
    is significantly better than every system of every later cluster (in particular of the next one, the WMT
    requirement), and no finer cut of the ranking has that property. Returns system, mean, cluster (1 = best),
    rank range of the cluster (``rank_low``, ``rank_high``), in ranking order.
    """
    series = pd.Series(means, dtype=float)
    if len(series) < 2 or not np.isfinite(series.to_numpy()).all() or series.index.has_duplicates:
        raise InputError("the means must be one finite number per system, for two or more systems")
    order = series.sort_values(ascending=not higher_is_better, kind="stable").index.tolist()
    flags = significance_matrix(pairwise, order, alpha, p_column).to_numpy()
    values = series[order].to_numpy()
    better = flags & ((values[:, None] > values[None, :]) if higher_is_better else (values[:, None] < values[None, :]))
    n = len(order)
    cuts = [p for p in range(1, n) if better[:p, p:].all()]
    bounds = [0, *cuts, n]
    cluster = np.repeat(np.arange(1, len(bounds)), np.diff(bounds))
    low = np.repeat(np.array(bounds[:-1]) + 1, np.diff(bounds))
    high = np.repeat(np.array(bounds[1:]), np.diff(bounds))
    return pd.DataFrame({"system": order, "mean": values, "cluster": cluster, "rank_low": low, "rank_high": high})

