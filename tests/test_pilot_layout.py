"""Planning from a pilot's layout with repeated ratings (issue 23, item 2): the duplicates policy of
`fit`/`analyze` (refuse by default, average, keep) and the layout's true k in the records."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from humaneval_power.cli import main
from humaneval_power.designs import PilotDesign
from humaneval_power.errors import InputError
from humaneval_power.scenarios.likert import likert_power


def _pilot(repeats: int = 2) -> pd.DataFrame:
    """12 items x 2 systems, each output rated by 3 distinct workers of 6; the first ``repeats``
    workers rate every output they see twice."""
    rows = []
    for i in range(12):
        for s in ("A", "B"):
            for p in range(3):
                w = (i * 3 + p + (s == "B")) % 6
                rows += [(f"w{w}", f"i{i}", s, 3.0)] * (2 if w < repeats else 1)
    return pd.DataFrame(rows, columns=["worker", "item", "system", "score"])


def test_repeats_are_refused_by_default_and_averaged_or_kept_on_request() -> None:
    frame = _pilot()
    with pytest.raises(InputError, match=r"share a .worker, item, system.*--duplicates"):
        PilotDesign.from_ratings(frame)
    avg = PilotDesign.from_ratings(frame, duplicates="average")
    rec = avg.record()
    assert rec["ratings_per_item"] == 3 and "ratings_per_output" not in rec  # the pilot's true k
    assert avg.draw(np.random.default_rng(0), 1).size == 12 * 2 * 3
    keep = PilotDesign.from_ratings(frame, duplicates="keep").record()
    assert keep["ratings_per_item"] == 3 and keep["ratings_per_output"] == round(len(frame) / 24, 3) > 3
    assert PilotDesign.from_ratings(_pilot(repeats=0)).record()["ratings_per_item"] == 3


def test_cli_and_api_plan_the_same_averaged_layout(tmp_path, capsys) -> None:
    path = tmp_path / "pilot.csv"
    _pilot().to_csv(path, index=False)
    args = ["likert", "power", "--preset", "card2020-high", "--design-from", str(path), "--effect", "0.3",
            "--sims", "40", "--seed", "3", "--jobs", "1"]
    assert main(args + ["--json"]) == 2
    assert "--duplicates average" in capsys.readouterr().err
    assert main(args + ["--duplicates", "average", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)[0]
    design = PilotDesign.from_ratings(_pilot(), duplicates="average", source=str(path))
    api = likert_power("card2020-high", 0, 12, 0.3, design_from=design, n_sims=40, seed=3, jobs=1).iloc[0]
    assert cli["ratings_per_item"] == api.ratings_per_item == 3
    assert cli["power"] == api.power
    assert main(["likert", "power", "--preset", "card2020-high", "--duplicates", "keep", "--effect", "0.3"]) == 2


def test_real_crowd_ratings_of_several_dimensions_are_repeats_unless_filtered(data_dir) -> None:
    """The DialSummEval AMT ratings hold four dimensions per (worker, item, system): planning from the
    whole file would count them as repeated ratings; one dimension has none."""
    frame = pd.read_csv(data_dir / "dialsummeval_amt" / "ratings.csv")
    with pytest.raises(InputError, match="share a"):
        PilotDesign.from_ratings(frame)
    one = frame[frame.dimension == frame.dimension.iloc[0]]
    k = PilotDesign.from_ratings(one).record()["ratings_per_item"]
    averaged = PilotDesign.from_ratings(frame, duplicates="average").record()
    assert averaged["ratings_per_item"] == k and "ratings_per_output" not in averaged
    assert PilotDesign.from_ratings(frame, duplicates="keep").record()["ratings_per_output"] == pytest.approx(
        k * frame.dimension.nunique(), rel=1e-3)
