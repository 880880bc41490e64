"""The Likert cell of any design: a design x a data-generating process x an analysis, and its cost.

:class:`CrowdScenario` composes the three parts the planner keeps apart —
:mod:`~humaneval_power.designs` (who rates what), :mod:`~humaneval_power.processes`
(what a rating is) and :mod:`~humaneval_power.analyses` (model, tier, test,
contrasts) — into one engine cell, asking the analysis (never reading its
fields). Where the analysis names a closed form for the design (Card et al.'s
slope model on a fully crossed two-system design), the cell is computed by the
closed-form cell of :mod:`.crossed` (sufficient statistics; ``analytic`` and
``statsmodels`` too); every other design is simulated in full and fitted by the
analysis. :func:`cell_factory` binds everything but the design sizes and the
effect, for :mod:`humaneval_power.planning`.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from ..analyses import RATING_MODELS, Analysis, CrossedSlopes, get_analysis
from ..analyses.crossed import TIERS as GAUSSIAN_TIERS
from ..analyses.ordinal import TIERS as ORDINAL_TIERS
from ..designs import Costs, CrowdDesign, Design, Layout, PilotDesign
from ..engine import PowerResult, StudyOutcomes
from ..errors import InputError
from ..fitting.clmm import BARTLETT_DRAWS
from ..ordinal_process import ORDINAL_TESTS, OrdinalProcess
from ..params import LikertParams
from ..processes import InvariantProcess, Process, SlopeProcess, system_means
from ..significance.coef_test import COEFFICIENT_TESTS
from ..validation import check_number
from .crossed import CrossedLikertScenario

#: the analyses of the planner (``model``): the registered rating models, and ``both``: the ordinal CLMM and the
#: linear (coding-invariant) LMM of ordinal ratings on the same simulated studies
MODELS = (*RATING_MODELS.names(), "both")
BOTH = ("ordinal", "invariant")  #: the analyses of ``model="both"``, in the order of its records
#: how sentences name the analyses of ``both``
ANALYSIS_LABELS = {"ordinal": "ordinal analysis", "invariant": "linear analysis"}
#: the planner's methods (tiers) and tests, of every analysis: each analysis takes its own (``check_options``)
METHODS = (*GAUSSIAN_TIERS, *ORDINAL_TIERS[1:])
TESTS = (*COEFFICIENT_TESTS, *(t for t in ORDINAL_TESTS if t not in COEFFICIENT_TESTS))
#: studies per chunk of every cell of ordinal ratings, whatever the analysis and test: the chunks' random streams
#: then give the ordinal and the linear analysis (and the fast and clmm tiers) the same simulated studies; the
#: chunk of ``--test bartlett``, whose studies pool their bootstrap draws into one Bartlett factor
ORDINAL_CHUNK = BARTLETT_DRAWS


def analyses_of(model: Any) -> tuple[Any, ...]:
    """The analyses ``model`` names: both of :data:`BOTH` for ``"both"``, else ``model`` itself."""
    return BOTH if model == "both" else (model,)


def check_options(name: str, method: str, test: str) -> None:
    """Refuse (InputError, one line) a method or test of another analysis than ``name``'s: ``clmm`` and ``lrt``
    are the ordinal analysis's; ``analytic``, ``lme4``, ``statsmodels`` and ``card2020`` the linear ones'."""
    tiers, tests = (ORDINAL_TIERS, ("satterthwaite", *ORDINAL_TESTS)) if name == "ordinal" else (
        GAUSSIAN_TIERS, COEFFICIENT_TESTS)
    for what, value, ok in (("method", method, tiers), ("test", test, tests)):
        if value not in ok and value in (METHODS if what == "method" else TESTS):
            raise InputError(f"--{what} {value} is not a {what} of the {name} analysis (its {what}s: {', '.join(ok)})"
                             + ("; the ordinal analysis needs ordinal parameters" if name != "ordinal" and
                                value in ("clmm", "lrt") else ""))


def default_model(params: Any, systems: int) -> str:
    """The ordinal CLMM with an ordinal process; Card et al.'s slopes for two systems with slope parameters;
    the coding-invariant model otherwise."""
    if isinstance(params, OrdinalProcess):
        return "ordinal"
    return "slopes" if systems == 2 and isinstance(params, LikertParams) else "invariant"


def check_ratings(params: Any, analysis: Analysis) -> None:
    """Refuse (InputError) an ordinal analysis of Gaussian parameters, and of ordinal parameters any analysis but
    the ordinal one and the linear one (``invariant``: the Gaussian LMM fitted to the ratings 1..K)."""
    ordinal = bool(getattr(analysis, "ordinal", False))
    if ordinal and not isinstance(params, OrdinalProcess):
        raise InputError(f"the {analysis.name} model analyses ordinal ratings; these parameters are Gaussian "
                         "(give ordinal parameters: --family ordinal, or a file of hepower fit --family ordinal)")
    if isinstance(params, OrdinalProcess) and not ordinal and analysis.name != "invariant":
        raise InputError(f"ordinal ratings are analysed by --model ordinal, invariant (the linear model of the "
                         f"ratings) or both, not {analysis.name}")


def make_process(params: Any, systems: int, analysis: Analysis) -> Any:
    """The process behind ``params`` for ``systems`` systems: slope parameters analysed by the slope model
    stay slope parameters; for more than two systems or another analysis they become invariant ones (where
    that mapping exists); a process (a dataclass with ``systems``) is used as it is, for ``systems``."""
    if not isinstance(params, LikertParams):
        return replace(params, systems=systems)
    if systems == 2 and analysis.name == "slopes":
        return SlopeProcess(params)
    return InvariantProcess.from_likert(params, systems)


@dataclass(frozen=True)
class CrowdScenario:
    """One cell: a design, a process, an analysis (an instance or a registered name), the effect (B - A for
    the pair of interest) and costs."""

    design: Design
    process: Process
    analysis: Analysis
    effect: float
    means: tuple[float, ...] | None = None
    costs: Costs = field(default_factory=Costs)
    #: use sufficient statistics (closed form) where the design allows; False fits every study in full
    sufficient: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.analysis, str):
            object.__setattr__(self, "analysis", get_analysis(self.analysis))
        check_number("effect", self.effect)
        if self.process.systems != self.design.systems:
            raise InputError(f"the parameters describe {self.process.systems} systems, the design {self.design.systems}")
        self.analysis.check(self.design.systems, self.effect)
        self.closed_form  # noqa: B018  (checks the tier against the design)

    @cached_property
    def closed_form(self) -> CrossedLikertScenario | None:
        """The closed-form cell where the analysis has a closed form on this design (None otherwise)."""
        closed = self.analysis.closed_form(self.design, self.process, self.means, self.sufficient)
        if closed is None:
            return None
        d = self.design
        assert isinstance(closed, CrossedSlopes) and isinstance(d, CrowdDesign) and isinstance(self.process, SlopeProcess)
        return CrossedLikertScenario.of(self.process.params, d.workers, d.items, self.effect, closed)

    @property
    def chunk_size(self) -> int:
        if self.closed_form is not None:
            return self.closed_form.chunk_size
        return ORDINAL_CHUNK if isinstance(self.process, OrdinalProcess) else self.analysis.chunk_size

    def study_bytes(self) -> int:
        """Memory one simulated study needs: its ratings in several copies (none for closed forms)."""
        if self.closed_form is not None:
            return self.closed_form.study_bytes()
        return int(self.design.counts()["ratings"] * 8 * 40)

    @cached_property
    def _means(self) -> np.ndarray:
        return system_means(self.design.systems, self.effect, self.analysis.pair, self.means)

    def cell(self) -> dict[str, Any]:
        rec = {**self.design.record(), "effect": self.effect, **self.analysis.record()}
        if isinstance(self.process, OrdinalProcess):  # the latent shift as a difference in expected mean rating
            a, b = self.analysis.pair
            m = self._means
            rec["mean_difference"] = self.process.mean_difference(float(m[b] - m[a]), base=float(m[a]))
        if self.costs.any:
            rec["cost"] = self.costs.of(self.design)
        return rec

    def stream_key(self) -> str:
        if self.closed_form is not None:
            return self.closed_form.stream_key()
        return json.dumps(["crowd", self.design.key(), self.process.key()])

    def exact(self) -> PowerResult | None:
        r = self.closed_form.exact() if self.closed_form is not None else None
        return None if r is None else replace(r, cell=self.cell())

    @cached_property
    def _fixed(self) -> tuple[Any, Any] | None:
        """The layout and the fast tier's design when every study shares them (built once per cell)."""
        if not self.design.fixed:
            return None
        layout = self.design.draw(np.random.default_rng(0), 1)
        assert isinstance(layout, Layout)
        return layout, self.analysis.prepare(layout)

    def simulate(self, n: int, rng: np.random.Generator) -> StudyOutcomes:
        if self.closed_form is not None:
            return self.closed_form.simulate(n, rng)
        if not self.analysis.location_invariant or isinstance(self.process, OrdinalProcess):
            # ordinal ratings do not move along a shift of the means: every analysis fits them at the truth
            return _concat([self.analysis.decide(f, self._means, self._means) for f in self._fit(n, rng, self._means)])
        zero = system_means(self.design.systems, 0.0, self.analysis.pair, None)
        key = (self.stream_key(), repr(self.analysis), n, repr(rng.bit_generator.state))
        fits = _FITS.get(key)
        if fits is None:  # fits at effect 0 serve every effect (see analyses.lmm.GaussianLMM.fit)
            fits = self._fit(n, rng, zero)
            _FITS[key] = fits
            while len(_FITS) > 64:
                del _FITS[next(iter(_FITS))]
        return _concat([self.analysis.decide(f, self._means, zero) for f in fits])

    def _fit(self, n: int, rng: np.random.Generator, means: np.ndarray) -> list[Any]:
        """Simulate n studies at ``means`` and fit them (a list of family fits)."""
        if self._fixed is not None:
            layout, prepared = self._fixed
            return [self.analysis.fit(layout, self.process.simulate(layout, means, n, rng), prepared)]
        drawn = self.design.draw(rng, n)
        if not isinstance(drawn, list):
            return [self.analysis.fit(drawn, self.process.simulate(drawn, means, n, rng))]
        return [self.analysis.fit(drawn, [self.process.simulate(lay, means, 1, rng) for lay in drawn])]


#: recent fits at effect 0, by (stream, analysis, chunk size, chunk seed): cells that differ only in
#: the effect reuse them (an MDE search or an effect grid fits each simulated study once)
_FITS: dict[tuple[Any, ...], list[Any]] = {}


def _concat(parts: Sequence[StudyOutcomes]) -> StudyOutcomes:
    """The outcomes of several chunks of studies as one."""
    def cat(name: str) -> Any:
        vals = [getattr(p, name) for p in parts]
        return None if any(v is None for v in vals) else np.concatenate(vals)

    return StudyOutcomes(*(cat(f) for f in ("estimate", "significant", "failed", "singular", "warned", "df",
                                            "all_detected")))


def crowd_design(items: int, workers: int, ratings_per_item: int | None = None, systems: int = 2,
                 assignment: str | None = None, presentation: str = "within", items_per_hit: int = 1,
                 missing: float = 0.0, workload: Sequence[float] | None = None) -> CrowdDesign:
    """A :class:`CrowdDesign` with the assignment defaulting to ``crossed`` when k = W (or k is not
    given) and ``balanced`` otherwise."""
    k = workers if ratings_per_item is None else ratings_per_item
    if assignment is None:
        assignment = "crossed" if k == workers and presentation == "within" and workload is None else (
            "random" if workload is not None else "balanced")
    return CrowdDesign(items, workers, k, systems, assignment, presentation, items_per_hit, missing,
                       None if workload is None else tuple(float(w) for w in workload))


def cell_factory(params: LikertParams | InvariantProcess | OrdinalProcess | str, systems: int = 2, assignment: str | None = None,
                 presentation: str = "within", missing: float = 0.0, workload: Sequence[float] | None = None,
                 design_from: PilotDesign | None = None, model: str | Analysis | None = None, method: str = "fast",
                 test: str = "satterthwaite", alpha: float = 0.05, compare: str = "pair", adjust: str = "holm",
                 pair: tuple[int, int] | None = None, means: Sequence[float] | None = None,
                 costs: Costs | None = None) -> Callable[..., CrowdScenario]:
    """``make(items, workers, ratings_per_item, items_per_hit, effect) -> CrowdScenario`` with
    everything else bound (``design_from`` replaces the crowd design: only ``items`` varies it).

    ``model``: a registered analysis name (:mod:`humaneval_power.analyses`; default :func:`default_model`),
    built with ``method``, ``test``, ``alpha``, ``compare``, ``adjust`` and ``pair`` (the ordinal model also
    with the link and scale of an :class:`~humaneval_power.ordinal_process.OrdinalProcess`, whose effect is
    the latent shift); or an analysis instance, used as it is (those options are then ignored)."""
    from ..params import as_params

    if isinstance(params, str):
        params = as_params(params)
    if design_from is not None:
        systems = design_from.systems
    if model == "both":
        raise InputError("a cell is analysed by one model: give ordinal or invariant (the likert planners run "
                         "both in turn)")
    if model is None or isinstance(model, str):
        name = model or default_model(params, systems)
        check_ratings(params, get_analysis(name))
        check_options(name, method, test)
        ordinal = {"link": params.link, "scale": params.scale} if name == "ordinal" and isinstance(
            params, OrdinalProcess) else {}
        analysis = get_analysis(name, tier=method, test=test, alpha=alpha, compare=compare, adjust=adjust,
                                pair=pair or (0, systems - 1), **ordinal)
    else:
        analysis = model
        check_ratings(params, analysis)
    process = make_process(params, systems, analysis)
    fixed_means = tuple(means) if means is not None else None
    costs = costs or Costs()

    def make(items: int, workers: int = 0, ratings_per_item: int | None = None, items_per_hit: int = 1,
             effect: float = 0.0) -> CrowdScenario:
        if design_from is not None:
            design: Design = replace(design_from, items=items)
        else:
            design = crowd_design(items, workers, ratings_per_item, systems, assignment, presentation,
                                  items_per_hit, missing, workload)
        return CrowdScenario(design, process, analysis, effect, fixed_means, costs)

    return make


