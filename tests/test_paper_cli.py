"""The paper outputs on the command line (issue 28): `analyze --latex/--paper-records/--agreement-metric` and
`hepower agreement` give the API's numbers (the statistics themselves are checked against R and the reference
packages in test_agreement, test_rating_reliability, test_significance_groups, test_rankings); bad input is one
line, exit 2, no file."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from humaneval_power.cli import main
from humaneval_power.completed_study import agreement, analyze, latex_text
from humaneval_power.io import json_records

SYSTEMS = ["A", "B", "C", "D"]


@pytest.fixture(scope="module")
def expert(data_dir: Path) -> Path:
    return data_dir / "dialsummeval_expert" / "ratings.csv"


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_analyze_latex_and_paper_records_equal_the_api(expert: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    tex = tmp_path / "tables.tex"
    args = [str(expert), "--where", "dimension=relevance", "--systems", *SYSTEMS, "--backend", "statsmodels"]
    code, out, _ = _cli(capsys, "analyze", *args, "--latex", str(tex), "--latex-digits", "2",
                        "--agreement-metric", "ordinal", "--reliability-target", "0.9", "--paper-records", "--json")
    assert code == 0
    result = analyze(expert, where={"dimension": "relevance"}, systems=SYSTEMS, backend="statsmodels",
                     agreement_metric="ordinal", reliability_target=0.9)
    assert tex.read_text() == latex_text(result, 2)
    assert json.loads(out) == json_records(pd.DataFrame(result.records(paper=True)))
    kinds = {r["record"] for r in json.loads(out)}
    assert kinds == {"contrast", "agreement", "reliability", "system"}
    assert {r["target"] for r in json.loads(out) if r["record"] == "reliability"} == {0.9}
    if shutil.which("pdflatex"):
        doc = tmp_path / "doc.tex"
        doc.write_text("\\documentclass{article}\\usepackage{booktabs}\\begin{document}\\input{tables.tex}"
                       "\\end{document}\n")
        run = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name], cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stdout[-1500:]


def test_agreement_command_equals_the_api(expert: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(capsys, "agreement", str(expert), "--metric", "ordinal", "--boot", "50", "--seed", "3",
                        "--where", "dimension=coherence", "--json")
    assert code == 0
    ref = agreement(expert, metric="ordinal", n_boot=50, seed=3, where={"dimension": "coherence"})
    assert json.loads(out) == json_records(pd.DataFrame(ref.records()))


@pytest.mark.parametrize("extra, message", [
    (["--latex", "{tmp}/t.csv"], "--latex"),
    (["--latex", "{tmp}/t.tex", "--latex-digits", "11"], "--latex-digits"),
    (["--latex", "{tmp}/t.tex", "--backend", "bambi"], "bambi"),
    (["--agreement-metric", "ratio"], "invalid choice"),
])
def test_analyze_paper_options_refused(expert: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       extra: list[str], message: str) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in extra]
    code, _, err = _cli(capsys, "analyze", str(expert), "--where", "dimension=relevance", *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())


def test_latex_with_judgments_refused(data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys, "analyze", str(data_dir / "wmt13_fren_rankings" / "pairs.csv"), "--family",
                        "binomial", "--worker", "judge", "--item", "segment", "--latex", str(tmp_path / "t.tex"))
    assert code == 2 and "--family gaussian" in err and not list(tmp_path.iterdir())


def test_agreement_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one_rater = tmp_path / "one.csv"
    pd.DataFrame({"worker": ["w1"] * 4, "item": [1, 2, 3, 4], "system": ["A"] * 4,
                  "score": [1, 2, 3, 4]}).to_csv(one_rater, index=False)
    out = tmp_path / "out.csv"
    code, _, err = _cli(capsys, "agreement", str(one_rater), "--out", str(out))
    assert code == 2 and len(err.strip().splitlines()) == 1 and not out.exists()
    code, _, err = _cli(capsys, "agreement", str(one_rater), "--metric", "cosine")
    assert code == 2 and "invalid choice" in err
