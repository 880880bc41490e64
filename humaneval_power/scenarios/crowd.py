"""Crowd Likert studies: a design x a data-generating process x an analysis, and what they cost.

:class:`CrowdScenario` composes the three parts the planner keeps apart —
:mod:`~humaneval_power.designs` (who rates what), :mod:`~humaneval_power.processes`
(what a rating is) and :mod:`~humaneval_power.analyses` (model, tier, test,
contrasts) — into one engine cell. The planning functions below are thin
layers over :func:`~humaneval_power.planning.power_grid` and
:func:`~humaneval_power.planning.solve`; :func:`crowd_budget` searches items x
workers x ratings per item (x items per HIT) for the cheapest design reaching
the target power.
"""
from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from ..analyses import MixedModelAnalysis
from ..designs import Costs, CrowdDesign, Design, PilotDesign, check_budget
from ..engine import PowerResult, StudyOutcomes, run_cells
from ..errors import InputError
from ..params import LikertParams
from ..planning import SolveResult, as_list, power_grid, solve
from ..processes import InvariantProcess, SlopeProcess, system_means
from ..progress import ProgressFn, as_progress
from ..validation import check_number

Process = SlopeProcess | InvariantProcess


def make_process(params: LikertParams | InvariantProcess, systems: int, model: str) -> Process:
    """The process behind ``params`` for ``systems`` systems (slope parameters become invariant ones
    for more than two systems or an invariant analysis, where that mapping exists)."""
    if isinstance(params, InvariantProcess):
        return replace(params, systems=systems)
    if systems == 2 and model == "slopes":
        return SlopeProcess(params)
    return InvariantProcess.from_likert(params, systems)


@dataclass(frozen=True)
class CrowdScenario:
    """One cell: a design, a process, an analysis, the effect (B - A for the pair of interest) and costs."""

    design: Design
    process: Process
    analysis: MixedModelAnalysis
    effect: float
    means: tuple[float, ...] | None = None
    costs: Costs = field(default_factory=Costs)

    def __post_init__(self) -> None:
        check_number("effect", self.effect)
        if self.process.systems != self.design.systems:
            raise InputError(f"the parameters describe {self.process.systems} systems, the design {self.design.systems}")
        self.analysis.check(self.design.systems)
        if self.analysis.test == "card2020" and self.effect < 0:
            raise InputError("the card2020 test counts only positive detections (B > A): give a positive effect")

    @property
    def chunk_size(self) -> int:
        return 10 if self.analysis.tier == "lme4" else 200

    def study_bytes(self) -> int:
        c = self.design.counts()
        return int(c["ratings"] * 8 * 40)

    @cached_property
    def _means(self) -> np.ndarray:
        return system_means(self.design.systems, self.effect, self.analysis.pair, self.means)

    def cell(self) -> dict[str, Any]:
        rec = {**self.design.record(), "effect": self.effect, **self.analysis.record()}
        if self.costs.any:
            rec["cost"] = self.costs.of(self.design)
        return rec

    def stream_key(self) -> str:
        return json.dumps(["crowd", self.design.key(), self.process.key()])

    def exact(self) -> PowerResult | None:
        return None

    @cached_property
    def _fixed(self) -> tuple[Any, Any] | None:
        """The layout and the fast tier's design when every study shares them (built once per cell)."""
        if not self.design.fixed:
            return None
        layout = self.design.draw(np.random.default_rng(0), 1)
        return layout, (self.analysis.design(layout) if self.analysis.tier == "fast" else None)

    def simulate(self, n: int, rng: np.random.Generator) -> StudyOutcomes:
        means = self._means
        if self._fixed is not None:
            layout, design = self._fixed
            y = self.process.simulate(layout, means, n, rng)
            return self.analysis.analyse(layout, y, means, design)
        drawn = self.design.draw(rng, n)
        if not isinstance(drawn, list):
            y = self.process.simulate(drawn, means, n, rng)
            return self.analysis.analyse(drawn, y, means)
        parts = [self.analysis.analyse(lay, self.process.simulate(lay, means, 1, rng), means) for lay in drawn]
        return _concat(parts)


def _concat(parts: Sequence[StudyOutcomes]) -> StudyOutcomes:
    """The outcomes of several chunks of studies as one."""
    def cat(name: str) -> np.ndarray | None:
        vals = [getattr(p, name) for p in parts]
        return None if any(v is None for v in vals) else np.concatenate(vals)

    return StudyOutcomes(*(cat(f) for f in ("estimate", "significant", "failed", "singular", "warned", "df",
                                            "all_detected")))


def crowd_design(items: int, workers: int, ratings_per_item: int | None = None, systems: int = 2,
                 assignment: str | None = None, presentation: str = "within", items_per_hit: int = 1,
                 missing: float = 0.0, workload: Sequence[float] | None = None) -> CrowdDesign:
    """A :class:`CrowdDesign` with the assignment defaulting to ``crossed`` when k = W (or k is not
    given) and ``balanced`` otherwise."""
    k = workers if ratings_per_item is None else ratings_per_item
    if assignment is None:
        assignment = "crossed" if k == workers and presentation == "within" and workload is None else (
            "random" if workload is not None else "balanced")
    return CrowdDesign(items, workers, k, systems, assignment, presentation, items_per_hit, missing,
                       None if workload is None else tuple(float(w) for w in workload))


def crowd_power(params: LikertParams | InvariantProcess | str, items: Sequence[int] | int,
                workers: Sequence[int] | int, effect: Sequence[float] | float,
                ratings_per_item: Sequence[int | None] | int | None = None, systems: int = 2,
                assignment: str | None = None, presentation: str = "within",
                items_per_hit: Sequence[int] | int = 1, missing: float = 0.0,
                workload: Sequence[float] | None = None, design_from: PilotDesign | None = None,
                model: str | None = None, method: str = "fast", test: str = "satterthwaite", alpha: float = 0.05,
                compare: str = "pair", adjust: str = "holm", pair: tuple[int, int] | None = None,
                means: Sequence[float] | None = None, costs: Costs | None = None, n_sims: int = 1000,
                seed: int = 0, jobs: int | None = None, progress: ProgressFn | None = None,
                checkpoint: str | None = None) -> pd.DataFrame:
    """Power, Type-S and Type-M of crowd designs over items x workers x ratings per item x items per
    HIT x effect (one row per cell; ``cost`` when ``costs`` are given; ``power_all`` for families).

    >>> t = crowd_power("card2020-high", 100, 15, 0.3, ratings_per_item=3, n_sims=200, seed=1)
    >>> t[["items", "workers", "ratings_per_item", "assignment", "power"]].to_dict("records")
    [{'items': 100, 'workers': 15, 'ratings_per_item': 3, 'assignment': 'balanced', 'power': 0.575}]
    """
    make = cell_factory(params, systems, assignment, presentation, missing, workload, design_from, model, method,
                        test, alpha, compare, adjust, pair, means, costs)
    axes = {"items": as_list(items), "workers": as_list(workers), "ratings_per_item": as_list(ratings_per_item),
            "items_per_hit": as_list(items_per_hit), "effect": as_list(effect)}
    return power_grid(make, axes, n_sims, seed=seed, jobs=jobs, progress=progress, checkpoint=checkpoint)


def cell_factory(params: LikertParams | InvariantProcess | str, systems: int = 2, assignment: str | None = None,
                 presentation: str = "within", missing: float = 0.0, workload: Sequence[float] | None = None,
                 design_from: PilotDesign | None = None, model: str | None = None, method: str = "fast",
                 test: str = "satterthwaite", alpha: float = 0.05, compare: str = "pair", adjust: str = "holm",
                 pair: tuple[int, int] | None = None, means: Sequence[float] | None = None,
                 costs: Costs | None = None) -> Callable[..., CrowdScenario]:
    """``make(items, workers, ratings_per_item, items_per_hit, effect) -> CrowdScenario`` with
    everything else bound (``design_from`` replaces the crowd design: only ``items`` varies it)."""
    from ..params import as_params

    if isinstance(params, str):
        params = as_params(params)
    if design_from is not None:
        systems = design_from.systems
    model = model or ("slopes" if systems == 2 and isinstance(params, LikertParams) else "invariant")
    process = make_process(params, systems, model)
    analysis = MixedModelAnalysis(model, method, test, alpha, compare, adjust, pair or (0, systems - 1))
    fixed_means = tuple(means) if means is not None else None
    costs = costs or Costs()

    def make(items: int, workers: int = 0, ratings_per_item: int | None = None, items_per_hit: int = 1,
             effect: float = 0.0) -> CrowdScenario:
        if design_from is not None:
            design: Design = replace(design_from, items=items)
        else:
            design = crowd_design(items, workers, ratings_per_item, systems, assignment, presentation,
                                  items_per_hit, missing, workload)
        return CrowdScenario(design, process, analysis, effect, fixed_means, costs)

    return make


def crowd_size(params: LikertParams | InvariantProcess | str, effect: float, workers: int,
               ratings_per_item: int | None = None, target_power: float = 0.8, max_items: int = 20_000,
               n_sims: int = 1000, seed: int = 0, jobs: int | None = 1, progress: ProgressFn | None = None,
               **options: Any) -> SolveResult:
    """Smallest number of items reaching the target power (other design fields fixed; ``options`` as
    :func:`cell_factory`)."""
    if check_number("effect", effect) == 0:
        raise InputError("the sample size for a zero effect is undefined; give a non-zero effect")
    hpi = options.pop("items_per_hit", 1)
    make = cell_factory(params, **options)
    return solve(lambda items: make(items, workers, ratings_per_item, hpi, effect),
                 "items", 2, max_items, target_power, n_sims=n_sims, seed=seed, jobs=jobs, progress=progress,
                 why=_cap_reason(params, workers, ratings_per_item))


def crowd_mde(params: LikertParams | InvariantProcess | str, items: int, workers: int,
              ratings_per_item: int | None = None, target_power: float = 0.8, n_sims: int = 1000, seed: int = 0,
              jobs: int | None = 1, progress: ProgressFn | None = None, **options: Any) -> SolveResult:
    """Minimum detectable effect of a crowd design (the *sensitivity* of a finished study given its
    ``design_from`` and fitted parameters); the same simulated studies for every effect."""
    hpi = options.pop("items_per_hit", 1)
    make = cell_factory(params, **options)
    scale = make(items, workers, ratings_per_item, hpi, 1.0).process
    sd = math.sqrt(sum(v * v for v in (scale.sds.values() if isinstance(scale, InvariantProcess)
                                       else scale.params.sds.values())))
    return solve(lambda e: make(items, workers, ratings_per_item, hpi, e), "effect", 1e-4 * sd, sd / 4,
                 target_power, integer=False, n_sims=n_sims, seed=seed, jobs=jobs, progress=progress, grow=True)


def _cap_reason(params: Any, workers: int, k: int | None) -> str:
    sd = getattr(params, "sd_worker_slope", None) if isinstance(params, LikertParams) else None
    if sd:
        return (f"with {workers} workers in the pool the worker-slope SD ({sd:.3g}) keeps the variance of the "
                f"effect estimate above sd_worker_slope^2 / {workers}: add workers")
    return "add workers or ratings per item"


def crowd_budget(params: LikertParams | InvariantProcess | str, effect: float,
                 items: Sequence[int], workers: Sequence[int], ratings_per_item: Sequence[int],
                 items_per_hit: Sequence[int] = (1,), costs: Costs | None = None, budget: float | None = None,
                 target_power: float = 0.8, n_sims: int = 1000, seed: int = 0, jobs: int | None = None,
                 progress: ProgressFn | None = None, **options: Any) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The cheapest design reaching the target power among items x workers x k x h (within ``budget``).

    Designs are evaluated in order of cost, cheapest first, in rounds of a few
    cells; the search stops at the first round holding a design whose power
    reaches the target (every cheaper design has been evaluated by then).
    Returns the table of evaluated designs (the cost-power frontier) and a
    summary: the cheapest design, its power with its interval, the cheapest
    design whose lower 95% bound reaches the target (the Monte-Carlo margin),
    or why nothing qualifies.
    """
    costs = costs or Costs(per_rating=1.0)
    cap = check_budget(budget, costs)
    make = cell_factory(params, costs=costs, **options)
    if check_number("effect", effect) == 0:
        raise InputError("the effect must be non-zero to plan for it")
    cells = []
    for i, w, k, h in itertools.product(as_list(items), as_list(workers), as_list(ratings_per_item),
                                        as_list(items_per_hit)):
        if k > w:
            continue
        cell = make(i, w, k, h, effect)
        cost = costs.of(cell.design)
        if cost <= cap:
            cells.append((cost, cell))
    if not cells:
        raise InputError("no design in the search range fits the budget (or every k exceeds the workers)")
    cells.sort(key=lambda c: (c[0], c[1].design.record()["items"]))
    report = as_progress(progress)
    results: list[PowerResult] = []
    round_size = 4
    for start in range(0, len(cells), round_size):
        batch = cells[start:start + round_size]
        done = len(results)
        results += run_cells([c for _, c in batch], n_sims, seed=seed, jobs=jobs,
                             progress=lambda d, t, label="": report(done * n_sims + d, len(cells) * n_sims,
                                                                    f"budget search, designs by cost: {label}"))
        if any(r.power >= target_power for r in results):
            break
    table = pd.DataFrame([r.record() for r in results])
    reached = table[table.power >= target_power]
    summary: dict[str, Any] = {"target_power": target_power, "evaluated": len(results), "candidates": len(cells),
                               "budget": budget}
    if len(reached):
        best = reached.iloc[0].to_dict()
        sure = table[table.ci_low >= target_power]
        summary.update(attainable=True, cheapest=best,
                       cheapest_sure=sure.iloc[0].to_dict() if len(sure) else None,
                       reason="")
    else:
        top = table.loc[table.power.idxmax()].to_dict()
        summary.update(attainable=False, cheapest=None, cheapest_sure=None, best=top,
                       reason=(f"no design within {'the budget' if budget else 'the search range'} reaches power "
                               f"{target_power:g} (highest {top['power']:.3f} at {top['items']} items, "
                               f"{top['workers']} workers, k = {top['ratings_per_item']}); "
                               + _cap_reason(params if not isinstance(params, str) else None,
                                             int(top['workers']), None)))
    return table, summary
