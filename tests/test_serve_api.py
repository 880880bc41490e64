"""``hepower serve``'s JSON API: every endpoint, the same records as the Python API and the CLI, bad input
as HTTP 422 with the CLI's one-line message, limits on size and time, jobs with progress and cancel."""
from __future__ import annotations

import io
import json
import logging
import time
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("fastapi", reason="hepower serve needs the serve extra (FastAPI)")
pytest.importorskip("httpx", reason="the API tests use FastAPI's TestClient (httpx)")

from fastapi.testclient import TestClient

from humaneval_power.cli import main
from humaneval_power.params import PRESETS, LikertParams
from humaneval_power.serve.app import create_app
from humaneval_power.serve.commands import (
    Limits,
    arguments,
    check,
    command_line,
    functions,
    python_snippet,
    uploads,
)

FIT_DOC = LikertParams(0.55, 0.02, 0.05, 0.03, 0.08, 0.2, scale=None, name="B vs A").to_json()

#: one call of every function (small, so the whole module runs in seconds)
CALLS: dict[str, dict[str, Any]] = {
    "f1_power": {"n": [300], "p_positive": [0.3], "table_positive": [0.1, 0.05, 0.15, 0.7],
                 "table_negative": [0.9, 0.05, 0.03, 0.02], "permutations": 200, "n_sims": 100},
    "f1_size": {"p_positive": 0.3, "table_positive": [0.1, 0.05, 0.15, 0.7], "table_negative": [0.9, 0.05, 0.03, 0.02],
                "permutations": 200, "n_sims": 100},
    "f1_mde": {"n": 500, "p_positive": 0.3, "table_positive": [0.1, 0.05, 0.15, 0.7],
               "table_negative": [0.9, 0.05, 0.03, 0.02], "permutations": 200, "n_sims": 100},
    "likert_power": {"params": "card2020-high", "workers": [6], "items": [40], "effect": [0.25],
                     "ratings_per_item": [3], "costs": {"per_rating": 0.1}, "n_sims": 200, "seed": 3},
    "likert_sample_size": {"params": {"sd_worker_intercept": 0.01, "sd_worker_slope": 0.1, "sd_item_intercept": 0.04,
                                      "sd_item_slope": 0.2, "sd_residual": 0.25}, "effect": 0.15, "workers": 10,
                           "n_sims": 200},
    "likert_mde": {"params": FIT_DOC, "workers": 8, "items": 60, "n_sims": 100, "target_power": 0.9},
    "likert_budget": {"params": "card2020-low", "effect": 0.2, "items": [30, 60], "workers": [4, 8],
                      "ratings_per_item": [2, 4], "costs": {"per_rating": 0.2, "per_worker": 1}, "n_sims": 100},
    "h2h_power": {"n": [50, 100], "p_win": [0.6], "p_tie": [0.1], "ties": "split"},
    "h2h_sample_size": {"p_win": 0.62, "target_power": 0.85},
    "h2h_mde": {"n": 300},
    # one simulated cell: one chunk runs in the calling process (two would start a pool of workers in each of the
    # three callers, ~3 CPU s; the records' order over several cells is h2h_power's check)
    "mcnemar_power": {"n": [500], "delta": [0.03], "agreement": [0.9], "method": "simulate", "n_sims": 2000,
                      "seed": 5},
    "mcnemar_sample_size": {"delta": 0.03, "agreement": 0.85, "method": "normal"},
    "accuracy_mde": {"n": 2000, "baseline": 0.85},
    "bleu_power": {"n": [400], "delta": [1.0], "p0": [0.3], "b0": [20.0], "method": "saddlepoint", "n_sims": 200},
    "bleu_sample_size": {"delta": 1.0, "p0": 0.3, "b0": 20.0, "method": "normal", "n_sims": 200},
    "bleu_mde": {"n": 500, "p0": 0.3, "b0": 20.0, "method": "normal", "n_sims": 200},
    "h2h_mixed_power": {"params": {"sd_worker": 0.5, "sd_item": 0.8, "p_tie": 0.1}, "workers": [6], "items": [30],
                        "log_odds": [0.6], "per_item": [3], "n_sims": 30, "seed": 2},
    "h2h_mixed_sample_size": {"params": {"sd_worker": 0.3, "sd_item": 0.3}, "log_odds": 1.5, "workers": 8,
                              "n_sims": 30, "target_power": 0.6},
    "mde_table": {"prior": "squad2", "methods": ["normal"]},
    "solve_prop_test": {"p1": 0.8, "p2": 0.85, "power": 0.8},
}


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(Limits(max_jobs=2))) as c:
        yield c


def _cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _api_records(name: str, kwargs: dict[str, Any], folder: Any) -> list[dict[str, Any]]:
    """The records of the Python API called as the snippet shown by the page calls it."""
    (folder / "params.json").write_text(json.dumps(kwargs.get("params")))
    namespace: dict[str, Any] = {}
    import os

    here = os.getcwd()
    os.chdir(folder)
    try:
        with redirect_stdout(io.StringIO()):
            exec(python_snippet(name, kwargs), namespace)
    finally:
        os.chdir(here)
    from humaneval_power.serve.worker import outcome

    return outcome(namespace["table"] if "table" in namespace else namespace["result"])["records"]


def test_api_lists_every_function_with_the_api_names(client: TestClient) -> None:
    doc = client.get("/api").json()
    assert set(doc["functions"]) == set(functions()) and set(CALLS) | set(uploads()) == set(functions())
    assert doc["functions"]["likert_power"][:4] == ["params", "workers", "items", "effect"]
    assert "n_sims" in doc["functions"]["bleu_power"] and "jobs" not in doc["functions"]["bleu_power"]
    assert doc["limits"]["max_body"] == Limits().max_body


@pytest.mark.parametrize("name", sorted(CALLS))
def test_records_are_the_api_and_cli_records(client: TestClient, name: str, tmp_path: Any) -> None:
    """POST /api/<function> returns exactly the records of the Python API (the page's snippet) and of the
    command it shows (`--json`)."""
    r = client.post(f"/api/{name}", json=CALLS[name])
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["records"] == _api_records(name, CALLS[name], tmp_path)
    argv = doc["command"].split()[1:]
    assert argv == command_line(name, check(name, CALLS[name]))  # the values as validated
    if name == "likert_mde":
        argv = [str(tmp_path / "params.json") if a == "params.json" else a for a in argv]
    code, out, err = _cli(argv + ["--json"])
    assert code == 0, err
    assert json.loads(out) == doc["records"]
    if name == "likert_budget":
        answer, designs = doc["records"][0], doc["designs"]
        assert answer["designs_evaluated"] == len(designs) and answer["attainable"]
        assert answer["value"] == min(d["cost"] for d in designs if d["power"] >= answer["target_power"])


BAD: dict[str, tuple[str, dict[str, Any], str]] = {
    # case: (function, arguments, expected part of the one-line message)
    "unknown argument": ("likert_power", {"params": "card2020-high", "workers": [3], "items": [50], "effect": [0.2],
                                          "sims": 10}, "has no argument 'sims'"),
    "a word for a count": ("likert_power", {"workers": ["ten"], "items": [50], "effect": [0.2]}, "takes numbers"),
    "zero workers": ("likert_power", {"workers": [0], "items": [50], "effect": [0.2]}, "--workers"),
    "unknown preset": ("likert_power", {"params": "nope", "workers": [3], "items": [50], "effect": [0.2]},
                       "invalid choice: 'nope'"),
    "missing effect": ("likert_power", {"workers": [3], "items": [50]}, "required: --effect"),
    "k above the pool": ("likert_power", {"workers": [3], "items": [50], "effect": [0.2], "ratings_per_item": [5]},
                         "exceed the pool of workers"),
    "p_win above 1": ("h2h_power", {"n": [100], "p_win": [1.5]}, "p_win"),
    "an option smuggled in a string": ("bleu_power", {"n": [100], "delta": [1], "p0": [0.3], "b0": [20],
                                                      "method": "--sims=999999"}, "invalid choice"),
    "a bad parameter file": ("likert_power", {"params": {"schema": "humaneval-power/likert-params", "version": 1,
                                                         "intercept": 0.5}, "workers": [3], "items": [50],
                             "effect": [0.2]}, "missing sd_worker_intercept"),
    "too many simulations": ("likert_power", {"workers": [3], "items": [50], "effect": [0.2], "n_sims": 10**6},
                             "exceeds this server's limit"),
    "too large a grid": ("h2h_power", {"n": list(range(10, 30)), "p_win": [0.55 + i / 100 for i in range(20)]},
                         "more than this server's limit"),
    "unknown function": ("likert_powerr", {}, "unknown function 'likert_powerr'"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_422_with_one_line(client: TestClient, case: str) -> None:
    name, kwargs, expected = BAD[case]
    for url in (f"/api/{name}", f"/api/jobs/{name}", f"/api/command/{name}"):
        r = client.post(url, json=kwargs)
        if url.startswith("/api/jobs") and r.status_code == 202:  # found bad while running: the job says so
            job = r.json()
            while job["state"] == "running":
                time.sleep(0.05)
                job = client.get(f"/api/jobs/{job['id']}").json()
            assert job["state"] == "failed" and job["status"] == 422 and expected in job["detail"], job
            continue
        if url.startswith("/api/command") and r.status_code == 200:  # valid as a command; fails when run
            continue
        assert r.status_code == 422, (url, r.text)
        detail = r.json()["detail"]
        assert expected in detail and "\n" not in detail and "Traceback" not in detail, detail


@pytest.mark.parametrize("case", ["zero workers", "unknown preset", "missing effect", "k above the pool",
                                  "p_win above 1"])
def test_bad_input_message_is_the_cli_message(client: TestClient, case: str) -> None:
    """The same one line as `hepower` prints for the same command."""
    name, kwargs, _ = BAD[case]
    detail = client.post(f"/api/{name}", json=kwargs).json()["detail"]
    argv = command_line(name, {})
    for key, value in kwargs.items():  # the command line by hand (the CLI's option names)
        option = "--preset" if key == "params" else f"--{key.replace('_', '-')}"
        argv += [option, *map(str, value if isinstance(value, list) else [value])]
    code, _, err = _cli(argv)
    assert code == 2 and err.strip() == f"hepower: error: {detail}"


@pytest.mark.parametrize("body, ctype, expected", [
    (b"{not json", "application/json", "not JSON"),
    (b"[1, 2]", "application/json", "JSON object"),
    (b"workers=3", "application/x-www-form-urlencoded", "Content-Type: application/json"),
])
def test_a_body_that_is_not_a_json_object_is_422(client: TestClient, body: bytes, ctype: str, expected: str) -> None:
    r = client.post("/api/h2h_power", content=body, headers={"content-type": ctype})
    assert r.status_code == 422 and expected in r.json()["detail"]


def test_oversized_request_is_413(client: TestClient) -> None:
    big = {"n": [100], "p_win": [0.6], "padding": "x" * (Limits().max_body + 1)}
    r = client.post("/api/h2h_power", json=big)
    assert r.status_code == 413 and "limit of 1,000,000 bytes" in r.json()["detail"]

    def chunks():  # no Content-Length: counted as it arrives
        for _ in range(20):
            yield b" " * 100_000
    r = client.post("/api/h2h_power", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    upload = client.post("/api/params", files={"file": ("p.json", b"x" * 2_000_000)})
    assert upload.status_code == 413


SLOW = {"params": "card2020-high", "workers": [10], "items": [200], "effect": [0.2], "ratings_per_item": [3],
        "n_sims": 20000}


def test_job_reports_progress_and_cancels(client: TestClient) -> None:
    job = client.post("/api/jobs/likert_power", json=SLOW)
    assert job.status_code == 202
    job = job.json()
    assert job["state"] == "running" and job["command"].startswith("hepower likert power ")
    deadline = time.monotonic() + 60
    while job["done"] == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
        job = client.get(f"/api/jobs/{job['id']}").json()
    assert job["state"] == "running" and 0 < job["done"] < job["total"] == 20000, job
    assert "cell 1/1" in job["label"]
    cancelled = client.delete(f"/api/jobs/{job['id']}").json()
    assert cancelled["state"] == "cancelled"
    assert client.get(f"/api/jobs/{job['id']}").json()["state"] == "cancelled"
    assert client.get("/api/jobs/nosuchjob").status_code == 404


def test_time_limit_and_busy_server() -> None:
    with TestClient(create_app(Limits(time_limit=1.0, max_jobs=1), warm_up=False)) as c:
        first = c.post("/api/jobs/likert_power", json=SLOW).json()
        busy = c.post("/api/h2h_mde", json={"n": 100})
        assert busy.status_code == 429 and "running 1 computations already" in busy.json()["detail"]
        while first["state"] == "running":
            time.sleep(0.1)
            first = c.get(f"/api/jobs/{first['id']}").json()
        assert first["status"] == 504 and "longer than this server's limit of 1 s" in first["detail"]
        r = c.post("/api/likert_power", json=SLOW)
        assert r.status_code == 504 and "\n" not in r.json()["detail"]


def test_localhost_server_answers_only_localhost_host_names() -> None:
    """A page of another site reaching the server through DNS rebinding sends its own Host: refused."""
    from humaneval_power.cli.serve import LOCAL_HOSTS

    with TestClient(create_app(warm_up=False, hosts=LOCAL_HOSTS), base_url="http://127.0.0.1:8000") as c:
        assert c.get("/api").status_code == 200
        assert c.get("/api", headers={"host": "localhost:8000"}).status_code == 200
        assert c.get("/api", headers={"host": "[::1]:8000"}).status_code == 200
        r = c.post("/api/h2h_mde", json={"n": 100}, headers={"host": "evil.example:8000"})
        assert r.status_code == 400 and "not for the host 'evil.example'" in r.json()["detail"]


def test_presets_and_parameter_upload(client: TestClient) -> None:
    assert client.get("/api/presets").json() == {k: json.loads(json.dumps(p.to_json())) for k, p in PRESETS.items()}
    r = client.post("/api/params", files={"file": ("pilot.json", json.dumps(FIT_DOC).encode())})
    assert r.status_code == 200 and r.json() == {"params": FIT_DOC, "filename": "pilot.json"}
    for content, expected in [(b"{", "is not JSON"), (b'{"schema": "x"}', "not a Likert parameter file"),
                              (json.dumps({**FIT_DOC, "sd_residual": -1}).encode(), "sd_residual must be >= 0"),
                              (json.dumps({"schema": "humaneval-power/h2h-params", "family": "binomial"}).encode(),
                               "head-to-head (binomial)")]:
        r = client.post("/api/params", files={"file": ("bad.json", content)})
        assert r.status_code == 422 and expected in r.json()["detail"], r.text


def test_command_endpoint_and_the_page(client: TestClient) -> None:
    r = client.post("/api/command/likert_power", json={**CALLS["likert_power"], "pair": [0, 1]})
    assert r.json()["command"] == ("hepower likert power --preset=card2020-high --workers 6 --items 40 --effect 0.25 "
                                   "--ratings-per-item 3 --cost-per-rating=0.1 --sims=200 --seed=3 --pair 1 2")
    assert "costs=Costs(per_rating=0.1)" in r.json()["python"] and "pair=(0, 1)" in r.json()["python"]
    page = client.get("/")
    assert page.status_code == 200 and "hepower planner" in page.text
    for asset in ("/static/app.js", "/static/style.css"):
        text = client.get(asset).text
        assert client.get(asset).status_code == 200 and "://" not in text.replace("data:,", "")  # nothing external


def test_arguments_are_the_api_signature() -> None:
    import inspect

    from humaneval_power.scenarios.headtohead import h2h_power

    assert arguments("h2h_power") == tuple(p for p in inspect.signature(h2h_power).parameters
                                            if p not in ("jobs", "progress"))


def test_serve_defaults_to_localhost_and_help_stays_light() -> None:
    import subprocess
    import sys

    from humaneval_power.cli import build_parser

    args = build_parser(["serve"]).parse_args(["serve"])
    assert (args.host, args.port) == ("127.0.0.1", 8000)
    code = ("import sys; from humaneval_power.cli import main\n"
            "try: main(['serve', '--help'])\nexcept SystemExit: pass\n"
            "print(sorted(m for m in ('fastapi', 'uvicorn', 'pandas', 'scipy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


# ------------------------------------------------------------------ issue 24, item 12

@pytest.mark.parametrize("doc", [b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 5000 + b"1" + b"}" * 5000,
                                 b'{"n": ' + b"[" * 40 + b"]" * 40 + b"}"], ids=["list-100000", "object-5000", "list-40"])
def test_a_deeply_nested_body_is_422_not_500(client: TestClient, doc: bytes) -> None:
    """Python's JSON parser recurses: a deep body raised RecursionError (HTTP 500, a traceback, a reset)."""
    for url in ("/api/h2h_power", "/api/jobs/h2h_power", "/api/command/h2h_power"):
        r = client.post(url, content=doc, headers={"content-type": "application/json"})
        assert r.status_code == 422 and "nests arrays or objects deeper than 32 levels" in r.json()["detail"], r.text
    r = client.post("/api/params", files={"file": ("deep.json", doc)})
    assert r.status_code == 422 and r.json()["detail"].startswith("deep.json nests arrays"), r.text


def test_host_names_are_case_insensitive_and_parsed_strictly() -> None:
    from humaneval_power.cli.serve import LOCAL_HOSTS

    with TestClient(create_app(warm_up=False, hosts=LOCAL_HOSTS), base_url="http://127.0.0.1:8000") as c:
        for host in ("LOCALHOST", "LocalHost:8000", "[::1]", "[::1]:", "127.0.0.1:65535"):
            assert c.get("/api", headers={"host": host}).status_code == 200, host
        for host in ("[::1]evil.com", "[::1]:8000evil.com", "[::1]]", "[::1]:80:80", "localhost.evil.com",
                     "localhost@evil.com", "evil.com:localhost", "127.0.0.1:8000:1", "[::1", "", " localhost"):
            r = c.get("/api", headers={"host": host})
            assert r.status_code == 400 and "this server answers only for" in r.json()["detail"], host


_PIECES = ["localhost", "LocalHost", "LOCALHOST", "127.0.0.1", "[::1]", "::1", "[", "]", ":", "8000", "evil.com",
           ".", "@", "/", " ", "\t", "x"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=5).map("".join))
def test_only_loopback_names_with_an_optional_port_are_answered(header: str) -> None:
    """A Host header is answered on localhost iff it is a loopback name (any case) with an optional :port."""
    import re

    from humaneval_power.cli.serve import LOCAL_HOSTS
    from humaneval_power.serve.app import _host_name

    loopback = re.fullmatch(r"(127\.0\.0\.1|localhost|\[::1\])(:[0-9]*)?", header, re.IGNORECASE) is not None
    assert (_host_name(header) in LOCAL_HOSTS) == loopback, header


# ------------------------------------------------------------------ issue 24, item 11

@pytest.mark.slow  # about 7 s: uvicorn, the fork server, a computation started and abandoned
def test_a_request_whose_client_went_away_is_cancelled_and_frees_its_slot(caplog: pytest.LogCaptureFixture) -> None:
    """A real uvicorn on loopback: a synchronous request's client disconnects mid-computation. The
    computation is cancelled within a second or two, and the server (one slot) answers the next request.
    A client that leaves in the middle of its body leaves no traceback in the server's log."""
    import socket
    import threading

    import httpx
    import uvicorn

    app = create_app(Limits(max_jobs=1, time_limit=120), warm_up=False)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_config=None))  # its log records reach caplog
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive()
            time.sleep(0.05)
        body = json.dumps(SLOW).encode()
        conn = socket.create_connection(("127.0.0.1", port))
        conn.sendall(b"POST /api/likert_power HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        jobs = app.state.jobs
        while not any(j.done for j in list(jobs.jobs.values())):  # computing
            assert time.monotonic() < deadline, "the computation did not start"
            time.sleep(0.05)
        job = next(iter(jobs.jobs.values()))
        conn.close()
        assert job.finished.wait(5) and job.state == "cancelled", job.view()
        r = httpx.post(f"http://127.0.0.1:{port}/api/h2h_mde", json={"n": 100}, timeout=30)
        assert r.status_code == 200, r.text
        conn = socket.create_connection(("127.0.0.1", port))
        conn.sendall(b"POST /api/h2h_power HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n{\"n\": [")
        time.sleep(0.3)
        conn.close()
        time.sleep(0.5)
        assert httpx.get(f"http://127.0.0.1:{port}/api", timeout=30).status_code == 200
    finally:
        server.should_exit = True
        thread.join(15)
    assert not thread.is_alive()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not errors, [r.getMessage() for r in errors]


def test_a_job_nobody_asks_for_is_cancelled_and_frees_its_slot() -> None:
    """The page runs its computations as jobs and polls them every 40-80 ms: a closed page stops asking."""
    with TestClient(create_app(Limits(max_jobs=1, abandon_after=0.5), warm_up=False)) as c:
        job = c.post("/api/jobs/likert_power", json=SLOW).json()
        assert job["state"] == "running"
        running = c.app.state.jobs.jobs[job["id"]]  # not through the API: looking would count as asking
        assert running.finished.wait(10) and running.state == "cancelled", running.view()
        assert "no client asked for it for 0.5 s" in running.detail
        assert c.post("/api/h2h_mde", json={"n": 100}).status_code == 200  # the slot is free
        polled = c.post("/api/jobs/h2h_mde", json={"n": 100}).json()
        while polled["state"] == "running":  # a job that is polled runs to its end
            time.sleep(0.1)
            polled = c.get(f"/api/jobs/{polled['id']}").json()
        assert polled["state"] == "done"
