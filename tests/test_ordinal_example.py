"""The worked example of docs/ordinal_example.md (issue 26, item 4), run as the doc runs it.

``examples/ordinal_dialsummeval.sh`` holds the doc's commands; here it runs at reduced sims and the
doc's claims that do not depend on Monte-Carlo luck are checked against a fresh run: the fitted
thresholds, SDs and effects to the digits printed, the latent <-> mean-rating conversions, and which
pairs each analysis of the full expert data finds (Holm, alpha 0.05), with and without a normal
reference (the ordinal analysis's default latent t, its --df asymptotic z). The plans' powers
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
#: one xdist worker runs the module: its fixture (the whole script, ~2 CPU min) is per process
pytestmark = pytest.mark.xdist_group("ordinal_example")

#: numbers as the doc prints them (the fit's summary: 4 significant digits)
THRESHOLDS = [-4.653, -2.934, -0.4412, 1.753]
LATENT_SDS = {"sd_worker": 1.302, "sd_item": 0.9729, "sd_worker_system": 0.127, "sd_item_system": 0.5638}
EFFECTS = {"A": 1.434, "H": -0.5297, "K": 0.4398}
#: the pairs (system, versus) each analysis finds at Holm-adjusted p < 0.05: against the normal, and with the
#: small-sample reference (Gaussian and ordinal alike)
NORMAL_FINDS = {("A", "F"), ("H", "F"), ("K", "F"), ("H", "A"), ("K", "A"), ("K", "H")}
GAUSSIAN_FINDS = NORMAL_FINDS - {("H", "F"), ("K", "F")}


def _sig(x: float) -> float:
    return float(f"{x:.4g}")


@pytest.fixture(scope="module")
def run(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The doc's commands (the script) at 10 simulated studies per plan cell and 20 Bartlett bootstrap draws in
    the first ordinal analysis (the doc's 200 were ~60 CPU s, 2/3 of the script; the tests here read its
    contrasts and its bootstrap-free omnibus rows; the bootstrap test itself: tests/test_analyze_ordinal_tests.py):
    (output folder, stdout)."""
    out = tmp_path_factory.mktemp("ordinal_example")
    env = dict(os.environ, HEPOWER_DATA=str(data_dir), OUT=str(out), SIMS="10", BOOTSTRAP="2",
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
    # the first ordinal analysis's omnibus rows that do not depend on its bootstrap draws
    omnibus = "likelihood ratio chi2(3) = 23.37, p = 3.38e-05; Wald chi2(3) = 82.74, p = 7.94e-18"
    assert omnibus in stdout and omnibus in doc


@pytest.mark.slow
def test_pairs_each_analysis_finds(run: tuple[Path, str]) -> None:
    """Gaussian (Satterthwaite t, ~9 df) and ordinal (latent Satterthwaite t, the default): not H-F, K-F; the
    ordinal contrasts with --df asymptotic (emmeans' z) and the Gaussian ones against the normal: all six."""
    out, _ = run
    assert _found(out / "ordinal_contrasts.csv") == GAUSSIAN_FINDS
    assert _found(out / "gaussian_contrasts.csv") == GAUSSIAN_FINDS
    assert _found(out / "ordinal_contrasts_z.csv") == NORMAL_FINDS
    g = pd.read_csv(out / "gaussian_contrasts.csv")
    p_z = adjust_pvalues(2 * norm.sf(np.abs(g.t.to_numpy())), "holm")
    assert {(s, v) for s, v, q in zip(g.system, g.versus, p_z) if q < 0.05} == NORMAL_FINDS


@pytest.mark.slow
def test_ordinal_contrasts_have_the_latent_df_printed_in_the_doc(run: tuple[Path, str]) -> None:
    """The ordinal analysis's default df (the latent working model's, the planner's t test): 8.43 for every
    pair of the balanced design, as the doc prints it."""
    out, _ = run
    c = pd.read_csv(out / "ordinal_contrasts.csv")
    assert set(c.df.round(2)) == {8.43} and "t (df 8.43)" in DOC.read_text()


def test_the_script_runs_exactly_the_doc_commands() -> None:
    """Every ``bash`` block of the doc appears verbatim in the script (its SIMS variable at the doc's 200, its
    BOOTSTRAP variable unset: the CLI's default)."""
    import re

    script = SCRIPT.read_text().replace('"$SIMS"', "200").replace('${BOOTSTRAP:+ --bootstrap "$BOOTSTRAP"}', "")
    blocks = re.findall(r"```bash\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 8
    assert [b.strip()[:40] for b in blocks if b.strip() not in script] == []
