"""Where the engine's chunks run: the executor seam.

The engine hands an executor a lazy list of tasks (one chunk of simulated
studies each) and a callback; the executor runs ``fn(task)`` somewhere and
calls ``on_done(task, result)`` in this process exactly once per task. Only
*where* a chunk runs changes: every chunk draws from its own random stream
(:func:`humaneval_power.engine.chunk_seed`), so results are bit-identical
whichever executor and however many workers.

* :class:`~humaneval_power.executors.local.LocalProcesses` (the default): processes
  on this machine, started on first use and kept until :meth:`Executor.close`,
  so one solve or grid starts R once per worker;
* :class:`~humaneval_power.executors.dask_cluster.DaskExecutor`: a Dask ``LocalCluster`` it starts, or an existing Dask
  distributed cluster (a scheduler address or a ``distributed.Client``).

``jobs`` arguments across the API take a number of local processes, an
:class:`Executor` or a ``distributed.Client`` (:func:`using` turns any of them
into an executor). Workers run one task at a time with one BLAS thread. With several
workers the engine hands out the costliest chunks first (:func:`costliest_first`), so that
the workers finish together. A
planning function that runs several sweeps (the cells of an assurance grid, the
steps of a solve, the rounds of a budget search) opens its ``jobs`` once
(:func:`one_executor`): its workers, and R in them, start once per command.
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, cast

from ..errors import InputError
from .base import Executor, Jobs, costliest_first
from .dask_cluster import DaskExecutor, is_dask_client
from .local import LocalProcesses

__all__ = ["SCHEDULERS", "DaskExecutor", "Executor", "Jobs", "LocalProcesses", "costliest_first", "from_options",
           "one_executor", "using"]

#: what ``--scheduler`` takes besides a scheduler address
SCHEDULERS = ("processes", "dask")


@contextmanager
def using(jobs: Jobs) -> Iterator[Executor]:
    """The executor for ``jobs``: an :class:`Executor` as is (left open), a ``distributed.Client``
    wrapped (the client left open), a number of local processes (None: all cores) started here
    and stopped on exit."""
    if isinstance(jobs, Executor):
        yield jobs
        return
    if is_dask_client(jobs):
        executor: Executor = DaskExecutor(client=jobs)
    else:
        executor = LocalProcesses(jobs)
    with executor:
        yield executor


F = TypeVar("F", bound=Callable[..., Any])


def one_executor(fn: F) -> F:
    """Decorator: ``fn`` runs with its ``jobs`` argument opened once by :func:`using`, so every
    sweep it starts (and every assurance cell its factory builds) shares one set of workers,
    started on first use and stopped when ``fn`` returns (an executor given is left open)."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        with using(bound.arguments["jobs"]) as executor:
            bound.arguments["jobs"] = executor
            return fn(*bound.args, **bound.kwargs)

    return cast(F, wrapper)


def from_options(scheduler: str | None, jobs: int | None) -> Executor:
    """The executor of the command line's ``--scheduler`` and ``--jobs``: ``processes`` (default),
    ``dask`` (a LocalCluster of ``jobs`` workers) or a Dask scheduler address ``tcp://HOST:PORT``."""
    if scheduler in (None, "processes"):
        return LocalProcesses(jobs)
    if scheduler == "dask":
        return DaskExecutor(n_workers=jobs)
    if "://" in scheduler:
        return DaskExecutor(address=scheduler)
    raise InputError(f"--scheduler takes {', '.join(SCHEDULERS)} or a Dask scheduler address such as "
                     f"tcp://HOST:8786, got {scheduler!r}")
