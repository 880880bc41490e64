"""The command line: bad input gives one line and exit 2, outputs are complete or absent."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from humaneval_power.cli import main
from humaneval_power.params import get_preset, save_params

BASE = ["likert", "power", "--workers", "3", "--items", "20", "--effect", "0.2", "--sims", "50"]


def _bad_cases(tmp: Path) -> dict[str, list[str]]:
    (tmp / "malformed.json").write_text("{not json")
    (tmp / "wrongschema.json").write_text(json.dumps({"schema": "other", "version": 1}))
    (tmp / "negative.json").write_text(json.dumps({**get_preset("card2020-low").to_json(), "sd_residual": -1}))
    out = ["--out", str(tmp / "out.csv"), "--plot", str(tmp / "out.png")]
    return {
        "unknown preset": BASE + ["--preset", "nope"] + out,
        "negative SD": BASE + ["--preset", "card2020-high", "--sd-worker-slope", "-0.1"] + out,
        "non-numeric SD": BASE + ["--sd-item-slope", "abc"] + out,
        "zero items": ["likert", "power", "--items", "0", "--effect", "0.1", "--sims", "10"] + out,
        "non-numeric effect": ["likert", "power", "--effect", "big", "--sims", "10"] + out,
        "missing params file": BASE + ["--params", str(tmp / "absent.json")] + out,
        "malformed params file": BASE + ["--params", str(tmp / "malformed.json")] + out,
        "wrong schema": BASE + ["--params", str(tmp / "wrongschema.json")] + out,
        "negative SD in file": BASE + ["--params", str(tmp / "negative.json")] + out,
        "sims 0": ["likert", "power", "--effect", "0.1", "--sims", "0"] + out,
        "one worker": ["likert", "power", "--workers", "1", "--effect", "0.1", "--sims", "10"] + out,
        "bad range": ["likert", "power", "--items", "100:10:5", "--effect", "0.1"] + out,
        "alpha": BASE + ["--alpha", "1.5"] + out,
        "out suffix": BASE + ["--out", str(tmp / "table.xlsx")],
        "out folder": BASE + ["--out", str(tmp / "missing" / "t.csv")],
        "card2020 negative": ["likert", "power", "--effect", "-0.1", "--test", "card2020", "--sims", "10"] + out,
        "analytic card2020": BASE + ["--method", "analytic", "--test", "card2020"] + out,
        "partial SDs": BASE + ["--sd-residual", "0.2"] + out,
        "preset and params": BASE + ["--preset", "card2020-low", "--params", str(tmp / "x.json")] + out,
        "size without workers": ["likert", "size", "--effect", "0.1"],
        "size zero effect": ["likert", "size", "--effect", "0", "--workers", "3"],
        "size target": ["likert", "size", "--effect", "0.1", "--workers", "3", "--target-power", "1.2"],
        "unknown command": ["likert", "fly"],
    }


def test_bad_input_matrix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name, argv in _bad_cases(tmp_path).items():
        code = main(argv)
        captured = capsys.readouterr()
        lines = captured.err.strip().splitlines()
        assert code == 2, name
        assert len(lines) == 1 and lines[0].startswith("hepower"), (name, captured.err)
        assert "Traceback" not in captured.err
        assert captured.out == "", name
        assert not (tmp_path / "out.csv").exists() and not (tmp_path / "out.png").exists(), name
        assert not list(tmp_path.glob(".out*")), f"{name}: a temporary file was left behind"


def test_real_process_exit_code_and_no_traceback(tmp_path: Path) -> None:
    out = tmp_path / "t.csv"
    proc = subprocess.run([sys.executable, "-m", "humaneval_power.cli", "likert", "power", "--effect", "0.1",
                           "--sims", "0", "--out", str(out)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert not out.exists()


def test_outputs_table_json_plot_and_params_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    params = tmp_path / "p.json"
    save_params(get_preset("card2020-low").with_sds(sd_item_slope=0.3), params)
    argv = ["likert", "power", "--params", str(params), "--workers", "3", "5", "--items", "20:60:20",
            "--effect", "0.1", "0.3", "--sims", "400", "--out", str(tmp_path / "t.parquet"),
            "--plot", str(tmp_path / "p.svg"), "--json", "--jobs", "1"]
    assert main(argv) == 0
    records = json.loads(capsys.readouterr().out)
    assert len(records) == 2 * 3 * 2
    table = pd.read_parquet(tmp_path / "t.parquet")
    assert list(table.power) == [r["power"] for r in records]
    assert (tmp_path / "p.svg").read_text().lstrip().startswith("<?xml")


def test_readable_output_and_analytic_df(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["likert", "power", "--method", "analytic", "--workers", "5", "--items", "50", "--effect",
                 "0.2", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)[0]
    assert rec["df"] > 0 and rec["method"] == "analytic"
    assert main(["likert", "power", "--workers", "3", "--items", "50", "--effect", "0.2", "--sims", "200"]) == 0
    text = capsys.readouterr().out
    assert "Smallest designs" in text and "power" in text


def test_size_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["likert", "size", "--preset", "card2020-low", "--workers", "10", "--effect", "0.1",
                 "--method", "analytic", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert isinstance(rec, list) and len(rec) == 1
    assert rec[0]["value"] == rec[0]["items"] == 135 and rec[0]["solve_for"] == "items"
    assert rec[0]["power"] >= 0.8 and rec[0]["attainable"] and rec[0]["n_sims"] == 0
    assert main(["likert", "size", "--preset", "card2020-high", "--workers", "3", "--effect", "0.1"]) == 0
    assert "not attainable" in capsys.readouterr().out


def test_fit_says_what_it_does_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A slow fit (R's start-up alone takes seconds) says what it does on stderr; stdout stays the table or JSON."""
    from humaneval_power.cli import common

    monkeypatch.setattr(common, "NOTE_DELAY", 0.0)  # as if the fit were slow
    rng = np.random.default_rng(3)
    rows = [(w, i, s, rng.normal(0.5 + 0.1 * (s == "B"), 0.2)) for w in range(4) for i in range(12) for s in "AB"]
    path = tmp_path / "pilot.csv"
    pd.DataFrame(rows, columns=["worker", "item", "system", "score"]).to_csv(path, index=False)
    assert main(["fit", str(path), "--backend", "statsmodels", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)[0]["system"] == "B"
    assert "fitting 96 ratings of 2 systems with statsmodels" in err


@pytest.mark.parametrize("argv,note", [
    (["accuracy", "table"], "hepower: searching the MDE of every glue task with normal"),
    (["accuracy", "mde", "--n", "1725", "--baseline", "0.92"],
     "hepower: searching the smallest gain reaching power 0.8 ..."),
    (["likert", "size", "--workers", "10", "--effect", "0.2", "--sims", "200"], "solving for items, step 1: items 2"),
    (["likert", "mde", "--workers", "15", "--items", "100", "--ratings-per-item", "3", "--sims", "100"],
     "solving for effect, step 1"),
    (["bleu", "mde", "--n", "500", "--p0", "0.13", "--b0", "25.8", "--sims", "100"], "solving for delta, step 1"),
])
def test_searches_say_what_they_do_on_stderr(argv: list[str], note: str, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Size/MDE searches show labelled progress (which step, which value); the MDE table and the
    exact accuracy searches (no progress of their own) say on stderr what runs."""
    from humaneval_power.cli import common

    labels: list[str] = []
    monkeypatch.setattr(common, "NOTE_DELAY", 0.0)
    monkeypatch.setattr(common.ProgressBar, "__call__", lambda self, done, total, label="": labels.append(label))
    assert main(argv + ["--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) and (note in err or any(note in label for label in labels)), (err, labels[:5])
