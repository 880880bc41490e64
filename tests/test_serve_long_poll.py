"""A poll of a job with ``?wait=`` answers as soon as the job ends (the page's long poll), not after the wait."""
from __future__ import annotations

import time

import pytest

from tests.serve_helpers import served


@pytest.fixture(scope="module")
def client():
    yield from served()


def test_long_poll_answers_when_the_job_ends(client) -> None:
    job = client.post("/api/jobs/h2h_mde", json={"n": 100}).json()
    for _ in range(60):  # a loaded machine may take longer than one wait to start the worker
        t = time.perf_counter()
        job = client.get(f"/api/jobs/{job['id']}?wait=2").json()
        seconds = time.perf_counter() - t
        if job["state"] != "running":
            break
    assert job["state"] == "done"
    assert seconds < 1.9  # answered when it ended, within the wait
    t = time.perf_counter()
    assert client.get(f"/api/jobs/{job['id']}?wait=2").json()["state"] == "done"
    assert time.perf_counter() - t < 1.0  # a finished job: no wait at all
