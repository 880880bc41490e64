"""Crowd designs, costs and the Likert planner over any design (issue 13)."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from humaneval_power.analyses import SlopesLMM
from humaneval_power.cli import main
from humaneval_power.designs import Costs, CrowdDesign, PilotDesign
from humaneval_power.engine import run_cells
from humaneval_power.errors import InputError
from humaneval_power.multiplicity import adjust_pvalues
from humaneval_power.params import get_preset
from humaneval_power.processes import InvariantProcess, SlopeProcess, system_means
from humaneval_power.scenarios.crossed import CrossedLikertScenario
from humaneval_power.scenarios.crowd import CrowdScenario
from humaneval_power.scenarios.likert import likert_budget, likert_power, likert_sample_size

from .conftest import mc_tolerance

HIGH = get_preset("card2020-high")
INVARIANT = InvariantProcess(0.3, 0.15, 0.3, 0.15, 0.8)


def _pairs(lay) -> pd.DataFrame:
    return pd.DataFrame({"w": np.asarray(lay.worker).ravel(), "i": lay.item, "s": lay.system})


@pytest.mark.parametrize("presentation", ["within", "between"])
def test_balanced_designs_give_k_distinct_workers_per_unit_and_even_workloads(presentation: str) -> None:
    d = CrowdDesign(items=30, workers=7, ratings_per_item=3, systems=3, presentation=presentation)
    lay = d.draw(np.random.default_rng(0), 1)
    df = _pairs(lay)
    unit = ["i"] if presentation == "within" else ["i", "s"]
    assert (df.groupby(unit).w.nunique() == 3).all()
    assert len(df) == 30 * 3 * 3 == d.counts()["ratings"]
    if presentation == "within":  # each worker rates every system of the items they see
        assert (df.groupby(["i", "w"]).s.nunique() == 3).all()
    load = df.groupby("w").size()
    assert load.max() - load.min() <= 3 * (3 if presentation == "within" else 1)


def test_random_assignment_draws_anew_per_study_and_hits_share_workers() -> None:
    d = CrowdDesign(items=40, workers=10, ratings_per_item=2, assignment="random", items_per_hit=4)
    lay = d.draw(np.random.default_rng(1), 5)
    assert lay.worker.shape == (5, lay.size)
    assert not (lay.worker[0] == lay.worker[1]).all()
    for j in range(5):
        df = pd.DataFrame({"w": lay.worker[j], "i": lay.item})
        assert (df.groupby("i").w.nunique() == 2).all()
        hit_workers = df.assign(h=df.i // 4).groupby("h").w.nunique()
        assert (hit_workers == 2).all()  # a HIT is done by the same k workers
    assert d.hits == 10 and d.counts()["assignments"] == 20


def test_skewed_workloads_follow_their_weights() -> None:
    weights = (10.0,) + (1.0,) * 9
    d = CrowdDesign(items=2000, workers=10, ratings_per_item=1, assignment="random", workload=weights)
    lay = d.draw(np.random.default_rng(2), 1)
    share = np.mean(lay.worker[0] == 0) / 2  # two systems per item
    assert share * 2 == pytest.approx(10 / 19, abs=3.5 * math.sqrt(0.25 / 2000))


def test_missing_ratings_are_dropped_at_the_rate() -> None:
    d = CrowdDesign(items=500, workers=5, ratings_per_item=2, missing=0.2)
    lays = d.draw(np.random.default_rng(3), 4)
    kept = np.mean([lay.size / 2000 for lay in lays])
    assert kept == pytest.approx(0.8, abs=3.5 * math.sqrt(0.16 / 8000))


def test_pilot_design_is_scaled_to_new_items() -> None:
    frame = pd.DataFrame({"worker": ["a", "b", "a", "c", "b", "c"], "item": [1, 1, 2, 2, 3, 3],
                          "system": ["A", "B", "B", "A", "A", "B"]})
    pilot = PilotDesign.from_ratings(frame, items=7)
    lay = pilot.draw(np.random.default_rng(0), 1)
    assert lay.size == 14 and lay.n_items == 7 and lay.item.max() == 6
    assert lay.worker[:6].tolist() == lay.worker[6:12].tolist()
    with pytest.raises(InputError, match="connect"):
        PilotDesign.from_ratings(pd.DataFrame({"worker": ["a", "b"], "item": [1, 2], "system": ["A", "B"]}))


def test_costs() -> None:
    d = CrowdDesign(items=100, workers=20, ratings_per_item=3, systems=2, items_per_hit=10)
    c = Costs(per_rating=0.1, per_hit=0.5, fee=0.2, per_worker=2.0)
    # 600 ratings, 10 HITs x 3 workers = 30 assignments, 20 workers used
    assert c.of(d) == pytest.approx((60 + 15) * 1.2 + 40)
    with pytest.raises(InputError):
        Costs(per_rating=-1)


def test_system_means_and_holm() -> None:
    assert system_means(4, 0.3, (0, 3), None).tolist() == pytest.approx([0, 0.1, 0.2, 0.3])
    assert system_means(3, 0.3, (2, 0), None).tolist() == pytest.approx([0, -0.15, -0.3])
    p = np.array([[0.01, 0.04, 0.03], [0.5, 0.001, 0.02]])
    holm = adjust_pvalues(p, "holm")
    assert holm[0].tolist() == pytest.approx([0.03, 0.06, 0.06])
    assert holm[1].tolist() == pytest.approx([0.5, 0.003, 0.04])


#: Card et al. Fig. 6 cells (high variance, 3 workers, 100 items; effect = 2 x their diff)
FIG6 = [0.1, 0.2, 0.3, 0.4]


def test_crossed_batched_fits_equal_the_closed_form_tier_on_fig6_cells() -> None:
    """The full-data batched fit of a crossed design vs the sufficient-statistics tier: same power
    within Monte-Carlo error (two independent runs: the SE of a difference). The four full-data cells run in
    one process: their fits at effect 0 are made once and serve every effect (``CrowdScenario.simulate``), as
    in a user's sweep; each cell's studies are those it has alone (conformance)."""
    n = 600
    analysis = SlopesLMM("fast", "card2020")
    design = CrowdDesign(items=100, workers=3, ratings_per_item=3, assignment="crossed")
    full = [CrowdScenario(design, SlopeProcess(HIGH), analysis, effect, sufficient=False) for effect in FIG6]
    assert all(c.closed_form is None for c in full)
    closed = [CrossedLikertScenario(HIGH, 3, 100, effect, "fast", "card2020") for effect in FIG6]
    for effect, a, b in zip(FIG6, run_cells(full, n, seed=4, jobs=1), run_cells(closed, 20_000, seed=4, jobs=1)):
        se = math.sqrt(b.power * (1 - b.power) * (1 / n + 1 / 20_000))
        assert abs(a.power - b.power) < 3.5 * max(se, 1e-3), (effect, a.power, b.power)


def test_crossed_designs_use_the_closed_form_and_crowd_designs_the_batched_fits() -> None:
    t = likert_power(HIGH, 3, 100, 0.4, test="card2020", n_sims=2000, seed=1)
    ref = run_cells([CrossedLikertScenario(HIGH, 3, 100, 0.4, "fast", "card2020")], 2000, seed=1)[0]
    assert t.power[0] == ref.power and t.assignment[0] == "crossed" and t.ratings_per_item[0] == 3
    with pytest.raises(InputError, match="crossed"):
        likert_power(HIGH, 10, 100, 0.4, ratings_per_item=3, method="analytic")


def test_null_rejection_rate_is_reported_per_design() -> None:
    """With no effect, power is the Type-I error of the test on that design (Satterthwaite is
    slightly anti-conservative with few workers; the rate must be near alpha, not near 0 or 1)."""
    n = 400
    for k, presentation in ((2, "within"), (3, "between")):
        t = likert_power(INVARIANT, 12, 60, 0.0, ratings_per_item=k, presentation=presentation, n_sims=n, seed=5,
                         jobs=1)
        assert t.power[0] <= 0.05 + mc_tolerance(0.08, n) and t.power[0] >= 0.05 - mc_tolerance(0.05, n)
        assert t.n_failed[0] == 0


def test_several_systems_report_the_power_to_detect_every_difference() -> None:
    t = likert_power(INVARIANT, 20, 100, 0.5, ratings_per_item=3, systems=3, compare="baseline", n_sims=200,
                     seed=2)
    assert {"power_all", "compare", "adjust"} <= set(t.columns)
    assert t.power_all[0] <= t.power[0] + 1e-12  # every difference found implies the pair found


@pytest.mark.slow
def test_sample_size_and_budget_of_a_crowd_design() -> None:
    """The size search on a 20-worker crowd design attains the target inside its interval; the budget search's
    cheapest design reaches it and every cheaper one does not. (Effect 0.5 at 100 studies per step: the search
    logic is the same at 20 items as at 60, and the steps' batched REML fits were the test's time.)"""
    r = likert_sample_size(INVARIANT, 0.5, workers=20, ratings_per_item=3, n_sims=100, seed=1, jobs=1)
    assert r.attainable and r.low <= r.value <= (r.high or r.value) and r.at.power >= 0.8
    table, best = likert_budget(HIGH, 0.3, [50, 100], [5, 10], [1, 2], costs=Costs(per_rating=0.1), n_sims=200,
                                seed=1, jobs=1)
    assert best.attainable and best.at.power >= 0.8
    cheaper = table[table.cost < best.value]
    assert (cheaper.power < 0.8).all() and table.cost.is_monotonic_increasing


@pytest.mark.parametrize("argv", [
    ["likert", "power", "--workers", "3", "--ratings-per-item", "5", "--effect", "0.2"],
    ["likert", "power", "--workers", "3", "--ratings-per-item", "0", "--effect", "0.2"],
    ["likert", "power", "--workers", "3", "--items", "0", "--effect", "0.2"],
    ["likert", "power", "--workers", "9", "--ratings-per-item", "3", "--effect", "0.2", "--cost-per-rating", "-1"],
    ["likert", "budget", "--items", "50", "--workers", "5", "--ratings-per-item", "2", "--effect", "0.2",
     "--cost-per-rating", "1", "--budget", "0.5"],
    ["likert", "power", "--workers", "9", "--ratings-per-item", "3", "--assignment", "cyclic", "--effect", "0.2"],
    ["likert", "power", "--workers", "9", "--ratings-per-item", "3", "--presentation", "mixed", "--effect", "0.2"],
    ["likert", "power", "--design-from", "DESIGN", "--effect", "0.2"],
    ["likert", "power", "--design-from", "NOOVERLAP", "--effect", "0.2"],
    ["likert", "power", "--workers", "9", "--ratings-per-item", "3", "--systems", "3", "--effect", "0.2"],
])
def test_bad_crowd_input_is_one_line_exit_2(argv: list[str], tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "design.csv"
    bad.write_text("this is not, a ratings table\n\"unterminated")
    none = tmp_path / "none.csv"
    none.write_text("worker,item,system\na,1,A\nb,2,B\n")
    argv = [{"DESIGN": str(bad), "NOOVERLAP": str(none)}.get(a, a) for a in argv]
    out = tmp_path / "out.csv"
    assert main(argv + ["--sims", "10", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]
    assert not out.exists()


def test_cli_crowd_power_records_carry_the_design(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["likert", "power", "--workers", "15", "--ratings-per-item", "3", "--items", "100", "--effect", "0.3",
                 "--cost-per-rating", "0.1", "--sims", "100", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)[0]
    for key in ("items", "workers", "ratings_per_item", "assignment", "presentation", "systems", "cost", "power",
                "ci_low", "ci_high", "type_s", "type_m", "n_sims", "n_failed", "n_singular", "method", "test"):
        assert key in rec, key
    assert rec["cost"] == pytest.approx(100 * 3 * 2 * 0.1)


@pytest.mark.slow
@pytest.mark.r
@pytest.mark.parametrize("design", [
    {"workers": 12, "ratings_per_item": 2, "presentation": "within"},
    {"workers": 12, "ratings_per_item": 3, "presentation": "between", "assignment": "random"},
    {"workers": 8, "ratings_per_item": 2, "presentation": "between", "systems": 3},
])
def test_fast_tier_power_equals_lme4_refits_on_sparse_designs(design: dict, lme4_backend) -> None:
    """Power of the batched fast tier and of lme4 + lmerTest refits agree within Monte-Carlo error (the
    tiers chunk their studies differently, so they see different simulated studies: the tolerance is
    that of a difference of two independent estimates); with no effect, the rejection rate is
    reported per design by both."""
    n = 60
    for effect in (0.0, 0.4):
        fast = likert_power(INVARIANT, items=40, effect=effect, n_sims=n, seed=3, jobs=1, **design)
        ref = likert_power(INVARIANT, items=40, effect=effect, n_sims=n, seed=3, jobs=1, method="lme4", **design)
        assert ref.n_failed[0] == 0 and fast.n_failed[0] == 0
        p = (fast.power[0] + ref.power[0]) / 2
        assert abs(fast.power[0] - ref.power[0]) <= math.sqrt(2) * mc_tolerance(p, n), (effect, fast.power[0],
                                                                                         ref.power[0])


@pytest.mark.slow
def test_amt_pilot_example_runs_end_to_end(data_dir, tmp_path) -> None:
    """The README's real-data crowd example: fit the DialSummEval AMT pilot, the sensitivity and
    Type-I error of its own design, the cheapest new study and its frontier plot (in one process: results do
    not depend on jobs; with R loaded a pool's workers are spawned and import the package anew)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root), "HEPOWER_DATA": str(data_dir)}
    run = subprocess.run([sys.executable, str(root / "examples" / "plan_crowd_amt.py"), "--sims", "60", "--jobs", "1"],
                         cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "sensitivity: smallest effect" in run.stdout and "Type-I error" in run.stdout
    assert "cheapest reaching 80% power" in run.stdout or "not attainable" in run.stdout
    assert (tmp_path / "out" / "crowd_frontier.png").stat().st_size > 10_000


def test_design_file_sets_the_design_and_the_command_line_wins(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    design = tmp_path / "design.json"
    design.write_text(json.dumps({"items": 80, "workers": 12, "ratings_per_item": 2, "presentation": "between"}))
    assert main(["likert", "power", "--design", str(design), "--effect", "0.3", "--sims", "50", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)[0]
    assert (rec["items"], rec["workers"], rec["ratings_per_item"], rec["presentation"]) == (80, 12, 2, "between")
    assert main(["likert", "power", "--design", str(design), "--items", "40", "--effect", "0.3", "--sims", "50",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["items"] == 40
    for text in ('{"items": 12', '{"itemz": 12}', "[1, 2]"):
        design.write_text(text)
        assert main(["likert", "power", "--design", str(design), "--effect", "0.3", "--sims", "50"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(design) in err[0]
