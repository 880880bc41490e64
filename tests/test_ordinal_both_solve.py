"""``--model both`` in the Likert solvers (issue 26, "Plan"): ``likert size``, ``mde`` and ``budget`` answer for
the ordinal and the linear analysis side by side, each on the same simulated studies (common random numbers),
so each answer equals that analysis's search alone on the same seed, number for number.

Both analyses' fits (deterministic) are shared between the runs of a comparison (:func:`_shared`,
``tests/ordinal_shared.py``): a search alone on the same studies reads the fits the search with ``both`` made, so
each comparison still fails when the two runs simulate or decide differently (other studies, designs, seeds or
tests are other calls, fitted afresh), at half the fits. One comparison fits afresh
(``test_size_with_both_equals_each_analysis_alone``): it catches a fit depending on the process's earlier runs.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from humaneval_power.analyses import OrdinalCLMM
from humaneval_power.analyses.lmm import GaussianLMM
from humaneval_power.cli import main
from humaneval_power.designs import Costs
from humaneval_power.engine import run_cells
from humaneval_power.errors import InputError
from humaneval_power.interface.validation import validate
from humaneval_power.io import json_records
from humaneval_power.ordinal_process import OrdinalProcess
from humaneval_power.planning import SolveResult, SolveResults
from humaneval_power.scenarios.crowd import BOTH, cell_factory
from humaneval_power.scenarios.likert import likert_budget, likert_mde, likert_sample_size

from .ordinal_shared import share_analysis_fits

PROCESS = OrdinalProcess(thresholds=(-2.0, -0.7, 0.5, 1.8), sd_worker=0.8, sd_worker_system=0.3, sd_item=1.0,
                         sd_item_system=0.5)
TYPED = ["--family", "ordinal", "--thresholds", "-2", "-0.7", "0.5", "1.8", "--sd-worker", "0.8",
         "--sd-worker-system", "0.3", "--sd-item", "1", "--sd-item-system", "0.5"]
#: the test both analyses share besides the default (whose ordinal t test adds a df per study): cheaper
TEST = "z"
#: a size search over ratings per item with 4 workers: at most four steps per analysis
SIZE = {"effect": 1.5, "workers": 4, "items": 12, "vary": "ratings_per_item", "n_sims": 8, "seed": 5, "jobs": 1,
        "test": TEST}
BUDGET = {"items": [8, 16], "workers": [4], "ratings_per_item": [2, 4], "costs": Costs(per_rating=1.0), "n_sims": 8,
          "seed": 3, "jobs": 1, "test": TEST}


def _shared(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both analyses' fits of a study answered once per process (see the module docs)."""
    for cls in (OrdinalCLMM, GaussianLMM):
        share_analysis_fits(monkeypatch, cls)


def _plain(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The API's records as the JSON of the command line and the web API has them (one table: NaN as null)."""
    return json.loads(json.dumps(json_records(pd.DataFrame(records))))


@pytest.fixture(scope="module")
def size_both() -> Any:
    with pytest.MonkeyPatch.context() as mp:
        _shared(mp)
        return likert_sample_size(PROCESS, model="both", **SIZE)


@pytest.fixture(scope="module")
def budget_both() -> Any:
    with pytest.MonkeyPatch.context() as mp:
        _shared(mp)
        return likert_budget(PROCESS, 1.5, model="both", **BUDGET)


def test_a_design_point_gives_both_analyses_the_same_studies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Common random numbers at the source: the ratings each analysis's cell simulates are the same arrays."""
    seen: dict[str, list[np.ndarray]] = {m: [] for m in BOTH}
    current = [""]
    simulate = OrdinalProcess.simulate

    def spy(self: OrdinalProcess, *args: Any, **kw: Any) -> Any:
        out = simulate(self, *args, **kw)
        seen[current[0]].append(np.array(out, copy=True))
        return out

    monkeypatch.setattr(OrdinalProcess, "simulate", spy)
    for design in ({"items": 10, "workers": 4}, {"items": 12, "workers": 6, "ratings_per_item": 3}):
        for m in seen:
            seen[m].clear()
        for m in BOTH:
            current[0] = m
            cell = cell_factory(PROCESS, model=m, test=TEST)(effect=0.7, **design)
            run_cells([cell], 5, seed=11, jobs=1)
        assert len(seen["ordinal"]) == len(seen["invariant"]) > 0
        for a, b in zip(seen["ordinal"], seen["invariant"]):
            np.testing.assert_array_equal(a, b)


def test_size_with_both_equals_each_analysis_alone(size_both: Any) -> None:
    """Each search alone fits its studies afresh (not shared): a fit depending on what ran before it in the process
    (the ``both`` search's state) fails here."""
    assert isinstance(size_both, SolveResults) and list(size_both.results) == list(BOTH)
    for m in BOTH:
        alone = likert_sample_size(PROCESS, model=m, **SIZE)
        assert isinstance(alone, SolveResult)
        assert size_both[m].record() == alone.record()
    assert [r["model"] for r in size_both.records()] == list(BOTH)
    assert any(size_both[m].attainable for m in BOTH)  # the design is not vacuous
    said = [f"{size_both[m].value} ratings per item" if size_both[m].attainable else "not attainable" for m in BOTH]
    assert str(size_both) == "\n".join([f"ordinal analysis: {said[0]}; linear analysis: {said[1]}",
                                        f"ordinal analysis: {size_both['ordinal']}",
                                        f"linear analysis: {size_both['invariant']}"])


@pytest.mark.slow
@pytest.mark.parametrize(("workers", "items", "effect", "seed"), [(4, 10, 1.2, 1), (3, 16, 1.5, 7)])
def test_size_and_mde_with_both_equal_each_analysis_alone_over_designs(workers: int, items: int, effect: float,
                                                                       seed: int, monkeypatch: pytest.MonkeyPatch
                                                                       ) -> None:
    """The property over a few small designs and seeds: size (over ratings per item) and MDE."""
    _shared(monkeypatch)
    size = {"effect": effect, "workers": workers, "items": items, "vary": "ratings_per_item", "n_sims": 6,
            "seed": seed, "jobs": 1, "test": TEST}
    mde = {"workers": workers, "items": items, "n_sims": 6, "seed": seed, "jobs": 1, "test": TEST}
    both = likert_sample_size(PROCESS, model="both", **size)
    assert isinstance(both, SolveResults)
    for m in BOTH:
        assert both[m].record() == likert_sample_size(PROCESS, model=m, **size).record()  # type: ignore[union-attr]
    both_mde = likert_mde(PROCESS, model="both", **mde)
    assert isinstance(both_mde, SolveResults)
    for m in BOTH:
        assert both_mde[m].record() == likert_mde(PROCESS, model=m, **mde).record()  # type: ignore[union-attr]


def test_the_linear_analysis_type_m_is_over_the_mean_rating_difference(size_both: Any,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Its estimates are mean-rating differences: Type-M over the cell's mean_difference (the engine's is over
    the latent shift); the ordinal analysis's stays over the latent shift."""
    _shared(monkeypatch)
    for m in BOTH:
        r = size_both[m]
        at = r.at.cell
        cell = cell_factory(PROCESS, model=m, test=TEST)(at["items"], at["workers"], at["ratings_per_item"],
                                                         effect=at["effect"])
        raw = run_cells([cell], SIZE["n_sims"], seed=SIZE["seed"], jobs=1)[0]
        scale = 1.0 if m == "ordinal" else abs(at["effect"] / at["mean_difference"])
        assert r.at.power == raw.power
        assert r.at.type_m == pytest.approx(raw.type_m * scale, rel=1e-12)


def test_budget_with_both_equals_each_search_alone(budget_both: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _shared(monkeypatch)
    table, answer = budget_both
    assert isinstance(answer, SolveResults) and list(table.model.unique()) == list(BOTH)
    for m in BOTH:  # the invariant search on ordinal parameters used to crash in the analytic screen
        t, r = likert_budget(PROCESS, 1.5, model=m, **BUDGET)
        pd.testing.assert_frame_equal(table[table.model == m].reset_index(drop=True).dropna(axis=1, how="all"),
                                      t.dropna(axis=1, how="all"), check_like=True)
        assert answer[m].record() == r.record()
    assert [r["model"] for r in answer.records()] == list(BOTH)


def test_progress_names_the_analysis_being_solved() -> None:
    labels: list[str] = []
    likert_sample_size(PROCESS, model="both", progress=lambda d, t, label="": labels.append(label),
                       **{**SIZE, "items": 6})
    ordinal = [i for i, lab in enumerate(labels) if lab.startswith("ordinal analysis: solving for ratings_per_item")]
    linear = [i for i, lab in enumerate(labels) if lab.startswith("linear analysis: solving for ratings_per_item")]
    assert ordinal and linear and max(ordinal) < min(linear)
    assert all(lab.startswith(("ordinal analysis: ", "linear analysis: ")) for lab in labels)


def test_cli_size_both_equals_the_api(size_both: Any, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _shared(monkeypatch)
    argv = ["likert", "size", "--workers", "4", "--items", "12", "--vary", "ratings_per_item", "--effect", "1.5",
            "--model", "both", "--sims", "8", "--seed", "5", "--jobs", "1", "--test", TEST, *TYPED]
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == _plain(size_both.records())
    assert main(argv) == 0
    text = capsys.readouterr().out
    head = text.splitlines()[0]
    assert head.startswith("ordinal analysis: ") and "; linear analysis: " in head
    assert str(size_both) in text


def test_cli_mde_header_says_the_effect_is_a_latent_shift(capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import humaneval_power.scenarios.likert as likert

    monkeypatch.setattr(likert, "solve", lambda *a, **k: SolveResult("effect", 0.8, None, None, None, False,
                                                                     "not searched", None, 0.0))
    assert main(["likert", "mde", "--workers", "4", "--items", "10", "--model", "both", *TYPED]) == 0
    assert "system 2 - system 1 of 2, latent shift (logit scale;" in capsys.readouterr().out


def test_cli_budget_both_equals_the_api(budget_both: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _shared(monkeypatch)
    table, answer = budget_both
    argv = ["likert", "budget", "--items", "8", "16", "--workers", "4", "--ratings-per-item", "2", "4",
            "--cost-per-rating", "1", "--effect", "1.5", "--model", "both", "--sims", "8", "--seed", "3", "--jobs",
            "1", "--test", TEST, *TYPED]
    out = tmp_path / "designs.csv"
    assert main([*argv, "--json", "--out", str(out)]) == 0
    assert json.loads(capsys.readouterr().out) == _plain(answer.records())
    assert list(pd.read_csv(out).model) == list(table.model)
    assert main([*argv, "--plot", str(tmp_path / "frontier.png")]) == 0
    assert (tmp_path / "frontier.png").stat().st_size > 0
    text = capsys.readouterr().out
    for m, label in (("ordinal", "ordinal analysis"), ("invariant", "linear analysis")):
        assert (f"{label}: cheapest design reaching" in text) == answer[m].attainable


def test_the_cost_frontier_plots_each_analysis(budget_both: Any) -> None:
    from humaneval_power.plots import plot_cost_frontier

    labels = [t.get_text() for t in plot_cost_frontier(budget_both[0], target=0.5).axes[0].get_legend().get_texts()]
    for m in BOTH:
        assert f"{m}: designs evaluated (95% CI)" in labels and f"{m}: frontier: most power for the cost" in labels


def test_web_request_with_both_is_accepted(tmp_path: Path) -> None:
    """The web API (validation, then the worker's call) takes ``model: both`` and returns a record per analysis,
    the API's (ordinal parameters from a preset: the web form has no typed thresholds)."""
    from humaneval_power.plan_inputs import likert_params
    from humaneval_power.serve.worker import call

    request = {"params": "dialsummeval-amt", **{k: v for k, v in SIZE.items() if k != "jobs"}, "model": "both"}
    assert validate("likert_sample_size", request)["model"] == "both"
    out = call("likert_sample_size", request, str(tmp_path), lambda d, t, label="": None)
    api = likert_sample_size(likert_params("dialsummeval-amt"), model="both", **SIZE)
    assert isinstance(api, SolveResults)
    assert out["records"] == _plain(api.records()) and [r["model"] for r in out["records"]] == list(BOTH)
    assert out["summary"] == str(api)


@pytest.mark.parametrize("argv", [
    ["size", "--workers", "4", "--effect", "0.5"],                              # Gaussian parameters: no ordinal one
    ["mde", "--workers", "4", "--items", "10"],
    ["budget", "--effect", "0.5", "--cost-per-rating", "1"],
    ["size", "--workers", "4", "--effect", "0.5", "--method", "clmm", *TYPED],  # clmm: not the linear analysis's
    ["size", "--workers", "4", "--effect", "0.5", "--test", "t", *TYPED],       # t: the ordinal analysis's
    ["mde", "--workers", "4", "--items", "10", "--method", "lme4", *TYPED],      # lme4: not the ordinal one's
    ["size", "--workers", "4", "--effect", "0.5", "--assurance", "--prior", "sd_worker=lognormal:-0.2,0.3",
     *TYPED],
])
def test_refusals_of_both_are_one_line_before_any_work(argv: list[str], capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def no_work(*args: Any, **kw: Any) -> Any:
        raise AssertionError("simulated before refusing")

    monkeypatch.setattr("humaneval_power.planning.run_cells", no_work)
    assert main(["likert", *argv, "--model", "both", "--sims", "4", "--jobs", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]


def test_cell_factory_builds_one_analysis() -> None:
    with pytest.raises(InputError, match="one model"):
        cell_factory(PROCESS, model="both")
