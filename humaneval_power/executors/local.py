"""Local process parallelism: lazy task lists, a callback per finished task, workers that stop with us.

:class:`LocalProcesses` is the default executor (see :mod:`humaneval_power.executors`).

* Tasks are submitted a few at a time, so a huge (lazy) task list costs no memory.
* Ctrl-C (KeyboardInterrupt) or any error: the results already finished are
  handed to ``on_done`` first, then pending tasks are cancelled and the workers
  terminated at once (no waiting for the remaining tasks).
* Workers die with their parent even when it is killed (SIGKILL included):
  Linux ``PR_SET_PDEATHSIG``, elsewhere a watchdog thread. They ignore SIGINT
  (the parent decides) and use one BLAS thread.
* Worker temporary files (e.g. R's ``RtmpXXXX`` folders) go to one folder per
  run, removed at the end; folders of runs that were killed are removed by the
  next run.
"""
from __future__ import annotations

import ctypes
import itertools
import multiprocessing as mp
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..io import pid_alive
from .base import Executor

_RUN_DIR_PREFIX = "hepower-run-"
_PR_SET_PDEATHSIG = 1
_END = object()


def resolve_jobs(jobs: int | None) -> int:
    """``None`` means all cores; otherwise a positive integer."""
    if jobs is None:
        return os.cpu_count() or 1
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise InputError(f"jobs must be a positive integer, got {jobs!r}")
    return jobs


def _die_with_parent(parent: int) -> None:
    """Make this process end when ``parent`` does, however it ends."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    else:
        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(0.5)
            os._exit(1)

        threading.Thread(target=watch, daemon=True, name="hepower-parent-watch").start()
    if os.getppid() != parent:  # the parent died before we could ask
        os._exit(1)


def _init_worker(parent: int, tmp: str) -> None:
    """Worker initializer: die with the parent, leave Ctrl-C to it, temp files in the run's
    folder, one BLAS thread.

    The processes already occupy the cores; a multi-threaded BLAS in each of
    them oversubscribes and, on the small matrices of a refit, spins: 600
    statsmodels-tier studies on 2 processes took 106 s instead of 8 s.
    """
    for signum, handler in _held_previous.items():  # forked while the parent held them: its own handlers
        signal.signal(signum, handler)
    _held.clear()
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for var in ("TMPDIR", "TMP", "TEMP"):
        os.environ[var] = tmp
    tempfile.tempdir = tmp
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)


#: the signals that stop a run, held while the pool may fork a worker
HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_held: list[int] = []  #: the signals that arrived while held
_held_previous: dict[int, Any] = {}  #: their handlers while held (a worker forked then restores them)


def _hold(signum: int, frame: Any) -> None:
    _held.append(signum)


@contextmanager
def _signals_held() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM while the pool may fork a worker (``submit`` starts one on demand): a handler that
    raised during the fork raised inside its at-fork hooks, which ignore the exception, so the stop was lost and
    the run went on (a CI run: SIGTERM while the second worker was forked). Held, a signal is only recorded and
    is raised again, to the handler in place before, as soon as the section ends. (A signal mask would not do:
    the process's other threads take the signal and Python still runs the handler in this one.) Where handlers
    cannot be set (not the main thread) or were not set from Python, nothing is held."""
    previous: dict[int, Any] = {int(s): signal.getsignal(s) for s in HELD_SIGNALS}
    if any(h is None for h in previous.values()):
        yield
        return
    try:
        for s in HELD_SIGNALS:
            signal.signal(s, _hold)
    except ValueError:  # not the main thread: handlers run elsewhere
        yield
        return
    _held_previous.update(previous)
    try:
        yield
    finally:
        for signum, h in previous.items():
            signal.signal(signum, h)
        _held_previous.clear()
        caught = list(dict.fromkeys(_held))
        _held.clear()
        for signum in caught:
            signal.raise_signal(signum)


def remove_stale_run_dirs(root: str | None = None) -> list[Path]:
    """Remove the worker temp folders of runs whose process no longer exists."""
    removed = []
    for folder in Path(root or tempfile.gettempdir()).glob(_RUN_DIR_PREFIX + "*"):
        pid = folder.name[len(_RUN_DIR_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _terminate(pool: ProcessPoolExecutor) -> None:
    """Stop the pool now: cancel what has not started, kill the workers (their tasks are lost)."""
    processes = list(getattr(pool, "_processes", {}).values())  # no public API before Python 3.14
    pool.shutdown(wait=False, cancel_futures=True)
    for p in processes:
        if p.is_alive():
            p.kill()
    for p in processes:
        p.join(timeout=5)


def _without_r_library_path() -> str | None:
    """``LD_LIBRARY_PATH`` as it was before rpy2 prepended R's to it ("" when it was unset), or
    None when rpy2 has not changed it."""
    openrlib = sys.modules.get("rpy2.rinterface_lib.openrlib")
    added = getattr(openrlib, "LD_LIBRARY_PATH", "") if openrlib is not None else ""
    current = os.environ.get("LD_LIBRARY_PATH")
    if not added or current is None or not current.startswith(added + ":"):
        return None
    return current[len(added) + 1:]


def _set_library_path(value: str) -> None:
    if value:
        os.environ["LD_LIBRARY_PATH"] = value
    else:
        os.environ.pop("LD_LIBRARY_PATH", None)


def drop_r_library_path() -> None:
    """Undo rpy2's change of ``LD_LIBRARY_PATH`` (see :func:`launch_environment`). It has no effect on
    this process (the dynamic loader reads the variable at start-up), only on the processes it starts."""
    original = _without_r_library_path()
    if original is not None:
        _set_library_path(original)


@contextmanager
def launch_environment() -> Iterator[None]:
    """The environment of processes started while R runs here, without R's library path.

    Starting R, rpy2 prepends R's ``LD_LIBRARY_PATH`` (which holds the system's library folder)
    to this process's environment. A Python interpreter started with it may load the system's
    ``libpython`` instead of its own: a spawned worker (or multiprocessing's resource tracker)
    then runs another patch release of Python under this one's standard library and fails, e.g.
    ``'_thread.RLock' object has no attribute '_recursion_count'`` (3.11.7's library on Debian's
    3.11.2). Workers start R themselves, with rpy2 setting the path again. (The lme4 bridge drops
    the path once R has started; this covers R started by other code.)
    """
    original = _without_r_library_path()
    if original is None:
        yield
        return
    current = os.environ["LD_LIBRARY_PATH"]
    _set_library_path(original)
    try:
        yield
    finally:
        os.environ["LD_LIBRARY_PATH"] = current


#: times a run restarts its local workers after losing one (e.g. killed by the kernel) before giving up
MAX_RESTARTS = 3


class LocalProcesses(Executor):
    """Up to ``jobs`` processes on this machine (None: all cores), started on first use and kept
    until :meth:`close`: successive runs (the steps of a solve) reuse them and their R.

    One task runs in this process, without starting workers, when no workers are running yet.
    On Linux, workers are forked (scripts need no ``if __name__ == "__main__"`` guard) unless
    R is already running in this process, where forking is not safe and ``spawn`` is used.
    A worker lost mid-run (killed) has its unfinished tasks rerun on new workers, up to
    :data:`MAX_RESTARTS` times per run.
    """

    def __init__(self, jobs: int | None = None) -> None:
        self.workers = resolve_jobs(jobs)
        self._pool: ProcessPoolExecutor | None = None
        self._tmp: str | None = None
        self.restarts = 0  #: worker pools replaced after losing a worker

    def describe(self) -> str:
        return f"{self.workers} local process{'es' if self.workers > 1 else ''}"

    def _start(self) -> ProcessPoolExecutor:
        if self._pool is None:
            if self._tmp is None:
                remove_stale_run_dirs()
                self._tmp = tempfile.mkdtemp(prefix=f"{_RUN_DIR_PREFIX}{os.getpid()}-")
            linux = sys.platform.startswith("linux")
            method = "fork" if linux and "rpy2.rinterface" not in sys.modules else "spawn"
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=mp.get_context(method),
                                             initializer=_init_worker, initargs=(os.getpid(), self._tmp))
        return self._pool

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any], on_done: Callable[[Any, Any], None]) -> None:
        it = iter(tasks)
        if self.workers <= 1:
            for task in it:
                on_done(task, fn(task))
            return
        queue = deque(itertools.islice(it, 2 * self.workers))
        if self._pool is None and len(queue) <= 1:  # not worth starting processes
            for task in queue:
                on_done(task, fn(task))
            return
        pending: dict[Future[Any], Any] = {}
        with launch_environment():
            try:
                self._run(fn, it, queue, pending, on_done)
            except BaseException:
                _harvest(pending, on_done)
                if self._pool is not None:
                    _terminate(self._pool)
                    self._pool = None
                raise

    def _run(self, fn: Callable[[Any], Any], it: Iterator[Any], queue: deque[Any], pending: dict[Future[Any], Any],
             on_done: Callable[[Any, Any], None]) -> None:
        lost = 0
        while True:
            try:
                pool = self._start()
                while queue or pending:
                    while queue and len(pending) < 2 * self.workers:
                        task = queue.popleft()
                        with _signals_held():
                            pending[pool.submit(fn, task)] = task
                    finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for fut in finished:
                        result = fut.result()
                        on_done(pending.pop(fut), result)
                        nxt = next(it, _END)
                        if nxt is not _END:
                            queue.append(nxt)
                return
            except BrokenProcessPool:
                lost += 1
                if lost > MAX_RESTARTS:
                    raise
                _harvest(pending, on_done)  # finished chunks count; the others run again, once each
                queue.extendleft(reversed(list(pending.values())))
                pending.clear()
                if self._pool is not None:
                    _terminate(self._pool)
                    self._pool = None
                self.restarts += 1

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


def _harvest(pending: dict[Future[Any], Any], report: Callable[[Any, Any], None]) -> None:
    """Hand over the results that finished while we were interrupted (a second Ctrl-C skips this)."""
    for fut, task in list(pending.items()):
        if fut.done() and not fut.cancelled() and fut.exception() is None:
            pending.pop(fut)
            report(task, fut.result())
