"""``hepower analyze --family ordinal``'s options (review of issue 26, item 3): the web API and page run an ordinal
analysis (``family`` is an API argument, validated from the command's description), malformed ordinal scores get
an ordinal one-line refusal, and every option of the command either changes the ordinal result or is refused
(never silently ignored)."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from humaneval_power.cli import main
from humaneval_power.completed_study import analyze
from humaneval_power.designs import CrowdDesign
from humaneval_power.errors import InputError
from humaneval_power.interface.commands import ANALYZE
from humaneval_power.interface.validation import validate
from humaneval_power.ordinal_process import OrdinalProcess

#: the command line of the ordinal analysis every case starts from (no R, no bootstrap: fast)
BASE = ["--family", "ordinal", "--backend", "laplace", "--bootstrap", "0"]


def ordinal_ratings(seed: int, workers: int = 5, items: int = 8) -> pd.DataFrame:
    """Ratings 1-5 of three systems (latent effects 0, 0.4, 0.9), crossed, with the extra columns the option
    cases name: ``rater`` (workers merged in pairs), ``unit`` (items merged in pairs), ``model`` (the systems
    renamed), ``reversed`` (6 - score) and ``dim`` (two halves of the items)."""
    process = OrdinalProcess((-1.2, -0.3, 0.5, 1.3), "logit", sd_worker=0.6, sd_worker_system=0.3, sd_item=0.7,
                             sd_item_system=0.3)
    rng = np.random.default_rng(seed)
    layout = CrowdDesign(items=items, workers=workers, systems=3).draw(rng, 1)
    assert not isinstance(layout, list)
    score = process.simulate(layout, np.array([0.0, 0.4, 0.9]), 1, rng)[:, 0].astype(int)
    worker, item, system = np.asarray(layout.worker).reshape(-1), np.asarray(layout.item), np.asarray(layout.system)
    return pd.DataFrame({"worker": [f"w{w}" for w in worker], "item": [f"i{i}" for i in item],
                         "system": [f"S{s}" for s in system], "score": score,
                         "rater": [f"r{w // 2}" for w in worker], "unit": [f"u{i // 2}" for i in item],
                         "model": [f"M{2 - s}" for s in system], "reversed": 6 - score,
                         "dim": np.where(item % 2 == 0, "a", "b")})


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The study (seed chosen so that every category is used in it, in each half and with the merged columns),
    another study, and the study with one rating repeated."""
    folder = tmp_path_factory.mktemp("ordinal_options")
    frame = ordinal_ratings(1)
    assert frame["score"].nunique() == 5 and frame.groupby("dim")["score"].nunique().min() == 5
    out = {"study": folder / "study.csv", "other": folder / "other.csv", "repeated": folder / "repeated.csv"}
    frame.to_csv(out["study"], index=False)
    ordinal_ratings(2).to_csv(out["other"], index=False)
    pd.concat([frame, frame.iloc[:1]]).to_csv(out["repeated"], index=False)
    return out


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["analyze", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- 1. every option changes the ordinal result or is refused ----------------------------------------------------

#: per option of ``hepower analyze`` (by its flag): the words that set it to something other than the default,
#: with ``{study}``, ``{other}``, ``{repeated}`` and ``{o}`` (a fresh folder) filled in. The study is the first
#: word; BASE follows, then the option (the last of a repeated option wins). "output" options write a file.
VARIANTS: dict[str, list[str]] = {
    "data": ["{other}"],
    "--worker": ["--worker", "rater"], "--item": ["--item", "unit"], "--system": ["--system", "model"],
    "--score": ["--score", "reversed"], "--where": ["--where", "dim=a"], "--systems": ["--systems", "S0", "S2"],
    "--scale": ["--scale", "1", "6"], "--duplicates": ["--duplicates", "keep"], "--baseline": ["--baseline", "S2"],
    "--random": ["--random", "slopes"], "--keep-singular": ["--keep-singular"], "--df": ["--df", "asymptotic"],
    "--by": ["--by", "dim"], "--contrasts": ["--contrasts", "baseline"], "--adjust": ["--adjust", "bonferroni"],
    "--backend": ["--backend", "statsmodels"], "--draws": ["--draws", "50"], "--chains": ["--chains", "3"],
    "--level": ["--level", "0.9"], "--seed": ["--seed", "7"], "--out": ["--out", "{o}/c.csv"],
    "--report": ["--report", "{o}/r.md"], "--plot": ["--plot", "{o}/p.svg"], "--sims": ["--sims", "20"],
    "--latex": ["--latex", "{o}/t.tex"], "--latex-digits": ["--latex-digits", "2"],
    "--agreement-metric": ["--agreement-metric", "ordinal"], "--reliability-target": ["--reliability-target", "0.7"],
    "--paper-records": ["--paper-records"], "--family": ["--family", "gaussian"], "--link": ["--link", "probit"],
    "--bootstrap": ["--bootstrap", "3"], "--system-a": ["--system-a", "worker"],
    "--system-b": ["--system-b", "item"], "--outcome": ["--outcome", "score"], "--ties": ["--ties", "split"],
    "--tie-values": ["--tie-values", "both"], "--json": ["--json"],
}
#: options whose effect needs a random part in the analysis (the Bartlett test's bootstrap) or another file
CONTEXT = {"--seed": ["--bootstrap", "3"], "--duplicates": []}
STUDY = {"--duplicates": "{repeated}"}


def test_every_option_of_the_command_is_classified() -> None:
    """A new option of ``hepower analyze`` must say what it does to an ordinal analysis (a case above)."""
    flags = {o.flag if not o.positional else o.name for o in ANALYZE.all_options()} - {"ratings"}
    assert flags | {"data"} == set(VARIANTS), sorted(flags ^ set(VARIANTS))


@pytest.mark.parametrize("flag", list(VARIANTS))
def test_an_option_changes_the_ordinal_result_or_is_refused(flag: str, files: dict[str, Path], tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """With the option the command prints something else, writes its file, or refuses it (exit 2, one line, no
    file written); never the same output as without it."""
    fill = {**{k: str(v) for k, v in files.items()}, "o": str(tmp_path)}
    study = STUDY.get(flag, "{study}").format(**fill)
    context = CONTEXT.get(flag, [])
    variant = [w.format(**fill) for w in VARIANTS[flag]]
    without = [study, *BASE, *context]
    if flag == "data":
        with_option = [variant[0], *BASE]
    else:
        with_option = [*without, *variant]
    code, out, err = run(with_option, capsys)
    if code == 2:
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert not any(tmp_path.iterdir()), list(tmp_path.iterdir())
        return
    assert code == 0, err
    written = list(tmp_path.iterdir())
    if written:  # an output option: its file, and the printed result unchanged
        assert all(p.stat().st_size > 0 for p in written)
        return
    if tuple(without) not in _WITHOUT:  # one run of each starting command for the module
        _WITHOUT[tuple(without)] = run(without, capsys)[:2]
    assert _WITHOUT[tuple(without)] != (code, out), f"{flag} changed nothing"


_WITHOUT: dict[tuple[str, ...], tuple[int, str]] = {}


def test_draws_and_chains_reach_the_posterior_sampler(files: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """``draws`` and ``chains`` are bambi's (its default 1000 x 2 when not given): they reach the sampler."""
    from humaneval_power.completed_study import ordinal

    seen: list[tuple[int, int]] = []

    def fake(data: Any, contrasts: str, link: str, level: float, seed: int, draws: int, chains: int,
             progress: Any = None) -> str:
        seen.append((draws, chains))
        return "posterior"

    monkeypatch.setattr(ordinal, "posterior_ordinal", fake)
    assert analyze(files["study"], family="ordinal", backend="bambi", draws=50, chains=3) == "posterior"
    assert analyze(files["study"], family="ordinal", backend="bambi") == "posterior"
    assert seen == [(50, 3), (1000, 2)]
    with pytest.raises(InputError, match="--draws: only for the posterior sampling"):
        analyze(files["study"], family="ordinal", backend="laplace", draws=50)
    with pytest.raises(InputError, match="--chains: only for the posterior sampling"):
        analyze(files["study"], family="gaussian", backend="statsmodels", chains=3)


# -- 2. malformed ordinal scores: an ordinal one-line refusal ----------------------------------------------------

SPOILS = st.one_of(
    st.floats(-1e6, 1e6, allow_nan=False).filter(lambda v: not float(v).is_integer()),  # a fraction
    st.floats(1e3, 1e300).map(float) | st.floats(-1e300, -1e3).map(float),               # huge (in magnitude)
    st.integers(-10**6, -1).map(float),                                                   # negative
    st.integers(102, 10**18).map(float))                                                  # beyond 101 categories


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=SPOILS, row=st.integers(0, 119))
def test_a_spoilt_ordinal_score_gets_an_ordinal_one_line_refusal(value: float, row: int, files: dict[str, Path],
                                                                 tmp_path_factory: pytest.TempPathFactory,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Any non-integer, huge or negative score among 1-5 ratings: exit 2, one line naming ordinal ratings (never
    the Gaussian model's advice to rescale), no traceback, no output file (1e20 got the Gaussian message)."""
    folder = tmp_path_factory.mktemp("spoilt")
    frame = pd.read_csv(files["study"])
    frame["score"] = frame["score"].astype(float)
    frame.loc[row % len(frame), "score"] = value
    frame.to_csv(folder / "s.csv", index=False)
    code, _, err = run([str(folder / "s.csv"), *BASE, "--out", str(folder / "c.csv")], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (value, err)
    assert re.search(r"ordinal|rating \S+ is never used", lines[0]) and "rescale" not in lines[0] \
        and "power of ten" not in lines[0], (value, lines[0])
    assert not (folder / "c.csv").exists()


# -- 3. the web API and page ------------------------------------------------------------------------------------

def test_the_api_validates_an_ordinal_request_from_the_description() -> None:
    assert validate("analyze", {"family": "ordinal", "link": "probit", "bootstrap": 0}) == {
        "family": "ordinal", "link": "probit", "bootstrap": 0}
    with pytest.raises(InputError, match="argument --family: invalid choice: 'poisson'"):
        validate("analyze", {"family": "poisson"})


def test_analyze_refuses_judgments_naming_the_function_that_takes_them(files: dict[str, Path]) -> None:
    with pytest.raises(InputError, match="analyze_judgments") as refused:
        analyze(files["study"], family="binomial")
    assert "\n" not in str(refused.value)


@pytest.mark.slow
def test_the_web_api_runs_the_ordinal_analysis_as_the_cli_runs_it(files: dict[str, Path],
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """An ordinal study uploaded to POST /api/upload/analyze: done, the command line shown is ``--family
    ordinal``'s and the records are that command's ``--json``; the report is the ordinal report."""
    pytest.importorskip("fastapi", reason="hepower serve needs the serve extra (FastAPI)")
    pytest.importorskip("httpx", reason="the API tests use FastAPI's TestClient (httpx)")
    from fastapi.testclient import TestClient

    from humaneval_power.serve.app import create_app
    from humaneval_power.serve.commands import Limits

    arguments = {"family": "ordinal", "backend": "laplace", "bootstrap": 0, "contrasts": "baseline"}
    with TestClient(create_app(Limits(max_jobs=1))) as client:
        r = client.post("/api/upload/analyze", files={"file": ("study.csv", files["study"].read_bytes(), "text/csv")},
                        data={"arguments": json.dumps(arguments)})
        assert r.status_code == 202, r.text
        job = r.json()
        while job["state"] == "running":
            time.sleep(0.05)
            job = client.get(f"/api/jobs/{job['id']}").json()
        assert job["state"] == "done", job
        refused = client.post("/api/upload/analyze", files={"file": ("s.csv", files["study"].read_bytes(), "text/csv")},
                              data={"arguments": json.dumps({"family": "binomial"})}).json()
        while refused["state"] == "running":
            time.sleep(0.05)
            refused = client.get(f"/api/jobs/{refused['id']}").json()
    assert job["command"] == ("hepower analyze --family=ordinal --backend=laplace --bootstrap=0 --contrasts=baseline "
                              "ratings.csv")
    code, out, _ = run([str(files["study"]), *BASE, "--contrasts", "baseline", "--json"], capsys)
    assert code == 0 and job["records"] == json.loads(out)
    assert {r["family"] for r in job["records"]} == {"ordinal"}
    assert "Category probabilities" in job["report"]
    assert refused["status"] == 422 and "analyze_judgments" in refused["detail"], refused
