"""Krippendorff's alpha: the agreement of any number of raters, missing ratings allowed.

Definitions (Krippendorff, *Computing Krippendorff's Alpha-Reliability*, 2011). A *unit* is one thing rated
(by default an item's output of one system); its *pairable values* are its ratings when it has at least two.
The coincidence matrix counts every ordered pair of values within a unit with weight 1 / (m_u - 1)
(m_u: the unit's pairable values)::

    o[c, k] = sum_u  #(c, k pairs in u) / (m_u - 1),   n_c = sum_k o[c, k],   n = sum_c n_c
    alpha   = 1 - (n - 1) * sum o[c, k] delta2(c, k) / sum n_c n_k delta2(c, k)

with the metric's squared difference ``delta2``: nominal ``c != k``; ordinal
``(sum_{g=c..k} n_g - (n_c + n_k) / 2)^2``; interval ``(c - k)^2``; ratio ``((c - k) / (c + k))^2``.
Alpha is undefined (NaN) when every pairable value is the same.

The interval is a cluster bootstrap over units (percentile): units are resampled with replacement and alpha
is recomputed in full, expected disagreement included. Krippendorff's own bootstrap resamples pairable values
as if independent with the expected disagreement held fixed; the pairs of one unit share that unit, and a
unit's raters are correlated, so we resample the independent units instead (it also works unchanged for every
metric and for missing ratings). Its coverage is checked by simulation in ``tests/test_agreement.py``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .errors import InputError

METRICS = ("nominal", "ordinal", "interval", "ratio")
#: the bootstrap's per-unit coincidence arrays are processed in chunks of at most this many numbers
_CHUNK = 4_000_000


@dataclass(frozen=True)
class Alpha:
    """Krippendorff's alpha of one set of ratings, with its bootstrap interval (NaN when ``n_boot`` is 0)."""

    metric: str
    alpha: float
    lower: float
    upper: float
    level: float
    units: int  #: units with at least two ratings (the pairable units)
    pairable: int  #: pairable values (ratings in those units)
    raters: int  #: distinct raters (tidy frame) or columns (matrix) with a pairable value
    n_boot: int

    def __str__(self) -> str:
        ci = "" if self.n_boot == 0 else f", {self.level:.0%} CI [{self.lower:.3f}, {self.upper:.3f}]"
        return (f"Krippendorff's alpha ({self.metric}) = {self.alpha:.3f}{ci}; {self.units} units, "
                f"{self.pairable} pairable values, {self.raters} raters")


@dataclass(frozen=True)
class _Pairable:
    """The pairable data: value counts per unit (units x values), the values, raters."""

    counts: np.ndarray
    values: np.ndarray
    raters: int


def _check_metric(metric: str) -> str:
    if metric not in METRICS:
        raise InputError(f"unknown metric {metric!r} for Krippendorff's alpha; choose one of {', '.join(METRICS)}")
    return metric


def _long(data: Any, unit: str | Sequence[str] | None, rater: str, score: str
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(unit codes, rater codes, values) of a tidy frame or of a units x raters matrix (NaN/None: missing)."""
    if isinstance(data, pd.DataFrame) and score in data.columns:
        if unit is None:
            unit = ["item", "system"] if "system" in data.columns else ["item"]
        cols = [unit] if isinstance(unit, str) else list(unit)
        missing = [c for c in [*cols, rater] if c not in data.columns]
        if missing:
            raise InputError(f"the ratings have no column {missing[0]!r} (columns: {', '.join(map(str, data.columns))})")
        frame = data.loc[data[score].notna(), [*cols, rater, score]]
        keys = [*cols, rater]
        unnamed = frame[keys].isna().any()
        if unnamed.any():
            raise InputError(f"column {unnamed.idxmax()!r} has missing values: every rating needs its unit and rater")
        if frame.duplicated(keys).any():
            first = frame.loc[frame.duplicated(keys), keys].iloc[0].tolist()
            raise InputError(f"rater {first[-1]!r} rated unit {tuple(first[:-1])} twice; name every column that "
                             f"identifies a unit (e.g. a dimension) or compute alpha per group")
        units = pd.MultiIndex.from_frame(frame[cols]).factorize()[0] if len(cols) > 1 else \
            pd.factorize(frame[cols[0]])[0]
        return units, pd.factorize(frame[rater])[0], frame[score].to_numpy()
    try:
        matrix = np.asarray(data, dtype=object)
    except Exception as exc:  # noqa: BLE001 - any unreadable input is the user's
        raise InputError(f"cannot read the ratings as a units x raters matrix: {exc}") from None
    if matrix.ndim != 2:
        raise InputError(f"the ratings must be a tidy frame with a {score!r} column or a units x raters matrix; "
                         f"got {matrix.ndim} dimension(s)")
    present = ~pd.isna(matrix)
    units, raters = np.nonzero(present)
    return units, raters, matrix[present]


def _pairable(data: Any, metric: str, *, unit: str | Sequence[str] | None = None, rater: str = "worker",
              score: str = "score", levels: Sequence[Any] | None = None) -> _Pairable:
    units, raters, raw = _long(data, unit, rater, score)
    if metric == "nominal":
        try:
            codes, values = pd.factorize(pd.Series(raw, dtype=object), sort=True)
        except TypeError:
            raise InputError("the scores mix types that cannot be ordered (e.g. numbers and text)") from None
        values = np.asarray(values, dtype=object)
        if levels is not None:
            try:
                scale = set(levels)
            except TypeError:
                raise InputError("the declared levels must be a list of values") from None
            undeclared = [v for v in values if v not in scale]
            if undeclared:
                raise InputError(f"score {undeclared[0]!r} is outside the declared scale")
    else:
        try:
            numbers = np.asarray(raw, dtype=float)
        except (TypeError, ValueError):
            raise InputError(f"{metric} alpha needs numeric scores") from None
        if not np.isfinite(numbers).all():
            raise InputError(f"{metric} alpha needs finite scores")
        if metric == "ratio" and (numbers < 0).any():
            raise InputError("ratio alpha needs non-negative scores (a ratio scale starts at 0)")
        values = np.unique(numbers)
        if levels is not None:
            try:
                declared = np.unique(np.asarray(levels, dtype=float))
            except (TypeError, ValueError):
                raise InputError(f"{metric} alpha needs numeric levels") from None
            outside = np.setdiff1d(values, declared)
            if outside.size:
                raise InputError(f"score {outside[0]:g} is outside the declared scale "
                                 f"({', '.join(f'{v:g}' for v in declared)})")
            values = declared
        codes = np.searchsorted(values, numbers)
    n_units = int(units.max()) + 1 if units.size else 0
    counts = np.bincount(units * len(values) + codes, minlength=n_units * len(values)).reshape(n_units, len(values))
    keep = counts.sum(axis=1) >= 2
    if not keep.any():
        raise InputError("no unit has ratings from two raters: Krippendorff's alpha needs pairable values")
    pairable_raters = np.unique(raters[keep[units]]).size
    return _Pairable(counts[keep], values, pairable_raters)


def _delta2(metric: str, values: np.ndarray, n_c: np.ndarray) -> np.ndarray:
    """The metric's squared differences between values (a leading axis of ``n_c`` broadcasts)."""
    if metric == "nominal":
        return 1.0 - np.eye(len(values))
    if metric == "ordinal":
        mid = np.cumsum(n_c, axis=-1) - n_c / 2
        return (mid[..., None, :] - mid[..., :, None]) ** 2
    v = values.astype(float)
    diff = v[None, :] - v[:, None]
    if metric == "interval":
        squared: np.ndarray = diff**2
        return squared
    total = v[None, :] + v[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total == 0, 0.0, (diff / np.where(total == 0, 1.0, total)) ** 2)


def _alpha_of(metric: str, values: np.ndarray, o: np.ndarray) -> np.ndarray:
    """Alpha from coincidence matrices (leading axes broadcast)."""
    n_c = o.sum(axis=-1)
    n = n_c.sum(axis=-1)
    d = _delta2(metric, values, n_c)
    observed = (o * d).sum(axis=(-2, -1))
    expected = (n_c[..., :, None] * n_c[..., None, :] * d).sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(expected > 0, 1.0 - (n - 1) * observed / np.where(expected > 0, expected, 1.0), np.nan)


def coincidence_matrix(counts: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Krippendorff's coincidence matrix from value counts per pairable unit (units x values).

    ``weights``: how many times each unit counts (a bootstrap resample); 1 by default.
    """
    w = 1.0 / (counts.sum(axis=1) - 1.0)
    if weights is not None:
        w = w * weights
    pairs: np.ndarray = (counts.T * w) @ counts - np.diag(counts.T @ w)
    return pairs


def krippendorff_alpha(data: Any, metric: str = "interval", *, unit: str | Sequence[str] | None = None,
                       rater: str = "worker", score: str = "score", levels: Sequence[Any] | None = None,
                       n_boot: int = 0, level: float = 0.95, seed: int | np.random.SeedSequence = 1) -> Alpha:
    """Krippendorff's alpha of ratings, with a cluster-bootstrap interval over units when ``n_boot`` > 0.

    ``data``: a tidy frame (``rater``, the ``unit`` columns, ``score``; rows with a missing score are dropped)
    or a units x raters matrix (NaN or None: missing). ``unit``: the columns naming the thing rated; by
    default ``item`` and ``system`` (``item`` alone when there is no system column). ``levels``: the declared
    scale (numeric metrics); a score outside it is an error. The result depends on ``seed`` only.
    """
    _check_metric(metric)
    if n_boot < 0 or not 0 < level < 1:
        raise InputError(f"need n_boot >= 0 and 0 < level < 1; got n_boot={n_boot}, level={level}")
    p = _pairable(data, metric, unit=unit, rater=rater, score=score, levels=levels)
    alpha = float(_alpha_of(metric, p.values, coincidence_matrix(p.counts)))
    lower = upper = float("nan")
    if n_boot:
        draws = bootstrap_alphas(p.counts, p.values, metric, n_boot, seed)
        draws = draws[np.isfinite(draws)]
        if draws.size:
            lower, upper = (float(x) for x in np.quantile(draws, [(1 - level) / 2, (1 + level) / 2]))
    return Alpha(metric, alpha, lower, upper, level, int(p.counts.shape[0]), int(p.counts.sum()), p.raters, n_boot)


def bootstrap_alphas(counts: np.ndarray, values: np.ndarray, metric: str, n_boot: int,
                     seed: int | np.random.SeedSequence = 1) -> np.ndarray:
    """Alpha in ``n_boot`` resamples of the pairable units (with replacement), vectorised.

    Each unit's coincidence contribution is a V x V array (V: distinct values); a resample's coincidence
    matrix is the resample counts times those contributions, summed in chunks of units.
    """
    rng = np.random.default_rng(seed)
    n_units, v = counts.shape
    times = rng.multinomial(n_units, np.full(n_units, 1.0 / n_units), size=n_boot).astype(float)
    w = 1.0 / (counts.sum(axis=1) - 1.0)
    o = np.zeros((n_boot, v * v))
    step = max(1, _CHUNK // max(v * v, n_boot))
    for start in range(0, n_units, step):
        c = counts[start:start + step].astype(float)
        per_unit = (c[:, :, None] * c[:, None, :] - c[:, :, None] * np.eye(v)) * w[start:start + step, None, None]
        o += times[:, start:start + step] @ per_unit.reshape(len(c), v * v)
    return _alpha_of(metric, values, o.reshape(n_boot, v, v))


def alpha_table(ratings: pd.DataFrame, by: Sequence[str] = ("dimension",), metric: str = "interval", *,
                unit: str | Sequence[str] | None = None, rater: str = "worker", score: str = "score",
                levels: Sequence[Any] | None = None, n_boot: int = 0, level: float = 0.95,
                seed: int = 1) -> pd.DataFrame:
    """Alpha per group of a tidy frame: one row per combination of the ``by`` columns (e.g. per dimension,
    or per dimension and system), with ``metric, alpha, lower, upper, level, units, pairable, raters``.

    Each group's bootstrap has its own random stream, spawned from ``seed`` in group order.
    """
    _check_metric(metric)
    by = list(by)
    missing = [c for c in by if c not in ratings.columns]
    if missing:
        raise InputError(f"the ratings have no column {missing[0]!r} to group by")
    groups = list(ratings.groupby(by, sort=True)) if by else [((), ratings)]
    streams = np.random.SeedSequence(seed).spawn(len(groups))
    rows = []
    for (key, frame), stream in zip(groups, streams):
        key = key if isinstance(key, tuple) else (key,)
        a = krippendorff_alpha(frame, metric, unit=unit, rater=rater, score=score, levels=levels, n_boot=n_boot,
                               level=level, seed=stream)
        rows.append({**dict(zip(by, key)), "metric": metric, "alpha": a.alpha, "lower": a.lower, "upper": a.upper,
                     "level": level, "units": a.units, "pairable": a.pairable, "raters": a.raters})
    return pd.DataFrame(rows)
