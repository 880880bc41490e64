"""Local process parallelism: lazy task lists, a callback per finished task, workers that stop with us.

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
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any, Callable, Iterable

from .errors import InputError

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
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for var in ("TMPDIR", "TMP", "TEMP"):
        os.environ[var] = tmp
    tempfile.tempdir = tmp
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_run_dirs(root: str | None = None) -> list[Path]:
    """Remove the worker temp folders of runs whose process no longer exists."""
    removed = []
    for folder in Path(root or tempfile.gettempdir()).glob(_RUN_DIR_PREFIX + "*"):
        pid = folder.name[len(_RUN_DIR_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not _pid_alive(int(pid)):
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


def map_tasks(
    fn: Callable[[Any], Any],
    tasks: Iterable[Any],
    jobs: int | None = None,
    on_done: Callable[[Any, Any], None] | None = None,
) -> None:
    """Run ``fn`` over ``tasks`` on up to ``jobs`` processes; ``on_done(task, result)`` in this
    process as each task ends (in completion order).

    On Linux, workers are forked (scripts need no ``if __name__ == "__main__"``
    guard) unless R is already running in this process, where forking is not
    safe and ``spawn`` is used.
    """
    n_jobs = resolve_jobs(jobs)
    report = on_done or (lambda task, result: None)
    it = iter(tasks)
    if n_jobs <= 1:
        for task in it:
            report(task, fn(task))
        return
    first = list(itertools.islice(it, 2 * n_jobs))
    if len(first) <= 1:  # not worth starting processes
        for task in first:
            report(task, fn(task))
        return
    remove_stale_run_dirs()
    tmp = tempfile.mkdtemp(prefix=f"{_RUN_DIR_PREFIX}{os.getpid()}-")
    method = "fork" if sys.platform.startswith("linux") and "rpy2.rinterface" not in sys.modules else "spawn"
    pool = ProcessPoolExecutor(max_workers=min(n_jobs, len(first)), mp_context=mp.get_context(method),
                               initializer=_init_worker, initargs=(os.getpid(), tmp))
    pending: dict[Future[Any], Any] = {}
    try:
        for task in first:
            pending[pool.submit(fn, task)] = task
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                task = pending.pop(fut)
                report(task, fut.result())
                nxt = next(it, _END)
                if nxt is not _END:
                    pending[pool.submit(fn, nxt)] = nxt
    except BaseException:
        _harvest(pending, report)
        _terminate(pool)
        raise
    else:
        pool.shutdown(wait=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _harvest(pending: dict[Future[Any], Any], report: Callable[[Any, Any], None]) -> None:
    """Hand over the results that finished while we were interrupted (a second Ctrl-C skips this)."""
    for fut, task in list(pending.items()):
        if fut.done() and not fut.cancelled() and fut.exception() is None:
            pending.pop(fut)
            report(task, fut.result())
