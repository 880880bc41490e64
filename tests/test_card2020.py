"""Card et al. (2020) Figure 6 (card2020 test, +-1 coding, 200 simulations per cell)."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from humaneval_power.params import PRESETS, get_preset
from humaneval_power.scenarios.likert import likert_power

# (preset, workers, items, diff in +-1 coding, power printed in the paper)
FIGURE6 = [
    ("card2020-high", 3, 100, 0.05, 0.27),
    ("card2020-high", 3, 100, 0.10, 0.555),
    ("card2020-high", 3, 100, 0.15, 0.75),
    ("card2020-high", 3, 100, 0.20, 0.885),
    ("card2020-high", 10, 100, 0.05, 0.315),
    ("card2020-high", 10, 100, 0.10, 0.795),
    ("card2020-low", 3, 100, 0.05, 0.60),
    ("card2020-low", 3, 100, 0.10, 0.945),
]
PAPER_SIMS = 200


def _close(ours: float, n_ours: int, paper: float, z: float = 3.5) -> bool:
    se = np.sqrt(ours * (1 - ours) / n_ours + paper * (1 - paper) / PAPER_SIMS)
    return abs(ours - paper) < z * se


def test_presets_convert_plus_minus_one_coding() -> None:
    high = get_preset("card2020-high")
    assert high.sd_worker_slope == pytest.approx(0.22) and high.sd_item_slope == pytest.approx(0.28)
    assert high.sd_worker_intercept == 0.01 and high.sd_residual == 0.26
    assert high.provenance["original_sds"]["sd_worker_slope"] == 0.11
    assert set(PRESETS) >= {"card2020-high", "card2020-low"}


@pytest.mark.parametrize("preset,workers,items,diff,paper", FIGURE6)
def test_figure6_cells(preset: str, workers: int, items: int, diff: float, paper: float) -> None:
    n = 4000
    t = likert_power(get_preset(preset), [workers], [items], [2 * diff], test="card2020", n_sims=n, seed=6, jobs=1)
    assert _close(float(t.power[0]), n, paper), (float(t.power[0]), paper)
    assert int(t.n_failed[0]) == 0


def test_acceptance_command_line() -> None:
    cmd = [sys.executable, "-m", "humaneval_power.cli", "likert", "power", "--preset", "card2020-high",
           "--workers", "3", "--items", "100", "--effect", "0.4", "--test", "card2020", "--sims", "2000",
           "--method", "fast", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    records = json.loads(out.stdout)
    assert len(records) == 1
    rec = records[0]
    for key in ("workers", "items", "effect", "power", "ci_low", "ci_high", "type_s", "type_m", "n_sims",
                "n_failed", "method", "test"):
        assert key in rec
    assert rec["n_sims"] == 2000 and rec["method"] == "fast" and rec["test"] == "card2020"
    assert _close(rec["power"], 2000, 0.885)
