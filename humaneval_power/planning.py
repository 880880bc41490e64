"""Planning over any scenario: one power grid and one solver, one result type.

A scenario cell (see :class:`~humaneval_power.engine.Scenario`) is built by a
*cell factory*, ``make(**fields) -> Scenario``, from the design fields that
vary (items, workers, n, ...) and the effect. Everything else (parameters,
design rules, analysis) is bound inside the factory, so the two functions here
never know which scenario they plan:

* :func:`power_grid` — power of every combination of the given axes;
* :func:`solve` — the smallest value of one field (an integer design size or a
  continuous effect) whose power reaches a target, with its Monte-Carlo range,
  returned as a :class:`SolveResult` whether or not the target is attainable.

Cells that differ only in the effect share their random stream (common random
numbers), so a solve over the effect sees a monotone step function of it and
the minimum detectable effect moves smoothly with the design.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from .engine import PowerResult, Scenario, results_table, run_cells
from .errors import InputError
from .executors import Jobs, using
from .progress import ProgressFn, as_progress
from .validation import check_target_power

CellFactory = Callable[..., Scenario]


def as_list(values: Any) -> list[Any]:
    """A grid axis from one value or a sequence of values."""
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray, range)):
        return [values]
    return list(values)


def power_grid(make: CellFactory, axes: Mapping[str, Sequence[Any]], n_sims: int, seed: int = 0,
               jobs: Jobs = None, progress: ProgressFn | None = None, restart: bool = False,
               store: str | None = None) -> pd.DataFrame:
    """Power of ``make(**cell)`` for every combination of ``axes`` (one row per cell, in product order);
    ``jobs`` and the result ``store`` as in :func:`run_cells`."""
    names = list(axes)
    values = [list(axes[k]) for k in names]
    empty = [k for k, v in zip(names, values) if not v]
    if empty:
        raise InputError(f"the design grid is empty: give at least one value of {', '.join(empty)}")
    cells = [make(**dict(zip(names, combo))) for combo in itertools.product(*values)]
    return results_table(run_cells(cells, n_sims, seed=seed, jobs=jobs, progress=progress, restart=restart,
                                   store=store))


@dataclass(frozen=True)
class SolveResult:
    """The smallest value of ``solve_for`` whose power reaches ``target_power``.

    ``value`` is where the power estimate first reaches the target; ``low`` and
    ``high`` bound it: for simulated power, where the upper and the lower end of
    the 95% interval first reach the target (the answer's Monte-Carlo range); for
    exact power of a discrete test (saw-toothed in n), the first value reaching
    the target and the value from which it stays there; otherwise both equal
    ``value``. When the target is not attainable ``value`` is None, ``reason``
    says why and ``at`` is the best design tried. ``limit_power`` is the power
    as the field grows without bound, where known. ``detail`` holds
    scenario-specific figures (e.g. the unrounded normal-approximation n).
    """

    solve_for: str
    target_power: float
    value: float | None
    low: float | None
    high: float | None
    attainable: bool
    reason: str
    at: PowerResult | None
    highest_power: float
    limit_power: float = math.nan
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def exact(self) -> bool:
        """True when the power figures are exact (no simulation)."""
        return self.at is not None and self.at.n_sims == 0

    def noted(self, note: str) -> SolveResult:
        """This result with a note for the reader, in its record and its text (e.g. an answer off the scale)."""
        return replace(self, detail={**self.detail, "note": note})

    def record(self) -> dict[str, Any]:
        """One flat record: the design and power at the answer, then the answer."""
        base = {"solve_for": self.solve_for, "target_power": self.target_power, "value": self.value,
                "low": self.low, "high": self.high, "attainable": self.attainable, "reason": self.reason,
                "highest_power": self.highest_power, "limit_power": self.limit_power, **self.detail}
        at = self.at.record() if self.at is not None else {}
        at.pop(self.solve_for, None)
        return {self.solve_for: self.value, **{k: v for k, v in at.items() if k not in base}, **base}

    def __str__(self) -> str:
        if "conditional_value" in self.detail or (self.at is not None and "assurance" in self.at.extra):  # assurance
            from .assurance import describe_solve

            return describe_solve(self, _fmt(self.value), *self._spread_where())
        if not self.attainable:
            return f"target power {self.target_power:g} is not attainable: {self.reason}"
        r = self.at
        assert r is not None and self.value is not None
        spread, where = self._spread_where()
        type_m = f", Type-M {r.type_m:.3g}" if math.isfinite(r.type_m) else ""
        note = f"\nnote: {self.detail['note']}" if "note" in self.detail else ""
        return f"smallest {self.solve_for}: {_fmt(self.value)}{spread}; power there {r.power:.3f} {where}{type_m}{note}"

    def _spread_where(self) -> tuple[str, str]:
        """How far the answer may move (its range) and the power interval there, as text."""
        r = self.at
        if self.low == self.high == self.value or not self.attainable:
            spread = ""
        elif self.exact:
            spread = f" (power first reaches it at {_fmt(self.low)} and stays there from {_fmt(self.high)})"
        else:
            high = "beyond the search" if self.high is None else _fmt(self.high)
            spread = f" (Monte-Carlo range {_fmt(self.low)}-{high})"
        where = "" if r is None else ("exact" if self.exact else f"[{r.ci_low:.3f}, {r.ci_high:.3f}]")
        return spread, where


#: the solved-for fields a sentence names before their value ("effect 0.42"; a size follows its count: "40 items")
NAMED_FIRST = ("effect", "cost", "delta", "n", "p_win", "log_odds")


@dataclass(frozen=True)
class SolveResults:
    """The answers of one search under several alternatives side by side (e.g. one per analysis of the same
    simulated studies): ``results`` by key, ``by`` the record column naming the key, ``labels`` how the
    sentence names each key (default: the key)."""

    by: str
    results: dict[str, SolveResult]
    labels: Mapping[str, str] = field(default_factory=dict)

    def __getitem__(self, key: str) -> SolveResult:
        return self.results[key]

    def records(self) -> list[dict[str, Any]]:
        """One record per alternative (:meth:`SolveResult.record`), its key first."""
        return [{self.by: k, **r.record()} for k, r in self.results.items()]

    def __str__(self) -> str:
        def answer(r: SolveResult) -> str:
            if not r.attainable:
                return "not attainable"
            what = r.solve_for.replace("_", " ")
            return f"{what} {_fmt(r.value)}" if r.solve_for in NAMED_FIRST else f"{_fmt(r.value)} {what}"

        named = [(self.labels.get(k, k), r) for k, r in self.results.items()]
        return "\n".join(["; ".join(f"{label}: {answer(r)}" for label, r in named),
                          *(f"{label}: {r}" for label, r in named)])


def solve_records(result: SolveResult | SolveResults) -> list[dict[str, Any]]:
    """The records of a solve's answer: one, or one per alternative."""
    return result.records() if isinstance(result, SolveResults) else [result.record()]


def in_turn(keys: Sequence[str], run: Callable[[str, ProgressFn | None], Any], labels: Mapping[str, str],
            progress: ProgressFn | None) -> dict[str, Any]:
    """``run(key, progress)`` for each key in turn, its progress labels prefixed by the key's label (what is
    being solved for): ``{key: result}``."""
    def labelled(name: str) -> ProgressFn | None:
        if progress is None:
            return None
        report = progress

        def inner(done: int, total: int, label: str = "") -> None:
            report(done, total, f"{name}: {label}" if label else name)

        return inner

    return {k: run(k, labelled(labels.get(k, k))) for k in keys}


def _fmt(v: float | None) -> str:
    if v is None:
        return "n.a."
    return f"{int(v)}" if float(v).is_integer() else f"{v:.4g}"


def solve(make: CellFactory, solve_for: str, lo: float, hi: float, target_power: float = 0.8, *,
          integer: bool = True, n_sims: int = 2000, seed: int = 0, jobs: Jobs = None,
          progress: ProgressFn | None = None, limit: tuple[float, str] | None = None, grow: bool = False,
          sawtooth: bool = False, grid: int = 16, why: str = "") -> SolveResult:
    """Smallest ``v`` in [lo, hi] with power(make(v)) >= ``target_power``.

    ``integer``: walk a doubling grid from ``lo`` to the first value that reaches
    the target and bisect below it (power need not be monotone: boundary fits can
    make it fall); otherwise scan ``grid`` points and root-find in the first bracket
    (exact power, which may be non-monotone,
    then Brent's method), or bisect [lo, hi] (simulated power, a monotone step
    function of the effect thanks to common random numbers). ``grow`` doubles ``hi`` until the
    target is reached (continuous fields only; at most 40 times). ``sawtooth``
    (exact power of a discrete test) scans around the answer for the first and
    the stable value. ``limit`` = (power as the field grows, why) explains failure.
    Every step runs on one executor (``jobs``, see :func:`run_cells`): workers, and R in them,
    start once per solve.
    """
    with using(jobs) as executor:
        return _solve(make, solve_for, lo, hi, target_power, integer=integer, n_sims=n_sims, seed=seed,
                      jobs=executor, progress=progress, limit=limit, grow=grow, sawtooth=sawtooth, grid=grid, why=why)


def _solve(make: CellFactory, solve_for: str, lo: float, hi: float, target_power: float, *, integer: bool,
           n_sims: int, seed: int, jobs: Jobs, progress: ProgressFn | None, limit: tuple[float, str] | None,
           grow: bool, sawtooth: bool, grid: int, why: str) -> SolveResult:
    check_target_power(target_power)
    if not lo < hi:
        raise InputError(f"the search range for {solve_for} is empty ({lo:g} to {hi:g})")
    cache: dict[float, PowerResult] = {}
    report = as_progress(progress)

    def at(v: float) -> PowerResult:
        if v not in cache:
            step = len(cache) + 1
            head = f"solving for {solve_for}, step {step}: {solve_for} {_fmt(v)}"

            def studies(done: int, total: int, label: str = "") -> None:  # the step's simulated studies
                report(done, total, head)

            cache[v] = run_cells([make(v)], n_sims, seed=seed, jobs=jobs, progress=studies)[0]
            report(cache[v].n_sims, cache[v].n_sims, f"{head}: power {cache[v].power:.3f}")
        return cache[v]

    limit_power, limit_reason = limit if limit is not None else (math.nan, "")
    value: float | None
    low: float | None
    high: float | None
    if integer:
        value = _smallest_int(lambda k: at(k).power >= target_power, int(lo), int(hi))
    else:
        value, hi = _first_crossing(at, lambda r: r.power, target_power, float(lo), float(hi), grid, grow)
    best = max(cache, key=lambda k: (cache[k].power, -k))
    highest = cache[best].power
    if value is None:
        reason = (f"power stays below {target_power:g} for every {solve_for} tried from {_fmt(lo)} to {_fmt(hi)} "
                  f"(highest {highest:.3f} at {_fmt(best)})")
        reason = "; ".join(x for x in (reason, why, limit_reason) if x)
        return SolveResult(solve_for, target_power, None, None, None, False, reason, cache[best], highest,
                           limit_power)
    if at(value).n_sims == 0:
        low = high = value
        if sawtooth and integer:
            low, high = _teeth(lambda k: at(k).power >= target_power, int(value), int(lo))
            value = low
    elif integer:
        low = _smallest_int(lambda k: at(k).ci_high >= target_power, int(lo), int(value))
        high = _smallest_int(lambda k: at(k).ci_low >= target_power, int(value), int(hi))
    else:
        low = _first_crossing(at, lambda r: r.ci_high, target_power, float(lo), value, grid, False, 1e-3)[0]
        high = _first_crossing(at, lambda r: r.ci_low, target_power, value, hi, grid, False, 1e-3)[0]
    return SolveResult(solve_for, target_power, value, low, high, True, "", at(value), highest, limit_power)


def _smallest_int(reaches: Callable[[int], bool], lo: int, hi: int) -> int | None:
    """Smallest n in [lo, hi] with ``reaches(n)``: a doubling walk to the first hit, then bisection below it."""
    if reaches(lo):
        return lo
    step = max(lo, 1)
    while True:
        nxt = min(hi, lo + step)
        if reaches(nxt):
            break
        if nxt == hi:
            return None
        lo, step = nxt, step * 2
    left, right = lo, nxt  # reaches(left) is False, reaches(right) is True
    while right - left > 1:
        mid = (left + right) // 2
        if reaches(mid):
            right = mid
        else:
            left = mid
    return right


def _teeth(reaches: Callable[[int], bool], found: int, lo: int) -> tuple[int, int]:
    """Exact power of a discrete test is saw-toothed in n: the first n reaching the target (the
    bisection may have skipped a tooth) and the n from which it stays there (checked over the
    following 20%, at most 2,000 values)."""
    first = found
    for k in range(max(lo, found - 2 * int(math.sqrt(found)) - 10), found):
        if reaches(k):
            first = k
            break
    stable = first
    for k in range(first, first + min(int(first * 0.2) + 10, 2000)):
        if not reaches(k):
            stable = k + 1
    return first, stable


def _first_crossing(at: Callable[[float], PowerResult], score: Callable[[PowerResult], float], target: float,
                    lo: float, hi: float, grid: int, grow: bool, rel_tol: float = 1e-4) -> tuple[float | None, float]:
    """(smallest v in [lo, hi] with score(at(v)) >= target, the upper end searched), or (None, hi)."""
    if grow:
        for _ in range(40):
            if score(at(hi)) >= target:
                break
            lo, hi = hi, 2 * hi
    exact = at(lo).n_sims == 0
    ds = np.linspace(lo, hi, grid if exact else 2)  # simulated power: a monotone step (common random numbers)
    tol = rel_tol * (hi - lo)
    values = np.array([score(at(float(d))) for d in ds])
    hit = np.flatnonzero(values >= target)
    if not len(hit):
        if not exact:
            return None, hi
        i = int(values.argmax())  # exact power may peak between grid points (non-monotone curves)
        left, right = float(ds[max(i - 1, 0)]), float(ds[min(i + 1, grid - 1)])
        from scipy import optimize

        peak = float(optimize.minimize_scalar(lambda d: -score(at(d)), bounds=(left, right), method="bounded").x)
        if score(at(peak)) < target:
            return None, hi
        right = peak
    else:
        right = float(ds[hit[0]])
        if hit[0] == 0:
            return right, hi
        left = float(ds[hit[0] - 1])
    if score(at(left)) >= target:
        return left, hi
    if exact:
        from scipy import optimize

        step = 1e-12 * max(1.0, abs(right))
        v = optimize.brentq(lambda x: score(at(x)) - target, left, right, xtol=step)
        while v < right and score(at(v)) < target:  # the root may sit a hair below the target
            v, step = min(v + step, right), 2 * step
        return v, hi
    while right - left > tol:
        mid = (left + right) / 2
        if score(at(mid)) >= target:
            right = mid
        else:
            left = mid
    return right, hi


def smallest_in_grid(table: pd.DataFrame, target: float, vary: str, by: Sequence[str]) -> pd.DataFrame:
    """Per combination of ``by``: the smallest ``vary`` in a power grid whose power reaches ``target``
    (``vary`` is missing and ``power`` is the best found when none does)."""
    rows = []
    for key, g in table.groupby(list(by), sort=True):
        ok = g[g.power >= target].sort_values(vary)
        first = ok.iloc[0] if len(ok) else None
        rows.append({**dict(zip(by, key if isinstance(key, tuple) else (key,))),
                     vary: first[vary] if first is not None else None,
                     "power": float(first["power"]) if first is not None else float(g.power.max()),
                     "reached": first is not None})
    return pd.DataFrame(rows)


#: overall probability that the sequential Monte Carlo of :func:`sequential_cells` settles a cell on the wrong
#: side of the target early: one whose true power reaches it as falling short, or (two-sided) one whose true
#: power falls short as reaching it (each split evenly over the interim looks, Bonferroni)
SEQUENTIAL_ERROR = 0.05

#: how :func:`sequential_cells` settled a cell: run to the end, stopped with its upper bound below the target,
#: stopped with its lower bound at or above it
FULL, BELOW, ABOVE = "full", "below", "above"


def mc_margin(power: float, n_sims: int) -> float:
    """The half-width of the normal 95% interval of a power near ``power`` estimated from ``n_sims``
    studies: how far from the target a full run cannot tell a design."""
    return float(1.959963984540054 * math.sqrt(power * (1 - power) / n_sims))


def sequential_bound(k: Any, n: Any, looks: int, error: float = SEQUENTIAL_ERROR, lower: bool = False) -> Any:
    """The one-sided Clopper-Pearson upper bound (``lower``: lower bound) of k successes in n studies at
    level ``1 - error / looks``: one interim look's share of the sequential error (elementwise on arrays)."""
    from scipy import stats

    k, n = np.asarray(k), np.asarray(n)
    if lower:
        bound = np.where(k <= 0, 0.0, stats.beta.ppf(error / looks, np.maximum(k, 1), n - k + 1))
    else:
        bound = np.where(k >= n, 1.0, stats.beta.ppf(1 - error / looks, k + 1, np.maximum(n - k, 1)))
    return float(bound) if bound.ndim == 0 else bound


def sequential_cells(cells: Sequence[Scenario], n_sims: int, target: float, seed: int = 0, jobs: Jobs = None,
                     error: float = SEQUENTIAL_ERROR, above: float | None = None,
                     rank: Sequence[float] | None = None) -> list[tuple[PowerResult, str] | None]:
    """Power of each cell by sequential Monte Carlo: ``(result, how)`` per cell, ``how`` one of
    :data:`FULL`, :data:`BELOW`, :data:`ABOVE`.

    Each cell runs chunk by chunk (the engine's chunks, seeded by stream key and chunk index,
    so results depend on ``seed`` only, never on ``jobs``, and a cell run to the end equals
    :func:`run_cells` at ``n_sims``). After each chunk but the last (``m`` interim looks), a
    cell whose one-sided Clopper-Pearson upper bound at level ``1 - error / m`` falls below
    ``target`` stops there (BELOW); with ``above`` (at most ``target``), so does a cell whose lower
    bound at that level reaches ``above`` (ABOVE). Error control: a cell whose true power is at least
    ``target`` stops BELOW at a look with probability at most ``error / m``, so with probability at
    most ``error`` in all (Bonferroni over the looks); a cell whose true power is below ``above``
    stops ABOVE with probability at most ``error`` likewise. A cell that does not stop is run in
    full and judged as :func:`run_cells` would judge it. With ``rank`` (e.g. the cells' costs), once a
    cell is settled as reaching the target (ABOVE, or FULL with power >= target) the cells of no lower
    rank still running are dropped (None): only what a search for the lowest-ranked cell reaching the
    target needs is run. Closed-form cells return their exact result (FULL)."""
    from .engine import PowerCounts, _check_memory, _chunk_sizes, _in_order, _run_task

    out: dict[int, tuple[PowerResult, str] | None] = {}
    todo = []
    for i, c in enumerate(cells):
        exact = c.exact()
        if exact is not None:
            out[i] = (exact, FULL)
        else:
            todo.append(i)
    _check_memory([cells[i] for i in todo])
    plans = {i: _chunk_sizes(cells[i], n_sims) for i in todo}
    parts: dict[int, dict[int, PowerCounts]] = {i: {} for i in todo}

    def reached(i: int) -> bool:
        r = out.get(i)
        return r is not None and (r[1] == ABOVE or (r[1] == FULL and r[0].power >= target))

    with using(jobs) as executor:
        look = 0
        todo = _undropped(todo, out, rank, reached)
        while todo:
            tasks = [(i, cells[i], seed, look, min(plans[i][0], n_sims - look * plans[i][0])) for i in todo]

            def done(task: tuple[int, Scenario, int, int, int], result: tuple[PowerCounts, float]) -> None:
                parts[task[0]][task[3]] = result[0]

            executor.map(_run_task, tasks, done)
            look += 1
            still = []
            for i in todo:
                counts = _in_order(parts[i])
                result = PowerResult.from_counts(cells[i].cell(), counts)
                if look == plans[i][1]:
                    out[i] = (result, FULL)
                    continue
                k = counts.n_correct_sign if float(cells[i].effect) != 0 else counts.n_significant
                looks = plans[i][1] - 1
                if sequential_bound(k, counts.n, looks, error) < target:
                    out[i] = (result, BELOW)
                elif above is not None and sequential_bound(k, counts.n, looks, error, lower=True) >= above:
                    out[i] = (result, ABOVE)
                else:
                    still.append(i)
            todo = _undropped(still, out, rank, reached)
    return [out.get(i) for i in range(len(cells))]


def _undropped(todo: list[int], out: dict[int, Any], rank: Sequence[float] | None,
               reached: Callable[[int], bool]) -> list[int]:
    """The cells of ``todo`` ranked below every cell settled as reaching the target (all without ``rank``)."""
    if rank is None:
        return todo
    best = min((rank[i] for i in out if reached(i)), default=math.inf)
    return [i for i in todo if rank[i] < best]
