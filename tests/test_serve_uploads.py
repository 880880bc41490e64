"""``hepower serve``'s analysis of a completed study: the ratings are uploaded (never named as a server path),
the records are those of ``hepower analyze``, the report is the HTML report, and bad uploads are one-line 422s
(or 413 over the body limit)."""
from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="hepower serve needs the serve extra (FastAPI)")
pytest.importorskip("httpx", reason="the API tests use FastAPI's TestClient (httpx)")

from fastapi.testclient import TestClient

from humaneval_power.cli import main

from .serve_helpers import finished, ratings_csv, run_shown, served

ARGUMENTS = {"backend": "statsmodels", "contrasts": "baseline"}


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    yield from served(max_jobs=1, max_body=200_000)


def test_uploaded_ratings_are_analysed_as_the_cli_analyses_them(client: TestClient, tmp_path: Path) -> None:
    r = client.post("/api/upload/analyze", files={"file": ("study.csv", ratings_csv(), "text/csv")},
                    data={"arguments": json.dumps(ARGUMENTS)})
    assert r.status_code == 202, r.text
    job = finished(client, r.json())
    assert job["state"] == "done", job
    assert job["command"] == "hepower analyze --backend=statsmodels --contrasts=baseline ratings.csv"
    path = tmp_path / "ratings.csv"
    path.write_bytes(ratings_csv())
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        assert main(["analyze", str(path), "--backend", "statsmodels", "--contrasts", "baseline", "--json"]) == 0
    assert job["records"] == json.loads(out.getvalue())
    assert {r["system"] for r in job["records"]} == {"B", "C"}
    assert job["report"].lstrip().lower().startswith("<!doctype html") and "</html>" in job["report"]


@pytest.mark.parametrize(("files", "arguments", "expected"), [
    ({"file": ("study.txt", b"x", "text/plain")}, {}, "upload ratings as"),
    ({"file": ("study.csv", b"worker,item\nw,i\n", "text/csv")}, {}, "no system column"),
    ({"file": ("study.csv", ratings_csv(), "text/csv")}, {"backend": "nope"}, "invalid choice: 'nope'"),
    ({"file": ("study.csv", ratings_csv(), "text/csv")}, {"ratings": "/etc/passwd", "bogus": 1}, "no argument 'bogus'"),
    ({"file": ("study.csv", ratings_csv(), "text/csv")}, {"systems": ["--json"]}, "may not start with '-'"),
])
def test_bad_uploads_are_one_line(client: TestClient, files: Any, arguments: Any, expected: str) -> None:
    r = client.post("/api/upload/analyze", files=files, data={"arguments": json.dumps(arguments)})
    job = finished(client, r.json()) if r.status_code == 202 else {"status": r.status_code, **r.json()}
    assert job["status"] == 422 and expected in job["detail"] and "\n" not in job["detail"], job


def test_a_server_path_is_never_analysed(client: TestClient) -> None:
    """The JSON endpoints refuse a function taking a file: a client cannot name a file on the server."""
    for url in ("/api/analyze", "/api/jobs/analyze", "/api/command/analyze"):
        r = client.post(url, json={"ratings": "/etc/passwd"})
        assert r.status_code == 422 and "POST it to /api/upload/analyze" in r.json()["detail"], (url, r.text)


def test_an_upload_over_the_body_limit_is_413(client: TestClient) -> None:
    r = client.post("/api/upload/analyze", files={"file": ("big.csv", b"w,i,s,x\n" * 40_000, "text/csv")})
    assert r.status_code == 413 and "limit of 200,000 bytes" in r.json()["detail"]


def test_a_pilot_layout_plans_as_the_cli_plans_it(client: TestClient, tmp_path: Path) -> None:
    """`likert mde --design-from`: the uploaded pilot's own layout, scaled, gives the command line's numbers."""
    arguments = {"params": "card2020-high", "pilot_systems": ["A", "C"], "n_sims": 40, "seed": 1}
    r = client.post("/api/upload/likert_mde", files={"file": ("pilot.csv", ratings_csv(2), "text/csv")},
                    data={"arguments": json.dumps(arguments)})
    assert r.status_code == 202, r.text
    job = finished(client, r.json())
    assert job["state"] == "done", job
    assert "--design-from=design_from.csv" in job["command"]
    (tmp_path / "design_from.csv").write_bytes(ratings_csv(2))
    code, out, err = run_shown(job["command"], tmp_path, "--json")
    assert code == 0, err
    assert job["records"] == json.loads(out)
    assert job["records"][0]["items"] == 12  # the pilot's items
