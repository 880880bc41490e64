"""F1 power: the paired randomization test of Card et al. (2020), App. F.

App. F describes the test and the assumptions it needs — per true class, the contingency table of the
two models' predictions (Table 11: p(both neg.), p(only M1 pos.), p(only M2 pos.), p(both pos.)) and the
share of each class — but reports no F1 power figures. The numbers are therefore checked against
independent computations: every swap pattern of small test sets enumerated by brute force; McNemar's
exact conditional test (scipy), to which the test reduces when the models never disagree on negative
items (App. F: "replacing McNemar's test with a randomization test"); the exact power of tiny test sets
by enumerating every test set; an explicit Monte-Carlo with per-item predictions and real swaps; and the
Type-I error under exchangeable models.
"""
from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from humaneval_power.errors import InputError
from humaneval_power.scenarios.f1 import (
    F1Scenario,
    f1_difference,
    f1_mde,
    f1_power,
    f1_size,
    permutation_tail,
    scaled_tables,
)

from .conftest import mc_tolerance

#: the 8 categories as (label, M1's prediction, M2's prediction): positive items first, Table 11's cell order
CATEGORIES = [(label, m1, m2) for label in (1, 0) for m1, m2 in ((0, 0), (1, 0), (0, 1), (1, 1))]
POSITIVE = (0.05, 0.05, 0.8, 0.1)  # M2 finds most positives M1 misses
NEGATIVE = (0.1, 0.7, 0.1, 0.1)  # M1 has many more false positives
SYMMETRIC = ((0.1, 0.1, 0.1, 0.7), (0.8, 0.06, 0.06, 0.08))  # exchangeable models: the null


def _f1(pred: np.ndarray, label: np.ndarray) -> np.ndarray:
    """F1 of each row of predictions, as the harmonic mean of precision and recall (0 without a true positive)."""
    tp = (pred & label).sum(-1)
    precision = tp / np.maximum((pred).sum(-1), 1)
    recall = tp / np.maximum(label.sum(-1), 1)
    return np.where(tp > 0, 2 * precision * recall / np.where(tp > 0, precision + recall, 1), 0.0)


def _items(counts: list[int]) -> tuple[np.ndarray, ...]:
    """(label, M1, M2) per item of a test set with ``counts`` items of each category."""
    rows = np.repeat(np.array(CATEGORIES, dtype=bool), counts, axis=0)
    return rows[:, 0], rows[:, 1], rows[:, 2]


def _brute_tail(counts: list[int]) -> tuple[float, float]:
    """(observed F1 difference, share of the 2^n swap patterns at least as extreme), every pattern enumerated."""
    label, m1, m2 = _items(counts)
    swap = ((np.arange(2 ** len(label))[:, None] >> np.arange(len(label))) & 1).astype(bool)
    diff = _f1(np.where(swap, m1, m2), label) - _f1(np.where(swap, m2, m1), label)
    observed = diff[0]  # pattern 0 swaps nothing
    return float(observed), float(np.mean(np.abs(diff) >= abs(observed) - 1e-9 * max(1.0, abs(observed))))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=8, max_size=8).filter(lambda c: 0 < sum(c) <= 11))
def test_permutation_tail_is_the_enumerated_swap_distribution(counts: list[int]) -> None:
    observed, tail = permutation_tail(counts)
    brute_observed, brute_tail = _brute_tail(counts)
    assert observed == pytest.approx(brute_observed, abs=1e-12)
    assert tail == pytest.approx(brute_tail, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 150), min_size=8, max_size=8))
def test_permutation_tail_on_larger_test_sets_is_the_full_binomial_sum(counts: list[int]) -> None:
    """Beyond brute force: the sum over every (x, y) of the two binomial counts of swapped discordant items."""
    positives, m_pos, m_neg = sum(counts[:4]), counts[1] + counts[2], counts[5] + counts[6]
    x, y = np.arange(m_pos + 1)[:, None], np.arange(m_neg + 1)[None, :]

    def f1(tp: np.ndarray, fp: np.ndarray) -> np.ndarray:
        return np.where(tp > 0, 2 * tp / np.maximum(tp + positives + fp, 1), 0.0)

    diff = f1(counts[3] + x, counts[7] + y) - f1(counts[3] + m_pos - x, counts[7] + m_neg - y)
    observed = diff[counts[2], counts[6]]
    extreme = np.abs(diff) >= abs(observed) - 1e-9 * max(1.0, abs(observed))
    expected = stats.binom.pmf(x[:, 0], m_pos, 0.5) @ extreme @ stats.binom.pmf(y[0], m_neg, 0.5)
    assert permutation_tail(counts) == pytest.approx((observed, min(expected, 1.0)), abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=6, max_size=6))
def test_without_negative_disagreement_the_test_is_mcnemars_exact_test(c: list[int]) -> None:
    """No item where only one model predicts positive is negative: F1 then orders the swap patterns as the
    count of positives only M2 finds does, so the test is McNemar's exact conditional (sign) test."""
    counts = [*c[:4], c[4], 0, 0, c[5]]
    tail = permutation_tail(counts)[1]
    discordant = counts[1] + counts[2]
    expected = stats.binomtest(counts[2], discordant, 0.5).pvalue if discordant else 1.0
    assert tail == pytest.approx(expected, rel=1e-9)


def _exact_power(n: int, p_positive: float, positive: tuple[float, ...], negative: tuple[float, ...],
                 permutations: int, alpha: float) -> float:
    """Power of the randomization test by enumerating every test set of n items (brute-force tails): a
    study rejects when (c + 1) / (permutations + 1) <= alpha, c ~ Binomial(permutations, tail)."""
    probs = np.concatenate([p_positive * np.array(positive), (1 - p_positive) * np.array(negative)])
    most = int(np.floor(alpha * (permutations + 1) - 1 + 1e-9))
    # stars and bars: every composition of n into 8 counts
    counts = np.array([np.diff([-1, *bars, n + 7]) - 1 for bars in itertools.combinations(range(n + 7), 7)])
    tails = np.array([_brute_tail(list(c))[1] for c in counts])
    return float(stats.multinomial.pmf(counts, n, probs) @ stats.binom.cdf(most, permutations, tails))


@pytest.mark.parametrize("tables", [(POSITIVE, NEGATIVE), SYMMETRIC], ids=["effect", "null"])
def test_simulated_power_matches_the_enumerated_power(tables: tuple[tuple[float, ...], ...]) -> None:
    n, p_positive, permutations, alpha, sims = 6, 0.5, 9, 0.2, 4000
    exact = _exact_power(n, p_positive, *tables, permutations, alpha)
    if tables == SYMMETRIC:
        assert exact <= alpha  # the randomization test is valid: it rejects at most alpha under the null
    simulated = f1_power(n, p_positive, *tables, permutations, alpha, n_sims=sims, seed=3, jobs=1).power.iloc[0]
    assert abs(simulated - exact) <= mc_tolerance(exact, sims)


def test_matches_an_explicit_randomization_test() -> None:
    """Per-item labels and predictions drawn one by one, each study tested with real swaps."""
    n, p_positive, permutations, alpha, studies = 120, 0.3, 199, 0.05, 400
    positive, negative = (0.1, 0.08, 0.2, 0.62), (0.85, 0.08, 0.04, 0.03)
    rng = np.random.default_rng(11)
    probs = np.concatenate([p_positive * np.array(positive), (1 - p_positive) * np.array(negative)])
    rejected = 0
    for _ in range(studies):
        label, m1, m2 = (np.array(CATEGORIES, dtype=bool)[rng.choice(8, n, p=probs)]).T
        swap = rng.random((permutations, n)) < 0.5
        observed = _f1(m2, label) - _f1(m1, label)
        diff = _f1(np.where(swap, m1, m2), label) - _f1(np.where(swap, m2, m1), label)
        extreme = int((np.abs(diff) >= abs(observed) - 1e-9).sum())
        rejected += (extreme + 1) / (permutations + 1) <= alpha
    reference = rejected / studies
    sims = 2000
    power = f1_power(n, p_positive, positive, negative, permutations, alpha, n_sims=sims, seed=5, jobs=1).power.iloc[0]
    tolerance = 3.5 * np.sqrt(max(reference * (1 - reference), 1e-4) * (1 / studies + 1 / sims))
    assert abs(power - reference) <= tolerance


def test_type_one_error_under_exchangeable_models() -> None:
    sims, alpha = 2000, 0.05
    table = f1_power(300, 0.4, *SYMMETRIC, alpha=alpha, n_sims=sims, seed=7, jobs=1)
    assert table.effect.iloc[0] == 0
    assert table.power.iloc[0] <= alpha + mc_tolerance(alpha, sims)


def test_mde_keeps_the_agreement_and_reports_the_difference_at_its_answer() -> None:
    positive, negative = (0.1, 0.05, 0.15, 0.7), (0.9, 0.05, 0.03, 0.02)
    assert np.allclose(scaled_tables(positive, negative, 1.0), (positive, negative), rtol=0, atol=1e-15)
    assert f1_difference(0.3, *scaled_tables(positive, negative, 0.0)) == 0
    result = f1_mde(300, 0.3, positive, negative, n_sims=100, seed=1, jobs=1)
    record = result.record()
    assert result.attainable and record["power"] >= 0.8
    assert record["effect"] == pytest.approx(result.value, rel=1e-9)
    pos, neg = scaled_tables(positive, negative, record["scale"])
    assert record["table_positive"] == pytest.approx(list(pos)) and record["table_negative"] == pytest.approx(list(neg))
    for table, answer in ((positive, pos), (negative, neg)):
        assert answer[0] == table[0] and answer[3] == table[3]  # each class's agreement is kept


def test_size_reaches_the_target() -> None:
    result = f1_size(0.3, (0.1, 0.05, 0.15, 0.7), (0.9, 0.05, 0.03, 0.02), n_sims=100, seed=1, jobs=1)
    assert result.attainable and result.at is not None and result.at.power >= 0.8
    assert result.low <= result.value <= result.high


@pytest.mark.parametrize(("call", "message"), [
    (lambda: f1_mde(100, 0.3, (0.1, 0.15, 0.05, 0.7), (0.9, 0.03, 0.05, 0.02)), "M1 has the higher F1"),
    (lambda: f1_mde(100, 0.3, (0.1, 0.1, 0.1, 0.7), (0.9, 0.04, 0.04, 0.02)), "no direction"),
    (lambda: f1_size(0.3, *SYMMETRIC), "zero difference"),
    (lambda: f1_power(100, 1.0, *SYMMETRIC), "p_positive"),
])
def test_refusals(call: object, message: str) -> None:
    with pytest.raises(InputError, match=message):
        call()  # type: ignore[operator]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=2)), min_size=0,
                max_size=6))
def test_malformed_tables_are_refused_in_one_line(table: list[object]) -> None:
    try:
        F1Scenario(50, 0.5, table, SYMMETRIC[1])  # type: ignore[arg-type]
    except InputError as exc:
        assert "\n" not in str(exc)
    else:  # a valid table slipped through: it must be one
        values = np.asarray(table, dtype=float)
        assert values.shape == (4,) and (values >= 0).all() and abs(values.sum() - 1) <= 1e-6


def test_cli_matches_the_api(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    from humaneval_power.cli import main

    tables = ["--table-positive", "0.1", "0.05", "0.15", "0.7", "--table-negative", "0.9", "0.05", "0.03", "0.02"]
    out = tmp_path / "f1.csv"
    assert main(["f1", "power", "--n", "100:200:100", "--p-positive", "0.3", *tables, "--sims", "100", "--jobs", "1",
                 "--json", "--out", str(out)]) == 0
    cli = json.loads(capsys.readouterr().out)
    api = f1_power([100, 200], 0.3, (0.1, 0.05, 0.15, 0.7), (0.9, 0.05, 0.03, 0.02), n_sims=100, jobs=1)
    assert [r["power"] for r in cli] == api.power.tolist() and out.exists()
    assert main(["f1", "mde", "--n", "100", "--p-positive", "0.3", *tables[:5], "--table-negative", "0.9", "0.05",
                 "0.03", "0.2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sum" in err[0]
