"""Two designs of one crowd cell on paired simulated studies: the same random effects and residuals, arranged
by each design's layout (who rates what), fitted and decided by the cell's analysis."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from humaneval_power.designs import Layout
from humaneval_power.processes import system_means
from humaneval_power.scenarios.crowd import CrowdScenario


def paired_decisions(cells: tuple[CrowdScenario, CrowdScenario], n: int, seed: int,
                     layouts: tuple[Layout, Layout] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each cell's decision (significant or not) on studies 0..n-1. Study j of both cells draws from one
    generator state (``SeedSequence([seed, j])``); the processes draw every level's effect and every rating's
    residual before indexing them by the layout, so with the same numbers of workers, items, systems and ratings
    the two studies differ in the layout only (as the cells simulate: a fixed design's one layout fitted at once,
    a random assignment's layout per study). ``layouts`` replaces the designs' draws (a mutation check)."""
    out = []
    for c, cell in enumerate(cells):
        d = cell.design
        lay = d.draw(np.random.default_rng([seed, 1 << 20]), 1 if d.fixed else n) if layouts is None else layouts[c]
        assert isinstance(lay, Layout)
        # a fixed design's one layout, or one layout per study (the workers of study j in row j)
        studies = [lay] * n if lay.worker.ndim == 1 else [replace(lay, worker=lay.worker[j]) for j in range(n)]
        means = system_means(d.systems, cell.effect, cell.analysis.pair, cell.means)
        y = np.hstack([cell.process.simulate(s, means, 1, np.random.default_rng([seed, j]))
                       for j, s in enumerate(studies)])
        significant = []
        for a in range(0, n, cell.chunk_size):  # fitted in the cell's chunks, as the engine does
            b = min(n, a + cell.chunk_size)
            part = lay if lay.worker.ndim == 1 else replace(lay, worker=lay.worker[a:b])
            fit = cell.analysis.fit(part, y[:, a:b], cell.analysis.prepare(part) if part.worker.ndim == 1 else None)
            significant.append(cell.analysis.decide(fit, means, means).significant)
        out.append(np.concatenate(significant).astype(bool))
    return out[0], out[1]


def paired_difference_tolerance(a: np.ndarray, b: np.ndarray, z: float = 3.5) -> float:
    """``z`` standard errors of the difference of two rejection rates on paired studies (McNemar's: from the
    discordant pairs; at least one discordant pair's worth, so that a rate differing by one study passes)."""
    n = len(a)
    d = a.astype(float) - b.astype(float)
    var = max(float(np.mean(d * d) - np.mean(d) ** 2), 1.0 / n)
    return z * math.sqrt(var / n)
