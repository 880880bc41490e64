"""Head-to-head fits: split ties as a weighted likelihood, quasi-separation, judgment input (issue 17: 1, 2, 8)."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from humaneval_power.errors import InputError
from humaneval_power.fitting.model import fit_pilot
from humaneval_power.fitting.ratings import read_judgments
from humaneval_power.params import H2HParams, load_h2h_params

from .laplace_reference import laplace_fit


def _judgments(seed: int = 11, workers: int = 12, items: int = 40, p_tie: float = 0.3) -> pd.DataFrame:
    """B vs A, every worker judges every item; logistic GLMM (log-odds 0.8, SDs 0.7, 1.0) plus ties."""
    rng = np.random.default_rng(seed)
    w, i = np.repeat(np.arange(workers), items), np.tile(np.arange(items), workers)
    eta = 0.8 + rng.normal(0, 0.7, workers)[w] + rng.normal(0, 1.0, items)[i]
    tie = rng.random(len(w)) < p_tie
    won = rng.random(len(w)) < 1 / (1 + np.exp(-eta))
    return pd.DataFrame({"worker": [f"w{k}" for k in w], "item": [f"i{k}" for k in i], "system_a": "A",
                         "system_b": "B", "outcome": np.where(tie, "tie", np.where(won, "b", "a"))})


def _separated() -> pd.DataFrame:
    """5 workers x 20 items; B wins 19 items unanimously, the last one 3 to 2."""
    w, i = np.repeat(np.arange(5), 20), np.tile(np.arange(20), 5)
    out = np.where(i < 19, "b", np.where((w + i) % 2 == 0, "b", "a"))
    return pd.DataFrame({"worker": [f"w{k}" for k in w], "item": [f"i{k}" for k in i], "system_a": "A",
                         "system_b": "B", "outcome": out})


def test_split_ties_equal_an_independent_weighted_laplace_fit(lme4_backend) -> None:
    """A tie = half a win + half a loss: lme4's fit equals a hand-written Laplace fit of that likelihood.

    On main, glmer rounded the 1/2-weighted rows (0.434 expected; the old fit differs by > 0.01).
    """
    raw = _judgments()
    rec = fit_pilot(read_judgments(raw, baseline="A", ties="split"), "lme4")
    score = np.where(raw.outcome == "b", 1.0, np.where(raw.outcome == "tie", 0.5, 0.0))
    ref = laplace_fit(score, raw.worker.to_numpy(), raw["item"].to_numpy())
    got = rec.records[0]
    assert got["effect"] == pytest.approx(ref.estimate, abs=1e-4)
    assert got["sd_worker"] == pytest.approx(ref.sd_worker, abs=1e-4)
    assert got["sd_item"] == pytest.approx(ref.sd_item, abs=1e-4)
    assert got["effect_se"] == pytest.approx(ref.se, rel=2e-3)  # finite-difference Hessians on both sides
    assert rec.raw.criterion == pytest.approx(ref.deviance, abs=1e-3)  # -2 x the weighted log-likelihood
    assert got["n_ratings"] == len(raw) and not got["separation"]
    assert not any("non-integer" in w for w in rec.raw.warnings)
    # the tie-free rows alone: drop differs from split (the ties carry information)
    drop = fit_pilot(read_judgments(raw, baseline="A", ties="drop"), "lme4").records[0]
    assert abs(drop["effect"] - got["effect"]) > 0.1


def test_split_ties_refused_where_no_weighted_likelihood_exists() -> None:
    data = read_judgments(_judgments(items=10), baseline="A", ties="split")
    with pytest.raises(InputError, match="bambi backend has no weighted likelihood"):
        fit_pilot(data, "bambi")
    with pytest.raises(InputError, match="--intervals boot"):
        fit_pilot(data, "lme4", intervals="boot")


def test_quasi_separation_is_flagged_and_the_planner_refuses_it(lme4_backend, tmp_path: Path) -> None:
    fit = fit_pilot(read_judgments(_separated(), baseline="A"), "lme4")
    rec = fit.records[0]
    assert rec["separation"] and "quasi-separated" in rec["separation_reason"]
    assert "fitted probabilities numerically 0 or 1" in rec["separation_reason"]
    assert any("quasi-separated" in w for w in fit.raw.warnings) and "quasi-separated" in fit.summary()
    doc = fit.to_params_file()
    assert doc["separation"] is True and doc["separation_reason"] == rec["separation_reason"]
    path = tmp_path / "h2h.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="quasi-separated.*--force"):
        load_h2h_params(path)
    forced = load_h2h_params(path, allow_separation=True)
    assert forced.separation == rec["separation_reason"]


def test_ordinary_fit_is_not_flagged(lme4_backend, tmp_path: Path) -> None:
    fit = fit_pilot(read_judgments(_judgments(), baseline="A"), "lme4")
    doc = fit.to_params_file()
    assert doc["separation"] is False
    path = tmp_path / "h2h.json"
    path.write_text(json.dumps(doc))
    assert load_h2h_params(path).separation is None


def test_h2h_params_without_the_flag_still_load() -> None:
    doc = {"schema": "humaneval-power/h2h-params", "sd_worker": 0.3, "sd_item": 0.5}
    assert H2HParams.from_json(doc).separation is None


def test_tie_answers_are_mapped_and_only_analysed_pairs_are_checked() -> None:
    """'both'/'neither' in other pairs do not matter; in the analysed pair they are ties when declared."""
    rows = pd.DataFrame({
        "worker": ["j1", "j2", "j3", "j2", "j2", "j3", "j1"], "item": ["1", "2", "3", "4", "5", "6", "7"],
        "system_a": ["A", "A", "B", "A", "A", "C", "C"], "system_b": ["B", "B", "A", "B", "C", "A", "B"],
        "outcome": ["a", "both", "neither", "b", "both", "neither", "maybe"],
    })
    with pytest.raises(InputError, match=r"^2 of the 4 judgments analysed .*'both', 'neither'.*--tie-values"):
        read_judgments(rows, baseline="A", systems=["A", "B"])
    data = read_judgments(rows, baseline="A", systems=["A", "B"], ties="split", tie_values=("both", "Neither"))
    assert list(data.frame.score) == [0.0, 0.5, 0.5, 1.0]
    assert "2 of 4 judgments are ties" in data.notes[0]
    dropped = read_judgments(rows, baseline="A", systems=["A", "B"], tie_values=["both", "neither"])
    assert list(dropped.frame.score) == [0.0, 1.0]
    with pytest.raises(InputError, match="list of answers"):
        read_judgments(rows, baseline="A", tie_values="both")


def test_fitting_reads_no_significance_module() -> None:
    """Issue 12 item 4: pilot-data reading does not depend on the significance tests."""
    root = Path(__file__).resolve().parents[1] / "humaneval_power" / "fitting"
    for name in ("ratings.py", "judgments.py"):
        tree = ast.parse((root / name).read_text())
        imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [m for m in imported if "significance" in m], name
    assert not (root / "headtohead.py").exists()  # one name per concept: scenarios/headtohead.py plans
