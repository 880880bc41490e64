"""`hepower fit --family binomial` withholds the Wald test of a quasi-separated or degenerate comparison by
the rule `hepower analyze` uses (fitting.judgments.withheld_reason; review of issue 23)."""
from __future__ import annotations

import json
import math

import pytest

from humaneval_power.cli import main
from tests.test_separation import separated_judgments


@pytest.mark.r
@pytest.mark.slow  # R startup and five glmer fits: about 8 s
@pytest.mark.parametrize("ties", ["drop"])
def test_fit_withholds_exactly_the_pairs_analyze_withholds(tmp_path, capsys, lme4_backend, ties: str) -> None:
    from humaneval_power.completed_study import analyze_judgments

    frame = separated_judgments()
    path = tmp_path / "pairs.csv"
    frame.to_csv(path, index=False)
    assert main(["fit", str(path), "--family", "binomial", "--baseline", "A", "--ties", ties, "--json"]) == 0
    records = {r["system"]: r for r in json.loads(capsys.readouterr().out)}
    pairs = analyze_judgments(frame, worker="worker", item="item", baseline="A", ties=ties).pairs
    expected = {r.system: r.withheld_reason for r in pairs.itertuples() if r.versus == "A"}
    assert set(records) == set(expected) and any(expected.values())
    for system, reason in expected.items():
        rec = records[system]
        assert (rec.get("withheld_reason") or "") == reason
        assert (rec["effect_se"] is None and rec["p_value"] is None) == bool(reason)
        if not reason:
            assert math.isfinite(rec["effect_se"]) and 0 <= rec["p_value"] <= 1
    assert main(["fit", str(path), "--family", "binomial", "--baseline", "A", "--ties", ties]) == 0
    out = capsys.readouterr()
    line = next(x for x in out.out.splitlines() if x.strip().startswith("C "))
    assert line.split()[2:] == ["NaN", "inf", "NaN", "NaN"] and "withheld" in out.out
