"""Significance groups (issue 28): the compact letter display equals R's multcompView::multcompLetters on random
p-value matrices (letters compared as sets of systems), and WMT-style clusters follow their definition."""
from __future__ import annotations

import itertools
import os

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from humaneval_power.errors import InputError
from humaneval_power.significance_groups import (
    compact_letters,
    letter_sets,
    significance_matrix,
    wmt_clusters,
)

R_LETTERS = """
function(p, n, names) {
  x <- matrix(p, n, n, dimnames = list(names, names))
  m <- multcompView::multcompLetters(x, threshold = 0.05)$LetterMatrix
  apply(m, 2, function(col) paste(names[col], collapse = ","))
}
"""


def _random_p(rng: np.random.Generator, n: int) -> pd.DataFrame:
    """A symmetric matrix of p-values, about half of them below 0.05 (some exactly 0.05: not significant)."""
    p = rng.uniform(size=(n, n)) ** 4
    p[rng.uniform(size=(n, n)) < 0.1] = 0.05
    p = np.triu(p, 1)
    p = p + p.T + np.eye(n)
    names = [f"S{k}" for k in range(n)]
    return pd.DataFrame(p, index=names, columns=names)


@pytest.fixture(scope="module")
def multcomp(lme4_backend):
    ro = lme4_backend.r_session()
    if not ro.r('isTRUE(requireNamespace("multcompView", quietly = TRUE))')[0]:
        if os.environ.get("CI"):
            pytest.fail("CI must run the multcompView comparison (apt-get install r-cran-multcompview)")
        pytest.skip("R lacks multcompView (Debian: apt-get install r-cran-multcompview)")
    fun = ro.r(R_LETTERS)

    def letters(p: pd.DataFrame) -> frozenset[frozenset[str]]:
        groups = fun(ro.FloatVector(p.to_numpy().ravel(order="F").tolist()), len(p), ro.StrVector(list(p.index)))
        return frozenset(frozenset(g.split(",")) for g in groups)
    return letters


@pytest.mark.r
def test_letters_equal_multcompview_on_random_p_values(multcomp) -> None:
    """60 random cases of 2-12 systems: the same letters, as sets of systems."""
    rng = np.random.default_rng(28)
    for case in range(60):
        p = _random_p(rng, int(rng.integers(2, 13)))
        ours = letter_sets(compact_letters(p))
        assert ours == multcomp(p), (case, p.round(3).to_dict())


@pytest.mark.r
def test_letters_of_a_contrasts_table_equal_multcompview(multcomp) -> None:
    """The long form (system, versus, p_adjusted), as the analysis' contrasts table gives it."""
    p = _random_p(np.random.default_rng(5), 7)
    long = pd.DataFrame([(a, b, p.at[a, b]) for a, b in itertools.combinations(p.index, 2)],
                        columns=["system", "versus", "p_adjusted"])
    assert letter_sets(compact_letters(long)) == multcomp(p)


@settings(max_examples=80, deadline=None)
@given(st.integers(2, 8), st.integers(0, 2**32 - 1))
def test_letters_are_a_valid_display(n: int, seed: int) -> None:
    """Two systems share a letter exactly when they are not significantly different, every system has a letter,
    and no letter's systems are contained in another's."""
    flags = significance_matrix(_random_p(np.random.default_rng(seed), n))
    letters = compact_letters(flags)
    for a, b in itertools.combinations(flags.index, 2):
        assert bool(set(letters[a]) & set(letters[b])) == (not flags.at[a, b])
    assert all(letters)
    groups = list(letter_sets(letters))
    assert not any(g < h for g in groups for h in groups)


def test_no_significant_pair_is_one_letter_and_all_pairs_give_one_letter_each() -> None:
    names = ["A", "B", "C"]
    none = pd.DataFrame(0.5, index=names, columns=names)
    assert compact_letters(none).tolist() == ["a", "a", "a"]
    every = pd.DataFrame(0.001, index=names, columns=names)
    assert letter_sets(compact_letters(every)) == {frozenset("A"), frozenset("B"), frozenset("C")}


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 9), st.integers(0, 2**32 - 1))
def test_wmt_clusters_follow_the_definition(n: int, seed: int) -> None:
    """Each boundary separates systems all significantly better than all below it; no other boundary does."""
    rng = np.random.default_rng(seed)
    p = _random_p(rng, n)
    means = pd.Series(rng.normal(size=n), index=p.index)
    table = wmt_clusters(means, p)
    assert list(table["mean"]) == sorted(means, reverse=True)
    sig = significance_matrix(p).loc[table.system, table.system].to_numpy()
    better = sig & (table["mean"].to_numpy()[:, None] > table["mean"].to_numpy()[None, :])
    for pos in range(1, n):
        boundary = table.cluster[pos] != table.cluster[pos - 1]
        assert boundary == bool(better[:pos, pos:].all())
    for c in table.cluster.unique():
        rows = table[table.cluster == c]
        assert (rows.rank_low == rows.index.min() + 1).all() and (rows.rank_high == rows.index.max() + 1).all()


def test_wmt_clusters_of_a_clear_ranking_and_lower_is_better() -> None:
    names = ["A", "B", "C", "D"]
    p = pd.DataFrame(0.001, index=names, columns=names)
    p.loc["A", "B"] = p.loc["B", "A"] = 0.3  # A and B tied, both better than C and D; C and D apart
    means = {"A": 3.0, "B": 2.9, "C": 2.0, "D": 1.0}
    assert wmt_clusters(means, p).cluster.tolist() == [1, 1, 2, 3]
    assert wmt_clusters(means, p, higher_is_better=False).system.tolist() == ["D", "C", "B", "A"]
    assert wmt_clusters(means, p, higher_is_better=False).cluster.tolist() == [1, 2, 3, 3]


def test_default_order_of_a_contrasts_table_is_the_study_order() -> None:
    long = pd.DataFrame({"system": ["B", "C", "C"], "versus": ["A", "A", "B"], "p_adjusted": [0.01, 0.5, 0.5]})
    assert compact_letters(long).index.tolist() == ["A", "B", "C"]
    with pytest.raises(InputError, match="one finite number per system"):
        wmt_clusters({"A": 1.0}, long)
    with pytest.raises(InputError, match="'D' is not in the pairwise table"):
        compact_letters(long, systems=["A", "D"])


@pytest.mark.parametrize("pairwise, message", [
    (pd.DataFrame({"system": ["A"], "versus": ["B"]}), "no 'p_adjusted' column"),
    (pd.DataFrame({"system": ["A", "B"], "versus": ["B", "A"], "p_adjusted": [0.1, 0.1]}), "appears twice"),
    (pd.DataFrame({"system": ["A", "A"], "versus": ["B", "C"], "p_adjusted": [0.1, 0.1]}), "no p-value"),
    (pd.DataFrame({"system": ["A"], "versus": ["B"], "p_adjusted": [1.5]}), "between 0 and 1"),
    (pd.DataFrame([[1, 0.01], [0.2, 1]], index=["A", "B"], columns=["A", "B"]), "not symmetric"),
    (pd.DataFrame([[1, 0.01], [0.01, 1]], index=["A", "B"], columns=["B", "A"]), "same systems"),
])
def test_bad_pairwise_tables_are_one_line(pairwise: pd.DataFrame, message: str) -> None:
    with pytest.raises(InputError, match=message) as info:
        compact_letters(pairwise)
    assert "\n" not in str(info.value)
