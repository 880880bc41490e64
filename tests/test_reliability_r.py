"""Reliability of the R-backed tiers (issue 18, items 2 and 7): Ctrl-C while R starts, and what one
seed reproduces."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
_LIKERT = ["likert", "power", "--method", "lme4", "--workers", "3", "--items", "20", "--effect", "0.2"]
_GLMM = ["h2h", "power", "--sd-worker", "0.5", "--sd-item", "0.5", "--workers", "5", "--items", "30",
         "--effect", "0.6", "--method", "lme4"]


def _start(argv: list[str]) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "humaneval_power.cli", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)


def _r_loaded(pid: int) -> bool:
    """Whether the process has mapped libR (rpy2 is starting R)."""
    try:
        return "libR.so" in Path(f"/proc/{pid}/maps").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False


@pytest.mark.r
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
@pytest.mark.parametrize("argv", [_LIKERT, _GLMM], ids=["lme4", "glmm"])
@pytest.mark.parametrize("delay", [1.0, 2.0])  # not earlier: a signal inside R's own initialisation is a known gap
def test_ctrl_c_while_r_starts_stops_the_run(lme4_backend: Any, argv: list[str], delay: float) -> None:
    """rpy2 resets SIGINT's handler when it starts R: a Ctrl-C while R loaded lme4 (2-6 s) was
    lost in a cffi callback and the run went on. ``delay``: seconds after libR is mapped."""
    proc = _start(argv + ["--sims", "5000", "--jobs", "1"])
    try:
        end = time.monotonic() + 30
        while not _r_loaded(proc.pid) and proc.poll() is None and time.monotonic() < end:
            time.sleep(0.02)
        time.sleep(delay)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        start = time.monotonic()
        _, err = proc.communicate(timeout=5)
        assert time.monotonic() - start < 5
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130, err
    last = err.replace("\r", "\n").strip().splitlines()[-1]  # after the progress bar, if it was drawn
    assert last.startswith("hepower: interrupted") and "Exception ignored" not in err, err


#: Run-to-run tolerance of the lme4 tiers (relative). Not bit for bit: lme4's symbolic Cholesky
#: (merPredD) picks between fill-equivalent orderings (natural or AMD) differently from one process
#: to the next (it follows the address-space layout: identical with ASLR off, `setarch -R`); the
#: other elimination order changes the rounding (1 ulp in the first deviance), which the optimiser's
#: stopping rule turns into differences of 1e-9 to 1e-6 in estimates, SEs and df. Measured: h2h GLMM
#: Type-M 1.4262654647 vs 1.4262654658 (30 studies); the issue saw df differ in the 6th digit.
R_TOLERANCE = 1e-5


@pytest.mark.r
def test_glmm_runs_agree_within_the_documented_tolerance(lme4_backend: Any) -> None:
    import json

    runs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-m", "humaneval_power.cli", *_GLMM, "--sims", "20", "--jobs", "1",
                               "--json"], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert proc.returncode == 0, proc.stderr
        runs.append(json.loads(proc.stdout)[0])
    a, b = runs
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], float):
            assert a[key] == pytest.approx(b[key], rel=R_TOLERANCE, nan_ok=True), key
        else:
            assert a[key] == b[key], key
