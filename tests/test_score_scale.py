"""Scale invariance of the ratings fits (review of issues 23/24): the same ratings times 10^k give the same
df and p and the same estimates / 10^k, or a one-line refusal saying to rescale (the fits' tolerances are
absolute, so outside validation.SCORE_SPREAD the df drift: SD 1.5e-6 gave df 9.0 for 8.9, 1.5e-8 gave 900)."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from humaneval_power.cli import main
from humaneval_power.completed_study import analyze
from humaneval_power.errors import InputError
from humaneval_power.validation import SCORE_SPREAD


@pytest.fixture(scope="module")
def expert(data_dir) -> pd.DataFrame:
    frame = pd.read_csv(data_dir / "dialsummeval_expert" / "ratings.csv")
    return frame[(frame.dimension == "relevance") & frame.system.isin(list("ABC"))][["worker", "item", "system", "score"]]


def _numbers(frame: pd.DataFrame, k: int, backend: str) -> np.ndarray:
    scaled = frame.assign(score=frame.score * 10.0**k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = analyze(scaled, backend=backend, contrasts="baseline", baseline="A").contrasts
    return np.r_[c.estimate / 10.0**k, c.se / 10.0**k, c.df, c.p_value]


@pytest.fixture(scope="module")
def unit(expert) -> np.ndarray:
    return _numbers(expert, 0, "statsmodels")


def _accepted(frame: pd.DataFrame, k: int) -> bool:
    sd = float(np.std(frame.score)) * 10.0**k
    return SCORE_SPREAD[0] <= sd <= SCORE_SPREAD[1]


@pytest.mark.parametrize("k", range(-12, 13))
def test_every_accepted_scale_gives_the_unit_scale_answer(expert, unit, k: int) -> None:
    if _accepted(expert, k):
        np.testing.assert_allclose(_numbers(expert, k, "statsmodels"), unit, rtol=1e-6)
    else:
        with pytest.raises(InputError, match="by a power of ten"):
            _numbers(expert, k, "statsmodels")


@pytest.mark.r
def test_lme4_at_the_edges_of_the_accepted_scales(expert, unit, lme4_backend) -> None:
    """lme4's optimiser agrees with the no-R fit to about 2e-3 at any moderate scale; the edges do no worse."""
    edges = [k for k in range(-12, 13) if _accepted(expert, k)]
    for k in (edges[0], edges[-1]):
        np.testing.assert_allclose(_numbers(expert, k, "lme4"), unit, rtol=5e-3)


@pytest.mark.parametrize("k", [-150, -300, 60])
def test_the_cli_refuses_a_tiny_or_huge_scale_in_one_line(tmp_path, expert, k: int, capsys) -> None:
    path = tmp_path / "r.csv"
    expert.assign(score=expert.score * 10.0**k).to_csv(path, index=False)
    for command in (["analyze", str(path), "--backend", "statsmodels"], ["fit", str(path)]):
        assert main(command) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and ("power of ten" in err or "overflow" in err)
