"""Parameter recovery of the lme4 fit: unbiased within Monte-Carlo error, 95% intervals cover 90-99%."""
from __future__ import annotations

import pandas as pd
import pytest

from tests.conftest import mc_tolerance
from tests.recovery import recovery

pytestmark = pytest.mark.slow


@pytest.mark.r
@pytest.mark.parametrize("design", ["crossed", "sparse"])
def test_recovery_and_coverage(lme4_backend, design: str) -> None:
    _check(recovery(design, reps=100, intervals="wald"))


@pytest.mark.parametrize("design", ["crossed", "sparse"])
def test_recovery_and_coverage_without_r(design: str) -> None:
    """The same studies through the statsmodels backend (its own Satterthwaite df and Wald intervals)."""
    _check(recovery(design, reps=100, intervals="wald", backend="statsmodels"))


def _check(table: pd.DataFrame) -> None:
    print("\n" + table.to_string(index=False))
    for row in table.itertuples():
        if row.parameter == "effect":
            assert abs(row.mean_estimate - row.truth) < 3.5 * row.mc_se, row
        else:  # REML is unbiased for variances (not SDs) away from the boundary
            assert abs(row.mean_variance - row.truth**2) < 3.5 * row.variance_mc_se, row
        if row.at_boundary < 0.05:  # nominal 95% within Monte-Carlo error of the replicates
            assert abs(row.coverage - 0.95) <= mc_tolerance(0.95, row.reps), row
