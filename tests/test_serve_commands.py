"""Every command the CLI has is served: the newly served ones (``agreement``, ``accuracy estimate``, by upload;
``accuracy table|unpaired`` by JSON, in tests/test_serve_api.py) give the records of the command they show."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("fastapi", reason="hepower serve needs the serve extra (FastAPI)")
pytest.importorskip("httpx", reason="the API tests use FastAPI's TestClient (httpx)")

from fastapi.testclient import TestClient

from humaneval_power.interface.commands import COMMANDS
from humaneval_power.serve.commands import NOT_SERVED, functions, uploads

from .serve_helpers import finished, ratings_csv, run_shown, served


def predictions_csv(seed: int = 2) -> bytes:
    """Per-item correctness of two models on 300 items, B a little better."""
    rng = np.random.default_rng(seed)
    a = rng.random(300) < 0.7
    b = np.where(rng.random(300) < 0.85, a, ~a) | (rng.random(300) < 0.05)
    rows = [(f"q{i}", m, int(c)) for i in range(300) for m, c in (("A", a[i]), ("B", b[i]))]
    return pd.DataFrame(rows, columns=["item", "model", "correct"]).to_csv(index=False).encode()


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    yield from served(max_jobs=1)


def test_every_described_command_is_served_or_says_why() -> None:
    described = {f for c in COMMANDS.values() for f in (c.function, *c.modes) if f is not None}
    assert described - set(NOT_SERVED) == set(functions()) and all(NOT_SERVED.values())
    assert {"agreement", "estimate_accuracy", "mde_table", "solve_prop_test"} <= set(functions())
    assert uploads()["agreement"] == "ratings" and uploads()["estimate_accuracy"] == "source"


UPLOADED = {  # function: (file name, content, arguments, file name in the command)
    "agreement": ("study.csv", ratings_csv, {"metric": "interval", "n_boot": 50, "seed": 3, "target": 0.7},
                  "ratings.csv"),
    "estimate_accuracy": ("preds.csv", predictions_csv, {"model_a": "A", "model_b": "B"}, "source.csv"),
}


@pytest.mark.parametrize("function", sorted(UPLOADED))
def test_an_uploaded_file_gives_the_records_of_the_command_shown(client: TestClient, function: str,
                                                                  tmp_path: Path) -> None:
    filename, content, arguments, local = UPLOADED[function]
    r = client.post(f"/api/upload/{function}", files={"file": (filename, content(), "text/csv")},
                    data={"arguments": json.dumps(arguments)})
    assert r.status_code == 202, r.text
    job = finished(client, r.json())
    assert job["state"] == "done", job
    (tmp_path / local).write_bytes(content())
    code, out, err = run_shown(job["command"], tmp_path, "--json")
    assert code == 0, err
    assert job["records"] == json.loads(out) and job["records"]
    if function == "agreement":
        assert "alpha" in job["summary"].lower()


def test_a_bad_upload_of_a_new_command_is_one_line(client: TestClient) -> None:
    r = client.post("/api/upload/estimate_accuracy", files={"file": ("preds.csv", predictions_csv(), "text/csv")},
                    data={"arguments": json.dumps({"model_a": "A", "model_b": "Z"})})
    job = finished(client, r.json()) if r.status_code == 202 else r.json()
    assert "Z" in job["detail"] and "\n" not in job["detail"], job
    r = client.post("/api/agreement", json={"ratings": "/etc/passwd"})
    assert r.status_code == 422 and "never a path on the server" in r.json()["detail"]
    r = client.post("/api/upload/agreement", files={"file": ("s.csv", ratings_csv(), "text/csv")},
                    data={"arguments": json.dumps({"metric": "cubic"})})
    assert r.status_code == 422 and r.json()["detail"].startswith("hepower agreement: argument --metric: invalid choice")


@pytest.mark.slow
def test_a_pilot_size_search_varies_the_items_as_the_cli_does(client: TestClient, tmp_path: Path) -> None:
    """`likert size --design-from`: the items are searched, not fixed at the pilot's (the worker used to set
    them, and the search refused them)."""
    arguments = {"params": "card2020-high", "effect": 0.6, "pilot_systems": ["A", "C"], "n_sims": 20, "seed": 1,
                 "method": "fast", "target_power": 0.6}
    r = client.post("/api/upload/likert_sample_size", files={"file": ("pilot.csv", ratings_csv(2), "text/csv")},
                    data={"arguments": json.dumps(arguments)})
    assert r.status_code == 202, r.text
    job = finished(client, r.json())
    assert job["state"] == "done", job
    (tmp_path / "design_from.csv").write_bytes(ratings_csv(2))
    code, out, err = run_shown(job["command"], tmp_path, "--json")  # the file as the command names it
    assert code == 0, err
    cli = json.loads(out)
    assert job["records"] == cli and cli[0]["solve_for"] == "items"


def test_the_command_and_snippet_shown_make_the_call_the_worker_makes(client: TestClient) -> None:
    """Values as the validation converts them (6.0 workers is 6, the pair counted from 0 in Python, from 1 on
    the command line): the command and the snippet shown make the worker's call, not the raw JSON's."""
    r = client.post("/api/command/likert_power", json={"workers": [6.0], "items": [40], "effect": [0.2],
                                                        "systems": 3, "pair": [0, 2], "n_sims": 1e2})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert "--workers 6 " in doc["command"] and "--pair 1 3" in doc["command"] and "--sims=100" in doc["command"]
    assert "workers=[6]" in doc["python"] and "pair=(0, 2)" in doc["python"] and "n_sims=100" in doc["python"]
