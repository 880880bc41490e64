"""Shared fixtures: R availability (skip locally with the reason, fail on CI) and data paths."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):
    # One BLAS thread per xdist worker: the workers already occupy the cores, and a threaded BLAS only spins on
    # these small matrices (the library's own worker processes do the same, executors.dask_cluster._limit_blas).
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = "1"  # libraries loaded later (R's BLAS)
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)  # libraries loaded already


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist, the slow tests first (otherwise in collection order): the workers take the long
    tests while there is much left to balance them with, and finish together on the short ones (xdist's
    loadgroup sends multi-test groups first, then one test at a time in this order).

    ``xdist_group`` repaired for pytest >= 9: pytest-xdist 3.8 names a grouped test ``nodeid@group`` by
    setting ``item._nodeid``, which pytest 9 no longer reads (a node's id lives in ``item._id``), so every
    group was silently split across the workers (measured: the two tests of a group ran on gw0 and gw1).
    """
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    from _pytest.nodeid import NodeId

    for item in items:
        grouped = getattr(item, "_nodeid", None)
        if isinstance(grouped, str) and grouped.startswith(item.nodeid + "@"):
            item._id = NodeId.parse(grouped)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(autouse=True)
def _no_timed_stage_notes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's stage notes appear after a delay, so on a loaded machine a quick failure could print one before
    its one-line error: tests see none unless they ask (tests/test_cli.py sets NOTE_DELAY to 0)."""
    from humaneval_power.cli import common

    monkeypatch.setattr(common, "NOTE_DELAY", None)


def mc_tolerance(p: float, n: int, z: float = 3.5) -> float:
    """Monte-Carlo tolerance for a proportion estimated from n draws: z standard errors."""
    return z * float(np.sqrt(max(p * (1 - p), 1e-4) / n))


def sim_jobs() -> int:
    """Processes for a test's simulation: 2 when tests run one at a time, 1 under pytest-xdist, whose workers
    already keep the cores busy (a pool there only adds process start-up, R's included). Results depend on
    the seed only, never on jobs (engine.run_cells)."""
    return 1 if os.environ.get("PYTEST_XDIST_WORKER") else 2


@pytest.fixture(scope="session")
def lme4_backend():
    """The lme4 bridge, or a skip (a failure on CI, which must run these tests)."""
    from humaneval_power.fitting import lme4

    ok, why = lme4.available()
    if not ok:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the lme4 tests but the backend is unavailable: {why}")
        pytest.skip(f"lme4 backend unavailable: {why}")
    return lme4


@pytest.fixture(scope="session")
def small_ordinal_ratings(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small ordinal ratings file (3 systems, 5 workers x 8 items, logit) the ordinal analysis tests share."""
    from .ordinal_ratings import simulated_ratings

    path = tmp_path_factory.mktemp("small_ordinal") / "ratings.csv"
    simulated_ratings(seed=3, link="logit", workers=5, items=8).to_csv(path, index=False)
    return path


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The shared real data (HEPOWER_DATA or ../shared/data), or a skip saying why."""
    env = os.environ.get("HEPOWER_DATA")
    path = Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"
    if not path.is_dir():
        pytest.skip(f"real data not found at {path} (set HEPOWER_DATA)")
    return path


#: fits made by :func:`humaneval_power.completed_study.analyze` under ``shared_analysis_fits``
_ANALYSIS_FITS: dict[tuple, tuple] = {}


@pytest.fixture
def shared_analysis_fits(monkeypatch: pytest.MonkeyPatch) -> dict[tuple, tuple]:
    """``analyze`` fits each (ratings, model, backend, df method) once per test session.

    Tests that analyse one study under several contrast families and adjustments then fit its model once:
    the fit is deterministic and everything these tests check (F, means, contrasts, adjustments) is
    computed from it afterwards. Returns the cache (a test may assert how many fits it made).
    """
    import pandas as pd

    from humaneval_power.completed_study import backends

    fit_once = backends.fit_once

    def cached(frame: pd.DataFrame, spec: object, backend: str, kenward_roger: bool, progress: object) -> tuple:
        key = (tuple(frame.columns), pd.util.hash_pandas_object(frame).to_numpy().tobytes(), spec, backend,
               kenward_roger)
        if key not in _ANALYSIS_FITS:
            _ANALYSIS_FITS[key] = fit_once(frame, spec, backend, kenward_roger, progress)
        return _ANALYSIS_FITS[key]

    monkeypatch.setattr(backends, "fit_once", cached)
    return _ANALYSIS_FITS


#: results of calls answered by :func:`share_calls`, by (module, function, arguments)
_SHARED_CALLS: dict[tuple, object] = {}


def call_key(value: object) -> object:
    """A hashable stand-in for an argument: arrays by dtype, shape and bytes; dataclasses by their fields (class
    named); containers element-wise."""
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__, tuple(call_key(getattr(value, f.name)) for f in dataclasses.fields(value)))
    if isinstance(value, dict):
        return tuple((k, call_key(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(call_key(v) for v in value)
    return value


def share_calls(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> None:
    """``module.name`` answers a call with the same arguments once per test process (xdist worker).

    For a deterministic fitter that several tests call on the same simulated studies (cells that differ only
    in the decision taken from the fit: the same stream, the same studies, the same fit): the first test fits,
    the others read its result. Only calls in this process are shared (run the cells with ``jobs=1``).
    """
    fn = getattr(module, name)

    def shared(*args: object, **kwargs: object) -> object:
        key = (getattr(module, "__name__", module), name, call_key(args), call_key(sorted(kwargs.items())))
        if key not in _SHARED_CALLS:
            _SHARED_CALLS[key] = fn(*args, **kwargs)
        return _SHARED_CALLS[key]

    monkeypatch.setattr(module, name, shared)
