"""The batched fit's einsum with cached contraction paths gives np.einsum(optimize=True)'s results bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

from humaneval_power.fitting.batched.deviance import einsum

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


@pytest.mark.parametrize("n", [1, 2, 7])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_einsum_equals_numpy_bitwise(case: tuple, n: int) -> None:
    eq, *shapes = case
    rng = np.random.default_rng(n * 1000 + len(eq))
    ops = [rng.normal(size=[n if d == "n" else d for d in s]) for s in shapes]
    for _ in range(2):  # the second call takes the cached path
        assert np.array_equal(einsum(eq, *ops), np.einsum(eq, *ops, optimize=True))
