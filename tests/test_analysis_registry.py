"""Analyses as plug-ins: found by name, accepted as names or instances, a new model registered in one line."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from humaneval_power.analyses import (
    REGISTRY,
    InvariantLMM,
    JudgmentGLMM,
    get_analysis,
    register,
)
from humaneval_power.designs import CrowdDesign
from humaneval_power.engine import run_cells
from humaneval_power.errors import InputError
from humaneval_power.params import H2HParams
from humaneval_power.processes import InvariantProcess
from humaneval_power.scenarios.crowd import CrowdScenario, cell_factory
from humaneval_power.scenarios.headtohead import MixedJudgments
from humaneval_power.scenarios.likert import likert_power

PROCESS = InvariantProcess(0.3, 0.15, 0.3, 0.15, 0.8, systems=3)


def test_an_unknown_name_is_refused_naming_the_choices() -> None:
    with pytest.raises(InputError, match="invariant"):
        get_analysis("no-such-model")


def test_a_name_and_the_instance_it_names_give_the_same_numbers() -> None:
    kw = {"systems": 3, "compare": "pairs", "n_sims": 40, "seed": 3, "ratings_per_item": 2}
    by_name = likert_power(PROCESS, 6, 8, 0.4, model="invariant", **kw)
    by_instance = likert_power(PROCESS, 6, 8, 0.4, model=InvariantLMM(compare="pairs", pair=(0, 2)), **kw)
    assert by_name.to_dict("records") == by_instance.to_dict("records")
    design = CrowdDesign(8, 6, 2, systems=3)
    assert CrowdScenario(design, PROCESS, "invariant", 0.4).analysis == InvariantLMM()
    assert MixedJudgments(H2HParams(0.3, 0.3), 4, 6, 0.5, analysis="judgment-glmm").analysis == JudgmentGLMM()


@dataclass(frozen=True)
class _Plugin(InvariantLMM):
    """A stand-in new model: the invariant LMM under another name (what a plug-in needs: a class, a line)."""

    name: ClassVar[str] = "test-plugin"


def test_a_registered_model_is_planned_with_by_name_without_other_changes() -> None:
    register(_Plugin)
    try:
        make = cell_factory(PROCESS, systems=3, model="test-plugin")
        cell = make(8, 6, 2, 1, 0.4)
        assert isinstance(cell.analysis, _Plugin) and cell.cell()["model"] == "test-plugin"
        ref = cell_factory(PROCESS, systems=3, model="invariant")(8, 6, 2, 1, 0.4)
        a, b = run_cells([cell], 30, seed=1)[0], run_cells([ref], 30, seed=1)[0]
        assert (a.power, a.mean_estimate) == (b.power, b.mean_estimate)
    finally:
        REGISTRY.unregister("test-plugin")


def test_options_an_analysis_does_not_have_are_refused() -> None:
    with pytest.raises(InputError, match="judgment-glmm analysis has no option adjust, compare"):
        cell_factory("card2020-high", model="judgment-glmm")
    with pytest.raises(InputError):
        get_analysis("judgment-glmm", test="satterthwaite")
    with pytest.raises(InputError, match="two systems"):
        CrowdScenario(CrowdDesign(8, 6, 2, systems=3), PROCESS, "slopes", 0.4)
