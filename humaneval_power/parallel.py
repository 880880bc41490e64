"""Local process parallelism: ordered results, a callback per finished task."""
from __future__ import annotations

import multiprocessing as mp
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, Callable, Sequence

from .errors import InputError


def resolve_jobs(jobs: int | None) -> int:
    """``None`` means all cores; otherwise a positive integer."""
    if jobs is None:
        return os.cpu_count() or 1
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise InputError(f"jobs must be a positive integer, got {jobs!r}")
    return jobs


def _one_blas_thread() -> None:
    """Worker initializer: one BLAS thread per process.

    The processes already occupy the cores; a multi-threaded BLAS in each of
    them oversubscribes and, on the small matrices of a refit, spins: 600
    statsmodels-tier studies on 2 processes took 106 s instead of 8 s.
    """
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)


def map_tasks(
    fn: Callable[[Any], Any],
    tasks: Sequence[Any],
    jobs: int | None = None,
    on_done: Callable[[int, Any], None] | None = None,
) -> list[Any]:
    """Run ``fn`` over ``tasks`` on up to ``jobs`` processes; results in task order.

    ``on_done(position, result)`` is called in this process as each task ends.
    On Linux, workers are forked (scripts need no ``if __name__ == "__main__"``
    guard) unless R is already running in this process, where forking is not
    safe and ``spawn`` is used.
    """
    n_jobs = min(resolve_jobs(jobs), len(tasks))
    results: list[Any] = [None] * len(tasks)
    if n_jobs <= 1:
        for i, task in enumerate(tasks):
            results[i] = fn(task)
            if on_done:
                on_done(i, results[i])
        return results
    method = "fork" if sys.platform.startswith("linux") and "rpy2.rinterface" not in sys.modules else "spawn"
    with ProcessPoolExecutor(max_workers=n_jobs, mp_context=mp.get_context(method),
                             initializer=_one_blas_thread) as pool:
        futures = {pool.submit(fn, task): i for i, task in enumerate(tasks)}
        for fut in as_completed(futures):
            i = futures[fut]
            results[i] = fut.result()
            if on_done:
                on_done(i, results[i])
    return results
