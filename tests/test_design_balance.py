"""Balanced crowd designs do not confound workers with systems (issue 23, item 1).

The former cyclic rule gave unit u = item*S + system the workers u*k, ..., u*k + k - 1 (mod W): whenever
W is a multiple of S*k every worker rated a single system, and a between-output design's power collapsed
(4 systems, 200 items, 20 workers: k = 1 and 5 far below random assignment, k = 3 not).
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from humaneval_power.designs import CrowdDesign
from humaneval_power.processes import InvariantProcess
from humaneval_power.scenarios.crowd import cell_factory
from humaneval_power.scenarios.likert import likert_power

from .crowd_pairing import paired_decisions, paired_difference_tolerance

#: card2020-like SDs on the coding-invariant scale, with a worker main effect large enough that
#: confounding workers with systems shows
SDS = InvariantProcess(0.3, 0.1, 0.15, 0.1, 0.6)

GRID = [(w, s, k, h, p, i) for w, s, k, h, p, i in itertools.product(
    (1, 2, 3, 5, 8, 12, 20), (2, 3, 4), (1, 2, 3), (1, 2, 3), ("within", "between"), (3, 10, 50)) if k <= w]


@pytest.mark.parametrize("presentation", ["within", "between"])
def test_every_worker_rates_every_system_as_evenly_as_the_numbers_allow(presentation: str) -> None:
    """Over a grid of (W, S, k, h, I): k distinct workers per unit, workloads within one HIT of each
    other, and (one output per HIT) each worker's ratings spread over the systems within one of each
    other, so that no two systems' workers are disjoint once every worker has S outputs; with HITs of
    h outputs (composed item-major, so mixed) no worker rates a single system once it has S HITs."""
    for w, s, k, h, _, i in (g for g in GRID if g[4] == presentation):
        d = CrowdDesign(items=i, workers=w, ratings_per_item=k, systems=s, presentation=presentation,
                        items_per_hit=h)
        lay = d.draw(np.random.default_rng(0), 1)
        unit = lay.item * (s if presentation == "between" else 1) + (lay.system if presentation == "between" else 0)
        assert len(set(zip(unit.tolist(), lay.worker.tolist()))) * (1 if presentation == "between" else s) \
            == lay.size, (w, s, k, h, i)  # k distinct workers per unit
        hits = np.zeros(w, int)
        for worker, _ in set(zip(lay.worker.tolist(), (unit // h).tolist())):
            hits[worker] += 1
        assert hits.max() - hits.min() <= 1, (w, s, k, h, i)
        per = np.zeros((w, s), int)
        np.add.at(per, (lay.worker, lay.system), 1)
        outputs = per.sum(axis=1) // (s if presentation == "within" else 1)
        if h == 1:
            assert (per.max(axis=1) - per.min(axis=1)).max() <= 1, (w, s, k, h, i, per)
        if w >= 2 and outputs.min() >= s and (h == 1 or hits.min() >= s):
            assert (per > 0).all(), (w, s, k, h, i, per)
            sets = [set(lay.worker[lay.system == j].tolist()) for j in range(s)]
            assert all(a & b for a, b in itertools.combinations(sets, 2))


def test_between_outputs_of_an_item_go_to_different_workers_where_possible() -> None:
    """A between design's point: a worker sees one version of an item (when S*ceil(I*k/W) <= I)."""
    for w, s, k, i in ((20, 4, 1, 200), (20, 4, 5, 200), (12, 3, 2, 60), (8, 2, 4, 80)):
        lay = CrowdDesign(items=i, workers=w, ratings_per_item=k, systems=s, presentation="between").draw(
            np.random.default_rng(0), 1)
        assert len(set(zip(lay.item.tolist(), lay.worker.tolist()))) == lay.size


#: (workers, systems, k, items): the issue's example (W a multiple of S*k for k = 1 and 5) and two more
#: designs the cyclic rule confounded (W = S*k)
POWER_CELLS = [(20, 4, 1, 200), (20, 4, 3, 200), (20, 4, 5, 200), (12, 3, 2, 60), (8, 2, 4, 80)]


@pytest.mark.slow
def test_balanced_between_power_equals_random_assignment_power() -> None:
    """Balanced and random assignment, same workloads on average: the same power within Monte-Carlo error, on
    paired studies (``tests/crowd_pairing.py``: study j of both designs has the same worker, item and residual
    draws, arranged by each design's layout), at 3.5 SEs of the paired difference (McNemar's, from the
    discordant studies: 6-22% here, so +-0.09 to +-0.16 at 100 studies; two independent runs of 200 studies
    were +-0.15 to +-0.18). Mutation: the former cyclic rule's layouts in place of the balanced ones fail at
    k = 5 (power 0.05 vs 0.72) and on both W = S*k designs (0.07 vs 0.33, 0.08 vs 0.47), as the independent
    runs did; its k = 1 design (0.13 vs 0.26) passes both forms."""
    n = 100
    for w, s, k, i in POWER_CELLS:
        cells = tuple(cell_factory(SDS, systems=s, assignment=a, presentation="between")(
            i, w, k, 1, 0.1 if s == 4 else 0.15) for a in ("balanced", "random"))
        balanced, random = paired_decisions(cells, n, seed=7)
        assert abs(balanced.mean() - random.mean()) < paired_difference_tolerance(balanced, random), (
            w, s, k, i, balanced.mean(), random.mean())


@pytest.mark.r
@pytest.mark.slow
def test_balanced_between_fast_tier_equals_lme4_refits_of_the_same_studies(lme4_backend) -> None:
    """The batched fast tier and lme4 + lmerTest refits of the same simulated studies (same seed, same
    stream) reach the same decisions on the issue's 4-system design."""
    n = 8
    kw = {"ratings_per_item": 3, "systems": 4, "presentation": "between", "n_sims": n, "seed": 3, "jobs": 1}
    fast = likert_power(SDS, 20, 200, 0.2, **kw).iloc[0]
    refit = likert_power(SDS, 20, 200, 0.2, method="lme4", **kw).iloc[0]
    assert refit.n_failed == 0
    assert abs(fast.power - refit.power) <= 1 / n  # at most one boundary decision differs
    assert fast.mean_estimate == pytest.approx(refit.mean_estimate, abs=1e-5)
