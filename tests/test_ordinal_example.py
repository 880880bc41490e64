"""The worked example of docs/ordinal_example.md (issue 26, item 4), run as the doc runs it.

``examples/ordinal_dialsummeval.sh`` holds the doc's commands; here it runs at reduced sims and the
doc's claims that do not depend on Monte-Carlo luck are checked against a fresh run: the fitted
thresholds, SDs and effects to the digits printed, the latent <-> mean-rating conversions, and which
pairs each analysis of the full expert data finds (Holm, alpha 0.05), with and without a normal
reference for the Gaussian contrasts and with the latent t for the ordinal ones. The plans' powers
are Monte-Carlo numbers: only their tables are checked to exist.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from humaneval_power.multiplicity import adjust_pvalues

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "ordinal_example.md"
SCRIPT = ROOT / "examples" / "ordinal_dialsummeval.sh"

#: numbers as the doc prints them (the fit's summary: 4 significant digits)
THRESHOLDS = [-4.653, -2.934, -0.4412, 1.753]
LATENT_SDS = {"sd_worker": 1.302, "sd_item": 0.9729, "sd_worker_system": 0.127, "sd_item_system": 0.5638}
EFFECTS = {"A": 1.434, "H": -0.5297, "K": 0.4398}
#: the pairs (system, versus) each analysis finds at Holm-adjusted p < 0.05
ORDINAL_FINDS = {("A", "F"), ("H", "F"), ("K", "F"), ("H", "A"), ("K", "A"), ("K", "H")}
GAUSSIAN_FINDS = ORDINAL_FINDS - {("H", "F"), ("K", "F")}


def _sig(x: float) -> float:
    return float(f"{x:.4g}")


@pytest.fixture(scope="module")
def run(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The doc's commands (the script) at 10 simulated studies per plan cell: (output folder, stdout)."""
    out = tmp_path_factory.mktemp("ordinal_example")
    env = dict(os.environ, HEPOWER_DATA=str(data_dir), OUT=str(out), SIMS="10",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    done = subprocess.run(["bash", str(SCRIPT)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-2000:]
    return out, done.stdout


def _found(path: Path, p: str = "p_adjusted") -> set[tuple[str, str]]:
    c = pd.read_csv(path)
    return {(s, v) for s, v, q in zip(c.system, c.versus, c[p]) if q < 0.05}


@pytest.mark.slow
def test_fit_equals_the_numbers_printed_in_the_doc(run: tuple[Path, str]) -> None:
    out, _ = run
    doc = DOC.read_text()
    fitted = json.loads((out / "ordinal.json").read_text())
    assert [_sig(t) for t in fitted["thresholds"]] == THRESHOLDS
    assert {k: _sig(v) for k, v in fitted["sds"].items()} == LATENT_SDS
    assert {k: _sig(v) for k, v in fitted["effects"].items()} == EFFECTS
    assert fitted["systems"] == ["F", "A", "H", "K"] and fitted["link"] == "logit"
    for value in [*THRESHOLDS, *LATENT_SDS.values(), *EFFECTS.values()]:
        assert f"{value:g}" in doc, value


@pytest.mark.slow
def test_conversions_and_plans_as_in_the_doc(run: tuple[Path, str]) -> None:
    _, stdout = run
    doc = DOC.read_text()
    for line in ("mean rating of F for a new worker and item: 3.660",
                 "latent shift 0.44 = a mean-rating difference of 0.169",
                 "mean-rating difference 0.19 = a latent shift of 0.497"):
        assert line in stdout and line in doc
    assert stdout.count("Smallest designs in this sweep") + stdout.count("No design in this sweep") == 2


@pytest.mark.slow
def test_pairs_each_analysis_finds(run: tuple[Path, str]) -> None:
    """Ordinal: all six pairs; Gaussian (Satterthwaite t, ~9 df): not H-F, K-F; the Gaussian contrasts
    against the normal (the ordinal analysis's reference): all six again."""
    out, _ = run
    assert _found(out / "ordinal_contrasts.csv") == ORDINAL_FINDS
    assert _found(out / "gaussian_contrasts.csv") == GAUSSIAN_FINDS
    g = pd.read_csv(out / "gaussian_contrasts.csv")
    p_z = adjust_pvalues(2 * norm.sf(np.abs(g.t.to_numpy())), "holm")
    assert {(s, v) for s, v, q in zip(g.system, g.versus, p_z) if q < 0.05} == ORDINAL_FINDS


@pytest.mark.slow
def test_ordinal_contrasts_with_the_latent_t_find_the_gaussian_pairs(run: tuple[Path, str]) -> None:
    """The planner's default test (Wald against t with the latent Satterthwaite df), computed by the doc's
    snippet on the analysis's z: the Gaussian analysis's 4 pairs, with the df printed in the doc."""
    _, stdout = run
    lines = stdout.splitlines()
    start = lines.index(next(line for line in lines if line.split() == ["system", "versus", "z", "p_adjusted", "df",
                                                                          "p_t", "p_t_holm"]))
    rows = [line.split() for line in lines[start + 1:start + 7]]
    assert {(r[0], r[1]) for r in rows if float(r[6]) < 0.05} == GAUSSIAN_FINDS
    assert {r[4] for r in rows} == {"8.4328"} and "8.4328" in DOC.read_text()


def test_the_script_runs_exactly_the_doc_commands() -> None:
    """Every ``bash`` block of the doc appears verbatim in the script (its SIMS variable at the doc's 200)."""
    import re

    script = SCRIPT.read_text().replace('"$SIMS"', "200")
    blocks = re.findall(r"```bash\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 8
    assert [b.strip()[:40] for b in blocks if b.strip() not in script] == []
