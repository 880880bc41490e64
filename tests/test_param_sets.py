"""A parameter set whose comparisons share their SDs (the coding-invariant fit of several systems) is one
model: no --comparison needed, and every choice gives the same random stream (issue 23, item 8)."""
from __future__ import annotations

import json

import pytest

from humaneval_power.cli import main
from humaneval_power.errors import InputError
from humaneval_power.params import load_params
from humaneval_power.scenarios.likert import likert_power

SDS = {"sd_worker_intercept": 0.29, "sd_worker_slope": 0.29, "sd_item_intercept": 0.26, "sd_item_slope": 0.24,
       "sd_residual": 0.78}


def _comparison(system: str, intercept: float, effect: float, **sds: float) -> dict:
    return {"schema": "humaneval-power/likert-params", "version": 1, "family": "gaussian", "name": f"{system} vs S00",
            "intercept": intercept, "effect": effect, "correlations": None, "scale": None, **(SDS | sds),
            "provenance": {"system": system}}


def _set(tmp_path, **other_sds: float):
    path = tmp_path / "set.json"
    # baseline mean 2.88: intercept = baseline + effect / 2
    path.write_text(json.dumps({"schema": "humaneval-power/params-set", "version": 1, "baseline": "S00",
                                "comparisons": {"S01": _comparison("S01", 2.83, -0.1),
                                                "S02": _comparison("S02", 2.8, -0.16, **other_sds)}}))
    return path


def test_shared_sds_need_no_comparison_and_give_one_stream(tmp_path, capsys) -> None:
    path = _set(tmp_path)
    p, a, b = load_params(path), load_params(path, "S01"), load_params(path, "S02")
    assert p.sds == a.sds == b.sds == SDS and p.intercept == a.intercept == b.intercept == pytest.approx(2.88)
    assert (p.effect, a.effect, b.effect) == (None, -0.1, -0.16)  # a named comparison keeps its pilot effect
    args = ["likert", "power", "--params", str(path), "--workers", "8", "--items", "20", "--ratings-per-item", "2",
            "--systems", "3", "--effect", "0.3", "--sims", "30", "--seed", "1", "--jobs", "1", "--json"]
    runs = []
    for extra in ([], ["--comparison", "S01"], ["--comparison", "S02"]):
        assert main(args + extra) == 0
        runs.append(json.loads(capsys.readouterr().out)[0]["power"])
    api = likert_power(p, 8, 20, 0.3, ratings_per_item=2, systems=3, n_sims=30, seed=1, jobs=1).power[0]
    assert runs == [api] * 3
    with pytest.raises(InputError, match="no comparison"):
        load_params(path, "S09")


def test_comparisons_with_their_own_sds_still_need_a_choice(tmp_path) -> None:
    path = _set(tmp_path, sd_residual=0.9)
    with pytest.raises(InputError, match="--comparison"):
        load_params(path)
    assert load_params(path, "S02").sd_residual == 0.9 and load_params(path, "S01").intercept == 2.83
