"""``hepower fit`` of ratings (gaussian or ordinal) refuses the options of head-to-head judgments instead of
ignoring them: one line, exit 2, no parameter file (``--system-a`` was silently ignored)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from humaneval_power.cli import main

#: each option of judgments, with a value other than its default
JUDGMENT_ONLY = {"--system-a": "a", "--system-b": "b", "--outcome": "won", "--ties": "split", "--tie-values": "both"}


@pytest.fixture(scope="module")
def ratings(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(5)
    rows = [(f"w{w}", f"i{i}", s, int(rng.integers(1, 6))) for w in range(4) for i in range(6) for s in "AB"]
    path = tmp_path_factory.mktemp("fit_judgment_options") / "ratings.csv"
    pd.DataFrame(rows, columns=["worker", "item", "system", "score"]).to_csv(path, index=False)
    return path


@pytest.mark.parametrize("family", ["gaussian", "ordinal"])
@pytest.mark.parametrize("flag", list(JUDGMENT_ONLY))
def test_judgment_options_are_refused_for_ratings(flag: str, family: str, ratings: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "params.json"
    assert main(["fit", str(ratings), "--family", family, flag, JUDGMENT_ONLY[flag], "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{flag}: only for --family binomial" in err[0], err
    assert not out.exists()
