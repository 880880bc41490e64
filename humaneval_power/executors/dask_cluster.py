"""Tasks on a Dask distributed cluster: a ``LocalCluster`` started here, a scheduler address or a ``Client``."""
from __future__ import annotations

import contextlib
import importlib
import itertools
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from ..errors import BackendUnavailableError, InputError
from .base import Executor
from .local import launch_environment, resolve_jobs

#: seconds to wait for a Dask scheduler before saying it is unreachable
CONNECT_TIMEOUT = 10
_INSTALL = "pip install 'humaneval-power[dask]' (dask and distributed)"
_END = object()


def is_dask_client(obj: Any) -> bool:
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
    """A Dask worker plugin giving each worker process one BLAS thread (see local._init_worker) and, at
    its start, the modules of this package loaded here (a local worker inherits them by fork; a Dask
    worker imported them in its first task, about 1 s of CPU). Not R: R starts in the thread that runs
    the tasks, on the first task that needs it."""
    distributed = _distributed()
    modules = sorted(m for m in sys.modules if m.startswith("humaneval_power."))

    class WorkerSetup(distributed.WorkerPlugin):  # type: ignore[misc, name-defined]
        name = "hepower-worker-setup"

        def setup(self, worker: Any) -> None:
            _limit_blas()
            for module in modules:  # a preload only: a module whose optional dependency a remote worker lacks
                with contextlib.suppress(ImportError):  # is left to the task that needs it, which says so
                    importlib.import_module(module)

    return WorkerSetup()


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

#: Dask settings of a LocalCluster started here: monitoring that costs CPU for as long as the cluster
#: lives, whatever the work. A worker's statistical profiler (the dashboard's profile page) samples the
#: task thread's stack every 10 ms: with R's deep stacks ~0.08 s of CPU per 0.75-s chunk of glmer refits
#: (measured, one worker); the event loops' 20-ms tick only logs blocked ticks; the system monitor (500 ms)
#: feeds the dashboard; work stealing (every 100 ms) moves tasks queued on a busy worker, and the
#: scheduler queues them instead; the memory monitor (100 ms) pauses or restarts a worker near its limit
#: (1 s is soon enough for chunks of seconds). Together they halved the rest (scheduler, nanny and worker
#: event loops) from 0.051 to 0.025 CPU seconds per chunk
QUIET_CLUSTER = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "1s",
                 "distributed.admin.system-monitor.interval": "5s", "distributed.scheduler.work-stealing": False,
                 "distributed.worker.memory.monitor-interval": "1s"}


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

            before = dict(os.environ)
            with launch_environment(), dask.config.set({**QUIET_CLUSTER, **{f"distributed.nanny.pre-spawn-environ.{k}": v
                                                                             for k, v in WORKER_ENVIRONMENT.items()}}):
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
