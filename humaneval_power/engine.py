"""The simulation engine of Card et al. (2020, Fig. 2), generic over scenarios.

A *scenario* is one design cell of a data-generating process plus the test
applied to each simulated study. The engine splits ``n_sims`` into chunks,
gives every chunk its own random stream derived from one seed (so results do
not depend on the number of processes), runs the chunks (in parallel, with
progress and an optional result store to resume from; see :mod:`.executors`
and :mod:`.store`) and summarises:

* **power**: share of studies that are significant *with the sign of the true
  effect* (failed fits count as not significant); with a zero effect, the
  rejection rate;
* **type_s**: among significant studies, the share with the wrong sign;
* **type_m**: among significant studies, mean |estimate| / |true effect|;
* a Clopper-Pearson 95% interval on power, counts of failed / singular fits
  and of fits with warnings, and power excluding failed fits.
"""
from __future__ import annotations

import hashlib
import math
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd
from scipy import stats

from .errors import InputError, Interrupted
from .executors import Jobs, costliest_first, using
from .progress import (
    LongRunWarning,
    ProgressFn,
    as_progress,
    format_duration,
    format_elapsed,
)
from .store import Store, cell_key
from .validation import check_memory

ENGINE_VERSION = 1


@dataclass(frozen=True)
class StudyOutcomes:
    """Per-study results of one chunk of simulated studies (arrays of equal length)."""

    estimate: np.ndarray
    significant: np.ndarray
    failed: np.ndarray
    singular: np.ndarray
    warned: np.ndarray | None = None
    df: np.ndarray | None = None
    #: every true difference of a family of contrasts detected with the right sign (several systems)
    all_detected: np.ndarray | None = None


@dataclass
class PowerCounts:
    """Additive summary of simulated studies (chunks add up to a cell)."""

    n: int = 0
    n_failed: int = 0
    n_singular: int = 0
    n_warned: int = 0
    n_significant: int = 0
    n_correct_sign: int = 0
    n_wrong_sign: int = 0
    sum_abs_estimate_significant: float = 0.0
    sum_estimate: float = 0.0
    sum_df: float = 0.0
    n_df: int = 0
    n_family: int = 0
    n_all_detected: int = 0

    @classmethod
    def from_outcomes(cls, out: StudyOutcomes, effect: float) -> PowerCounts:
        """Count the outcomes of one chunk against the true effect."""
        ok = ~np.asarray(out.failed, bool)
        est = np.asarray(out.estimate, float)
        sig = np.asarray(out.significant, bool) & ok
        sign = np.sign(effect)
        correct = sig & (np.sign(est) == sign) if sign != 0 else np.zeros_like(sig)
        df = np.asarray(out.df, float)[ok] if out.df is not None else np.array([])
        df = df[np.isfinite(df)]
        return cls(
            n=int(est.size),
            n_failed=int((~ok).sum()),
            n_singular=int((np.asarray(out.singular, bool) & ok).sum()),
            n_warned=int(np.asarray(out.warned, bool).sum()) if out.warned is not None else 0,
            n_significant=int(sig.sum()),
            n_correct_sign=int(correct.sum()),
            n_wrong_sign=int((sig & ~correct).sum()) if sign != 0 else 0,
            sum_abs_estimate_significant=float(np.abs(est[sig]).sum()),
            sum_estimate=float(est[ok].sum()),
            sum_df=float(df.sum()),
            n_df=int(df.size),
            n_family=int(est.size) if out.all_detected is not None else 0,
            n_all_detected=int((np.asarray(out.all_detected, bool) & ok).sum()) if out.all_detected is not None else 0,
        )

    def __add__(self, other: PowerCounts) -> PowerCounts:
        return PowerCounts(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval for a binomial proportion k/n."""
    if n <= 0:
        return (math.nan, math.nan)
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else float(stats.beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - a, k + 1, n - k))
    return lo, hi


@dataclass(frozen=True)
class PowerResult:
    """Power of one design cell. ``cell`` holds the design fields (workers, items, ...)."""

    cell: dict[str, Any]
    power: float
    ci_low: float
    ci_high: float
    power_excluding_failures: float
    type_s: float
    type_m: float
    mean_estimate: float
    n_sims: int
    n_failed: int
    n_singular: int
    n_warnings: int
    df: float = math.nan  #: mean (Satterthwaite) df over studies; the exact df for analytic tiers
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_counts(cls, cell: dict[str, Any], c: PowerCounts) -> PowerResult:
        """Summarise the counts of a cell (``cell['effect']`` is the true effect)."""
        effect = float(cell["effect"])
        k = c.n_correct_sign if effect != 0 else c.n_significant
        lo, hi = clopper_pearson(k, c.n)
        valid = c.n - c.n_failed
        nan = math.nan
        return cls(
            cell=dict(cell),
            power=k / c.n if c.n else nan,
            ci_low=lo,
            ci_high=hi,
            power_excluding_failures=k / valid if valid else nan,
            type_s=c.n_wrong_sign / c.n_significant if c.n_significant and effect != 0 else nan,
            type_m=(c.sum_abs_estimate_significant / c.n_significant / abs(effect))
            if c.n_significant and effect != 0
            else nan,
            mean_estimate=c.sum_estimate / valid if valid else nan,
            n_sims=c.n,
            n_failed=c.n_failed,
            n_singular=c.n_singular,
            n_warnings=c.n_warned,
            df=c.sum_df / c.n_df if c.n_df else nan,
            extra={"power_all": c.n_all_detected / c.n_family} if c.n_family else {},
        )

    @classmethod
    def closed_form(cls, cell: dict[str, Any], power: float, type_s: float, type_m: float, df: float = math.nan,
                    extra: dict[str, Any] | None = None) -> PowerResult:
        """An exact (not simulated) result: no Monte-Carlo interval, no simulated studies."""
        return cls(cell=dict(cell), power=power, ci_low=power, ci_high=power, power_excluding_failures=power,
                   type_s=type_s, type_m=type_m, mean_estimate=float(cell["effect"]), n_sims=0, n_failed=0,
                   n_singular=0, n_warnings=0, df=df, extra=extra or {})

    def record(self) -> dict[str, Any]:
        """One flat record: design fields first, then the results."""
        d = asdict(self)
        cell, extra = d.pop("cell"), d.pop("extra")
        return {**cell, **d, **extra}

    def __str__(self) -> str:
        design = ", ".join(f"{k}={v}" for k, v in self.cell.items())
        ci = f"[{self.ci_low:.3f}, {self.ci_high:.3f}]"
        return (
            f"{design}: power {self.power:.3f} {ci}, Type-S {self.type_s:.3g}, "
            f"Type-M {self.type_m:.3g} ({self.n_sims} sims, {self.n_failed} failed, "
            f"{self.n_singular} singular)"
        )


class Scenario(Protocol):
    """One design cell of a data-generating process plus the test applied to it."""

    @property
    def effect(self) -> float: ...

    @property
    def chunk_size(self) -> int: ...

    def cell(self) -> dict[str, Any]:
        """Record fields describing the cell (must include ``effect``)."""

    def stream_key(self) -> str:
        """What identifies the random stream: cells that differ only in effect or
        test share it (common random numbers make power curves smooth)."""

    def simulate(self, n: int, rng: np.random.Generator) -> StudyOutcomes:
        """Simulate and test ``n`` studies."""

    def exact(self) -> PowerResult | None:
        """A closed-form result (analytic tiers), or None to simulate."""


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def chunk_seed(seed: int, stream_key: str, chunk: int) -> np.random.SeedSequence:
    """The random stream of one chunk: independent of how chunks are scheduled."""
    h = _digest(stream_key)
    words = tuple(int(h[i : i + 8], 16) for i in range(0, 32, 8))
    return np.random.SeedSequence(seed, spawn_key=words + (chunk,))


def _run_task(task: tuple[int, Scenario, int, int, int]) -> tuple[PowerCounts, float]:
    """One chunk: its counts and the seconds it took."""
    _, scenario, seed, chunk, n = task
    started = time.perf_counter()
    rng = np.random.default_rng(chunk_seed(seed, scenario.stream_key(), chunk))
    counts = PowerCounts.from_outcomes(scenario.simulate(n, rng), scenario.effect)
    return counts, time.perf_counter() - started


def _task_cost(task: tuple[int, Scenario, int, int, int]) -> float:
    """A chunk's cost for scheduling the costliest first: its studies times one study's memory (its size),
    when the scenario says (``study_bytes()``)."""
    _, scenario, _, _, n = task
    return n * _study_cost(scenario)


def _study_cost(scenario: Scenario) -> float:
    """One study's cost in :func:`_task_cost`'s units."""
    return max(1, getattr(scenario, "study_bytes", lambda: 0)())


def _chunk_sizes(s: Scenario, n_sims: int) -> tuple[int, int]:
    """(studies per chunk, number of chunks) of a cell."""
    size = max(1, int(s.chunk_size))
    return size, -(-n_sims // size)


def _check_memory(scenarios: Sequence[Scenario]) -> None:
    """Refuse a cell whose single simulated study cannot fit in memory (scenarios may say
    what one study needs through an optional ``study_bytes()``)."""
    for s in scenarios:
        design = ", ".join(f"{k}={v}" for k, v in s.cell().items())
        check_memory(f"one simulated study of {design}", getattr(s, "study_bytes", lambda: 0)())


def _checked_counts(where: str, j: int, n: int, raw: Any, size: int, chunks: int, n_sims: int) -> PowerCounts | None:
    """The counts of a stored chunk ``j`` of ``n`` studies when this run needs it (None when it
    does not: another chunking of the cell's studies); refused when inconsistent."""
    if not (0 <= j < chunks and n == min(size, n_sims - j * size)):
        return None
    try:
        counts = PowerCounts(**raw)
    except TypeError:
        raise InputError(f"{where}: a chunk record does not describe a chunk of simulated studies") from None
    ints = [getattr(counts, f.name) for f in fields(counts) if f.type in ("int", int)]
    floats = [counts.sum_abs_estimate_significant, counts.sum_estimate, counts.sum_df]
    ok = (counts.n == n and all(isinstance(v, int) and v >= 0 for v in ints)
          and all(isinstance(v, (int, float)) and math.isfinite(v) for v in floats)
          and counts.n_failed + max(counts.n_singular, counts.n_significant) <= n
          and counts.n_correct_sign + counts.n_wrong_sign <= counts.n_significant
          and max(counts.n_warned, counts.n_df, counts.n_family) <= n and counts.n_all_detected <= counts.n_family
          and counts.sum_abs_estimate_significant >= 0)
    if not ok:
        raise InputError(f"{where}: the record of chunk {j} is inconsistent; --restart recomputes this run's cells")
    return counts


@dataclass
class RunSummary:
    """Where the time of a sweep went (handed to ``progress.summary`` when the progress object has one)."""

    cells: int
    studies: int
    studies_reused: int
    chunks_run: int
    seconds: float  #: wall time
    compute_seconds: float  #: time spent in chunks, summed over workers
    executor: str
    workers: int
    n_failed: int
    n_singular: int
    slowest_cell: str = ""
    slowest_seconds: float = 0.0

    def __str__(self) -> str:
        run = self.studies - self.studies_reused
        parts = [f"{self.cells} cells, {self.studies:,} studies"
                 + (f" ({self.studies_reused:,} from the store)" if self.studies_reused else "")
                 + f" in {format_elapsed(self.seconds)} on {self.executor}"]
        if run and self.seconds > 0:
            busy = self.compute_seconds / (self.seconds * self.workers)
            parts.append(f"{run / self.seconds:,.1f} studies/s; {format_elapsed(self.compute_seconds)} computing chunks "
                         f"({busy:.0%} of the workers' time, the rest starting workers, moving tasks and saving)")
        if self.slowest_cell:
            parts.append(f"slowest cell {self.slowest_cell} ({format_elapsed(self.slowest_seconds)})")
        parts.append(f"{self.n_failed:,} failed and {self.n_singular:,} singular fits")
        return "; ".join(parts)


def run_cells(
    scenarios: Sequence[Scenario],
    n_sims: int,
    seed: int = 0,
    jobs: Jobs = None,
    progress: ProgressFn | None = None,
    restart: bool = False,
    store: str | Path | Store | None = None,
) -> list[PowerResult]:
    """Power of every cell. Results depend on ``seed`` only, never on ``jobs``.

    ``jobs``: a number of local processes (None: all cores), an executor or a
    ``distributed.Client`` (see :mod:`.executors`). Chunks are generated lazily
    (memory does not grow with ``n_sims``) and, with a result ``store`` (a file
    name), chunks found there are not run again
    and each finished chunk is saved before the next is counted; ``restart``
    recomputes this run's cells. On Ctrl-C the workers stop at once and finished
    chunks stay in the store. ``progress(done, total, label)`` is called as chunks
    finish (see :mod:`.progress`); a :class:`RunSummary` goes to ``progress.summary``
    at the end when the progress object has that method.
    """
    if isinstance(n_sims, bool) or not isinstance(n_sims, (int, np.integer)) or n_sims < 1:
        raise InputError(f"the number of simulations must be a positive integer, got {n_sims!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"the seed must be a non-negative integer, got {seed!r}")
    n_sims, seed = int(n_sims), int(seed)
    started = time.monotonic()
    report = as_progress(progress)
    exact = [s.exact() for s in scenarios]
    simulated = [i for i, e in enumerate(exact) if e is None]
    _check_memory([scenarios[i] for i in simulated])
    plan = {i: (*_chunk_sizes(scenarios[i], n_sims), n_sims) for i in simulated}
    keys = {i: cell_key(scenarios[i], seed, plan[i][0], ENGINE_VERSION) for i in simulated}
    db = store if isinstance(store, Store) else Store(store) if store is not None else None
    parts: dict[int, dict[int, PowerCounts]] = {i: {} for i in simulated}  # summed in chunk order at the end:
    sums = {i: PowerCounts() for i in simulated}  # float sums must not depend on the order chunks finish in
    seconds = dict.fromkeys(simulated, 0.0)
    done: set[tuple[int, int]] = set()
    if db is not None:
        if restart or db.restart:
            db.discard(keys.values())
        db.add_cells((keys[i], scenarios[i], scenarios[i].cell(), seed, plan[i][0]) for i in simulated)
        for i in simulated:
            for j, n, raw in db.chunks(keys[i]):
                counts = _checked_counts(f"store {db.path}", j, n, raw, *plan[i])
                if counts is not None:
                    done.add((i, j))
                    parts[i][j] = counts
                    sums[i] += counts
    elif restart:
        raise InputError("restart applies to a result store")
    total = n_sims * len(simulated)
    reused = sum(c.n for c in sums.values())
    state: dict[str, Any] = {"done": reused, "started": started, "warned": False, "chunks": 0,
             "cells": sum(sums[i].n == n_sims for i in simulated),
             "failed": sum(c.n_failed for c in sums.values()), "singular": sum(c.n_singular for c in sums.values())}
    label = {i: ", ".join(f"{k}={v}" for k, v in scenarios[i].cell().items()) for i in simulated}
    report(state["done"], total, "resuming from the store" if done else "starting")

    def tasks() -> Iterator[tuple[int, Scenario, int, int, int]]:
        for i in simulated:
            size, chunks, _ = plan[i]
            for j in range(chunks):
                if (i, j) not in done:
                    yield i, scenarios[i], seed, j, min(size, n_sims - j * size)

    # the pace is measured in chunk costs, not studies: with several workers the costliest chunks run first
    state.update(cost_done=0.0, cost_total=sum((n_sims - sums[i].n) * _study_cost(scenarios[i]) for i in simulated))

    def on_done(task: tuple[int, Scenario, int, int, int], result: tuple[PowerCounts, float]) -> None:
        i, _, _, j, n = task
        if (i, j) in done:  # an executor reported a chunk twice: it counts once
            return
        counts, took = result
        if db is not None:
            db.add(keys[i], j, n, asdict(counts), took)
        done.add((i, j))
        parts[i][j] = counts
        sums[i] += counts
        seconds[i] += took
        state["done"] += n
        state["cost_done"] += _task_cost(task)
        state["chunks"] += 1
        state["failed"] += counts.n_failed
        state["singular"] += counts.n_singular
        _warn_if_long(state, total)
        failed, singular = state["failed"], state["singular"]
        fits = f"; {failed:,} failed, {singular:,} singular fits so far" if failed or singular else ""
        state["cells"] += sums[i].n == n_sims
        cells = f"; {state['cells']:,}/{len(simulated):,} cells done" if len(simulated) > 1 else ""
        report(state["done"], total, f"cell {simulated.index(i) + 1}/{len(simulated)} ({label[i]}): "
                                     f"{sums[i].n:,}/{n_sims:,} studies{cells}{fits}")

    try:
        with using(jobs) as executor:
            executor.map(_run_task, costliest_first(tasks(), _task_cost) if executor.workers > 1 else tasks(), on_done)
    except KeyboardInterrupt as exc:
        raise Interrupted(db.resume_hint() if db is not None else
                          "nothing was saved; add --store FILE to keep finished chunks") from exc
    finally:
        if db is not None and db is not store:
            db.close()
    summarise = getattr(progress, "summary", None)
    if callable(summarise) and simulated:
        slowest = max(simulated, key=lambda i: seconds[i])
        summarise(RunSummary(
            cells=len(simulated), studies=total, studies_reused=reused, chunks_run=state["chunks"],
            seconds=time.monotonic() - started, compute_seconds=sum(seconds.values()),
            executor=executor.describe(), workers=executor.workers,
            n_failed=state["failed"], n_singular=state["singular"],
            slowest_cell=label[slowest] if len(simulated) > 1 and seconds[slowest] else "",
            slowest_seconds=seconds[slowest]))
    return [e if e is not None else PowerResult.from_counts(s.cell(), _in_order(parts[i]))
            for i, (s, e) in enumerate(zip(scenarios, exact))]


def _in_order(parts: dict[int, PowerCounts]) -> PowerCounts:
    """The counts of a cell's chunks, added in chunk order (the same floating-point sums whichever
    executor ran them, in whatever order they finished)."""
    total = PowerCounts()
    for j in sorted(parts):
        total += parts[j]
    return total


def _warn_if_long(state: dict[str, Any], total: int) -> None:
    """Warn once when the run, at its measured pace, will take over an hour: the time so far over the cost of
    the chunks run so far (``_task_cost``, not their studies: the costliest chunks may run first; chunks reused
    from a store cost no time), times the cost left."""
    elapsed = time.monotonic() - state["started"]
    if state["warned"] or elapsed < 2 or not state["cost_done"]:
        return
    state["warned"] = True
    left = elapsed / state["cost_done"] * (state["cost_total"] - state["cost_done"])
    if left > 3600:
        warnings.warn(LongRunWarning(f"at the pace so far this run needs about {format_duration(left)} more "
                                     f"({total - state['done']:,} simulated studies left); Ctrl-C stops it"),
                      stacklevel=2)


def results_table(results: Sequence[PowerResult]) -> pd.DataFrame:
    """One row per design cell, the same columns as the CLI's JSON records."""
    return pd.DataFrame([r.record() for r in results])
