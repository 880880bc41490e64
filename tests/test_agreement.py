"""Krippendorff's alpha (issue 28): the published worked example, a definitional reference, the ``krippendorff``
package on the shared data, the bootstrap's coverage, and refusals."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from humaneval_power.agreement import (
    METRICS,
    alpha_table,
    bootstrap_alphas,
    coincidence_matrix,
    krippendorff_alpha,
)
from humaneval_power.errors import InputError

from .conftest import mc_tolerance

NAN = np.nan
#: Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section E: 4 observers x 12 units
WORKED = np.array([[1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
                   [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
                   [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
                   [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN]]).T  # units x raters
#: the values the paper prints (three decimals)
PUBLISHED = {"nominal": 0.743, "ordinal": 0.815, "interval": 0.849, "ratio": 0.797}


def _naive_alpha(matrix: np.ndarray, metric: str) -> Fraction:
    """Alpha from its definition, in exact arithmetic, without a coincidence matrix: D_o averages the pairs within
    units (weight 1 / (m_u - 1)), D_e all pairs of pairable values in the data."""
    units = [[Fraction(v).limit_denominator() for v in row if not np.isnan(v)] for row in matrix]
    units = [u for u in units if len(u) >= 2]
    values = [v for u in units for v in u]
    n = len(values)
    freq = {v: values.count(v) for v in set(values)}

    def d(c: Fraction, k: Fraction) -> Fraction:
        if metric == "nominal":
            return Fraction(int(c != k))
        if metric == "ordinal":
            lo, hi = min(c, k), max(c, k)
            return (sum(f for g, f in freq.items() if lo <= g <= hi) - Fraction(freq[c] + freq[k], 2)) ** 2
        if metric == "interval":
            return (c - k) ** 2
        return ((c - k) / (c + k)) ** 2 if c + k else Fraction(0)

    observed = sum(sum(d(u[i], u[j]) for i in range(len(u)) for j in range(len(u)) if i != j) / (len(u) - 1)
                   for u in units) / n
    expected = sum(d(values[a], values[b]) for a in range(n) for b in range(n) if a != b) / (n * (n - 1))
    return 1 - observed / expected


@pytest.mark.parametrize("metric", METRICS)
def test_worked_example_equals_the_paper_and_the_definition(metric: str) -> None:
    got = krippendorff_alpha(WORKED, metric)
    assert abs(got.alpha - PUBLISHED[metric]) < 5e-4  # the paper's rounding
    assert got.alpha == pytest.approx(float(_naive_alpha(WORKED, metric)), abs=1e-12)
    assert (got.units, got.pairable, got.raters) == (11, 40, 4)  # unit 12 has one value: not pairable


def test_worked_example_from_a_tidy_frame_and_as_the_paper_writes_values() -> None:
    """The same data as a tidy frame (missing ratings absent), and nominal values as letters."""
    units, raters = np.nonzero(~np.isnan(WORKED))
    tidy = pd.DataFrame({"worker": raters, "item": units, "score": WORKED[units, raters]})
    for metric in METRICS:
        assert krippendorff_alpha(tidy, metric).alpha == pytest.approx(PUBLISHED[metric], abs=5e-4)
    letters = np.array([[None if np.isnan(v) else "abcde"[int(v) - 1] for v in row] for row in WORKED], dtype=object)
    assert krippendorff_alpha(letters, "nominal").alpha == krippendorff_alpha(WORKED, "nominal").alpha


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_random_reliability_data_equal_the_definition(data: st.DataObject) -> None:
    units = data.draw(st.integers(2, 8))
    raters = data.draw(st.integers(2, 4))
    values = data.draw(st.lists(st.one_of(st.none(), st.integers(0, 4)), min_size=units * raters,
                                max_size=units * raters))
    matrix = np.array([np.nan if v is None else v for v in values], dtype=float).reshape(units, raters)
    metric = data.draw(st.sampled_from(METRICS))
    try:
        reference = _naive_alpha(matrix, metric)
    except ZeroDivisionError:  # no pairable values or no variation
        reference = None
    try:
        got = krippendorff_alpha(matrix, metric).alpha
    except InputError:
        assert ((~np.isnan(matrix)).sum(axis=1) < 2).all()
        return
    if reference is None:
        assert np.isnan(got)
    else:
        assert got == pytest.approx(float(reference), abs=1e-12)


def _pivot(frame: pd.DataFrame) -> np.ndarray:
    """raters x units, NaN where a worker did not rate the unit (the krippendorff package's layout)."""
    return frame.pivot_table(index="worker", columns=["item", "system"], values="score").to_numpy(dtype=float)


@pytest.mark.parametrize("folder", ["dialsummeval_expert", "dialsummeval_amt"])
def test_equals_the_krippendorff_package_on_the_shared_data(data_dir, folder: str) -> None:
    krippendorff = pytest.importorskip("krippendorff", reason="pip install krippendorff (the dev extra)")
    ratings = pd.read_csv(data_dir / folder / "ratings.csv", dtype={"item": str})
    ours = {m: alpha_table(ratings, by=["dimension"], metric=m).set_index("dimension") for m in METRICS}
    for dimension, frame in ratings.groupby("dimension"):
        matrix = _pivot(frame)
        for metric in METRICS:
            ref = krippendorff.alpha(reliability_data=matrix, level_of_measurement=metric, value_domain=[1, 2, 3, 4, 5])
            got = ours[metric].at[dimension, "alpha"]
            assert abs(got - ref) < 1e-9, (folder, metric, dimension, got, ref)
    assert (ours["interval"]["pairable"] == len(ratings) // 4).all()


def test_the_vectorised_bootstrap_is_the_alpha_of_each_resample() -> None:
    """Resample weights times per-unit contributions = the coincidence matrix of the resampled units."""
    p_counts = np.array([[2, 1, 0], [0, 3, 0], [1, 1, 1], [0, 0, 2], [1, 0, 1]])
    values = np.array([1.0, 2.0, 3.0])
    draws = bootstrap_alphas(p_counts, values, "ordinal", 20, seed=7)
    times = np.random.default_rng(7).multinomial(5, np.full(5, 0.2), size=20)
    for b in range(20):
        resampled = np.repeat(p_counts, times[b], axis=0)
        np.testing.assert_allclose(coincidence_matrix(p_counts, times[b]), coincidence_matrix(resampled))
        units = np.repeat(np.arange(len(resampled)), resampled.sum(axis=1))
        matrix = np.full((len(resampled), 4), np.nan)
        for u, row in enumerate(resampled):
            vals = np.repeat(values, row)
            matrix[u, :len(vals)] = vals
        assert len(units) == np.isfinite(matrix).sum()
        direct = krippendorff_alpha(matrix, "ordinal").alpha
        assert draws[b] == pytest.approx(direct, abs=1e-12) or (np.isnan(draws[b]) and np.isnan(direct))


def _likert_study(rng: np.random.Generator, units: int, raters: int = 3, missing: float = 0.2) -> np.ndarray:
    """Ratings 1..5 of units with a N(0, 1) true score, N(0, 1) rater noise, some ratings missing."""
    latent = rng.normal(size=(units, 1)) + rng.normal(size=(units, raters))
    scores = np.clip(np.round(3 + 0.9 * latent), 1, 5)
    scores[rng.random(scores.shape) < missing] = np.nan
    return scores


def test_bootstrap_interval_covers_the_population_alpha() -> None:
    """Coverage of the 90% cluster-bootstrap interval over 300 simulated studies of 80 units. The population
    alpha is that of one very large study (its own SE, ~0.002, is negligible next to the intervals' width)."""
    rng = np.random.default_rng(2028)
    truth = krippendorff_alpha(_likert_study(rng, 200_000), "interval").alpha
    sims, level = 300, 0.90
    hits = 0
    for _ in range(sims):
        a = krippendorff_alpha(_likert_study(rng, 80), "interval", n_boot=400, level=level,
                               seed=int(rng.integers(2**31)))
        hits += a.lower <= truth <= a.upper
    assert abs(hits / sims - level) <= mc_tolerance(level, sims), hits / sims


def test_alpha_table_per_dimension_and_system() -> None:
    rng = np.random.default_rng(3)
    rows = [(w, i, s, d, int(rng.integers(1, 6))) for w in "abc" for i in range(10) for s in "XY" for d in "uv"]
    ratings = pd.DataFrame(rows, columns=["worker", "item", "system", "dimension", "score"])
    table = alpha_table(ratings, by=["dimension", "system"], metric="ordinal", n_boot=50, seed=4)
    assert list(zip(table.dimension, table.system)) == [("u", "X"), ("u", "Y"), ("v", "X"), ("v", "Y")]
    one = ratings[(ratings.dimension == "v") & (ratings.system == "X")]
    assert table.alpha[2] == krippendorff_alpha(one, "ordinal", unit="item").alpha
    assert table.equals(alpha_table(ratings, by=["dimension", "system"], metric="ordinal", n_boot=50, seed=4))
    assert (table.lower <= table.alpha).all() and (table.alpha <= table.upper).all()
    assert (table.units == 10).all() and (table.raters == 3).all()


def test_duplicate_ratings_of_a_unit_are_refused() -> None:
    ratings = pd.DataFrame({"worker": ["a", "a", "b"], "item": [1, 1, 1], "score": [1, 2, 3]})
    with pytest.raises(InputError, match="rated unit"):
        krippendorff_alpha(ratings)


@pytest.mark.parametrize("bad, kwargs, message", [
    (np.array([[1.0, np.nan], [np.nan, 2.0]]), {}, "no unit has ratings from two raters"),
    (WORKED, {"metric": "ordinal", "levels": [1, 2, 3, 4]}, "outside the declared scale"),
    (WORKED, {"metric": "cardinal"}, "unknown metric"),
    (np.array([["a", "b"], ["c", "a"]], dtype=object), {"metric": "nominal", "levels": ["a", "b"]},
     "'c' is outside the declared scale"),
    (-WORKED, {"metric": "ratio"}, "non-negative"),
    (np.array([["a", "b"], ["c", "d"]]), {"metric": "interval"}, "numeric"),
    (np.arange(4.0), {}, "units x raters"),
    (WORKED, {"n_boot": -1}, "n_boot"),
])
def test_bad_input_is_one_line(bad, kwargs, message: str) -> None:
    with pytest.raises(InputError, match=message) as info:
        krippendorff_alpha(bad, **kwargs)
    assert "\n" not in str(info.value)


_frames = st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.one_of(st.integers(0, 5), st.none()),
                             st.one_of(st.integers(-3, 9), st.floats(allow_nan=True, allow_infinity=True),
                                       st.text(max_size=2), st.none())), max_size=12)


@settings(max_examples=60, deadline=None)
@given(_frames, st.sampled_from([*METRICS, "likert", ""]), st.sampled_from([None, [1, 2, 3, 4, 5], ["a", "b"]]),
       st.booleans())
def test_malformed_frames_give_an_alpha_or_one_line(rows, metric: str, levels, duplicates: bool) -> None:
    """Whatever the frame: a number (or NaN when there is no variation) or an InputError of one line."""
    frame = pd.DataFrame(rows, columns=["worker", "item", "score"])
    if not duplicates:
        frame = frame.drop_duplicates(["worker", "item"])
    try:
        got = krippendorff_alpha(frame, metric, levels=levels)
    except InputError as exc:
        assert "\n" not in str(exc) and str(exc)
    else:
        assert np.isnan(got.alpha) or got.alpha <= 1
