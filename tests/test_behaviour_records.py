"""Behaviour records: the JSON output of a fixed set of commands, saved before the architecture
refactor (issue 25) in ``tests/records/``, must stay bit-identical (lme4-tier commands: within
:data:`LME4_RTOL`, the spread of R's optimizer between runs, docs/architecture.md).

Regenerate (only when a change of numbers is intended, and say why in the commit):
``HEPOWER_WRITE_RECORDS=1 python -m pytest tests/test_behaviour_records.py``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from .conftest import sim_jobs

RECORDS = Path(__file__).parent / "records"
DATA = "{data}"
#: relative tolerance for numbers of commands that refit with lme4 (R's optimizer drifts with ASLR)
LME4_RTOL = 1e-4
#: record keys whose values depend on the machine or the clock, not on the statistics
VOLATILE = ("elapsed", "seconds", "time_s", "runtime", "version", "wall")

#: name -> (tier, argv after `hepower`); every command group, fast / exact / analytic tiers, a few lme4 ones
COMMANDS: dict[str, tuple[str, list[str]]] = {
    "likert_power_fast": ("fast", ["likert", "power", "--preset", "card2020-high", "--workers", "3", "10",
                                   "--items", "50", "200", "--effect", "0.2", "--sims", "200"]),
    "likert_power_analytic": ("analytic", ["likert", "power", "--preset", "card2020-low", "--workers", "5",
                                           "--items", "100", "--effect", "0.1", "--method", "analytic"]),
    "likert_power_crowd": ("fast", ["likert", "power", "--preset", "card2020-high", "--workers", "15",
                                    "--ratings-per-item", "3", "--items", "60", "--effect", "0.2", "--sims", "100",
                                    "--cost-per-rating", "0.1", "--platform-fee", "0.2"]),
    "likert_power_between_systems": ("fast", ["likert", "power", "--sd-worker", "0.3", "--sd-worker-system", "0.15",
                                              "--sd-item", "0.3", "--sd-item-system", "0.15", "--sd-residual", "0.8",
                                              "--systems", "4", "--compare", "baseline", "--workers", "12",
                                              "--ratings-per-item", "3", "--items", "40", "--effect", "0.3",
                                              "--sims", "60", "--presentation", "between"]),
    "likert_size": ("fast", ["likert", "size", "--preset", "card2020-low", "--workers", "10", "--effect", "0.1",
                             "--sims", "200"]),
    "likert_mde": ("fast", ["likert", "mde", "--preset", "card2020-low", "--workers", "10", "--items", "128",
                            "--sims", "200"]),
    "likert_budget": ("fast", ["likert", "budget", "--preset", "card2020-high", "--effect", "0.3", "--items",
                               "50", "100", "--workers", "10", "20", "--ratings-per-item", "1", "3",
                               "--cost-per-rating", "0.1", "--sims", "100"]),
    "likert_power_lme4": ("lme4", ["likert", "power", "--preset", "card2020-high", "--workers", "5", "--items",
                                   "30", "--effect", "0.3", "--sims", "10", "--method", "lme4"]),
    "h2h_power_exact": ("exact", ["h2h", "power", "--p-win", "0.65", "--n", "25", "100"]),
    "h2h_size_exact": ("exact", ["h2h", "size", "--p-win", "0.6", "--p-tie", "0.1"]),
    "h2h_mde_exact": ("exact", ["h2h", "mde", "--n", "200"]),
    "h2h_power_simulate": ("fast", ["h2h", "power", "--p-win", "0.6", "--n", "50", "--method", "simulate",
                                    "--sims", "500"]),
    "accuracy_power": ("exact", ["accuracy", "power", "--n", "500", "--delta", "0.02", "--agreement", "0.9"]),
    "accuracy_size": ("exact", ["accuracy", "size", "--delta", "0.03", "--agreement", "0.9"]),
    "accuracy_mde": ("exact", ["accuracy", "mde", "--n", "1725", "--baseline", "0.92", "--prior", "lachenbruch"]),
    "accuracy_table": ("exact", ["accuracy", "table", "--method", "normal"]),
    "accuracy_unpaired": ("analytic", ["accuracy", "unpaired", "--p1", "0.8", "--p2", "0.85", "--n", "500"]),
    "accuracy_estimate": ("exact", ["accuracy", "estimate", f"{DATA}/gsm8k_solutions/correct.csv",
                                    "--model-a", "6b_finetuning", "--model-b", "6b_verification"]),
    "bleu_power": ("fast", ["bleu", "power", "--n", "500", "--delta", "1", "--p0", "0.13", "--b0", "25.8",
                            "--sims", "100", "--permutations", "1000"]),
    "bleu_power_saddlepoint": ("analytic", ["bleu", "power", "--n", "500", "--delta", "1", "--p0", "0.13",
                                            "--b0", "25.8", "--sims", "100", "--method", "saddlepoint"]),
    "bleu_estimate": ("exact", ["bleu", "estimate", "--ref", f"{DATA}/wmt23_zhen/reference.txt", "--sys-a",
                                f"{DATA}/wmt23_zhen/system.HW-TSC.txt", "--sys-b",
                                f"{DATA}/wmt23_zhen/system.ONLINE-A.txt"]),
    "bleu_test": ("exact", ["bleu", "test", "--ref", f"{DATA}/wmt23_zhen/reference.txt", "--baseline",
                            f"{DATA}/wmt23_zhen/system.HW-TSC.txt", "--systems",
                            f"{DATA}/wmt23_zhen/system.ONLINE-A.txt", f"{DATA}/wmt23_zhen/system.ONLINE-Y.txt",
                            "--trials", "2000"]),
    "fit_gaussian_statsmodels": ("exact", ["fit", f"{DATA}/dialsummeval_expert/ratings.csv", "--where",
                                           "dimension=relevance", "--systems", "A", "F", "--scale", "1", "5",
                                           "--backend", "statsmodels"]),
    "fit_gaussian_lme4": ("lme4", ["fit", f"{DATA}/dialsummeval_expert/ratings.csv", "--where",
                                   "dimension=relevance", "--systems", "A", "F", "--scale", "1", "5"]),
    "fit_binomial_lme4": ("lme4", ["fit", f"{DATA}/wmt13_fren_rankings/pairs.csv", "--family", "binomial",
                                   "--worker", "judge", "--item", "segment", "--where", "split=train", "--systems",
                                   "uedin-wmt13.2838", "uedin-heafield-unconstrained.2755"]),
    "analyze_norr": ("exact", ["analyze", f"{DATA}/dialsummeval_expert/ratings.csv", "--where",
                               "dimension=coherence", "--backend", "statsmodels"]),
    "analyze_baseline_dunnett": ("exact", ["analyze", f"{DATA}/dialsummeval_expert/ratings.csv", "--where",
                                           "dimension=fluency", "--backend", "statsmodels", "--contrasts", "baseline",
                                           "--adjust", "dunnett"]),
    "analyze_lme4": ("lme4", ["analyze", f"{DATA}/dialsummeval_expert/ratings.csv", "--where",
                              "dimension=coherence"]),
    "analyze_binomial": ("lme4", ["analyze", f"{DATA}/wmt13_fren_rankings/pairs.csv", "--family", "binomial",
                                  "--worker", "judge", "--item", "segment", "--where", "split=test"]),
}


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if not any(t in k for t in VOLATILE)}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


#: the commands that take ``--jobs``: run with ``conftest.sim_jobs()`` processes (1 under xdist). Their results
#: never depend on it (``engine.run_cells``; test_scaleout, test_conformance); the default, all cores, started a
#: pool per command, spawned (a fresh interpreter and imports, ~1.5 CPU s a process) once R was up in the worker
SIMULATING = {("likert", c) for c in ("power", "size", "mde", "budget")} | {("h2h", "power"), ("bleu", "power")}


def run_command(argv: list[str], data: Path, capsys: pytest.CaptureFixture[str]) -> Any:
    """The JSON the command prints with ``--json`` (volatile keys dropped).

    Run by ``cli.main`` in this process: a record is what a command computes, and a process per command
    only added the interpreter, the imports and (lme4 tier) R's start-up, 1.5-4 CPU s each. The process
    boundary itself (``python -m``, signals, exit codes) has its own tests (test_cli, test_reliability*).
    """
    from humaneval_power.cli import main

    args = [a.replace(DATA, str(data)) for a in argv]
    if tuple(args[:2]) in SIMULATING:
        args += ["--jobs", str(sim_jobs())]
    capsys.readouterr()
    code = main([*args, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, f"hepower {' '.join(args)} failed: {err[-2000:]}"
    return _clean(json.loads(out))


def _close(a: Any, b: Any, rtol: float, where: str = "") -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{where}: keys {sorted(a)} != {sorted(b)}"
        for k in a:
            _close(a[k], b[k], rtol, f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{where}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, rtol, f"{where}[{i}]")
    elif isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        assert math.isclose(a, b, rel_tol=rtol, abs_tol=rtol), f"{where}: {a} != {b}"
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def _marks(tier: str) -> list[Any]:
    marks = [pytest.mark.slow] if tier == "lme4" else []
    return marks + ([pytest.mark.r] if tier == "lme4" else [])


@pytest.mark.parametrize("name", [pytest.param(n, marks=_marks(t)) for n, (t, _) in COMMANDS.items()])
def test_record_unchanged(name: str, data_dir: Path, request: pytest.FixtureRequest,
                          capsys: pytest.CaptureFixture[str]) -> None:
    tier, argv = COMMANDS[name]
    if tier == "lme4":
        request.getfixturevalue("lme4_backend")
    got = run_command(argv, data_dir, capsys)
    path = RECORDS / f"{name}.json"
    if os.environ.get("HEPOWER_WRITE_RECORDS"):
        RECORDS.mkdir(exist_ok=True)
        path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        return
    saved = json.loads(path.read_text())
    if tier == "lme4":
        _close(saved, got, LME4_RTOL, name)
    else:
        assert got == saved, f"{name}: the record changed"
