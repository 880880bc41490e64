"""The backends of the completed-study analysis, one entry each in a :class:`~humaneval_power.registry.Registry`.

An entry names the backend, the function that fits a model specification by REML and returns the fit
with its fixed-effects inference (:mod:`.inference`), how the methods paragraph and the report name the
engine, whether it fits the maximal structure's correlated slopes, and the cost of Kenward-Roger's dense
matrices on it. A backend without a fitter is a posterior (``bambi``: :mod:`.bayesian`). Adding a
frequentist backend is one :func:`register` call with its fitter.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..errors import InputError
from ..fitting import registry as fitting_registry
from ..registry import Registry
from .inference import (
    FixedEffectsInference,
    Inference,
    KenwardRogerInference,
    kenward_roger_dense,
)

if TYPE_CHECKING:
    from ..fitting.types import LmmSpec, RawFit

#: ``fit(frame, spec, kenward_roger, progress) -> (fit, inference)``: REML fit of ``spec`` with its inference
InferenceFitter = Callable[["pd.DataFrame", "LmmSpec", bool, "Callable[[str], None] | None"],
                           "tuple[RawFit, Inference]"]


@dataclass(frozen=True)
class KenwardRogerCost:
    """What Kenward-Roger costs on a backend: dense n x n matrices (``fixed_matrices`` plus
    ``matrices_per_parameter`` per variance parameter), time ``seconds_per_cube * n^3``, refused above
    ``max_ratings``."""

    method: str  #: what computes it, in words
    seconds_per_cube: float
    max_ratings: int
    fixed_matrices: int
    matrices_per_parameter: int = 0


@dataclass(frozen=True)
class AnalysisBackend:
    """A backend of :func:`~humaneval_power.completed_study.analyze`: its fitter and how the texts name it."""

    name: str
    fit: InferenceFitter | None  #: None: a posterior backend (:mod:`.bayesian`), no p-values or df
    methods_text: str = ""       #: the engine in the methods paragraph
    report_text: str = ""        #: the engine in the report's "Model and why"
    maximal: bool = False        #: fits the maximal structure's correlated random slopes (and its ladder)
    kenward_roger: KenwardRogerCost | None = None

    @property
    def posterior(self) -> bool:
        return self.fit is None


#: the backends by name, in registration order
REGISTRY: Registry[AnalysisBackend] = Registry("backend")


def register(backend: AnalysisBackend) -> AnalysisBackend:
    """Add (or replace) a backend under its name."""
    return REGISTRY.register(backend.name, backend)


def get_backend(name: str) -> AnalysisBackend:
    """A registered backend by name (InputError naming the choices otherwise, or the family of an ordinal one)."""
    if name in ORDINAL_BACKENDS:
        raise InputError(f"--backend {name} fits cumulative-link models of --family ordinal; ratings as interval data "
                         f"(--family gaussian) use {', '.join(REGISTRY)}")
    return REGISTRY.get(name)


def variance_parameters(spec: LmmSpec) -> int:
    """The model's variance parameters, the residual's included (a correlated term of t effects has t(t+1)/2)."""
    sizes = [sum(1 for h, _ in spec.components if h == g) for g in dict.fromkeys(g for g, _ in spec.components)]
    return 1 + (sum(t * (t + 1) // 2 for t in sizes) if spec.correlated else sum(sizes))


def kenward_roger_cost(n: int, parameters: int, backend: str) -> tuple[float, float]:
    """Estimated peak memory (bytes) and time (seconds) of Kenward-Roger's adjusted covariance on ``n`` ratings
    with ``parameters`` variance parameters (the residual's included)."""
    cost = _kenward_roger(backend)
    matrices = cost.fixed_matrices + cost.matrices_per_parameter * parameters
    return 8.0 * n * n * matrices, cost.seconds_per_cube * float(n) ** 3


def check_kenward_roger(n: int, parameters: int, backend: str) -> str:
    """Refuse Kenward-Roger above the backend's ``max_ratings`` with the estimated cost; below, the
    estimate in words (for a progress line)."""
    from ..progress import format_duration

    memory, seconds = kenward_roger_cost(n, parameters, backend)
    cost = (f"{_kenward_roger(backend).method} builds dense {n} x {n} matrices of the ratings: about "
            f"{memory / 1e9:.2g} GB and {format_duration(seconds)} (estimated)")
    limits = kenward_roger_limits()
    if n > limits[backend]:
        alt = "".join(f"--backend {other} or " for other, limit in limits.items() if other != backend and n <= limit)
        raise InputError(f"--df kenward-roger: {cost}, over the limit of {limits[backend]:,} ratings; "
                         f"use {alt}--df satterthwaite")
    return cost


def kenward_roger_limits() -> dict[str, int]:
    """The most ratings each backend offering Kenward-Roger accepts."""
    return {b.name: b.kenward_roger.max_ratings for b in REGISTRY.values() if b.kenward_roger}


def _kenward_roger(backend: str) -> KenwardRogerCost:
    cost = get_backend(backend).kenward_roger
    if cost is None:
        raise InputError(f"--df kenward-roger does not apply to --backend {backend}")
    return cost


def _announce_kenward_roger(frame: pd.DataFrame, spec: LmmSpec, backend: str,
                            progress: Callable[[str], None] | None) -> None:
    cost = check_kenward_roger(len(frame), variance_parameters(spec), backend)
    if progress is not None:
        progress(cost)


def lme4_inference(frame: pd.DataFrame, spec: LmmSpec, kenward_roger: bool = False,
                   progress: Callable[[str], None] | None = None) -> tuple[RawFit, Inference]:
    """Fit ``spec`` by REML with lme4 + lmerTest; the fit and lmerTest's own beta, V, J and A
    (``kenward_roger``: pbkrtest's adjusted covariance instead, :class:`.KenwardRogerInference`, refused
    above the backend's ``max_ratings`` with its estimated cost, which ``progress`` hears of below it)."""
    from rpy2.rinterface_lib.embedded import RRuntimeError

    from ..fitting import lme4

    if kenward_roger:
        _announce_kenward_roger(frame, spec, "lme4", progress)
    ro = lme4.r_session()
    if not ro.r('exists("hepower_analyze_lmm")')[0]:
        ro.r["source"](str(lme4.r_bridge_dir() / "analyze.R"))
    try:
        with lme4.r_interruptible():
            res = ro.r["hepower_analyze_lmm"](lme4.r_data_frame({c: frame[c].to_numpy() for c in frame.columns}),
                                              spec.formula, kenward_roger)
    except RRuntimeError as exc:
        raise InputError(f"lme4 could not fit the model: {str(exc).strip().splitlines()[-1].strip()}") from None
    raw = lme4.raw_fit(res, "gaussian", "none")
    p = len(raw.coefficients)
    m = int(res.rx2("n_jac")[0])
    arr = {name: np.asarray(list(res.rx2(name)), float) for name in ("beta", "vcov_beta", "jac", "vcov_varpar")}
    if kenward_roger:
        k = int(res.rx2("kr_n")[0])
        kr = {name: np.asarray(list(res.rx2(name)), float) for name in ("vcov_adj", "kr_p", "kr_w")}
        return raw, KenwardRogerInference(arr["beta"], arr["vcov_beta"].reshape(p, p, order="F"),
                                          kr["vcov_adj"].reshape(p, p, order="F"),
                                          kr["kr_p"].reshape(k, p, p).transpose(0, 2, 1),
                                          kr["kr_w"].reshape(k, k, order="F"))
    jac = arr["jac"].reshape(m, p, p).transpose(0, 2, 1)  # each matrix column-major
    inference = FixedEffectsInference(arr["beta"], arr["vcov_beta"].reshape(p, p, order="F"), jac,
                                      arr["vcov_varpar"].reshape(m, m, order="F"))
    return raw, inference


def statsmodels_inference(frame: pd.DataFrame, spec: LmmSpec, kenward_roger: bool = False,
                          progress: Callable[[str], None] | None = None) -> tuple[RawFit, Inference]:
    """Fit ``spec`` without R (:func:`~humaneval_power.fitting.statsmodels_lmm.fit_components`); its beta, V,
    exact J and A (:meth:`~humaneval_power.fitting.vc_reml.CrossedComponentsModel.satterthwaite`, from the fit
    itself: nothing is refitted). ``kenward_roger``: :func:`.kenward_roger_dense` at the same optimum instead.
    """
    from ..fitting.statsmodels_lmm import fit_components

    if kenward_roger:
        _announce_kenward_roger(frame, spec, "statsmodels", progress)
    raw, model, fit, satt = fit_components(frame, spec.columns, spec.components, intervals="none", progress=progress)
    if kenward_roger:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1):
            return raw, kenward_roger_dense(model.x, fit.beta, model.z, model.component, fit.gamma * fit.sigma2,
                                            fit.sigma2)
    return raw, FixedEffectsInference(fit.beta, fit.beta_cov, satt.jacobian, satt.vcov_varpar)


# Kenward-Roger is dense in the ratings. pbkrtest's ``vcovAdj`` holds Sigma^-1, its Cholesky factor, a transpose
# and ``G_r Sigma^-1`` for each of the m variance parameters (m + 3 matrices of n x n doubles); the no-R
# ``kenward_roger_dense`` holds four. Time grows as n^3: measured on 2 shared cores, pbkrtest 11 s at 900 ratings
# and 49 s at 1,500 (1.5e-8 n^3 s), the no-R code 1-3 s at 900 (4e-9 n^3 s). Refused above max_ratings: lme4
# (pbkrtest) ~7 min and 0.6 GB at 3,000 for the invariant model, the no-R code ~4 min and 0.5 GB at 4,000.
register(AnalysisBackend(
    "lme4", lme4_inference, "lme4 and lmerTest in R", "lme4 + lmerTest in R", maximal=True,
    kenward_roger=KenwardRogerCost("pbkrtest's vcovAdj (lme4)", 1.5e-8, 3000, 3, 1)))
register(AnalysisBackend(
    "statsmodels", statsmodels_inference, "humaneval-power's REML solver (the lme4 criterion, without R)",
    "the no-R solver", kenward_roger=KenwardRogerCost("Kenward-Roger without R", 4e-9, 4000, 4)))
register(AnalysisBackend("bambi", None))

#: the backends of ``family="ordinal"`` (:mod:`.ordinal`): the fitting registry's cumulative-link fitters that
#: fit no linear mixed model (not in :data:`REGISTRY`): R ``ordinal::clmm`` (the default) and the Laplace CLMM
#: without R; bambi's ordinal posterior is the ``bambi`` entry's
ORDINAL_BACKENDS = tuple(b for b in fitting_registry.backends_for("ordinal") if b not in REGISTRY)
#: the built-in backends' names, in registration order, then the ordinal ones (the CLI's choices)
BACKENDS = (*REGISTRY, *ORDINAL_BACKENDS)
#: a posterior backend's sampling when not given: draws per chain and chains
POSTERIOR_DRAWS, POSTERIOR_CHAINS = 1000, 2


def posterior_sampling(backend: str, draws: int | None, chains: int | None) -> tuple[int, int]:
    """The draws per chain and chains of a posterior ``backend`` (their defaults for None); refused (InputError)
    when given to a backend that does not sample (an ordinal one included)."""
    given = [flag for flag, value in (("--draws", draws), ("--chains", chains)) if value is not None]
    if given and (backend in ORDINAL_BACKENDS or not get_backend(backend).posterior):
        raise InputError(f"{' and '.join(given)}: only for the posterior sampling of --backend "
                         f"{', '.join(b.name for b in REGISTRY.values() if b.posterior)}; --backend {backend} "
                         "does not sample")
    return (POSTERIOR_DRAWS if draws is None else draws, POSTERIOR_CHAINS if chains is None else chains)


#: above this many ratings --df kenward-roger is refused, per built-in backend
KR_MAX_RATINGS = kenward_roger_limits()


def fit_once(frame: pd.DataFrame, spec: Any, backend: str, kenward_roger: bool,
             progress: Callable[[str], None] | None) -> tuple[Any, Any]:
    """One REML fit of ``spec`` through the backend's table entry (tests patch this to share fits)."""
    fit = get_backend(backend).fit
    if fit is None:
        raise InputError(f"the {backend} backend gives a posterior, not a REML fit")
    return fit(frame, spec, kenward_roger, progress)
