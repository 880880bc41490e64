"""The factor turning the engine's Type-M (over the latent shift) into the linear analysis's of ordinal
ratings (over the mean-rating difference): |effect / mean difference| where both are finite and nonzero,
else 1, and always 1 for the ordinal analysis."""
from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from humaneval_power.scenarios.likert import linear_type_m_scale

VALUES = st.one_of(st.floats(-5, 5), st.just(0.0), st.just(math.nan), st.just(math.inf), st.none())


@given(st.sampled_from(["ordinal", "invariant", "slopes"]), st.floats(-3, 3), VALUES)
def test_scale_is_the_ratio_where_defined_else_one(model: str, effect: float, mean_difference: float | None) -> None:
    scale = float(linear_type_m_scale(model, effect, mean_difference))
    defined = (model != "ordinal" and effect != 0 and mean_difference is not None
               and math.isfinite(mean_difference) and mean_difference != 0)
    assert scale == (abs(effect / mean_difference) if defined else 1.0)  # type: ignore[operator]
    assert scale >= 0


def test_elementwise_over_a_table() -> None:
    got = linear_type_m_scale(np.array(["invariant", "ordinal", "invariant", "invariant"]),
                              np.array([0.5, 0.5, 0.0, 0.5]), np.array([0.25, 0.25, 0.25, np.nan]))
    assert got.tolist() == [2.0, 1.0, 1.0, 1.0]
