"""Quasi-separated or degenerate head-to-head pairs: no Wald test or interval is reported for them (issue 23, item 5)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from humaneval_power.completed_study.judgments import WALD_COLUMNS
from humaneval_power.fitting.judgments import MIN_SE_RATIO, withheld_reason

WITHHELD = [*WALD_COLUMNS, "p_adjusted", "ci_low", "ci_high", "p_win"]


@settings(max_examples=200, deadline=None)
@given(n=st.integers(2, 100_000), rate=st.floats(0.0, 1.0), factor=st.floats(0.0, 10.0))
def test_withheld_exactly_below_the_independent_se(n: int, rate: float, factor: float) -> None:
    """A fit is withheld iff its SE is below MIN_SE_RATIO x 1/sqrt(n p (1-p)) (or it is quasi-separated)."""
    floor = 1 / math.sqrt(n * max(rate * (1 - rate), 1 / n))
    se = factor * floor
    reason = withheld_reason(n, rate, se, None)
    assert (reason is not None) == (se < MIN_SE_RATIO * floor)
    assert withheld_reason(n, rate, se, "quasi-separated: item SD 13") == "quasi-separated: item SD 13"
    assert withheld_reason(n, rate, math.nan, None) is not None


def separated_judgments(seed: int = 1) -> pd.DataFrame:
    """A, B, C; C beats A unanimously on 90% of the items (quasi-separation), B and A differ mildly."""
    rng = np.random.default_rng(seed)
    rows = []
    for item in range(80):
        unanimous = rng.random() < 0.9
        for worker in rng.choice(12, 3, replace=False):
            rows.append((worker, item, "A", "C", "b" if unanimous or rng.random() < 0.5 else "a"))
            rows.append((worker, item, "A", "B", "b" if rng.random() < 0.6 else "a"))
            rows.append((worker, item, "B", "C", "b" if rng.random() < 0.7 else "a"))
    return pd.DataFrame(rows, columns=["worker", "item", "system_a", "system_b", "outcome"])


def _check_withheld(res, withheld: set[tuple[str, str]]) -> None:
    pairs = res.pairs.set_index(["system", "versus"])
    assert set(pairs.index[pairs["withheld"]]) == withheld
    assert pairs.loc[list(withheld), WITHHELD].isna().all().all()
    shown = pairs.loc[~pairs["withheld"]]
    assert shown[WITHHELD].notna().all().all()
    assert all(0 < r < 1 for r in pairs["win_rate"])  # the raw win rate stands
    assert sum("withheld" in n for n in res.notes) >= len(withheld)
    assert "not reported" in res.methods()
    str(res)  # the summary prints without the reason column


@pytest.mark.r
def test_synthetic_quasi_separated_pair_withheld(lme4_backend) -> None:
    """C vs A is quasi-separated: no log-odds, test or interval; the other pairs' Holm p count it at p = 1."""
    from humaneval_power.completed_study import analyze_judgments
    from humaneval_power.multiplicity import adjust_pvalues

    res = analyze_judgments(separated_judgments(), worker="worker", item="item", baseline="A", ties="drop")
    _check_withheld(res, {("C", "A")})
    records = res.records()
    assert all(r["ties"] == 0 and r["ties_policy"] == "drop" for r in records)  # the count is not overwritten
    assert next(r for r in records if r["system"] == "C")["withheld_reason"].startswith("quasi-separated")
    pairs = res.pairs
    np.testing.assert_allclose(pairs["p_adjusted"].dropna(),
                               adjust_pvalues(pairs["p_value"].fillna(1.0).to_numpy(), "holm")[~pairs["withheld"]])


@pytest.mark.r
@pytest.mark.slow
def test_wmt13_quasi_separated_pair_withheld(data_dir, lme4_backend) -> None:
    """WMT13 fr-en, ties dropped: uedin-wmt13 vs Shef-wproa (win rate 0.77) fits an item SD of 13.5 on the
    log-odds scale and a p of 6e-57 (p_win 0.9997); it is withheld, with the reason."""
    from humaneval_power.completed_study import analyze_judgments

    res = analyze_judgments(data_dir / "wmt13_fren_rankings" / "pairs.csv", worker="judge", item="segment",
                            systems=["Shef-wproa.2780", "uedin-wmt13.2838"], ties="drop")
    _check_withheld(res, {("uedin-wmt13.2838", "Shef-wproa.2780")})
    assert res.pairs["win_rate"].iloc[0] == pytest.approx(1055 / 1370)
