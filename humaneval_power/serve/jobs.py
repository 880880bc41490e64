"""Computations of the web app: each calls the Python API in a worker process (:mod:`.worker`).

A worker process can be killed, so every computation has a time limit and can be
cancelled; its progress (the API's progress callback) is sent to the server as it goes.
Workers come from a fork server that has imported the numerical stack once, so a
fast computation starts in milliseconds.
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import signal
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .commands import (
    PARAMS_FILE,
    Limits,
    check,
    command_line,
    command_of,
    python_snippet,
    shell_command,
)

#: modules the fork server imports once for every worker
PRELOAD = ["humaneval_power.serve.worker"]
KEEP_FINISHED = 200  #: finished jobs remembered for polling


class Busy(Exception):
    """Too many computations are running."""


@dataclass
class Job:
    """One computation: its state, progress and outcome (``status``: the HTTP status of the outcome)."""

    function: str
    call: dict[str, Any]  #: validated and converted: the worker's keyword arguments, the command and snippet shown
    argv: list[str]
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    state: str = "running"  #: running, done, failed, cancelled
    done: int = 0
    total: int = 0
    label: str = ""
    status: int = 202
    detail: str = ""
    result: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    seconds: float = 0.0
    finished: threading.Event = field(default_factory=threading.Event)
    cancel_requested: bool = False
    last_seen: float = field(default_factory=time.monotonic)  #: when a client last asked for it
    files: dict[str, bytes] = field(default_factory=dict, repr=False)  #: uploaded files, written to its folder

    def view(self) -> dict[str, Any]:
        """The job as the API reports it."""
        out = {"id": self.id, "function": self.function, "state": self.state, "done": self.done,
               "total": self.total, "unit": command_of()[self.function].progress, "label": self.label, "seconds": round(self.seconds or
                                                                          time.monotonic() - self.started, 3),
               "command": shell_command(self.argv), "python": python_snippet(self.function, self.call)}
        if self.state != "running":
            out.update(status=self.status, warnings=self.warnings)
            if self.result is not None:
                out.update(self.result)
            else:
                out["detail"] = self.detail
        return out


class Jobs:
    """The running and recently finished computations of one server."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.jobs: dict[str, Job] = {}
        self.lock = threading.Lock()
        self.context = mp.get_context("forkserver")
        self.context.set_forkserver_preload(PRELOAD)

    def warm_up(self) -> None:
        """Start the fork server (it imports the numerical stack) before the first request needs it."""
        p = self.context.Process(target=_noop)
        p.start()
        p.join()

    def submit(self, function: str, arguments: Mapping[str, Any], files: Mapping[str, bytes] | None = None) -> Job:
        """Validate and start a computation (InputError when bad; :class:`Busy` when too many run)."""
        call = check(function, arguments, self.limits)
        job = Job(function, call, command_line(function, call), files=dict(files or {}))
        with self.lock:
            if sum(j.state == "running" for j in self.jobs.values()) >= self.limits.max_jobs:
                raise Busy(f"the server is running {self.limits.max_jobs} computations already; cancel one or "
                           "try again")
            self.jobs[job.id] = job
            finished = [k for k, j in self.jobs.items() if j.state != "running"]
            for k in finished[:max(0, len(finished) - KEEP_FINISHED)]:
                del self.jobs[k]
        threading.Thread(target=self._run, args=(job,), daemon=True, name=f"hepower-job-{job.id[:8]}").start()
        return job

    def get(self, job_id: str) -> Job | None:
        """The job (a client asking for it: it is not abandoned)."""
        with self.lock:
            job = self.jobs.get(job_id)
        if job is not None:
            job.last_seen = time.monotonic()
        return job

    def cancel(self, job: Job) -> None:
        job.cancel_requested = True

    def shutdown(self) -> None:
        """Cancel every running computation and wait for its worker to end."""
        with self.lock:
            running = [j for j in self.jobs.values() if j.state == "running"]
        for job in running:
            self.cancel(job)
        for job in running:
            job.finished.wait(10)

    def _run(self, job: Job) -> None:
        folder = tempfile.mkdtemp(prefix="hepower-serve-")
        try:
            for file_name, content in job.files.items():
                with open(os.path.join(folder, file_name), "wb") as f:
                    f.write(content)
            params = job.call.get("params")
            if isinstance(params, Mapping) and "schema" in params:
                with open(os.path.join(folder, PARAMS_FILE), "w", encoding="utf-8") as f:
                    json.dump(params, f)
            self._supervise(job, folder)
        except Exception as exc:  # noqa: BLE001 - reported to the client, never a traceback
            self._finish(job, "failed", 500, f"internal error: {exc.__class__.__name__}: {exc}")
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _supervise(self, job: Job, folder: str) -> None:
        from .worker import work

        receive, send = self.context.Pipe(duplex=False)
        # not a daemon: some commands run a pool of their own; the worker leads a process group, killed whole
        process = self.context.Process(target=work, args=(job.function, job.call, send, folder))
        process.start()
        send.close()
        deadline = job.started + self.limits.time_limit
        try:
            while True:
                if job.cancel_requested:
                    return self._finish(job, "cancelled", 499, "cancelled")
                if time.monotonic() - job.last_seen > self.limits.abandon_after:
                    return self._finish(job, "cancelled", 499, f"cancelled: no client asked for it for "
                                        f"{self.limits.abandon_after:g} s")
                if time.monotonic() > deadline:
                    return self._finish(job, "failed", 504, f"the computation took longer than this server's limit "
                                        f"of {self.limits.time_limit:g} s; ask for fewer simulations or a smaller "
                                        "grid, or run the command shown")
                if receive.poll(0.05):
                    try:
                        message = receive.recv()
                    except EOFError:
                        return self._finish(job, "failed", 500, f"internal error: the worker process ended "
                                            f"(exit code {process.exitcode})")
                    if message[0] == "progress":
                        job.done, job.total, job.label = message[1:]
                    elif message[0] == "done":
                        job.warnings = message[1].pop("warnings")
                        job.result = message[1]
                        return self._finish(job, "done", 200, "")
                    else:
                        return self._finish(job, "failed", *message[1:])
                elif not process.is_alive() and not receive.poll(0):
                    process.join()
                    return self._finish(job, "failed", 500, f"internal error: the worker process ended "
                                        f"(exit code {process.exitcode})")
        finally:
            _kill(process)
            receive.close()

    def _finish(self, job: Job, state: str, status: int, detail: str) -> None:
        job.seconds = time.monotonic() - job.started
        job.state, job.status, job.detail = state, status, detail
        job.finished.set()


def _kill(process: Any) -> None:
    """End a worker and everything it started (its process group)."""
    if process.pid is not None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    process.join()


def _noop() -> None:
    """A worker that does nothing (starts the fork server)."""
