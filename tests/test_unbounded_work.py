"""Long runs are never silent (issue 18, item 3): through the CLI, work that cannot finish is refused
with one line (exit 2); anything else shows labelled progress on stderr within about 2 s of starting,
with bounded memory, and stops on Ctrl-C."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and signals")


def _hepower(argv: list[str], capsys: pytest.CaptureFixture[str]) -> subprocess.CompletedProcess[str]:
    """``hepower argv`` run by ``cli.main`` in this process (a refusal before any work: the interpreter and its
    imports, 1.2 CPU s a process, are the process tests' subject, below and in test_cli)."""
    from humaneval_power.cli import main

    def late(signum: int, frame: object) -> None:
        raise TimeoutError(f"hepower {' '.join(argv)} was not refused within 60 s: it started the work")

    capsys.readouterr()
    previous = signal.signal(signal.SIGALRM, late)
    signal.alarm(60)  # a refusal that regressed would run the unbounded work: fail instead of hanging the worker
    try:
        code = main(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(argv, code, out, err)


def _progress_then_ctrl_c(argv: list[str], label: str) -> None:
    """The run shows a bar (or, stderr being a pipe, a plain line) labelled ``label`` whose clock reads at most 2 s; Ctrl-C then ends it
    (exit 130 within 5 s) and its peak memory stayed under 1 GiB."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "humaneval_power.cli", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.extend(iter(lambda: proc.stderr.read(1), "")), daemon=True)
    reader.start()
    # a terminal's bar shows its clock as [00:01<...; a log's plain line as (1 s)
    bar = re.compile(re.escape(label) + r".*(\[00:0[0-2]|\([0-2] s\))")
    try:
        end = time.monotonic() + 30
        while not bar.search("".join(err)) and proc.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
        assert bar.search("".join(err)), "".join(err)[-500:]
        peak = int(re.search(r"VmHWM:\s+(\d+)", Path(f"/proc/{proc.pid}/status").read_text()).group(1))
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=5)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    reader.join(5)
    assert proc.returncode == 130, "".join(err)[-500:]
    assert peak < 2**20, f"{peak / 2**10:.0f} MiB"


def test_simulated_h2h_power_of_1e12_studies_shows_progress_at_once() -> None:
    _progress_then_ctrl_c(["h2h", "power", "--n", "50", "--p-win", "0.6", "--method", "simulate", "--sims", "1e12"],
                          "cell 1/1 (n=50")


def test_bleu_permutations_that_cannot_finish_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    r = _hepower(["bleu", "power", "--n", "100", "--delta", "1", "--p0", "0.1", "--b0", "25",
                  "--permutations", "1e12"], capsys)
    assert r.returncode == 2 and r.stdout == ""
    assert re.fullmatch(r"hepower: error: 1,000 simulated studies per cell .* would take about [\d.]+ (days|years); "
                        r"ask for fewer --permutations.*\n", r.stderr), r.stderr


def test_a_long_first_chunk_still_shows_its_bar() -> None:
    """One study of 1e9 permutations takes seconds: the bar appears before any chunk is done."""
    _progress_then_ctrl_c(["bleu", "power", "--n", "100", "--delta", "1", "--p0", "0.1", "--b0", "25",
                           "--permutations", "1e9", "--sims", "3", "--jobs", "1"], "starting")


def test_exact_mcnemar_power_of_a_huge_n_shows_progress_and_stops_on_ctrl_c() -> None:
    _progress_then_ctrl_c(["accuracy", "power", "--n", "1e13", "--delta", "0.02", "--agreement", "0.9"],
                          "exact power, n = 10,000,000,000,000: binomial terms")


def test_bleu_test_trials_that_cannot_finish_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [f"the cat sat on mat number {i}\n" for i in range(200)]
    for name in ("ref", "base", "sys"):
        (tmp_path / f"{name}.txt").write_text("".join(lines if name != "sys" else lines[::-1]))
    r = _hepower(["bleu", "test", "--ref", str(tmp_path / "ref.txt"), "--baseline", str(tmp_path / "base.txt"),
                  "--systems", str(tmp_path / "sys.txt"), "--trials", "1e12"], capsys)
    assert r.returncode == 2 and r.stdout == ""
    assert re.fullmatch(r"hepower: error: 1 x 1,000,000,000,000 randomization trials over 200 items would take "
                        r"about .*; ask for fewer --trials\n", r.stderr), r.stderr
