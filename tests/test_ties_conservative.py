"""docs/headtohead.md's numbers for the conservatism of `--ties split` with common ties (exact power), and the
property behind them: split's size never exceeds drop's nominal level and falls as ties grow."""
from __future__ import annotations

import itertools
import json

import pytest

from humaneval_power.cli import main


def _power(capsys, ties: str, p_win: list[float], p_tie: float, n: int = 800) -> list[float]:
    assert main(["h2h", "power", "--p-win", *map(str, p_win), "--p-tie", str(p_tie), "--ties", ties,
                 "--n", str(n), "--json"]) == 0
    return [r["power"] for r in json.loads(capsys.readouterr().out)]


def test_the_documented_numbers(capsys) -> None:
    split, drop = _power(capsys, "split", [0.105, 0.147], 0.79), _power(capsys, "drop", [0.105, 0.147], 0.79)
    assert split[0] == pytest.approx(9.4e-6, rel=0.01) and drop[0] == pytest.approx(0.042, abs=5e-4)
    assert split[1] == pytest.approx(0.777, abs=5e-4) and drop[1] == pytest.approx(0.9995, abs=5e-5)


def test_split_size_falls_as_ties_grow(capsys) -> None:
    sizes = [_power(capsys, "split", [(1 - t) / 2], t)[0] for t in (0.0, 0.2, 0.4, 0.6, 0.8)]
    assert all(s <= 0.05 for s in sizes) and all(a > b for a, b in itertools.pairwise(sizes))
