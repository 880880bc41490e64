"""Refusals that name the actual problem (review of issue 24): unknown or repeated --pilot-systems, and a
read-only `store show` that does not suggest a --store option it does not have."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from humaneval_power.cli import main
from humaneval_power.designs import PilotDesign
from humaneval_power.errors import InputError

PILOT = pd.DataFrame({"worker": [1, 1, 1, 2, 2, 2], "item": [1, 1, 1, 2, 2, 2], "system": list("ABCABC")})


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(list("ABCXYZ")), min_size=1, max_size=4))
def test_pilot_systems_refused_for_what_is_wrong(picked: list[str]) -> None:
    unknown = sorted(set(picked) - set("ABC"))
    distinct = len(set(picked)) == len(picked) >= 2
    if distinct and not unknown:
        assert PilotDesign.from_ratings(PILOT, systems=picked).systems == len(picked)
        return
    with pytest.raises(InputError) as err:
        PilotDesign.from_ratings(PILOT, systems=picked)
    text = str(err.value)
    assert ("distinct systems" in text) if not distinct else (
        "no system" in text and all(u in text for u in unknown) and "have A, B, C" in text)


def test_store_show_of_a_non_store_does_not_suggest_another_store(tmp_path: Path, capsys) -> None:
    path = tmp_path / "small.csv"
    path.write_text("a,b\n1,2\n")
    assert main(["store", "show", str(path)]) == 2
    err = capsys.readouterr().err
    assert "not a hepower result store" in err and "give another --store" not in err
