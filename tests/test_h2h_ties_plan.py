"""Head-to-head plans carry the pilot's ties (issue 23, item 3): the tie rate and policy go from the fit
into the parameter file and into the GLMM planner, which simulates ties at that rate and analyses them
as fitted (dropped, or split as half a win and half a loss)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from humaneval_power.cli import main
from humaneval_power.errors import InputError
from humaneval_power.params import H2HParams, load_h2h_params
from humaneval_power.scenarios.headtohead import MixedJudgments, h2h_mixed_power

from .test_judgments_fit import _judgments

DOC = {"schema": "humaneval-power/h2h-params", "version": 1, "sd_worker": 0.5, "sd_item": 0.4}


def test_parameter_file_carries_the_tie_rate_and_policy() -> None:
    p = H2HParams.from_json({**DOC, "p_tie": 0.79, "ties": "split"})
    assert (p.p_tie, p.ties) == (0.79, "split")
    assert H2HParams.from_json(DOC).p_tie == 0.0  # files without ties: decisive judgments only
    for bad in ({"p_tie": 1.0}, {"p_tie": -0.1}, {"p_tie": "0.5"}, {"ties": "keep"}):
        with pytest.raises(InputError):
            H2HParams.from_json({**DOC, **bad})


def test_split_analysis_targets_the_log_odds_of_the_mean_score() -> None:
    p = H2HParams(0.5, 0.4, p_tie=0.79, ties="split")
    cell = MixedJudgments(p, 6, 40, math.log(3))  # P(B wins a decisive judgment) = 0.75
    assert cell.effect == pytest.approx(math.log((0.21 * 0.75 + 0.395) / (0.21 * 0.25 + 0.395)))
    assert MixedJudgments(H2HParams(0.5, 0.4, p_tie=0.79), 6, 40, math.log(3)).effect == math.log(3)
    assert cell.cell()["p_tie"] == 0.79 and cell.cell()["ties"] == "split"


@pytest.mark.r
def test_fit_writes_the_tie_rate_and_the_planner_refuses_to_override_it(lme4_backend, tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    data = _judgments(workers=6, items=20, p_tie=0.6)
    path, out = tmp_path / "pairs.csv", tmp_path / "h2h.json"
    data.to_csv(path, index=False)
    assert main(["fit", str(path), "--family", "binomial", "--ties", "split", "-o", str(out), "--json"]) == 0
    capsys.readouterr()
    params = load_h2h_params(out)
    assert params.p_tie == pytest.approx(float((data.outcome == "tie").mean())) and params.ties == "split"
    assert main(["h2h", "power", "--params", str(out), "--workers", "6", "--items", "20", "--effect", "0.7",
                 "--p-tie", "0"]) == 2
    assert "tie rate" in capsys.readouterr().err


@pytest.mark.r
@pytest.mark.slow
def test_ties_cost_power_as_the_decisive_judgments_they_remove(lme4_backend) -> None:
    """With no item variance, dropping ties at rate 1/2 from 2I items leaves as much information as I
    items without ties: equal power within Monte-Carlo error; a split analysis's estimate is centred on
    the log-odds of the mean score; and the plan of a 79%-ties pilot is far below its tie-free plan."""
    n, lo = 60, math.log(0.75 / 0.25)
    tied = H2HParams(0.4, 0.0, p_tie=0.5, ties="drop")
    a = h2h_mixed_power(tied, 6, 60, lo, n_sims=n, seed=2, jobs=1).iloc[0]
    b = h2h_mixed_power(H2HParams(0.4, 0.0), 6, 30, lo, n_sims=n, seed=3, jobs=1).iloc[0]
    se = math.sqrt(max(a.power * (1 - a.power) + b.power * (1 - b.power), 2e-4) / n)
    assert abs(a.power - b.power) < 3.5 * se, (a.power, b.power)

    split = MixedJudgments(H2HParams(0.4, 0.0, p_tie=0.5, ties="split"), 6, 40, lo)
    out = split.simulate(n, np.random.default_rng(4))
    est = out.estimate[~out.failed]
    assert abs(est.mean() - split.effect) < 3.5 * est.std(ddof=1) / math.sqrt(est.size), (est.mean(), split.effect)

    many = h2h_mixed_power(H2HParams(0.4, 0.3, p_tie=0.79, ties="split"), 6, 30, lo, n_sims=20, seed=5, jobs=1)
    none = h2h_mixed_power(H2HParams(0.4, 0.3), 6, 30, lo, n_sims=20, seed=5, jobs=1)
    assert many.power[0] < none.power[0] - 0.3, (many.power[0], none.power[0])
    assert json.loads(many.to_json(orient="records"))[0]["p_tie"] == 0.79
