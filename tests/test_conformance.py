"""One conformance check that every scenario class, design, analysis and backend passes (scikit-learn style).

The classes are discovered, not listed: every scenario class defined in
``humaneval_power.scenarios`` (and the assurance cell), every design class in
``humaneval_power.designs`` and every registered analysis
(``humaneval_power.analyses.REGISTRY``) must be exercised by a cell in
:data:`CELLS`; a new class without one fails :func:`test_every_class_is_covered`.
Every registered fitting backend (``fitting.registry.REGISTRY``) and completed-study
backend (``completed_study.backends.REGISTRY``) is checked by its entry: it resolves,
what it declares is consistent, and its refusals are one line.

A scenario cell must (1) carry its effect in its record, (2) draw its random
stream independently of the effect (common random numbers across effects),
(3) give results that do not depend on how its chunks are scheduled (jobs) or
which other cells run beside it, and (4) where it has both an exact and a
simulated method, agree between them within Monte-Carlo error. Its analysis
satisfies the :class:`~humaneval_power.analyses.Analysis` protocol and its
design the :class:`~humaneval_power.designs.Design` contract.
"""
from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
import pytest

import humaneval_power.scenarios
from humaneval_power import assurance, designs
from humaneval_power.analyses import (
    RATING_MODELS,
    REGISTRY,
    Analysis,
    CrossedSlopes,
    InvariantLMM,
    JudgmentGLMM,
    OrdinalCLMM,
    SlopesLMM,
)
from humaneval_power.assurance import Prior, apply_draws, assured
from humaneval_power.completed_study import backends as study_backends
from humaneval_power.designs import CrowdDesign, Layout, PilotDesign
from humaneval_power.engine import Scenario, run_cells
from humaneval_power.errors import InputError
from humaneval_power.executors import LocalProcesses
from humaneval_power.fitting import registry as fitting_registry
from humaneval_power.interface import choices_of
from humaneval_power.interface.commands import COMMANDS
from humaneval_power.ordinal_process import OrdinalProcess
from humaneval_power.params import H2HParams, get_preset
from humaneval_power.processes import InvariantProcess, SlopeProcess
from humaneval_power.registry import load
from humaneval_power.scenarios import crowd as crowd_module
from humaneval_power.scenarios.accuracy import McNemarScenario
from humaneval_power.scenarios.bleu import BleuScenario
from humaneval_power.scenarios.crossed import CrossedLikertScenario
from humaneval_power.scenarios.crowd import CrowdScenario, cell_factory
from humaneval_power.scenarios.f1 import F1Scenario
from humaneval_power.scenarios.headtohead import IndependentJudgments, MixedJudgments

from .conftest import mc_tolerance
from .crowd_pool import two_workers_fixture  # noqa: F401  (the fixture two_workers)

HIGH = get_preset("card2020-high")
INVARIANT = InvariantProcess(0.3, 0.15, 0.3, 0.15, 0.8, systems=3)
ORDINAL = OrdinalProcess((-1.0, 1.0), sd_worker=0.5, sd_worker_system=0.2, sd_item=0.5, sd_item_system=0.2)
#: a pilot: items 0-3, each rated under both systems by two of three workers
PILOT = PilotDesign.from_ratings(pd.DataFrame({"worker": [0, 1, 1, 2, 2, 0, 0, 1] * 2, "item": [0, 0, 1, 1, 2, 2, 3, 3] * 2,
                                               "system": ["A"] * 8 + ["B"] * 8}), items=8)

#: scenario name -> a cell with the given (positive) effect; simulated methods only; tiny designs
CELLS: dict[str, Callable[[float], Scenario]] = {
    "likert-fast": lambda e: CrossedLikertScenario(HIGH, 3, 30, e, "fast"),
    "likert-fast-card2020": lambda e: CrossedLikertScenario(HIGH, 4, 20, e, "fast", "card2020"),
    "likert-fast-assurance": lambda e: assured(lambda p: lambda e: CrossedLikertScenario(p, 3, 30, e, "fast"), HIGH,
                                               apply_draws(HIGH, Prior(("sd_item_slope=gamma:4,0.07",)).sample(3, 1)),
                                               200, 0, 0.8, "prior", jobs=1)(e),  # its own runs: in the process
    "crowd-invariant-baseline": lambda e: CrowdScenario(CrowdDesign(8, 6, 2, systems=3), INVARIANT,
                                                        InvariantLMM(compare="baseline", pair=(0, 2)), e),
    "crowd-slopes-random-missing": lambda e: CrowdScenario(CrowdDesign(8, 6, 2, assignment="random", missing=0.1),
                                                           SlopeProcess(HIGH), "slopes", e),
    "crowd-pilot": lambda e: CrowdScenario(PILOT, InvariantProcess(0.3, 0.15, 0.3, 0.15, 0.8),
                                                   InvariantLMM(), e),
    "crowd-ordinal-random": lambda e: CrowdScenario(CrowdDesign(6, 3, 2, assignment="random"), ORDINAL,
                                                    OrdinalCLMM.of(ORDINAL, test="t"), e),  # chunks: SMALL_CHUNKS
    "h2h-glmm-fast": lambda e: MixedJudgments(H2HParams(0.3, 0.3), 4, 6, 4 * e, per_item=3),
    "h2h-simulate": lambda e: IndependentJudgments(60, (1 + e) / 2 - 0.05, 0.1, "split", "simulate"),
    "mcnemar-simulate": lambda e: McNemarScenario(400, e / 4, 0.9, "simulate"),
    "bleu-saddlepoint": lambda e: BleuScenario(300, 4 * e, 0.2, 25.0, "saddlepoint"),
    "bleu-randomization": lambda e: BleuScenario(200, 4 * e, 0.2, 25.0, "randomization", 200),
}
#: cells whose chunks (of ``chunk_size`` studies) are too dear to run two of in full: the scheduling check runs them
#: at this many studies per chunk (the engine reads a cell's chunk size in the calling process only; the ordinal
#: cells' 200, ``scenarios.crowd.ORDINAL_CHUNK``, would be 207 studies fitted one by one, three times)
SMALL_CHUNKS = {"crowd-ordinal-random": 6}
#: a cell whose effect follows from its tables (no effect to vary): checked on its own
F1 = F1Scenario(300, 0.4, (0.1, 0.05, 0.15, 0.7), (0.8, 0.08, 0.07, 0.05), 200)


def _classes(module: Any, test: Callable[[type], bool]) -> set[type]:
    """The concrete classes ``module`` defines that pass ``test`` (protocols left out)."""
    return {c for _, c in inspect.getmembers(module, inspect.isclass)
            if c.__module__ == module.__name__ and not getattr(c, "_is_protocol", False) and test(c)}


def _is_scenario(cls: type) -> bool:
    return all(callable(getattr(cls, m, None)) for m in ("cell", "stream_key", "simulate", "exact"))


def _is_design(cls: type) -> bool:
    return all(callable(getattr(cls, m, None)) for m in ("draw", "record", "key", "counts"))


def discovered_scenarios() -> set[type]:
    """Every scenario class of the package: the scenario modules and the assurance cell."""
    found = _classes(assurance, _is_scenario)
    for info in pkgutil.iter_modules(humaneval_power.scenarios.__path__):
        found |= _classes(importlib.import_module(f"humaneval_power.scenarios.{info.name}"), _is_scenario)
    return found


def _parts(cell: Any) -> list[Any]:
    """The cell and the cells it wraps (an assurance cell's point-estimate cell and draws)."""
    inner = [cell.point, *cell.draws] if hasattr(cell, "draws") else []
    return [cell, *inner]


def test_every_class_is_covered() -> None:
    """Each discovered scenario class, design class and registered analysis has a conformance cell."""
    cells = [p for make in CELLS.values() for p in _parts(make(0.1))] + [F1]
    scenarios = {type(c) for c in cells}
    analyses = {type(c.analysis) for c in cells if hasattr(c, "analysis")}
    analyses |= {type(c.closed_form.analysis) for c in cells if getattr(c, "closed_form", None) is not None}
    used_designs = {type(c.design) for c in cells if isinstance(c, CrowdScenario)}
    assert discovered_scenarios() - scenarios == set(), "scenario classes without a conformance cell"
    assert set(REGISTRY.values()) - analyses == set(), "registered analyses without a conformance cell"
    assert _classes(designs, _is_design) - used_designs == set(), "design classes without a conformance cell"
    assert {CrowdScenario, MixedJudgments} <= scenarios


@pytest.mark.parametrize("name", sorted(CELLS))
def test_cell_carries_its_effect_and_its_stream_ignores_it(name: str) -> None:
    make = CELLS[name]
    a, b = make(0.1), make(0.2)
    assert a.cell()["effect"] == pytest.approx(a.effect) and b.cell()["effect"] == pytest.approx(b.effect)
    assert a.effect != b.effect and a.cell() != b.cell()
    assert a.stream_key() == b.stream_key()
    json.dumps(a.cell())


@pytest.mark.xdist_group("conformance_scheduling")  # one worker process: the pool (crowd_pool) starts once per CI run
@pytest.mark.parametrize("name", sorted(CELLS))
def test_results_do_not_depend_on_scheduling(name: str, monkeypatch: pytest.MonkeyPatch,
                                             two_workers: LocalProcesses) -> None:
    """jobs=1 vs two workers, alone vs beside other cells, chunk by chunk: identical records (over at least two
    chunks and a part chunk; a cell of :data:`SMALL_CHUNKS` at its small chunks: three chunks and a part)."""
    make = CELLS[name]
    if name in SMALL_CHUNKS:
        monkeypatch.setattr(crowd_module, "ORDINAL_CHUNK", SMALL_CHUNKS[name])
    cell = make(0.15)
    small = replace(cell, items=10) if isinstance(cell, CrossedLikertScenario) else cell
    n = 2 * small.chunk_size + 7 if small.chunk_size < 50 else min(301, small.chunk_size + 7)
    alone = run_cells([small], n, seed=5, jobs=1)[0].record()
    together = run_cells([make(0.3), small], n, seed=5, jobs=two_workers)[1].record()
    assert alone == together


@pytest.mark.xdist_group("conformance_scheduling")
def test_f1_scenario_conforms(two_workers: LocalProcesses) -> None:
    assert F1.cell()["effect"] == pytest.approx(F1.effect)
    alone = run_cells([F1], 120, seed=2, jobs=1)[0].record()
    assert alone == run_cells([F1, F1], 120, seed=2, jobs=two_workers)[1].record()


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_registered_analysis_follows_the_protocol(name: str) -> None:
    """Built by name with its defaults: the protocol's methods, a JSON record with its alpha, refusals of
    what it cannot do as InputError."""
    from humaneval_power.analyses import get_analysis

    analysis = get_analysis(name)
    assert isinstance(analysis, Analysis) and type(analysis) is REGISTRY.get(name) and analysis.name == name
    assert get_analysis(analysis) is analysis
    rec = analysis.record()
    assert rec["alpha"] == analysis.alpha and json.loads(json.dumps(rec)) == rec
    assert analysis.chunk_size >= 1
    analysis.check(2)
    with pytest.raises(InputError):
        get_analysis(name, tier="no-such-tier")


@pytest.mark.parametrize("design", [CrowdDesign(8, 6, 2, systems=3), CrowdDesign(8, 6, 2, assignment="random"),
                                    CrowdDesign(8, 4, 2, missing=0.2), PILOT], ids=repr)
def test_design_contract(design: Any) -> None:
    """``draw`` gives a shared Layout when ``fixed``, else per-study workers or a list of layouts, whose
    indices stay within the design's counts; record and key are JSON and stable."""
    rng = np.random.default_rng(0)
    drawn = design.draw(rng, 3)
    layouts = drawn if isinstance(drawn, list) else [drawn]
    assert design.fixed == (isinstance(drawn, Layout) and drawn.worker.ndim == 1)
    for lay in layouts:
        assert lay.n_systems == design.systems
        assert lay.item.max() < lay.n_items and lay.system.max() < lay.n_systems and lay.worker.max() < lay.n_workers
    json.dumps(design.record()) and json.dumps(design.key())
    assert design.key() == replace(design).key() and design.counts()["ratings"] > 0


#: (exact cell, simulated cell) pairs of the same design
PAIRS: dict[str, tuple[Scenario, Scenario]] = {
    "sign-test-drop": (IndependentJudgments(80, 0.6, 0.1, "drop", "exact"),
                       IndependentJudgments(80, 0.6, 0.1, "drop", "simulate")),
    "sign-test-split": (IndependentJudgments(80, 0.6, 0.1, "split", "exact"),
                        IndependentJudgments(80, 0.6, 0.1, "split", "simulate")),
    "mcnemar": (McNemarScenario(500, 0.03, 0.9, "exact"), McNemarScenario(500, 0.03, 0.9, "simulate")),
    "likert-westfall": (CrossedLikertScenario(get_preset("card2020-low").with_sds(
        sd_worker_intercept=0.3, sd_worker_slope=0.4, sd_item_intercept=0.3, sd_item_slope=0.4), 20, 20, 0.4,
        "analytic"), CrossedLikertScenario(get_preset("card2020-low").with_sds(
            sd_worker_intercept=0.3, sd_worker_slope=0.4, sd_item_intercept=0.3, sd_item_slope=0.4), 20, 20, 0.4,
            "fast")),
}


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_exact_and_simulated_power_agree(name: str) -> None:
    exact_cell, sim_cell = PAIRS[name]
    exact = exact_cell.exact()
    assert exact is not None and exact.n_sims == 0 and sim_cell.exact() is None
    n = 20_000
    sim = run_cells([sim_cell], n, seed=11)[0]
    assert abs(sim.power - exact.power) < mc_tolerance(exact.power, n), (sim.power, exact.power)


def test_closed_form_analyses_are_offered_by_the_slope_model_only() -> None:
    """The crossed cell's closed form is the slope model's own on a fully crossed two-system design."""
    crossed = CrowdDesign(10, 3, 3, assignment="crossed")
    assert SlopesLMM("fast", "card2020").closed_form(crossed, SlopeProcess(HIGH), None) == CrossedSlopes("fast", "card2020")
    assert SlopesLMM().closed_form(crossed, SlopeProcess(HIGH), None, sufficient=False) is None
    assert InvariantLMM().closed_form(crossed, SlopeProcess(HIGH), None) is None
    assert JudgmentGLMM().closed_form(crossed, SlopeProcess(HIGH), None) is None


def _one_line_refusal(call: Callable[[], Any], *expected: str) -> str:
    """The InputError message of ``call()``: one line, naming each of ``expected``."""
    with pytest.raises(InputError) as refused:
        call()
    message = str(refused.value)
    assert "\n" not in message and all(e in message for e in expected), message
    return message


def test_rating_models_are_the_analyses_users_choose_for_ratings() -> None:
    """A registered analysis is a rating model exactly when the Likert planner builds it by name for ratings of
    its kind, and the Likert commands' ``--model`` offers exactly the rating models and ``both``."""
    gaussian = get_preset("card2020-low").with_sds(sd_worker_intercept=0.3, sd_worker_slope=0.4,
                                                   sd_item_intercept=0.3, sd_item_slope=0.4)  # has an invariant form
    for name in REGISTRY:
        params = ORDINAL if getattr(REGISTRY.get(name), "ordinal", False) else gaussian
        if name in RATING_MODELS:
            assert cell_factory(params, model=name)(8, 6).analysis.name == name
            assert RATING_MODELS.get(name) is REGISTRY.get(name)
        else:
            _one_line_refusal(partial(cell_factory, params, model=name), name)
    _one_line_refusal(lambda: RATING_MODELS.get("crossed-slopes"), "unknown rating model", *RATING_MODELS)
    offered = [c for c in COMMANDS.values() if any(o.name == "model" for o in c.all_options())
               and c.path[0] == "likert"]
    assert offered and all(set(choices_of(c.option("model")) or ()) == {*RATING_MODELS, "both"} for c in offered)


@pytest.mark.parametrize("name", fitting_registry.REGISTRY.names())
def test_registered_fitting_backend_is_consistent(name: str) -> None:
    """Its fitters resolve (one per family it declares, none for the others), its interval methods are
    known and unique, and every refusal is one line."""
    backend = fitting_registry.REGISTRY.get(name)
    assert backend.name == name and set(backend.families) <= set(fitting_registry.FAMILIES)
    for family, methods in backend.intervals.items():
        assert methods and len(set(methods)) == len(methods)
        assert set(methods) <= set(fitting_registry.interval_methods())
        assert backend.resolve_intervals(family, None) == methods[0]
        _one_line_refusal(partial(backend.resolve_intervals, family, "no-such-method"), name, *methods)
    for family in set(fitting_registry.FAMILIES) - set(backend.families):
        _one_line_refusal(partial(backend.resolve_intervals, family, None), name, family)
    assert (backend.gaussian is not None) == ("gaussian" in backend.families)
    assert (backend.ordinal is not None) == ("ordinal" in backend.families)
    for where, fitter in ((backend.gaussian, backend.gaussian_fitter), (backend.ordinal, backend.ordinal_fitter)):
        if where is None:
            _one_line_refusal(fitter, name)
        else:
            assert callable(load(where)) and fitter() is load(where)


def test_fitting_registry_defaults_and_unknown_names() -> None:
    assert set(fitting_registry.DEFAULT_BACKENDS) == set(fitting_registry.FAMILIES)
    for family, name in fitting_registry.DEFAULT_BACKENDS.items():
        assert name in fitting_registry.backends_for(family) and fitting_registry.default_backend(family) == name
    _one_line_refusal(lambda: fitting_registry.REGISTRY.get("no-such-backend"), "unknown backend",
                      *fitting_registry.REGISTRY)


@pytest.mark.parametrize("name", study_backends.REGISTRY.names())
def test_registered_completed_study_backend_is_consistent(name: str) -> None:
    """A REML backend has a fitter and the texts naming its engine; a posterior one has neither a fitter nor
    Kenward-Roger nor the maximal structure; Kenward-Roger's limit refuses in one line and the estimate below
    it is a line of text."""
    backend = study_backends.get_backend(name)
    assert backend.name == name and backend.posterior == (backend.fit is None)
    if backend.posterior:
        assert backend.kenward_roger is None and not backend.maximal
    else:
        assert callable(backend.fit) and backend.methods_text and backend.report_text
    cost = backend.kenward_roger
    if cost is None:
        assert name not in study_backends.kenward_roger_limits()
        _one_line_refusal(lambda: study_backends.check_kenward_roger(100, 3, name), name)
        return
    assert study_backends.kenward_roger_limits()[name] == cost.max_ratings
    assert cost.max_ratings > 0 and cost.seconds_per_cube > 0 and cost.fixed_matrices >= 1
    assert "\n" not in study_backends.check_kenward_roger(cost.max_ratings, 3, name)
    _one_line_refusal(lambda: study_backends.check_kenward_roger(cost.max_ratings + 1, 3, name), "--df kenward-roger")


def test_completed_study_ordinal_backends_are_the_fitting_registrys() -> None:
    """The ordinal backends are the fitting registry's cumulative-link fitters (the default first), refused for
    Gaussian ratings in one line; the CLI's choices are the two lists, each name once."""
    assert study_backends.ORDINAL_BACKENDS[0] == fitting_registry.default_backend("ordinal")
    for name in study_backends.ORDINAL_BACKENDS:
        assert fitting_registry.REGISTRY.get(name).ordinal is not None and name not in study_backends.REGISTRY
        _one_line_refusal(partial(study_backends.get_backend, name), "--family ordinal", *study_backends.REGISTRY)
    assert study_backends.BACKENDS == (*study_backends.REGISTRY, *study_backends.ORDINAL_BACKENDS)
    assert len(set(study_backends.BACKENDS)) == len(study_backends.BACKENDS)
    _one_line_refusal(lambda: study_backends.get_backend("no-such-backend"), "unknown backend",
                      *study_backends.REGISTRY)
