"""Rankings with uncertainty (issue 28): P(best) against the normal probability, rank intervals, parametric
draws' moments, ties, refusals."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from humaneval_power.errors import InputError
from humaneval_power.rankings import parametric_draws, rank_table

from .conftest import mc_tolerance


def test_p_best_of_two_systems_is_the_normal_probability() -> None:
    """P(A > B) = Phi(delta / sd(A - B)) for correlated normal means."""
    cov = np.array([[0.04, 0.01], [0.01, 0.09]])
    n = 20_000
    table = rank_table(parametric_draws([0.1, 0.0], cov, n, seed=3), ["A", "B"]).set_index("system")
    exact = stats.norm.cdf(0.1 / np.sqrt(0.04 + 0.09 - 0.02))
    assert abs(table.p_best["A"] - exact) <= mc_tolerance(exact, n)
    assert table.p_best.sum() == pytest.approx(1.0)
    assert table.loc["A", "rank"] == 1 and table.loc["B", "rank"] == 2
    assert (table.rank_low == 1).all() and (table.rank_high == 2).all()


def test_separated_systems_have_exact_ranks_and_lower_can_be_better() -> None:
    draws = parametric_draws([0.0, 10.0, 20.0], np.eye(3) * 0.01, 500, seed=1)
    table = rank_table(draws, ["low", "mid", "high"])
    assert table.system.tolist() == ["high", "mid", "low"]
    assert table[["rank", "rank_low", "rank_high"]].to_numpy().tolist() == [[1, 1, 1], [2, 2, 2], [3, 3, 3]]
    assert table.p_best.tolist() == [1.0, 0.0, 0.0]
    flipped = rank_table(draws, ["low", "mid", "high"], higher_is_better=False)
    assert flipped.system.tolist() == ["low", "mid", "high"] and flipped.p_best.iloc[0] == 1.0


def test_exchangeable_systems_share_p_best_and_span_every_rank() -> None:
    k, n = 4, 8_000
    table = rank_table(parametric_draws(np.zeros(k), np.eye(k), n, seed=2), list("ABCD"))
    for p in table.p_best:
        assert abs(p - 1 / k) <= mc_tolerance(1 / k, n)
    assert (table.rank_low == 1).all() and (table.rank_high == k).all()
    assert table.mean_rank.to_numpy() == pytest.approx(np.full(k, (k + 1) / 2), abs=3.5 * np.sqrt((k * k - 1) / 12 / n))


def test_ties_in_a_draw_share_the_best_and_the_rank() -> None:
    draws = np.array([[1.0, 1.0, 0.0], [2.0, 1.0, 0.0]])
    table = rank_table(draws, ["A", "B", "C"], estimate=[1.5, 1.0, 0.0]).set_index("system")
    assert table.p_best.to_dict() == {"A": 0.75, "B": 0.25, "C": 0.0}
    assert table.mean_rank.to_dict() == {"A": 1.0, "B": 1.5, "C": 3.0}


def test_parametric_draws_have_the_estimate_and_covariance_even_when_singular() -> None:
    """A treatment-coded baseline has variance 0: its draws are constant; the others have the stated moments."""
    cov = np.array([[0.0, 0.0, 0.0], [0.0, 0.05, 0.02], [0.0, 0.02, 0.08]])
    n = 40_000
    d = parametric_draws([1.0, 2.0, 3.0], cov, n, seed=9)
    assert np.ptp(d[:, 0]) == pytest.approx(0.0, abs=1e-12)
    se = np.sqrt(np.diag(cov) / n)
    assert np.all(np.abs(d.mean(axis=0) - [1.0, 2.0, 3.0]) <= 3.5 * se + 1e-12)
    # the sample covariance's SE for normal data: sqrt((s_ij^2 + s_ii s_jj) / n)
    tol = 3.5 * np.sqrt((cov**2 + np.outer(np.diag(cov), np.diag(cov))) / n)
    assert np.all(np.abs(np.cov(d, rowvar=False) - cov) <= tol + 1e-12)
    np.testing.assert_array_equal(d, parametric_draws([1.0, 2.0, 3.0], cov, n, seed=9))


@pytest.mark.parametrize("call, message", [
    (lambda: parametric_draws([0, 1], np.eye(3)), "matching square covariance"),
    (lambda: parametric_draws([0, 1], np.array([[1, 0.5], [0.4, 1]])), "not symmetric"),
    (lambda: parametric_draws([0, 1], np.array([[1, 2], [2, 1]])), "positive semi-definite"),
    (lambda: parametric_draws([0, np.nan], np.eye(2)), "finite"),
    (lambda: rank_table(np.zeros((5, 3)), ["A", "B"]), "draws x systems"),
    (lambda: rank_table(np.zeros((5, 2)), ["A", "A"]), "distinct systems"),
    (lambda: rank_table(np.zeros((5, 2)), ["A", "B"], level=1.0), "level"),
    (lambda: rank_table(np.zeros((5, 2)), ["A", "B"], estimate=[1.0]), "one estimate per system"),
])
def test_bad_input_is_one_line(call, message: str) -> None:
    with pytest.raises(InputError, match=message) as info:
        call()
    assert "\n" not in str(info.value)
