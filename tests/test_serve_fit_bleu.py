"""``fit`` and ``bleu estimate|test`` in the web app: uploaded files give the records, summary and parameter file
of the command shown (the same library call, :func:`humaneval_power.fitting.pilot.fit_pilot_file` and
:func:`humaneval_power.scenarios.bleu.bleu_estimate` / ``bleu_test``), and bad multi-file uploads are one-line
422s."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("fastapi", reason="hepower serve needs the serve extra (FastAPI)")
pytest.importorskip("httpx", reason="the API tests use FastAPI's TestClient (httpx)")

from fastapi.testclient import TestClient

from humaneval_power.serve.commands import NOT_SERVED, functions, uploads

from .serve_helpers import finished, ratings_csv, run_shown, served


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    yield from served(max_jobs=1)


def ordinal_csv(seed: int = 4) -> bytes:
    """Integer ratings 1-5 of two systems: 6 workers x 15 items, B a category better on the latent scale."""
    rng = np.random.default_rng(seed)
    worker, item = rng.normal(0, 0.5, 6), rng.normal(0, 0.7, 15)
    rows = [(f"w{w}", f"i{i}", s, int(np.digitize(worker[w] + item[i] + 0.8 * (s == "B") + rng.logistic(),
                                                  [-1.5, -0.5, 0.5, 1.5])) + 1)
            for w in range(6) for i in range(15) for s in "AB"]
    return pd.DataFrame(rows, columns=["worker", "item", "system", "score"]).to_csv(index=False).encode()


FITS = {  # name: (content, arguments)
    "gaussian statsmodels": (ratings_csv, {"backend": "statsmodels", "scale": [0, 8]}),
    "ordinal laplace": (ordinal_csv, {"family": "ordinal", "backend": "laplace", "scale": [1, 5]}),
}


def test_fit_and_bleu_are_served_by_upload() -> None:
    assert {"fit_pilot_file", "bleu_estimate", "bleu_test"} <= set(functions())
    assert "fit_pilot_file" not in NOT_SERVED
    assert uploads()["fit_pilot_file"] == "source" and uploads()["bleu_test"] == "references"


@pytest.mark.parametrize("case", sorted(FITS))
def test_an_uploaded_pilot_gives_the_parameter_file_of_hepower_fit(client: TestClient, case: str,
                                                                   tmp_path: Path) -> None:
    """The page's parameter file is the one ``hepower fit -o`` writes, byte for byte (the same source name and
    versions: nothing volatile is left); the records and the summary are the command's too."""
    content, arguments = FITS[case]
    r = client.post("/api/upload/fit_pilot_file", files={"file": ("pilot.csv", content(), "text/csv")},
                    data={"arguments": json.dumps(arguments)})
    assert r.status_code == 202, r.text
    job = finished(client, r.json())
    assert job["state"] == "done", job
    assert job["command"].startswith("hepower fit ") and job["command"].endswith(" source.csv")
    (tmp_path / "source.csv").write_bytes(content())
    code, out, err = run_shown(job["command"], tmp_path, "-o", "params.json")
    assert code == 0, err
    assert job["params_file"] == (tmp_path / "params.json").read_text(encoding="utf-8")
    assert json.loads(job["params_file"])["schema"].startswith("humaneval-power/")
    assert out.startswith(job["summary"] + "\n") and job["summary"]
    code, out, err = run_shown(job["command"], tmp_path, "--json")
    assert code == 0, err
    assert job["records"] == json.loads(out)


def _texts(seed: int = 5, n: int = 60) -> dict[str, bytes]:
    """A reference and three systems' outputs: words of the reference, each dropped or replaced by chance."""
    rng = np.random.default_rng(seed)
    words = "the a cat dog sat ran on under mat rug today again quickly slowly".split()
    ref = [" ".join(rng.choice(words, size=8)) for _ in range(n)]

    def system(p: float) -> bytes:
        return "\n".join(" ".join(w if rng.random() > p else rng.choice(words) for w in line.split())
                         for line in ref).encode()

    return {"reference.txt": "\n".join(ref).encode(), "system.A.txt": system(0.4), "system.B.txt": system(0.3),
            "system.C.txt": system(0.45)}


BLEU = {  # function: (the uploads: multipart field -> file names, arguments)
    "bleu_test": ({"references": ["reference.txt"], "baseline": ["system.A.txt"],
                   "systems": ["system.B.txt", "system.C.txt"]}, {"trials": 400, "seed": 2}),
    "bleu_estimate": ({"references": ["reference.txt"], "sys_a": ["system.A.txt"], "sys_b": ["system.B.txt"]},
                      {"n_boot": 100, "metric": "chrf"}),
}


@pytest.mark.parametrize("function", sorted(BLEU))
def test_uploaded_outputs_give_the_records_of_the_bleu_command_shown(client: TestClient, function: str,
                                                                     tmp_path: Path) -> None:
    """Several text files (references, system outputs) keep their names, so the systems are named as the
    command names them, and the records are those of the command shown, run on the same files."""
    texts = _texts()
    fields, arguments = BLEU[function]
    files = [(field, (name, texts[name], "text/plain")) for field, names in fields.items() for name in names]
    r = client.post(f"/api/upload/{function}", files=files, data={"arguments": json.dumps(arguments)})
    assert r.status_code == 202, r.text
    job = finished(client, r.json())
    assert job["state"] == "done", job
    for name, content in texts.items():
        (tmp_path / name).write_bytes(content)
    code, out, err = run_shown(job["command"], tmp_path, "--json")
    assert code == 0, err
    assert job["records"] == json.loads(out)
    names = {r.get("system") or r["system_a"] for r in job["records"]}
    assert names == ({"B", "C"} if function == "bleu_test" else {"A"})


@pytest.mark.parametrize(("files", "arguments", "expected"), [
    ([("references", ("reference.txt", b"a b\n")), ("baseline", ("system.A.txt", b"a\n")),
      ("systems", ("system.A.txt", b"b\n"))], {}, "two uploaded files are named 'system.A.txt'"),
    ([("references", (".hidden", b"a\n"))], {}, "the file name '.hidden' is not taken"),
    ([("references", ("-x.txt", b"a\n"))], {}, "the file name '-x.txt' is not taken"),
    ([("references", ("r.txt", b"a\n")), ("baseline", ("a.txt", b"a\n")), ("baseline", ("b.txt", b"a\n"))], {},
     "baseline is one file; several were uploaded"),
    ([("references", ("r.txt", b"a\n")), ("passwd", ("p.txt", b"a\n"))], {}, "takes no file 'passwd'"),
    ([("references", ("r.txt", b"a\n"))], {"baseline": "/etc/passwd", "systems": ["/etc/passwd"]},
     "baseline is an uploaded file"),
    ([], {}, "upload bleu_test's file"),
])
def test_bad_multi_file_uploads_are_one_line(client: TestClient, files: Any, arguments: Any, expected: str) -> None:
    r = client.post("/api/upload/bleu_test", files=files or {"x": ("", b"")},
                    data={"arguments": json.dumps(arguments)})
    job = finished(client, r.json()) if r.status_code == 202 else {"status": r.status_code, **r.json()}
    assert job["status"] == 422 and expected in job["detail"] and "\n" not in job["detail"], job


def test_json_endpoints_refuse_server_paths_of_text_files(client: TestClient) -> None:
    r = client.post("/api/jobs/bleu_estimate", json={"references": ["/etc/passwd"], "sys_a": "a", "sys_b": "b"})
    assert r.status_code == 422 and "never a path on the server" in r.json()["detail"]
    r = client.post("/api/fit_pilot_file", json={"source": "/etc/passwd"})
    assert r.status_code == 422 and "never a path on the server" in r.json()["detail"]


def test_a_bad_fit_upload_is_the_commands_line(client: TestClient) -> None:
    r = client.post("/api/upload/fit_pilot_file", files={"file": ("p.csv", ratings_csv(), "text/csv")},
                    data={"arguments": json.dumps({"backend": "statsmodels", "link": "probit"})})
    job = finished(client, r.json())
    assert job["status"] == 422 and job["detail"] == "--link applies to --family ordinal", job


@pytest.mark.r
@pytest.mark.slow
def test_a_quasi_separated_comparison_is_one_warning_line_and_a_web_warning(client: TestClient, tmp_path: Path,
                                                                            lme4_backend: Any) -> None:
    """The library announces a quasi-separated comparison (a SeparationWarning): ``hepower fit`` prints it as the
    one line it printed before the move, and the web outcome lists it among its warnings."""
    from .test_separation import separated_judgments

    content = separated_judgments().to_csv(index=False).encode()
    r = client.post("/api/upload/fit_pilot_file", files={"file": ("pairs.csv", content, "text/csv")},
                    data={"arguments": json.dumps({"family": "binomial", "baseline": "A"})})
    job = finished(client, r.json())
    assert job["state"] == "done", job
    (tmp_path / "source.csv").write_bytes(content)
    code, _, err = run_shown(job["command"], tmp_path, "-o", "params.json")
    assert code == 0
    line = next(x for x in err.splitlines() if x.startswith("hepower: warning: C vs A: "))
    assert line.endswith("; the parameter file is marked and `hepower h2h` refuses it unless --force")
    assert job["warnings"] == [line.removeprefix("hepower: warning: ")]
    assert job["params_file"] == (tmp_path / "params.json").read_text(encoding="utf-8")
    assert json.loads(job["params_file"])["comparisons"]["C"]["separation"] is True
