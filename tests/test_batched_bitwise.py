"""The batched fit's own bitwise properties: the einsum with cached contraction paths (one per equation for every
batch size) equals np.einsum on that path, and a stacked evaluation (e.g. several step halvings of the line search
at once) gives every copy what its own batch gives alone."""
from __future__ import annotations

import numpy as np
import pytest

from humaneval_power.analyses import InvariantLMM
from humaneval_power.designs import CrowdDesign
from humaneval_power.fitting.batched.deviance import (
    Batch,
    Point,
    batch_statistics,
    einsum,
    evaluate,
    path_shapes,
    stacked,
)
from humaneval_power.fitting.batched.structure import BlockStructure, build_structure
from humaneval_power.processes import InvariantProcess

#: the contractions of an evaluation: (equation, operand shapes with n the number of studies)
CASES = [
    ("sni,snj->sij", ["n", 40, 3], ["n", 40, 3]),
    ("sbei,sbfj->sefij", ["n", 30, 2, 3], ["n", 30, 2, 3]),
    ("sli,slj,lk->skij", ["n", 20, 3], ["n", 20, 3], [20, 4]),
    ("sli,seflj->sefij", ["n", 20, 3], ["n", 2, 2, 20, 3]),
    ("sae,saf,sefij->saij", ["n", 3, 3], ["n", 3, 3], ["n", 3, 3, 3, 3]),
    ("saij,ak->skij", ["n", 2, 3, 3], [2, 4]),
    ("eflm,smj->seflj", [2, 2, 20, 20], ["n", 20, 3]),
]


@pytest.mark.parametrize("n", [1, 2, 7, 150])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_einsum_equals_numpy_bitwise(case: tuple, n: int) -> None:
    """Bit for bit np.einsum with numpy's greedy path for PATH_STUDIES studies (one path for every batch of more
    than one study, found once), and equal to np.einsum(optimize=True) up to rounding."""
    eq, *shapes = case
    rng = np.random.default_rng(n * 1000 + len(eq))
    ops = [rng.normal(size=[n if d == "n" else d for d in s]) for s in shapes]
    dummies = [np.zeros(s) for s in path_shapes(eq, tuple(o.shape for o in ops))]
    path = np.einsum_path(eq, *dummies, optimize=True)[0]
    for _ in range(2):  # the second call takes the cached path
        got = einsum(eq, *ops)
        assert np.array_equal(got, np.einsum(eq, *ops, optimize=path))
        np.testing.assert_allclose(got, np.einsum(eq, *ops, optimize=True), rtol=1e-12, atol=1e-12)


def _batch(kind: str, n: int, rng: np.random.Generator) -> Batch:
    """A crowd study's batch: 15 workers x 2 systems of outer effects (products big enough to change kernels
    with the batch size), the workers the same in every study or drawn anew per study."""
    process = InvariantProcess(0.4, 0.1, 0.5, 0.15, 0.9, systems=2, intercept=3.0)
    layout = CrowdDesign(60, 15, 3, 2, "random" if kind == "per_study" else "balanced").draw(rng, n)
    design = InvariantLMM().component_design(layout)
    y = process.simulate(layout, np.r_[0.0, 0.1], n, rng)
    st = build_structure(design)
    x = np.asarray(design.x, float)
    assert not isinstance(st, BlockStructure)  # the evaluation by block class (the block-by-block one is not stacked)
    return batch_statistics(st, x, y, slice(None) if design.n_studies else None, True)


@pytest.mark.parametrize("kind", ["shared", "per_study"])
@pytest.mark.parametrize("n", [2, 20])
def test_stacked_evaluation_equals_each_copy_bitwise(kind: str, n: int) -> None:
    rng = np.random.default_rng(2027 + n)
    bt = _batch(kind, n, rng)
    copies = 4
    gammas = rng.uniform(0.01, 2.0, size=(copies, n, bt.st.n_comp))
    big = evaluate(stacked(bt, copies), gammas.reshape(copies * n, -1), True)
    for i in range(copies):
        alone = evaluate(bt, gammas[i], True)
        for name in Point.__dataclass_fields__:
            assert np.array_equal(getattr(big, name)[i * n:(i + 1) * n], getattr(alone, name)), (name, i)
