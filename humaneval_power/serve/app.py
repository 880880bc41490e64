"""The web app: the planner's page and the JSON API (the Python API over HTTP).

Endpoints (every error is ``{"detail": "<one line>"}``; bad input is HTTP 422 with the CLI's message):

* ``POST /api/<function>`` with the function's keyword arguments: runs it (within the time
  limit) and returns ``{"records": [...]}``, the records ``hepower ... --json`` prints (a budget
  search adds ``"designs"``, the evaluated designs), with ``"command"`` and ``"python"``;
* ``POST /api/jobs/<function>``: the same as a job (HTTP 202); ``GET /api/jobs/<id>`` its state,
  progress and, once finished, its outcome (``?wait=<seconds>``, at most 2: answered as soon as the job ends
  within that time); ``DELETE /api/jobs/<id>`` cancels it, and so does nobody
  asking for it for ``Limits.abandon_after`` seconds (a closed page);
* ``POST /api/command/<function>``: only the equivalent command line and Python snippet;
* ``GET /api``: the functions, their arguments and the server's limits;
  ``GET /api/presets``: the built-in parameter files; ``POST /api/params``: validate an
  uploaded parameter file (multipart field ``file``);
* ``POST /api/upload/<function>``: a job (HTTP 202) of a function taking a file (``analyze``, ``agreement``,
  ``estimate_accuracy``: their input; the Likert planners: a pilot's layout, ``design_from``): the file
  (multipart ``file``, .csv, .json or .parquet, within the body limit) and ``arguments``, a JSON object of
  the function's other keyword arguments; an analysis's outcome adds ``summary`` (the text the command
  prints) and ``report`` (the HTML report).
"""
from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request, UploadFile
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.requests import ClientDisconnect

from ..errors import HepowerError, InputError
from ..interface.validation import file_arguments, request_options
from .commands import (
    NOT_SERVED,
    Limits,
    arguments,
    check,
    command_line,
    form,
    functions,
    python_snippet,
    shell_command,
    upload_arguments,
    upload_name,
    uploads,
)
from .jobs import Busy, Jobs

STATIC = resources.files("humaneval_power.serve") / "static"


def create_app(limits: Limits | None = None, warm_up: bool = True, hosts: Sequence[str] | None = None) -> FastAPI:
    """The app; ``warm_up`` starts the worker fork server at once (in the background); ``hosts``: the only
    Host headers answered (None: any), so that a page of another site cannot reach a server on localhost
    through DNS rebinding."""
    limits = limits or Limits()
    jobs = Jobs(limits)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if warm_up:
            asyncio.get_running_loop().run_in_executor(None, jobs.warm_up)
        yield
        await asyncio.get_running_loop().run_in_executor(None, jobs.shutdown)

    app = FastAPI(title="hepower", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.jobs = jobs
    app.add_middleware(Guard, limit=limits.max_body, hosts=hosts)

    @app.exception_handler(HepowerError)
    async def _input_error(request: Request, exc: HepowerError) -> JSONResponse:
        return _error(422, exc)

    @app.exception_handler(NotFound)
    async def _not_found(request: Request, exc: NotFound) -> JSONResponse:
        return _error(404, exc)

    @app.exception_handler(Busy)
    async def _busy(request: Request, exc: Busy) -> JSONResponse:
        return _error(429, exc)

    @app.exception_handler(ClientDisconnect)
    async def _gone(request: Request, exc: ClientDisconnect) -> JSONResponse:  # else logged with a traceback
        return _error(499, "the client went away before sending the whole request")

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        return _error(500, f"internal error: {exc.__class__.__name__}: {exc}")

    @app.get("/")
    async def index() -> FileResponse:
        return FileResponse(str(STATIC / "index.html"))

    @app.get("/api")
    async def api() -> dict[str, Any]:
        return {"functions": {name: list(arguments(name)) for name in functions()}, "limits": asdict(limits),
                "forms": {name: form(name) for name in functions()}, "uploads": uploads(),
                "not_served": NOT_SERVED}

    @app.get("/api/presets")
    async def presets() -> dict[str, Any]:
        from ..params import PRESETS

        return {name: p.to_json() for name, p in PRESETS.items()}

    @app.post("/api/params")
    async def params(file: UploadFile) -> dict[str, Any]:
        from ..params import LikertParams, strict_json

        name = file.filename or "uploaded file"
        doc = _json(await file.read(), name)
        if isinstance(doc, dict) and doc.get("family") == "binomial":
            raise InputError(f"{name} holds head-to-head (binomial) parameters; the Likert planner needs a "
                             "gaussian fit")
        LikertParams.from_json(doc, source=name)  # the CLI's checks of --params FILE
        return {"params": strict_json(doc), "filename": name}

    @app.post("/api/upload/{function}", status_code=202)
    async def upload(function: str, request: Request) -> dict[str, Any]:
        """A job of a function taking files (``analyze``: the ratings), uploaded as multipart: its file as
        ``file`` or each file argument by its name (repeated for one taking several, e.g. ``bleu_test``'s
        ``references`` and ``systems``), with the other keyword arguments as the JSON object ``arguments``."""
        files = uploads()
        if function not in files:
            raise InputError(f"{function} takes no file; files go to {', '.join(files)}")
        form = await request.form()
        text = form.get("arguments", "{}")
        kwargs = _json((text if isinstance(text, str) else "{}").encode(), "arguments")
        if not isinstance(kwargs, dict):
            raise InputError("send the keyword arguments as a JSON object")
        names, contents = await _uploaded(function, form.multi_items())
        missing = [a for a in upload_arguments(function) if a in kwargs and a not in names]
        if missing:
            raise InputError(f"{function}'s {missing[0]} is an uploaded file: send it as the multipart field "
                             f"{missing[0]!r}, never a path on the server")
        return jobs.submit(function, {**kwargs, **names}, files=contents).view()

    @app.post("/api/command/{function}")
    async def command(function: str, request: Request) -> dict[str, Any]:
        kwargs = await _kwargs(request)
        call = check(function, kwargs, limits)
        return {"command": shell_command(command_line(function, call)), "python": python_snippet(function, call)}

    @app.post("/api/jobs/{function}", status_code=202)
    async def submit(function: str, request: Request) -> dict[str, Any]:
        return jobs.submit(function, await _kwargs(request)).view()

    @app.get("/api/jobs/{job_id}")
    async def poll(job_id: str, wait: float = 0.0) -> dict[str, Any]:
        job = _job(jobs, job_id)
        if job.state == "running" and wait > 0:  # a long poll: answer as soon as it ends
            await asyncio.get_running_loop().run_in_executor(None, job.finished.wait, min(wait, MAX_WAIT))
        return job.view()

    @app.delete("/api/jobs/{job_id}")
    async def cancel(job_id: str) -> dict[str, Any]:
        job = _job(jobs, job_id)
        jobs.cancel(job)
        await asyncio.get_running_loop().run_in_executor(None, job.finished.wait, 5.0)
        return job.view()

    @app.post("/api/{function}")
    async def call(function: str, request: Request) -> JSONResponse:
        job = jobs.submit(function, await _kwargs(request))
        if not await _finished_while_connected(job, request, limits.time_limit + 10):
            jobs.cancel(job)  # its worker slot is free again at once, not at the time limit
            return _error(499, "the client went away; the computation was cancelled")
        view = job.view()
        if job.state != "done":
            return _error(job.status if job.state != "running" else 504, view.get("detail") or "not finished")
        return JSONResponse(view)

    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    return app


async def _uploaded(function: str, fields: Any) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The uploaded files of a request for ``function``: its file arguments -> the names the files get in the
    job's folder (a list for an argument taking several), and those names -> their contents."""
    arguments = upload_arguments(function)
    names: dict[str, Any] = {}
    contents: dict[str, bytes] = {}
    for field, value in fields:
        if field == "arguments" or isinstance(value, str):
            continue
        argument = uploads()[function] if field == "file" else field
        if argument not in arguments:
            raise InputError(f"{function} takes no file {field!r}; its files: {', '.join(arguments)}")
        name = upload_name(function, argument, value.filename)
        if name in contents:
            raise InputError(f"two uploaded files are named {name!r}; rename one")
        contents[name] = await value.read()
        several = request_options(function)[argument].nargs is not None
        if several:
            names.setdefault(argument, []).append(name)
        elif argument in names:
            raise InputError(f"{function}'s {argument} is one file; several were uploaded")
        else:
            names[argument] = name
    if not names:
        raise InputError(f"upload {function}'s file ({', '.join(arguments)}) as multipart 'file' or by its name")
    return names, contents


class NotFound(HepowerError):
    """An unknown job."""


def _job(jobs: Jobs, job_id: str) -> Any:
    job = jobs.get(job_id)
    if job is None:
        raise NotFound(f"no job {job_id!r} (finished jobs are kept for a while only)")
    return job


#: seconds between checks whether a computation finished or its client went away
POLL = 0.05
#: the longest a poll of a job waits for it to end (``GET /api/jobs/<id>?wait=<seconds>``)
MAX_WAIT = 2.0


async def _finished_while_connected(job: Any, request: Request, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for ``job``; False as soon as the client has disconnected."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not job.finished.is_set() and loop.time() < end:
        if await request.is_disconnected():
            return False
        job.last_seen = time.monotonic()  # its client is waiting: not abandoned
        await loop.run_in_executor(None, job.finished.wait, POLL)  # back as soon as it ends
    return True


async def _kwargs(request: Request) -> Any:
    """The request's JSON object of keyword arguments (a function taking an uploaded file is refused: its
    file comes with POST /api/upload/<function>, never as a path on the server)."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        raise InputError("send the keyword arguments as a JSON object (Content-Type: application/json)")
    function = request.path_params.get("function")
    body = _json(await request.body() or b"{}", "the request body")
    named = [f for f in (file_arguments(function) if function in functions() else ()) if isinstance(body, dict)
             and body.get(f) is not None]
    if named:
        where = (f"POST it to /api/upload/{function} (multipart 'file' or a field named after each file argument, "
                 "and 'arguments')" if function in uploads()
                 else "this server takes no such file")
        raise InputError(f"{function}'s {named[0]} is an uploaded file: {where}, never a path on the server")
    if not isinstance(body, dict):
        raise InputError("send the keyword arguments as a JSON object")
    return body


#: deepest nesting of arrays and objects a JSON document sent to the API may have
MAX_DEPTH = 32


def _json(raw: bytes, name: str) -> Any:
    """A JSON document, refused (:class:`InputError`) when malformed or nested deeper than
    :data:`MAX_DEPTH` (Python's parser recurses: a deep one raised RecursionError, HTTP 500)."""
    deep = InputError(f"{name} nests arrays or objects deeper than {MAX_DEPTH} levels")
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{name} is not JSON ({exc})") from None
    except RecursionError:
        raise deep from None
    level, depth = [doc], 0
    while level:  # breadth first, level by level: no recursion
        level = [v for c in level if isinstance(c, (dict, list)) for v in (c.values() if isinstance(c, dict) else c)]
        depth += 1
        if depth > MAX_DEPTH:
            raise deep
    return doc


def _error(status: int, message: Any) -> JSONResponse:
    text = str(message).strip().splitlines()
    return JSONResponse({"detail": text[0] if text else message.__class__.__name__}, status_code=status)


class Guard:
    """Refuse a Host header not in ``hosts`` (HTTP 400) and request bodies over ``limit`` bytes (HTTP 413),
    by Content-Length or as they arrive."""

    def __init__(self, app: Any, limit: int, hosts: Sequence[str] | None = None) -> None:
        self.app, self.limit, self.hosts = app, limit, hosts

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        if self.hosts is not None:
            host = _host_name(headers.get(b"host", b"").decode("latin-1"))
            if host not in self.hosts:
                return await _send_error(send, 400, f"this server answers only for {', '.join(self.hosts)}, not "
                                                    f"for the host {host!r}")
        message = f"the request body exceeds this server's limit of {self.limit:,} bytes"
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            return await _send_error(send, 413, message)
        seen = 0
        started = False

        async def limited() -> Any:
            nonlocal seen
            event = await receive()
            if event["type"] == "http.request":
                seen += len(event.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge()
            return event

        async def tracked(event: Any) -> None:
            nonlocal started
            started = started or event["type"] == "http.response.start"
            await send(event)

        try:
            await self.app(scope, limited, tracked)
        except _TooLarge:
            if not started:
                await _send_error(send, 413, message)


_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[^\[\]:@/\s]*)(?::[0-9]*)?")


def _host_name(header: str) -> str:
    """The host of a Host header, lower-case and without its port ("[::1]:8000" -> "[::1]",
    "LOCALHOST" -> "localhost"); the whole header when it is not ``host[:port]`` (an IPv6 literal
    in brackets must be the whole host: "[::1]evil.com" is no loopback name)."""
    match = _HOST.fullmatch(header)
    return match.group(1).lower() if match else header.lower()


class _TooLarge(Exception):
    pass


async def _send_error(send: Any, status: int, message: str) -> None:
    body = json.dumps({"detail": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
