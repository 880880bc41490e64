"""Where the engine's chunks run: the executor seam.

The engine hands an executor a lazy list of tasks (one chunk of simulated
studies each) and a callback; the executor runs ``fn(task)`` somewhere and
calls ``on_done(task, result)`` in this process exactly once per task. Only
*where* a chunk runs changes: every chunk draws from its own random stream
(:func:`humaneval_power.engine.chunk_seed`), so results are bit-identical
whichever executor and however many workers.

* :class:`~humaneval_power.parallel.LocalProcesses` (the default): processes
  on this machine, started on first use and kept until :meth:`Executor.close`,
  so one solve or grid starts R once per worker;
* :class:`DaskExecutor`: a Dask ``LocalCluster`` it starts, or an existing Dask
  distributed cluster (a scheduler address or a ``distributed.Client``).

``jobs`` arguments across the API take a number of local processes, an
:class:`Executor` or a ``distributed.Client`` (:func:`using` turns any of them
into an executor). Workers run one task at a time with one BLAS thread. A
planning function that runs several sweeps (the cells of an assurance grid, the
steps of a solve, the rounds of a budget search) opens its ``jobs`` once
(:func:`one_executor`): its workers, and R in them, start once per command.
"""
from __future__ import annotations

import functools
import inspect
import itertools
import logging
import os
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, TypeVar, Union, cast

from .errors import BackendUnavailableError, InputError

#: seconds to wait for a Dask scheduler before saying it is unreachable
CONNECT_TIMEOUT = 10
#: what ``--scheduler`` takes besides a scheduler address
SCHEDULERS = ("processes", "dask")
_INSTALL = "pip install 'humaneval-power[dask]' (dask and distributed)"
_END = object()


class Executor:
    """Runs tasks and reports each result once, in this process, as it finishes."""

    #: workers that run tasks at once (sets how many tasks are queued ahead)
    workers: int = 1

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any], on_done: Callable[[Any, Any], None]) -> None:
        """``on_done(task, fn(task))`` for every task, in completion order. On an error or Ctrl-C,
        results already finished are reported first, then the rest is cancelled and it is raised."""
        raise NotImplementedError

    def describe(self) -> str:
        """What runs the tasks, for progress and summaries."""
        return type(self).__name__

    def close(self) -> None:
        """Stop the workers this executor started (an executor given a running cluster leaves it)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


Jobs = Union[int, None, Executor, Any]  #: a number of local processes, an Executor or a distributed.Client


@contextmanager
def using(jobs: Jobs) -> Iterator[Executor]:
    """The executor for ``jobs``: an :class:`Executor` as is (left open), a ``distributed.Client``
    wrapped (the client left open), a number of local processes (None: all cores) started here
    and stopped on exit."""
    if isinstance(jobs, Executor):
        yield jobs
        return
    if _is_dask_client(jobs):
        executor: Executor = DaskExecutor(client=jobs)
    else:
        from .parallel import LocalProcesses

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
        from .parallel import LocalProcesses

        return LocalProcesses(jobs)
    if scheduler == "dask":
        return DaskExecutor(n_workers=jobs)
    if "://" in scheduler:
        return DaskExecutor(address=scheduler)
    raise InputError(f"--scheduler takes {', '.join(SCHEDULERS)} or a Dask scheduler address such as "
                     f"tcp://HOST:8786, got {scheduler!r}")


def _is_dask_client(obj: Any) -> bool:
    return type(obj).__name__ == "Client" and type(obj).__module__.startswith("distributed")


def _distributed() -> Any:
    try:
        import distributed
    except ImportError as exc:
        raise BackendUnavailableError(f"Dask is not installed ({exc}); {_INSTALL}") from None
    return distributed


def _check_scheduler(distributed: Any, address: str) -> None:
    """Refuse an address that is malformed or where no Dask scheduler answers within :data:`CONNECT_TIMEOUT`,
    before a ``Client`` is built: a ``Client()`` that fails half-way (``tcp://:::``, or another service on
    that port, which it waited on for minutes) leaves an object whose ``__del__`` hangs 20 s and prints a
    traceback."""
    import asyncio

    try:
        distributed.comm.get_address_host_port(address)
    except ValueError as exc:
        raise InputError(f"not a Dask scheduler address: {address!r} ({exc}); "
                         "give tcp://HOST:PORT, e.g. tcp://10.0.0.5:8786 or tcp://[::1]:8786") from None

    async def identity() -> Any:
        comm = await distributed.comm.connect(address, timeout=CONNECT_TIMEOUT)
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    from concurrent.futures import ThreadPoolExecutor

    try:  # in a thread of its own: the caller may be running an event loop (a notebook)
        with ThreadPoolExecutor(1) as thread:
            answer = thread.submit(asyncio.run, asyncio.wait_for(identity(), CONNECT_TIMEOUT)).result()
    except Exception as exc:  # noqa: BLE001 - whatever the other end did, it is no scheduler we can use
        why = str(exc).splitlines()[0] if str(exc) else f"no answer within {CONNECT_TIMEOUT} s"
        raise InputError(f"cannot reach the Dask scheduler at {address} ({why})") from None
    if not (isinstance(answer, dict) and answer.get("type") == "Scheduler"):
        raise InputError(f"what answers at {address} is not a Dask scheduler")


_TASK_LOCK = threading.Lock()


def _one_at_a_time(fn: Callable[[Any], Any], task: Any) -> Any:
    """Run a task on a Dask worker, one at a time per worker process: R is single-threaded and
    each worker's cores are already given a process (workers with several threads idle the rest)."""
    with _TASK_LOCK:
        return fn(task)


def _worker_plugin() -> Any:
    """A Dask worker plugin giving each worker process one BLAS thread (see parallel._init_worker)."""
    distributed = _distributed()

    class OneBlasThread(distributed.WorkerPlugin):  # type: ignore[misc, name-defined]
        name = "hepower-one-blas-thread"

        def setup(self, worker: Any) -> None:
            _limit_blas()

    return OneBlasThread()


def _limit_blas() -> None:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"  # libraries loaded later
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)  # libraries loaded already


#: set in a Dask worker process before it starts. A task runs in a worker's thread, not its main
#: thread; with glibc's per-thread malloc arenas, R's lme4 fits there differ from a main thread's in
#: the 9th digit (measured; one arena gives the same bits as local processes)
WORKER_ENVIRONMENT = {"MALLOC_ARENA_MAX": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                      "MKL_NUM_THREADS": "1"}


def _check_worker_environment(client: Any) -> None:
    """Warn when the workers of a running cluster lack :data:`WORKER_ENVIRONMENT`."""
    import warnings

    seen = client.run(lambda: {k: os.environ.get(k) for k in WORKER_ENVIRONMENT})
    if any(env != WORKER_ENVIRONMENT for env in seen.values()):
        warnings.warn(f"the Dask workers were not started with {' '.join(f'{k}={v}' for k, v in WORKER_ENVIRONMENT.items())}: "
                      "lme4-tier results may differ from a local run in the last digits (see docs/scaleout.md)",
                      stacklevel=3)


class DaskExecutor(Executor):
    """Tasks on a Dask distributed cluster.

    Give ``client`` (a running ``distributed.Client``, left open), ``address`` (a scheduler
    ``tcp://HOST:PORT``; unreachable: :class:`InputError`) or neither, which starts a
    ``LocalCluster`` of ``n_workers`` single-threaded worker processes (None: all cores),
    stopped by :meth:`close`. A worker lost mid-run has its tasks rerun elsewhere by Dask
    (up to Dask's ``distributed.scheduler.allowed-failures`` times); each task's result is
    reported once, when its future completes.
    """

    def __init__(self, client: Any = None, *, address: str | None = None, n_workers: int | None = None) -> None:
        distributed = _distributed()
        self._cluster: Any = None
        self._own_client = client is None
        if client is not None:
            self.client = client
        elif address is not None:
            _check_scheduler(distributed, address)
            try:
                self.client = distributed.Client(address, timeout=CONNECT_TIMEOUT, set_as_default=False)
            except (OSError, TimeoutError, ValueError) as exc:
                raise InputError(f"cannot reach the Dask scheduler at {address} "
                                 f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None
        else:
            import dask

            from .parallel import launch_environment, resolve_jobs

            before = dict(os.environ)
            with launch_environment(), dask.config.set({f"distributed.nanny.pre-spawn-environ.{k}": v
                                                        for k, v in WORKER_ENVIRONMENT.items()}):
                self._cluster = distributed.LocalCluster(
                    n_workers=resolve_jobs(n_workers), threads_per_worker=1, processes=True,
                    dashboard_address=":0", silence_logs=logging.ERROR)
            os.environ.clear()  # the nanny sets its workers' variables in this process before spawning them
            os.environ.update(before)
            self.client = distributed.Client(self._cluster, set_as_default=False)
        self.client.register_plugin(_worker_plugin())
        self.workers = max(1, sum(self.client.nthreads().values()))
        self.address = self.client.scheduler.address
        if self._cluster is None:
            _check_worker_environment(self.client)

    def describe(self) -> str:
        where = "a Dask LocalCluster" if self._cluster is not None else f"the Dask cluster at {self.address}"
        return f"{len(self.client.nthreads())} workers of {where}"

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any], on_done: Callable[[Any, Any], None]) -> None:
        distributed = _distributed()
        it = iter(tasks)
        pending: dict[str, tuple[Any, Any]] = {}  # future key -> (future, task): each reported once

        def submit(task: Any) -> Any:
            fut = self.client.submit(_one_at_a_time, fn, task, pure=False)
            pending[fut.key] = (fut, task)
            return fut

        first = [submit(task) for task in itertools.islice(it, 2 * self.workers)]
        if not first:
            return
        completed = distributed.as_completed(first, loop=self.client.loop)
        try:
            for fut in completed:
                entry = pending.pop(fut.key, None)
                if entry is None:  # already reported (a future is never counted twice)
                    continue
                on_done(entry[1], fut.result())
                nxt = next(it, _END)
                if nxt is not _END:
                    completed.add(submit(nxt))
        except BaseException:
            for key, (fut, task) in list(pending.items()):  # finished while we stopped: keep them
                if fut.status == "finished":
                    pending.pop(key)
                    on_done(task, fut.result())
            self.client.cancel([f for f, _ in pending.values()])
            raise

    def close(self) -> None:
        if self._own_client:
            self.client.close()
        if self._cluster is not None:
            self._cluster.close()
