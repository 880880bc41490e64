"""Simulated sparse crowd Likert studies for the fitting tests and benchmarks."""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from humaneval_power.analyses import get_analysis
from humaneval_power.designs import CrowdDesign, Layout
from humaneval_power.fitting.batched import ComponentDesign
from humaneval_power.processes import InvariantProcess


def crowd_ratings(items: int = 250, systems: int = 20, raters: int = 3, pool: int = 100, seed: int = 1,
                  sd_worker: float = 0.3, sd_worker_system: float = 0.15, sd_item: float = 0.3,
                  sd_item_system: float = 0.15, sd_residual: float = 0.8, spread: float = 0.1) -> pd.DataFrame:
    """Each (item, system) output rated by its own ``raters`` workers drawn from a pool (a 'between' crowd design).

    Scores follow the coding-invariant model (:class:`~humaneval_power.processes.InvariantProcess`,
    intercept 3); system means are drawn with SD ``spread``. Systems are named S00, S01, ... (S00 sorts
    first: the baseline).
    """
    rng = np.random.default_rng(seed)
    item = np.repeat(np.arange(items), systems * raters)
    system = np.tile(np.repeat(np.arange(systems), raters), items)
    worker = np.concatenate([rng.choice(pool, raters, replace=False) for _ in range(items * systems)])
    means = rng.normal(0, spread, systems)
    process = InvariantProcess(sd_worker, sd_worker_system, sd_item, sd_item_system, sd_residual, systems, 3.0)
    y = process.simulate(Layout(worker, item, system, pool, items, systems), means, 1, rng)[:, 0]
    return pd.DataFrame({"worker": [f"w{w}" for w in worker], "item": [f"i{i}" for i in item],
                         "system": [f"S{s:02d}" for s in system], "score": y})


def crowd_layout(systems: int, items: int, workers: int, k: int, presentation: str = "within",
                 assignment: str = "balanced", n_studies: int | None = None,
                 rng: np.random.Generator | None = None) -> Layout:
    """A drawn designs.CrowdDesign layout; ``random`` with ``n_studies=None``: one drawn layout for every study."""
    layout = CrowdDesign(items, workers, k, systems, assignment, presentation).draw(
        rng or np.random.default_rng(0), n_studies or 1)
    if n_studies is None and layout.worker.ndim == 2:
        layout = dataclasses.replace(layout, worker=layout.worker[0])
    return layout


def layout_component_design(layout: Layout, model: str = "invariant") -> ComponentDesign:
    """The planner's analysis model (an analyses model by name) of a layout as a component design blocked by item.

    With one rating per output the item:system component is confounded with the residual and is left out
    (lme4 refuses it).
    """
    design = dataclasses.replace(get_analysis(model).component_design(layout), block="item")
    k = layout.size // (layout.n_items * layout.n_systems)
    if k == 1 and model == "invariant":
        design = dataclasses.replace(design, components=design.components[:3])
    return design


def crowd_component_design(systems: int, items: int, workers: int, k: int, presentation: str = "within",
                           assignment: str = "balanced", model: str = "invariant", n_studies: int | None = None,
                           rng: np.random.Generator | None = None) -> ComponentDesign:
    """:func:`layout_component_design` of a :func:`crowd_layout`."""
    return layout_component_design(crowd_layout(systems, items, workers, k, presentation, assignment, n_studies, rng),
                                   model)
