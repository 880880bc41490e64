"""What the web app's upload tests share: a small ratings file, a served app, waiting for a job, and running the
command a job shows as the command line runs it."""
from __future__ import annotations

import io
import os
import shlex
import time
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from humaneval_power.cli import main

if TYPE_CHECKING:
    from fastapi.testclient import TestClient


def ratings_csv(seed: int = 1) -> bytes:
    """A small crossed study: 6 workers x 12 items x 3 systems, system C better."""
    rng = np.random.default_rng(seed)
    rows = [(f"w{w}", f"i{i}", s, 3 + 0.4 * (s == "C") + rng.normal(0, 0.3) * (w % 3) + rng.normal())
            for w in range(6) for i in range(12) for s in "ABC"]
    return pd.DataFrame(rows, columns=["worker", "item", "system", "score"]).to_csv(index=False).encode()


def served(**limits: Any) -> Iterator[TestClient]:
    """A test client of the app with these :class:`~humaneval_power.serve.commands.Limits` (for a fixture)."""
    from fastapi.testclient import TestClient

    from humaneval_power.serve.app import create_app
    from humaneval_power.serve.commands import Limits

    with TestClient(create_app(Limits(**limits))) as c:
        yield c


def finished(client: TestClient, job: dict[str, Any]) -> dict[str, Any]:
    """The job once it no longer runs."""
    while job["state"] == "running":
        time.sleep(0.05)
        job = client.get(f"/api/jobs/{job['id']}").json()
    return job


def run_shown(command: str, folder: Path, *more: str) -> tuple[int, str, str]:
    """The command shown, run by ``hepower`` in ``folder`` (where the files it names are): code, stdout, stderr."""
    out, err, here = io.StringIO(), io.StringIO(), Path.cwd()
    os.chdir(folder)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = main([*shlex.split(command)[1:], *more])
    finally:
        os.chdir(here)
    return code, out.getvalue(), err.getvalue()
