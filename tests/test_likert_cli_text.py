"""`likert budget` without a search space (issue 23, item 11) and what `likert mde` says it computed
(item 10)."""
from __future__ import annotations

import json

import pytest

from humaneval_power.cli import main
from humaneval_power.designs import (
    BUDGET_ITEMS,
    BUDGET_RATINGS_PER_ITEM,
    BUDGET_WORKERS,
    Costs,
)
from humaneval_power.planning import ABOVE
from humaneval_power.scenarios.likert import SETTLED, likert_budget


def test_budget_has_a_default_search_space_stated_in_its_help(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["likert", "budget", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for grid in (BUDGET_ITEMS, BUDGET_WORKERS, BUDGET_RATINGS_PER_ITEM):
        assert ", ".join(map(str, grid)) in text
    args = ["likert", "budget", "--preset", "card2020-high", "--effect", "0.6", "--cost-per-rating", "0.12",
            "--sims", "60", "--seed", "2", "--jobs", "1", "--json"]
    assert main(args) == 0
    cli = json.loads(capsys.readouterr().out)[0]
    table, api = likert_budget("card2020-high", 0.6, costs=Costs(per_rating=0.12), n_sims=60, seed=2, jobs=1)
    assert cli["value"] == api.value and api.attainable
    # of the designs costing the same and differing only in the pool, only the largest pool is evaluated
    assert not table.duplicated(["cost", "items", "ratings_per_item"]).any()
    assert set(table.workers) <= set(BUDGET_WORKERS)
    assert main(args[:-1] + ["--budget", "1"]) == 2  # no design within the budget


def test_mde_text_names_the_pair_scale_adjustment_and_design(capsys) -> None:
    assert main(["likert", "mde", "--preset", "card2020-low", "--workers", "10", "--items", "135",
                 "--method", "analytic"]) == 0
    out = capsys.readouterr().out
    assert "system 2 - system 1 of 2" in out and "[0, 1] scale" in out and "satterthwaite test at alpha 0.05" in out
    assert "design: 135 items, 10 workers, 10 per item, within, crossed assignment" in out
    assert "smallest effect: 0.09991" in out
    assert main(["likert", "mde", "--sd-worker", "0.3", "--sd-worker-system", "0.1", "--sd-item", "0.2",
                 "--sd-item-system", "0.1", "--sd-residual", "0.6", "--systems", "3", "--compare", "pairs",
                 "--adjust", "bonferroni", "--workers", "12", "--items", "40", "--ratings-per-item", "3",
                 "--presentation", "between", "--sims", "60", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "system 3 - system 1 of 3" in out and "(all pairs, bonferroni-adjusted)" in out
    assert "40 items, 12 workers, 3 per output, between, balanced assignment" in out


@pytest.mark.slow
def test_budget_designs_are_screened_and_the_answer_is_settled_as_reaching_the_target() -> None:
    """Designs cheaper than the answer are settled by the analytic screen or sequential Monte Carlo (an upper
    bound below the target); the answer by a full run or a lower bound within Monte-Carlo error of the target."""
    table, r = likert_budget("card2020-high", 0.2, items=[10, 20, 40, 80, 160], workers=[30], ratings_per_item=[2],
                             costs=Costs(per_rating=1.0), n_sims=500, seed=4, jobs=1)
    early = table[(table.cost < r.value) & (table.settled != "full")]
    assert len(early) >= 1 and (early.ci_high < 0.8).all()
    assert r.attainable and r.at.extra["settled"] in ("full", SETTLED[ABOVE]) and r.at.ci_high >= 0.8
    assert (table.cost.diff().dropna() >= 0).all()  # in order of cost
