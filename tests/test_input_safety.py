"""Issue 24 beyond the bad-input matrix: read-only `store show`, no output over an input through the
Python-facing check, answers that need a note or a proper interval rather than a refusal."""
from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from humaneval_power.cli import build_parser, main
from humaneval_power.cli.common import file_options
from humaneval_power.scenarios.accuracy import paired_difference_interval


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_store_show_changes_nothing_and_says_what_the_checksum_is_for(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.db"
    assert main(["likert", "power", "--workers", "3", "--items", "10", "--effect", "0.2", "--sims", "20",
                 "--store", str(store), "--json"]) == 0
    before = _files(tmp_path)
    capsys.readouterr()
    assert main(["store", "show", str(store)]) == 0
    out = capsys.readouterr().out
    assert "1 cells, 20 studies" in out and "not deliberate forgery" in out
    assert _files(tmp_path) == before  # same bytes, and no -wal/-shm files made
    assert main(["store", "show", str(store), "--json"]) == 0
    assert "forgery" not in capsys.readouterr().out  # --json: only the array


def test_every_file_option_is_known_as_read_or_written() -> None:
    """The one check of issue 24 sees every file a command names: each option with a file metavar is
    either an output (--out, --plot, --report) or an input, for every command."""
    parser = build_parser()
    argv = {"analyze": ["analyze", "R", "--out", "o.csv", "--report", "r.md", "--plot", "p.png"],
            "likert": ["likert", "power", "--effect", "0.2", "--design-from", "P", "--workload-from", "W", "--params", "X",
                       "--design", "D", "--store", "S", "--out", "o.csv", "--plot", "p.png"],
            "bleu": ["bleu", "test", "--ref", "R1", "R2", "--baseline", "B", "--systems", "S1", "S2"],
            "store": ["store", "show", "F"], "fit": ["fit", "R", "-o", "p.json"]}
    found = {g: file_options(parser.parse_args(a)) for g, a in argv.items()}
    assert found["analyze"] == ([("RATINGS", "R")], [("--out", "o.csv"), ("--report", "r.md"), ("--plot", "p.png")])
    assert sorted(found["likert"][0]) == sorted([("--design-from", "P"), ("--workload-from", "W"), ("--params", "X"),
                                                 ("--design", "D"), ("--store", "S")])
    assert found["bleu"] == ([("--ref", "R1"), ("--ref", "R2"), ("--baseline", "B"), ("--systems", "S1"),
                              ("--systems", "S2")], [])
    assert found["store"] == ([("FILE", "F")], []) and found["fit"] == ([("RATINGS", "R")], [("--out", "p.json")])
    for action in _all_actions(parser):  # a new file option must be classified here too
        assert action.metavar not in ("PATH", "DIR", "CSV", "JSON"), action.option_strings


def _all_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out += _all_actions(sub)
        else:
            out.append(action)
    return out


def test_a_result_file_may_replace_a_file_the_command_does_not_read(tmp_path: Path) -> None:
    """Only inputs are protected: --out over an unrelated existing file still works."""
    other = tmp_path / "old.csv"
    other.write_text("x\n1\n")
    assert main(["accuracy", "power", "--n", "100", "--delta", "0.05", "--agreement", "0.9", "--out", str(other),
                 "--json"]) == 0
    assert "power" in other.read_text()


def _coverage(n: int, p01: float, p10: float, interval) -> float:
    """Exact coverage of an interval for p01 - p10 by enumerating every paired table of n items."""
    total = 0.0
    for a in range(n + 1):
        for b in range(n + 1 - a):
            low, high = interval(a, b, n)
            if low <= p01 - p10 <= high:
                total += stats.multinomial.pmf([a, b, n - a - b], n, [p01, p10, 1 - p01 - p10])
    return total


def _wald(a: int, b: int, n: int) -> tuple[float, float]:
    d = (a - b) / n
    se = np.sqrt(max((a + b) / n - d * d, 0.0) / n)
    return d - 1.96 * se, d + 1.96 * se


def test_accuracy_estimate_interval_has_width_and_coverage() -> None:
    """Agresti-Min never has zero width (one item; no discordant items) and keeps its level by exact
    enumeration where the plain Wald interval it replaced falls far below it (sparse discordance)."""
    for a, b, n in ((0, 1, 1), (1, 0, 1), (0, 0, 20), (5, 0, 5)):
        low, high = paired_difference_interval(a, b, n)
        assert -1 <= low <= (a - b) / n <= high <= 1 and high - low > 0.1, (a, b, n, low, high)
    grid = [(10, 0.05, 0.05), (30, 0.05, 0.01), (30, 0.1, 0.1), (30, 0.02, 0.0), (30, 0.3, 0.1)]
    covered = [_coverage(n, p01, p10, paired_difference_interval) for n, p01, p10 in grid]
    assert min(covered) >= 0.93, covered
    assert min(_coverage(n, p01, p10, _wald) for n, p01, p10 in grid) < 0.8  # what the fix is for


def test_accuracy_estimate_of_one_item_gives_a_proper_interval(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "one.csv"
    path.write_text("item,model,correct\n1,A,1\n1,B,0\n")
    assert main(["accuracy", "estimate", str(path), "--model-a", "A", "--model-b", "B", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)[0]
    assert rec["delta"] == -1 and rec["delta_ci_low"] == -1 and rec["delta_ci_high"] > 0


def test_an_mde_beyond_the_rating_scale_is_flagged(capsys: pytest.CaptureFixture[str]) -> None:
    """`likert mde --workers 2 --items 2` on the 0-1 scale: an answer larger than the scale carries a note
    in its record and its text; an answer on the scale carries none."""
    from humaneval_power.scenarios.likert import likert_mde

    tiny = likert_mde("card2020-high", 2, 2, n_sims=50, method="fast")
    assert tiny.value is not None and tiny.value > 1
    assert "larger than the whole rating scale" in tiny.record()["note"] and "note:" in str(tiny)
    sane = likert_mde("card2020-low", 10, 135, method="analytic")
    assert "note" not in sane.record() and "note" not in str(sane)
    assert main(["likert", "mde", "--workers", "2", "--items", "2", "--sims", "50", "--json"]) == 0
    assert "larger than the whole rating scale" in capsys.readouterr().out


def test_hard_linked_output_is_refused_even_through_another_folder(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    ratings = tmp_path / "r.csv"
    rows = [f"w{w},i{i},{s},{(w + i + (s == 'B')) % 5 + 1}" for w in range(3) for i in range(4) for s in "AB"]
    ratings.write_text("worker,item,system,score\n" + "\n".join(rows) + "\n")
    (tmp_path / "sub").mkdir()
    os.link(ratings, tmp_path / "sub" / "copy.csv")
    before = ratings.read_bytes()
    assert main(["analyze", str(ratings), "--backend", "statsmodels", "--out", str(tmp_path / "sub" / "copy.csv")]) == 2
    assert "refusing to write over an input" in capsys.readouterr().err
    assert ratings.read_bytes() == before


def _solvers() -> dict[str, Callable[[float], object]]:
    from humaneval_power.scenarios.accuracy import accuracy_mde, mcnemar_sample_size
    from humaneval_power.scenarios.bleu import bleu_mde, bleu_sample_size
    from humaneval_power.scenarios.likert import (
        likert_budget,
        likert_mde,
        likert_sample_size,
    )

    return {"likert_mde": lambda t: likert_mde("card2020-low", 3, 20, target_power=t),
            "likert_sample_size": lambda t: likert_sample_size("card2020-low", 0.2, target_power=t, workers=3),
            "likert_budget": lambda t: likert_budget("card2020-low", 0.2, [20], [3], [3], target_power=t),
            "bleu_mde": lambda t: bleu_mde(100, 0.1, 25, target_power=t),
            "bleu_sample_size": lambda t: bleu_sample_size(1, 0.1, 25, target_power=t),
            "mcnemar_sample_size": lambda t: mcnemar_sample_size(0.05, 0.9, target_power=t),
            "accuracy_mde": lambda t: accuracy_mde(100, 0.8, target_power=t)}


@pytest.mark.parametrize("name", list(_solvers()))
def test_the_api_refuses_a_target_power_at_or_below_alpha_as_the_cli_does(name: str) -> None:
    from humaneval_power.errors import InputError

    for target in (0.01, 0.05):
        with pytest.raises(InputError, match="at or below alpha"):
            _solvers()[name](target)


@pytest.mark.slow  # the server's worker pool starts (about 15 s on a busy machine)
def test_the_web_api_refuses_overflow_scale_sds_with_422() -> None:
    """Issue 24 item 4: SDs of 1e308 in a parameter document were an HTTP 500; now the CLI's one line, 422."""
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from humaneval_power.params import get_preset
    from humaneval_power.serve.app import create_app
    from humaneval_power.serve.commands import Limits

    doc = {**get_preset("card2020-low").to_json(), "sd_residual": 1e308}
    with TestClient(create_app(Limits(max_jobs=1))) as client:
        r = client.post("/api/likert_power", json={"params": doc, "workers": [3], "items": [20], "effect": [0.2],
                                                   "n_sims": 20})
    assert r.status_code == 422 and "too large" in r.json()["detail"], r.text
