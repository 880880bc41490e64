"""Data-generating processes for Likert ratings: what a rating is, given who rated what.

Two parameterisations of the crossed worker/item model (DESIGN.md):

* :class:`SlopeProcess` — Card et al.'s model for two systems (a
  :class:`~humaneval_power.params.LikertParams`), x = -1/2 (A), +1/2 (B):
  ``y = b0 + u[w] + v[i] + x (effect + a[w] + b[i]) + e``;
* :class:`InvariantProcess` — the coding-invariant model for S >= 2 systems:
  ``y = b0 + m[s] + u[w] + uw[w, s] + v[i] + vi[i, s] + e``.

For two systems the two map onto each other as sd_slope^2 = 2 tau^2 and
sd_intercept^2 = sigma^2 + tau^2 / 2, the reverse existing only when
sd_intercept >= sd_slope / 2 (:meth:`InvariantProcess.from_likert`).

Every process draws its random effects from the stream first and adds the
system means last, so studies that differ only in the effect share their
random numbers (common random numbers). The fully crossed two-system cell
draws whole data sets in one array (:func:`simulate_ratings`, rows in the order
of :func:`long_design`); :func:`simulate_long` draws one study of any pilot's
(worker, item) pairs as a data frame. (The ordinal process lives in
:mod:`humaneval_power.ordinal_process`.)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd

from .designs import Layout
from .errors import InputError
from .params import LikertParams
from .validation import check_magnitude

INVARIANT_SDS = ("sd_worker", "sd_worker_system", "sd_item", "sd_item_system", "sd_residual")


class Process(Protocol):
    """What a rating is, given who rated what: what the Likert cell needs of a process."""

    systems: int

    def key(self) -> list[Any]:
        """What identifies its random stream (not the system means)."""

    def record(self) -> dict[str, Any]:
        """Its part of the result record."""

    def simulate(self, layout: Layout, means: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        """Ratings (N, n) of n studies, the random effects drawn before the ``means`` are added."""


def system_means(systems: int, effect: float, pair: tuple[int, int], means: tuple[float, ...] | None) -> np.ndarray:
    """Mean rating of each system relative to the first: ``means`` as given, or ``effect`` between the
    ``pair`` (B - A) with the other systems spaced evenly between them."""
    if means is not None:
        m = np.asarray(means, float)
        if m.shape != (systems,) or not np.all(np.isfinite(m)):
            raise InputError(f"give {systems} finite system means, got {list(means)}")
        return m - m[0]
    a, b = pair
    m = np.linspace(0.0, effect, systems)
    order = [a] + [s for s in range(systems) if s not in pair] + [b]
    out = np.empty(systems)
    out[order] = m
    return out - out[0]


def _effects(layout: Layout, sd: float, levels: np.ndarray, count: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """Random effects (n, N) for ``levels`` (N,) or (n, N) out of ``count`` levels per study."""
    draws = rng.standard_normal((n, count)) * sd
    idx = np.broadcast_to(levels, (n, layout.size))
    return np.take_along_axis(draws, idx, axis=1)


@dataclass(frozen=True)
class SlopeProcess:
    """Card et al.'s slope model for two systems (mean-difference coding)."""

    params: LikertParams
    systems: int = 2

    def __post_init__(self) -> None:
        if self.systems != 2:
            raise InputError("the slope parameters describe two systems; for more, give the coding-invariant SDs "
                             "(--sd-worker, --sd-worker-system, --sd-item, --sd-item-system, --sd-residual)")

    @property
    def name(self) -> str:
        return self.params.name

    def key(self) -> list[Any]:
        return ["slopes", self.params.intercept, sorted(self.params.sds.items())]

    def record(self) -> dict[str, Any]:
        return {"params": self.params.name}

    def simulate(self, layout: Layout, means: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        """Ratings (N, n) of n studies."""
        p = self.params
        x = layout.system - 0.5
        u = _effects(layout, p.sd_worker_intercept, layout.worker, layout.n_workers, n, rng)
        a = _effects(layout, p.sd_worker_slope, layout.worker, layout.n_workers, n, rng)
        v = _effects(layout, p.sd_item_intercept, layout.item, layout.n_items, n, rng)
        b = _effects(layout, p.sd_item_slope, layout.item, layout.n_items, n, rng)
        e = rng.standard_normal((n, layout.size)) * p.sd_residual
        effect = means[1] - means[0]
        return (p.intercept + u + v + x * (a + b) + e + x * effect).T


@dataclass(frozen=True)
class InvariantProcess:
    """The coding-invariant model: SDs of worker, worker:system, item, item:system and residual."""

    sd_worker: float
    sd_worker_system: float
    sd_item: float
    sd_item_system: float
    sd_residual: float
    systems: int = 2
    intercept: float = 0.5
    name: str = "invariant"

    def __post_init__(self) -> None:
        for k in INVARIANT_SDS + ("intercept",):
            check_magnitude(k, getattr(self, k))
        for k in INVARIANT_SDS:
            if getattr(self, k) < 0:
                raise InputError(f"{k} must be >= 0, got {getattr(self, k)}")
        if self.sd_residual <= 0:
            raise InputError("sd_residual must be > 0")

    @classmethod
    def from_likert(cls, params: LikertParams, systems: int) -> InvariantProcess:
        """The invariant SDs of a two-system slope parameter set (where they exist), for S systems."""
        c = params.invariant_components()
        return cls(c["sd_worker"], c["sd_worker_system"], c["sd_item"], c["sd_item_system"], params.sd_residual,
                   systems, params.intercept, params.name + " (invariant)")

    @property
    def sds(self) -> dict[str, float]:
        return {k: float(getattr(self, k)) for k in INVARIANT_SDS}

    def key(self) -> list[Any]:
        return ["invariant", self.intercept, sorted(self.sds.items())]

    def record(self) -> dict[str, Any]:
        return {"params": self.name}

    def simulate(self, layout: Layout, means: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        """Ratings (N, n) of n studies."""
        s = layout.system
        ws = layout.worker * layout.n_systems + s
        its = layout.item * layout.n_systems + s
        y = (_effects(layout, self.sd_worker, layout.worker, layout.n_workers, n, rng)
             + _effects(layout, self.sd_worker_system, ws, layout.n_workers * layout.n_systems, n, rng)
             + _effects(layout, self.sd_item, layout.item, layout.n_items, n, rng)
             + _effects(layout, self.sd_item_system, its, layout.n_items * layout.n_systems, n, rng)
             + rng.standard_normal((n, layout.size)) * self.sd_residual)
        return (self.intercept + y + means[s]).T

    def standardized(self, difference: float) -> float:
        """A difference in units of the SD of a single rating."""
        return difference / math.sqrt(sum(v * v for v in self.sds.values()))


def simulate_ratings(
    params: LikertParams, workers: int, items: int, effect: float, n: int, rng: np.random.Generator
) -> np.ndarray:
    """Fully crossed data sets of the slope model: shape (n, W, I, 2), last axis system A then B."""
    x = np.array([-0.5, 0.5])
    u = rng.normal(0.0, params.sd_worker_intercept, (n, workers, 1, 1))
    a = rng.normal(0.0, params.sd_worker_slope, (n, workers, 1, 1))
    v = rng.normal(0.0, params.sd_item_intercept, (n, 1, items, 1))
    b = rng.normal(0.0, params.sd_item_slope, (n, 1, items, 1))
    e = rng.normal(0.0, params.sd_residual, (n, workers, items, 2))
    return params.intercept + u + v + (effect + a + b) * x + e


def long_design(workers: int, items: int) -> dict[str, np.ndarray]:
    """Design columns (worker, item from 1; x = -1/2, +1/2) of the long format matching
    ``simulate_ratings(...).reshape(n, -1)``."""
    w, i, s = np.meshgrid(np.arange(workers), np.arange(items), np.arange(2), indexing="ij")
    return {"worker": w.ravel() + 1, "item": i.ravel() + 1, "x": np.where(s.ravel() == 1, 0.5, -0.5)}


def simulate_long(
    params: LikertParams, pairs: pd.DataFrame, effect: float, rng: np.random.Generator, baseline: str = "A",
    other: str = "B",
) -> pd.DataFrame:
    """One simulated study of the slope model in long format for any design: each (worker, item) row of
    ``pairs`` rates the item under both systems. Columns worker, item, system, score."""
    workers = pd.factorize(pairs["worker"])[0]
    items = pd.factorize(pairs["item"])[0]
    n_w, n_i = workers.max() + 1, items.max() + 1
    u, a = rng.normal(0, params.sd_worker_intercept, n_w), rng.normal(0, params.sd_worker_slope, n_w)
    v, b = rng.normal(0, params.sd_item_intercept, n_i), rng.normal(0, params.sd_item_slope, n_i)
    rows = []
    for x, system in ((-0.5, baseline), (0.5, other)):
        mean = params.intercept + u[workers] + v[items] + (effect + a[workers] + b[items]) * x
        rows.append(pd.DataFrame({
            "worker": pairs["worker"].astype(str).to_numpy(), "item": pairs["item"].astype(str).to_numpy(),
            "system": system, "score": mean + rng.normal(0, params.sd_residual, len(pairs)),
        }))
    return pd.concat(rows, ignore_index=True)
