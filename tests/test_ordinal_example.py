"""The worked example of docs/ordinal_example.md (issue 26, item 4), run as the doc runs it.

``examples/ordinal_dialsummeval.sh`` holds the doc's commands; here it runs at reduced sims and the
doc's claims that do not depend on Monte-Carlo luck are checked against a fresh run: the fitted
thresholds, SDs and effects to the digits printed, the latent <-> mean-rating conversions, and which
pairs each analysis of the full expert data finds (Holm, alpha 0.05), with and without a normal
reference (the ordinal analysis's default latent t, its --df asymptotic z). The plans' powers
are Monte-Carlo numbers: only their tables are checked to exist.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from humaneval_power.cli import main
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


#: sourced by bash before the script (BASH_ENV): each ``hepower`` / ``python`` command the script runs is recorded,
#: its arguments as bash expanded them (NUL-separated) and a heredoc's code, to be run in order in the test process
_RECORD = r"""
_n=0
hepower() { _n=$((_n + 1)); printf '%s\0' hepower "$@" > "$REC/$_n.argv"; }
python() { _n=$((_n + 1)); printf '%s\0' python "$@" > "$REC/$_n.argv"; cat > "$REC/$_n.stdin"; }
"""


def _run_recorded(rec: Path) -> str:
    """The recorded commands in their order, in this process: ``hepower`` through ``cli.main`` (exit 0 asserted),
    ``python - ARGS`` as the heredoc's code with ``sys.argv`` = ['-', ARGS]; their stdout, concatenated."""
    out = io.StringIO()
    for argv_file in sorted(rec.glob("*.argv"), key=lambda f: int(f.stem)):
        cmd, *args = argv_file.read_bytes().decode().split("\0")[:-1]
        with contextlib.redirect_stdout(out), pytest.MonkeyPatch.context() as mp:
            if cmd == "hepower":
                assert main(args) == 0, args
            else:
                assert args[0] == "-", args
                mp.setattr(sys, "argv", args)
                code = argv_file.with_suffix(".stdin").read_text()
                exec(compile(code, str(SCRIPT), "exec"), {"__name__": "__main__"})
    return out.getvalue()


@pytest.fixture(scope="module")
def run(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The doc's commands (the script) at 4 simulated studies per plan cell (the plans' powers are not checked:
    their tables are) and 2 Bartlett bootstrap draws in
    the first ordinal analysis (the doc's 200 were ~60 CPU s, 2/3 of the script; the tests here read its
    contrasts and its bootstrap-free omnibus rows; the bootstrap test itself: tests/test_analyze_ordinal_tests.py):
    (output folder, stdout). bash runs the script and expands every command as the doc's reader's shell does;
    the commands themselves run in this process in the script's order (``_RECORD``): ten processes' start-up
    (Python's imports, ~1.3 CPU s each) were 2/3 of the module's CPU. The plan runs in this process (``--jobs``
    left at the script's default, all cores, would start a pool here: results do not depend on jobs,
    tests/test_conformance.py)."""
    from humaneval_power.executors import local

    out = tmp_path_factory.mktemp("ordinal_example")
    rec = tmp_path_factory.mktemp("ordinal_example_commands")
    (rec / "record.sh").write_text(_RECORD)
    env = dict(os.environ, HEPOWER_DATA=str(data_dir), OUT=str(out), SIMS="4", BOOTSTRAP="2", REC=str(rec),
               BASH_ENV=str(rec / "record.sh"))
    done = subprocess.run(["bash", str(SCRIPT)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(list(rec.glob("*.argv"))) == 10  # the script's 7 hepower and 3 python commands
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HEPOWER_DATA", str(data_dir))
        mp.chdir(ROOT)
        resolve = local.resolve_jobs
        mp.setattr(local, "resolve_jobs", lambda jobs: resolve(1 if jobs is None else jobs))
        stdout = _run_recorded(rec)
    return out, stdout


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
