"""Random malformed ratings files and option combinations (issue 24): `fit`, `analyze` and `likert power`
either refuse cleanly (exit 2, one error line, no output file, inputs unchanged) or give a valid result;
never an internal error (exit 1) or a traceback.

Commands run in-process (``cli.main``) like the bad-input matrix; the statsmodels backend keeps each fit
well under a second, and the number of examples is bounded so the file runs in about half a minute.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from humaneval_power.cli import common, main

COLUMNS = ("worker", "item", "system", "score", "grp", "rating", "annotator")
JUNK = ("", "nan", "NaN", "inf", "-inf", "1e300", "-1e308", "1e-320", "abc", " ", '"', "1,5", "\u00e9", "0x10",
        "True", "None", "-0", "5" * 400)
VALID = {"worker": [f"w{i}" for i in range(4)], "item": [f"i{i}" for i in range(5)], "system": ["A", "B", "C"],
         "score": [str(v) for v in (1, 2, 3, 4, 5, 2.5)], "grp": ["x", "y"]}
SETTINGS = settings(max_examples=20, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _field(value: str) -> str:
    return f'"{value}"' if any(c in value for c in ',"\n') and value != '"' else value


@st.composite
def ratings_file(draw: st.DrawFn) -> bytes:
    """A ratings CSV: a crossed design (some rows dropped, a few cells corrupt), any columns, or bytes."""
    kind = draw(st.sampled_from(["design", "design", "design", "columns", "bytes"]))
    if kind == "bytes":
        return draw(st.binary(max_size=300))
    if kind == "columns":
        cols = draw(st.lists(st.sampled_from(COLUMNS), max_size=6, unique=True))
        rows = [[draw(st.sampled_from(list(VALID.get(c, [])) + list(JUNK[:3]))) for c in cols] for _ in range(draw(st.integers(0, 8)))]
    else:
        cols = ["worker", "item", "system", "score", "grp"]
        systems = VALID["system"][:draw(st.sampled_from([2, 2, 3, 1]))]
        rows = [[w, i, s, draw(st.sampled_from(VALID["score"])), draw(st.sampled_from(VALID["grp"]))]
                for w in VALID["worker"][:draw(st.integers(1, 4)) + 1] for i in VALID["item"][:draw(st.integers(2, 5))]
                for s in systems]
        for _ in range(draw(st.integers(0, 2))):  # dropped rows
            if rows:
                rows.pop(draw(st.integers(0, len(rows) - 1)))
        for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):  # corrupt cells
            if rows:
                rows[draw(st.integers(0, len(rows) - 1))][draw(st.integers(0, 4))] = draw(st.sampled_from(JUNK))
    lines = [",".join(cols), *(",".join(_field(v) for v in row) for row in rows)]
    return ("\n".join(lines) + draw(st.sampled_from(["\n", "", "\n\n"]))).encode()


#: where --out points: nowhere, a new file, the input itself, a link to it, a folder, a missing folder, ""
OUTPUTS = (None, None, None, "new", "new", "new", "input", "link", "folder", "missing", "")


def _out_path(choice: str | None, folder: Path, data: Path, suffix: str) -> str | None:
    return {None: None, "new": str(folder / f"out{suffix}"), "input": str(data), "link": str(folder / "link"),
            "folder": str(folder / "sub"), "missing": str(folder / "nope" / f"out{suffix}"), "": ""}[choice]


def _run(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, err.getvalue()


def _check(content: bytes, name: str, options: list[str], out: str | None, out_option: str) -> None:
    """Run one command on ``content`` saved as ``name``; assert a clean refusal or a valid result."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        data = folder / name
        data.write_bytes(content)
        (folder / "sub").mkdir()
        (folder / "link").symlink_to(data)
        suffix = ".json" if options[0] == "fit" else ".csv"
        target = _out_path(out, folder, data, suffix)
        reads = [a.replace("DATA", str(data)) for a in options]
        argv = reads + ([out_option, target] if target is not None else [])
        before = sorted(os.listdir(folder))
        code, err = _run(argv)
        event(f"exit {code}")
        assert code in (0, 2), (argv, err)
        assert "Traceback" not in err and "internal error" not in err, (argv, err)
        if str(data) in reads:  # a file the command does not read may be its output
            assert data.read_bytes() == content, (argv, "the input file was changed")
        if code == 2:
            errors = [line for line in err.splitlines() if line.startswith("hepower: error")]
            assert len(errors) == 1 and len(err.strip().splitlines()) == 1, (argv, err)
            assert sorted(os.listdir(folder)) == before, (argv, "a file was left behind", os.listdir(folder))
        elif out == "new":
            assert (folder / f"out{suffix}").stat().st_size > 0, argv


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "NOTE_DELAY", None)  # no timed stage notes: stderr holds only what is checked


def _ratings_options(draw: st.DrawFn) -> list[str]:
    """Options of the ratings reader: columns, --scale, --duplicates, --where, --systems."""
    opts: list[str] = []
    if draw(st.booleans()):
        opts += ["--score", draw(st.sampled_from(["score", "score", "rating", "nope"]))]
    if draw(st.booleans()):
        lo, hi = draw(st.sampled_from([(1, 5), (0, 10), (1, 5), (0, 1), (5, 1), (1, 1), (-1e308, 1e308)]))
        opts += ["--scale", str(lo), str(hi)]
    opts += ["--duplicates", draw(st.sampled_from(["error", "average", "keep"]))]
    if draw(st.integers(0, 3)) == 0:
        opts += ["--where", draw(st.sampled_from(["grp=x", "grp=z", "nocolumn=1", "grp"]))]
    if draw(st.integers(0, 3)) == 0:
        opts += ["--systems", *draw(st.lists(st.sampled_from(["A", "B", "C", "Z"]), min_size=1, max_size=3))]
    return opts


@SETTINGS
@given(content=ratings_file(), name=st.sampled_from(["r.csv", "r.json"]), out=st.sampled_from(OUTPUTS),
       data=st.data())
def test_fit_refuses_cleanly_or_fits(content: bytes, name: str, out: str | None, data: Any) -> None:
    options = ["fit", "DATA", "--backend", "statsmodels", *_ratings_options(data.draw)]
    if data.draw(st.booleans()):
        options += ["--baseline", data.draw(st.sampled_from(["A", "B", "Z"]))]
    _check(content, name, options, out, "-o")


@SETTINGS
@given(content=ratings_file(), out=st.sampled_from(OUTPUTS), data=st.data())
def test_analyze_refuses_cleanly_or_analyses(content: bytes, out: str | None, data: Any) -> None:
    options = ["analyze", "DATA", "--backend", "statsmodels", *_ratings_options(data.draw)]
    if data.draw(st.booleans()):
        options += ["--by", data.draw(st.sampled_from(["grp", "grp", "nocolumn"]))]
    if data.draw(st.booleans()):
        options += ["--adjust", data.draw(st.sampled_from(["holm", "none", "bonferroni"]))]
    if data.draw(st.booleans()):
        options += ["--level", data.draw(st.sampled_from(["0.9", "0.95", "0.9", "1"]))]
    _check(content, "r.csv", options, out, "--out")


@SETTINGS
@given(content=ratings_file(), out=st.sampled_from(OUTPUTS), data=st.data())
def test_likert_power_refuses_cleanly_or_plans(content: bytes, out: str | None, data: Any) -> None:
    pilot = data.draw(st.sampled_from(["--design-from", "--workload-from", None]))
    options = ["likert", "power", "--effect", data.draw(st.sampled_from(["0.2", "0.2", "0", "-0.3", "1e308"])),
               "--sims", "10", "--method", "fast", "--jobs", "1"]
    if pilot:
        options += [pilot, "DATA"]
    else:
        options += ["--workers", data.draw(st.sampled_from(["3", "3", "1", "2:4:1"]))]
    if data.draw(st.booleans()):
        options += ["--items", data.draw(st.sampled_from(["20", "2", "4:8:2"]))]
    if data.draw(st.integers(0, 2)) == 0:
        options += ["--missing", data.draw(st.sampled_from(["0.1", "0.5", "0.999", "1", "-0.1"]))]
    if data.draw(st.integers(0, 2)) == 0:
        options += ["--items-per-hit", data.draw(st.sampled_from(["1", "5", "50"]))]
    if pilot and data.draw(st.booleans()):
        options += ["--where", data.draw(st.sampled_from(["grp=x", "nocolumn=1"]))]
    if data.draw(st.integers(0, 2)) == 0:
        options += ["--target-power", data.draw(st.sampled_from(["0.8", "0.05", "0.01"]))]
    _check(content, "r.csv", options, out, "--out")


def test_a_fit_that_succeeds_writes_a_parameter_file_the_planner_reads(tmp_path: Path) -> None:
    """The property tests' 'valid result' of fit is a file `likert power --params` accepts."""
    rows = [f"w{w},i{i},{s},{(w + 2 * i + (s == 'B')) % 5 + 1}" for w in range(4) for i in range(6) for s in "AB"]
    data = tmp_path / "r.csv"
    data.write_text("worker,item,system,score\n" + "\n".join(rows) + "\n")
    code, err = _run(["fit", str(data), "--backend", "statsmodels", "-o", str(tmp_path / "p.json")])
    assert code == 0, err
    assert json.loads((tmp_path / "p.json").read_text())["family"] == "gaussian"
    code, err = _run(["likert", "power", "--params", str(tmp_path / "p.json"), "--workers", "3", "--items", "10",
                      "--effect", "0.2", "--sims", "10", "--jobs", "1"])
    assert code == 0, err
