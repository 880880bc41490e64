"""What `hepower fit` writes and prints (issue 17.6, 17.7): strict-JSON parameter files, singular fits named."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from humaneval_power.cli import main
from humaneval_power.fitting.model import fit_pilot
from humaneval_power.fitting.ratings import read_ratings
from humaneval_power.fitting.types import Design, RawFit, unreliable_wald
from humaneval_power.params import load_params, read_params_doc
from tests.crowd import crowd_ratings


def _strict(text: str) -> dict:
    def refuse(name: str) -> None:
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def test_parameter_file_is_strict_json_and_reads_back(tmp_path: Path) -> None:
    """A zero SD has a Wald interval [0, NaN]: the file says null there (R's jsonlite rejects NaN)."""
    frame = crowd_ratings(items=20, systems=3, raters=2, pool=6, seed=8, sd_worker_system=0.0, sd_item_system=0.0)
    src = tmp_path / "r.csv"
    frame.to_csv(src, index=False)
    out = tmp_path / "p.json"
    assert main(["fit", str(src), "--backend", "statsmodels", "-o", str(out)]) == 0
    text = out.read_text()
    doc = _strict(text)
    assert "NaN" not in text
    slope = doc["comparisons"]["S01"]["provenance"]["intervals"]["sd_item_slope"]
    assert slope[0] == 0.0 and slope[1] is None
    params = load_params(out, "S01")
    assert params.sd_item_slope == 0.0 and read_params_doc(out, "S01")["provenance"]["intervals"]["method"] == "wald"


def _correlated_singular(seed: int) -> pd.DataFrame:
    """Three workers, correlated worker intercepts and slopes: a 2 x 2 covariance from three levels."""
    rng = np.random.default_rng(seed)
    rows = []
    u = rng.multivariate_normal([0, 0], [[0.09, 0.05], [0.05, 0.04]], 3)
    v = rng.normal(0, [0.3, 0.2], (30, 2))
    for w in range(3):
        for i in range(30):
            for s, x in (("A", -0.5), ("B", 0.5)):
                rows.append((f"w{w}", f"i{i}", s, 3 + 0.1 * x + u[w, 0] + v[i, 0] + (u[w, 1] + v[i, 1]) * x
                             + rng.normal(0, 0.5)))
    return pd.DataFrame(rows, columns=["worker", "item", "system", "score"])


@pytest.mark.r
def test_summary_names_a_singular_correlated_fit(lme4_backend) -> None:
    """lme4 calls the fit singular (a worker correlation at -1 or +1) though no SD is at zero: the summary said
    nothing of it (only the provenance had singular: true)."""
    fit = fit_pilot(read_ratings(_correlated_singular(4)), "lme4", correlated=True, intervals="none")
    assert fit.raw.singular and not fit.zero_components
    assert abs(fit.raw.correlations.cor).max() > 0.999
    assert "singular fit: no SD is at zero, but a random-effect covariance matrix is degenerate" in fit.summary()


def test_wald_intervals_spanning_orders_of_magnitude_are_not_reported() -> None:
    """An SD near zero but above lme4's tolerance: its log-SD delta-method interval (e.g. [3.9e-6, 21.2]) is
    meaningless; it is dropped, and the warning gives it and points to profile intervals."""
    comp = pd.DataFrame({"group": ["worker", "item"], "term": ["(Intercept)", "(Intercept)"], "sd": [0.01, 0.3],
                         "lower": [3.9e-6, 0.2], "upper": [21.2, 0.45]})
    raw = RawFit("statsmodels", pd.DataFrame(), comp, pd.DataFrame(), 0.5, (0.45, 0.55), False, (), {})
    out = unreliable_wald(Design(("A", "B"), ("x",), "gaussian"), raw)
    assert math.isnan(out.components.lower[0]) and math.isnan(out.components.upper[0])
    assert out.components.lower[1] == 0.2 and out.sigma_interval == (0.45, 0.55)
    assert "worker intercept [3.9e-06, 21]" in out.warnings[-1] and "--intervals profile" in out.warnings[-1]
    assert unreliable_wald(Design(("A", "B"), ("x",), "gaussian"), out) is out  # nothing left to flag
