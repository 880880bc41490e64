"""Reliability from variance components (issue 28): psych::ICC on the DialSummEval expert ratings, from lme4's
components and from the ANOVA ones; Spearman-Brown and the ratings a target reliability needs."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from humaneval_power.errors import InputError
from humaneval_power.rating_reliability import (
    anova_components,
    ratings_needed,
    reliability,
)

R_ICC = """
function(unit, worker, score) {
  d <- data.frame(unit = factor(unit), worker = factor(worker), score = score)
  x <- as.matrix(reshape(d, idvar = "unit", timevar = "worker", direction = "wide")[, -1])
  icc <- psych::ICC(x, lmer = FALSE)$results
  one <- lme4::lmer(score ~ 1 + (1 | unit), data = d, REML = TRUE)
  two <- lme4::lmer(score ~ 1 + (1 | unit) + (1 | worker), data = d, REML = TRUE)
  sd <- function(fit, g) { v <- as.data.frame(lme4::VarCorr(fit)); v$sdcor[v$grp == g] }
  c(setNames(icc$ICC, icc$type), one_unit = sd(one, "unit"), one_residual = sd(one, "Residual"),
    two_unit = sd(two, "unit"), two_worker = sd(two, "worker"), two_residual = sd(two, "Residual"))
}
"""


#: psych::ICC runs aov with one level per target: about 20 s for all 1,400 summaries, 1 s for one system's 100
SUBSETS = [pytest.param(("A",), id="system-A"),
           pytest.param(None, id="all-systems", marks=pytest.mark.slow)]


@pytest.fixture(scope="module")
def expert_relevance(data_dir) -> pd.DataFrame:
    """The experts' relevance ratings: 1400 summaries (item x system) x 3 experts, complete."""
    frame = pd.read_csv(data_dir / "dialsummeval_expert" / "ratings.csv", dtype={"item": str})
    frame = frame[frame.dimension == "relevance"]
    return frame.assign(unit=frame["item"] + ":" + frame["system"])


def _psych_reference(lme4_backend, frame: pd.DataFrame) -> dict[str, float]:
    ro = lme4_backend.r_session()
    if not ro.r('isTRUE(requireNamespace("psych", quietly = TRUE))')[0]:
        if os.environ.get("CI"):
            pytest.fail("CI must run the psych comparison but R lacks psych (apt-get install r-cran-psych)")
        pytest.skip("R lacks psych (Debian: apt-get install r-cran-psych)")
    out = ro.r(R_ICC)(ro.StrVector(frame["unit"].tolist()), ro.StrVector(frame["worker"].tolist()),
                      ro.FloatVector(frame["score"].astype(float).tolist()))
    return dict(zip(out.names, np.asarray(out, dtype=float)))


@pytest.mark.r
@pytest.mark.parametrize("systems", SUBSETS)
def test_component_reliability_equals_psych_icc(expert_relevance, lme4_backend, systems) -> None:
    """ICC1/ICC1k from the one-way model's components, ICC2/ICC2k (agreement) and ICC3/ICC3k (consistency) from
    the crossed model's: lme4's REML components to lme4's convergence, the ANOVA components exactly.
    Targets: the summaries of the given systems (all 1,400 when None) x the 3 experts."""
    frame = expert_relevance if systems is None else expert_relevance[expert_relevance.system.isin(systems)]
    ref = _psych_reference(lme4_backend, frame)
    k = 3
    one = reliability(ref["one_unit"], 0.0, ref["one_residual"], k)
    two = reliability(ref["two_unit"], ref["two_worker"], ref["two_residual"], k)
    lme4_values = {"ICC1": one.icc1, "ICC1k": one.icck, "ICC2": two.icc1, "ICC2k": two.icck,
                   "ICC3": two.icc1_consistency, "ICC3k": two.icck_consistency}
    for name, value in lme4_values.items():
        assert value == pytest.approx(ref[name], abs=1e-6), name
    matrix = frame.pivot(index="unit", columns="worker", values="score").to_numpy(dtype=float)
    moments = anova_components(matrix)
    assert moments.targets == len(frame) // k
    one = reliability(*moments.one_way[:1], 0.0, moments.one_way[1], k)
    two = reliability(*moments.two_way, k=k)
    exact = {"ICC1": one.icc1, "ICC1k": one.icck, "ICC2": two.icc1, "ICC2k": two.icck,
             "ICC3": two.icc1_consistency, "ICC3k": two.icck_consistency}
    for name, value in exact.items():
        assert value == pytest.approx(ref[name], abs=1e-12), name


@settings(max_examples=60, deadline=None)
@given(st.floats(0.05, 3), st.floats(0, 3), st.floats(0.05, 3), st.floats(0.05, 0.99),
       st.sampled_from(["agreement", "consistency"]))
def test_ratings_needed_is_the_smallest_k_reaching_the_target(t: float, r: float, e: float, target: float,
                                                               kind: str) -> None:
    k = ratings_needed(t, r, e, target, kind)
    value = (lambda rel: rel.icck if kind == "agreement" else rel.icck_consistency)
    assert value(reliability(t, r, e, k)) >= target - 1e-12
    if k > 1:
        assert value(reliability(t, r, e, k - 1)) < target


@settings(max_examples=40, deadline=None)
@given(st.floats(0.05, 3), st.floats(0, 3), st.floats(0, 3), st.integers(1, 50))
def test_mean_of_k_follows_spearman_brown(t: float, r: float, e: float, k: int) -> None:
    rel = reliability(t, r, e, k)
    for single, mean in ((rel.icc1, rel.icck), (rel.icc1_consistency, rel.icck_consistency)):
        assert mean == pytest.approx(k * single / (1 + (k - 1) * single), rel=1e-12)


def test_anova_components_of_a_known_table() -> None:
    """Target effects (+-1), rater effects (+-0.5), no residual: MSE = 0 and the components are the effects'
    sample variances (n - 1 denominators), 4/3 and 1/2."""
    y = np.add.outer([1.0, -1.0, 1.0, -1.0], [0.5, -0.5])
    moments = anova_components(y)
    assert moments.mean_squares["MSE"] == pytest.approx(0, abs=1e-15)
    assert moments.two_way == pytest.approx((np.sqrt(4 / 3), np.sqrt(1 / 2), 0))


@pytest.mark.parametrize("call, message", [
    (lambda: reliability(-1, 0, 1), ">= 0"),
    (lambda: reliability(0, 0, 0), "all variance components are zero"),
    (lambda: reliability(1, 0, 1, k=0), "whole number"),
    (lambda: ratings_needed(1, 0, 1, 1.0), "between 0 and 1"),
    (lambda: ratings_needed(0, 1, 1, 0.8), "target \\(item\\) variance is zero"),
    (lambda: ratings_needed(1, 1, 1, 0.8, kind="absolute"), "unknown reliability kind"),
    (lambda: anova_components(np.ones((1, 3))), "at least 2"),
    (lambda: anova_components(np.array([[1.0, np.nan], [2.0, 3.0]])), "complete"),
])
def test_bad_input_is_one_line(call, message: str) -> None:
    with pytest.raises(InputError, match=message) as info:
        call()
    assert "\n" not in str(info.value)
