"""A parameter file fitted on several systems (shared SDs) is planned with its number of systems unless
--systems says otherwise, and the headline says how many (review of issue 23); CLI = API."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from humaneval_power import likert_power
from humaneval_power.cli import main
from humaneval_power.params import load_params, params_systems

RUN = ["--effect", "0.3", "--workers", "3", "--items", "12", "--sims", "10", "--jobs", "1", "--json"]


@pytest.fixture(scope="module")
def pilot(tmp_path_factory, data_dir) -> dict:
    """`hepower fit` of four systems' ratings (statsmodels): comparisons B, C, D vs A with shared SDs."""
    folder = tmp_path_factory.mktemp("pilot")
    frame = pd.read_csv(data_dir / "dialsummeval_expert" / "ratings.csv")
    frame = frame[(frame.dimension == "relevance") & frame.system.isin(list("ABCD"))]
    frame[["worker", "item", "system", "score"]].to_csv(folder / "r.csv", index=False)
    assert main(["fit", str(folder / "r.csv"), "--backend", "statsmodels", "-o", str(folder / "p.json")]) == 0
    return json.loads((folder / "p.json").read_text())


@pytest.mark.parametrize("kept", [1, 2, 3])
def test_the_default_systems_is_the_files_and_cli_equals_api(tmp_path: Path, pilot: dict, kept: int, capsys) -> None:
    doc = {**pilot, "comparisons": dict(list(pilot["comparisons"].items())[:kept])}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    expected = kept + 1
    assert params_systems(path) == expected
    capsys.readouterr()
    argv = ["likert", "power", "--params", str(path), *RUN]
    assert main(argv) == 0
    cli = pd.DataFrame(json.loads(capsys.readouterr().out))
    assert (cli["systems"] == expected).all()
    api = likert_power(load_params(path), 3, 12, 0.3, n_sims=10, jobs=1, systems=expected)
    assert cli["power"].tolist() == api["power"].tolist()
    assert main([*argv, "--systems", "2"]) == 0  # an explicit --systems wins
    assert (pd.DataFrame(json.loads(capsys.readouterr().out))["systems"] == 2).all()
    assert f"({expected} systems, shared SDs)" in load_params(path).name


def test_a_single_comparison_file_plans_two_systems(tmp_path: Path, pilot: dict) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps(pilot["comparisons"]["B"]))
    assert params_systems(path) is None
