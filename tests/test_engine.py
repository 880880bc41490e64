"""The generic engine: intervals, counting, seeds, parallelism, checkpoints."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.proportion import proportion_confint

from humaneval_power.engine import PowerCounts, PowerResult, StudyOutcomes, clopper_pearson, run_cells
from humaneval_power.errors import InputError
from humaneval_power.executors import LocalProcesses
from humaneval_power.params import get_preset
from humaneval_power.scenarios.likert import likert_power

from .crowd_pool import two_workers_fixture  # noqa: F401  (the fixture two_workers)


@pytest.mark.parametrize("k,n", [(0, 20), (7, 20), (20, 20), (831, 1000)])
def test_clopper_pearson_matches_statsmodels(k: int, n: int) -> None:
    lo, hi = proportion_confint(k, n, alpha=0.05, method="beta")
    assert clopper_pearson(k, n) == pytest.approx((lo, hi), abs=1e-12)


def test_counts_power_type_s_type_m_and_failures() -> None:
    out = StudyOutcomes(
        estimate=np.array([2.0, -1.0, 0.5, 3.0, np.nan]),
        significant=np.array([True, True, False, True, False]),
        failed=np.array([False, False, False, False, True]),
        singular=np.array([True, False, False, False, False]),
    )
    c = PowerCounts.from_outcomes(out, effect=1.0)
    r = PowerResult.from_counts({"effect": 1.0}, c + PowerCounts())
    assert r.power == pytest.approx(2 / 5)
    assert r.power_excluding_failures == pytest.approx(2 / 4)
    assert r.type_s == pytest.approx(1 / 3)
    assert r.type_m == pytest.approx((2 + 1 + 3) / 3)
    assert (r.n_failed, r.n_singular, r.n_sims) == (1, 1, 5)
    null = PowerResult.from_counts({"effect": 0.0}, c)
    assert null.power == pytest.approx(3 / 5) and np.isnan(null.type_s) and np.isnan(null.type_m)


def _grid(**kw: Any) -> pd.DataFrame:
    return likert_power(get_preset("card2020-high"), [3, 5], [20, 60], [0.2, 0.4], n_sims=3000, **kw)


@pytest.mark.xdist_group("engine_two_workers")  # with the two tests below: one pool (crowd_pool) per CI run
def test_results_do_not_depend_on_jobs_and_follow_the_seed(two_workers: LocalProcesses) -> None:
    one = _grid(seed=7, jobs=1)
    two = _grid(seed=7, jobs=two_workers)
    pd.testing.assert_frame_equal(one, two)
    other = _grid(seed=8, jobs=1)
    assert not np.array_equal(one.power.to_numpy(), other.power.to_numpy())


@pytest.mark.xdist_group("engine_two_workers")
def test_chunking_is_invisible_to_the_result(two_workers: LocalProcesses) -> None:
    """A cell larger than one chunk equals the sum of its chunks, whatever the jobs."""
    a = likert_power(get_preset("card2020-low"), [3], [50], [0.1], n_sims=45_000, seed=2, jobs=1)
    b = likert_power(get_preset("card2020-low"), [3], [50], [0.1], n_sims=45_000, seed=2, jobs=two_workers)
    pd.testing.assert_frame_equal(a, b)


def test_store_resumes_without_rerunning(tmp_path) -> None:
    import sqlite3

    path = tmp_path / "run.db"
    first = _grid(seed=4, jobs=1, store=str(path))
    with sqlite3.connect(path) as db:  # simulate an interruption: the last chunk was not saved
        db.execute("DELETE FROM chunks WHERE rowid = (SELECT MAX(rowid) FROM chunks)")
    db.close()
    seen: list[tuple[int, int]] = []
    resumed = _grid(seed=4, jobs=1, store=str(path), progress=lambda d, t, label="": seen.append((d, t)))
    pd.testing.assert_frame_equal(first, resumed)
    done, total = seen[0]
    assert total - done == 3000, "only the missing chunk should run again"


@dataclass(frozen=True)
class _Coin:
    """A minimal scenario: the engine is generic over anything with this shape."""

    p: float
    effect: float = 1.0
    chunk_size: int = 1000

    def cell(self) -> dict[str, Any]:
        return {"p": self.p, "effect": self.effect}

    def stream_key(self) -> str:
        return f"coin-{self.p}"

    def simulate(self, n: int, rng: np.random.Generator) -> StudyOutcomes:
        sig = rng.random(n) < self.p
        return StudyOutcomes(np.ones(n), sig, np.zeros(n, bool), np.zeros(n, bool))

    def exact(self) -> None:
        return None


@pytest.mark.xdist_group("engine_two_workers")
def test_engine_is_generic_and_monte_carlo_error_is_honest(two_workers: LocalProcesses) -> None:
    """20 chunks of a scenario defined here, on two worker processes (the module's pool, not one of its own)."""
    n = 20_000
    r = run_cells([_Coin(0.3)], n, seed=1, jobs=two_workers)[0]
    assert r.ci_low < 0.3 < r.ci_high
    assert abs(r.power - 0.3) < 3.5 * np.sqrt(0.3 * 0.7 / n)


@pytest.mark.parametrize("bad", [0, -5, 2.5, True])
def test_bad_number_of_simulations(bad: Any) -> None:
    with pytest.raises(InputError):
        run_cells([_Coin(0.3)], bad)
