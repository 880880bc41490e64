"""The fitting backends and what each supports; :func:`.model.fit_pilot` dispatches through it.

A backend is registered by name with the families it fits, the interval
methods per family (the first is the default), the random-effect structures
and whether it fits correlated random effects. Its Gaussian fitter is named
as ``"module:function"`` and imported only when used (R, pymc and statsmodels
are slow to import), with the signature ``fit(frame, spec: LmmSpec,
options: FitOptions) -> RawFit``; its ordinal (cumulative-link) fitter likewise, with the
signature of :func:`.clmm.fit_clmm` (ratings, X, groups, link=, scale=, beta_names=, hessian=) -> ClmmFit
(``hessian=False``: the estimates and likelihood only, as the null model of a likelihood-ratio test needs).
Each family's default backend is in :data:`DEFAULT_BACKENDS`.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InputError
from ..registry import Registry, load
from ..validation import check_choice

if TYPE_CHECKING:
    import pandas as pd

    from .clmm import ClmmFit
    from .types import FitOptions, LmmSpec, RawFit

#: the model families ``hepower fit`` fits: Likert ratings as interval data, head-to-head judgments, ordinal ratings
FAMILIES = ("gaussian", "binomial", "ordinal")

GaussianFitter = Callable[["pd.DataFrame", "LmmSpec", "FitOptions"], "RawFit"]


@dataclass(frozen=True)
class Backend:
    """A fitting backend: what it supports and where its Gaussian fitter lives."""

    name: str
    intervals: Mapping[str, tuple[str, ...]]  #: family -> interval methods, the default first
    gaussian: str | None = None  #: "module:function" of the Gaussian fitter
    correlated: bool = False
    ordinal: str | None = None  #: "module:function" of the cumulative-link mixed-model fitter

    @property
    def families(self) -> tuple[str, ...]:
        return tuple(self.intervals)

    def resolve_intervals(self, family: str, intervals: str | None) -> str:
        """The interval method to use (the default when None); InputError if unsupported."""
        if family not in self.intervals:
            raise InputError(f"the {self.name} backend does not fit {family} models "
                             f"(backends for {family}: {', '.join(backends_for(family))})")
        allowed = self.intervals[family]
        chosen = intervals or allowed[0]
        if chosen not in allowed:
            raise InputError(f"--intervals {chosen} is not available with the {self.name} backend "
                             f"(choose {', '.join(allowed)})")
        return chosen

    def gaussian_fitter(self) -> GaussianFitter:
        if self.gaussian is None:
            raise InputError(f"the {self.name} backend fits no Gaussian models")
        return load(self.gaussian)

    def ordinal_fitter(self) -> Callable[..., ClmmFit]:
        if self.ordinal is None:
            raise InputError(f"the {self.name} backend fits no ordinal models "
                             f"(backends for ordinal: {', '.join(backends_for('ordinal'))})")
        return load(self.ordinal)


#: the fitting backends by name (``REGISTRY.get(name)``: InputError naming the choices for an unknown one)
REGISTRY: Registry[Backend] = Registry("backend")


def register(backend: Backend) -> Backend:
    """Add (or replace) a backend under its name."""
    return REGISTRY.register(backend.name, backend)


def interval_methods() -> tuple[str, ...]:
    """Every interval method of the registered backends, in registration order."""
    return tuple(dict.fromkeys(m for b in REGISTRY.values() for ms in b.intervals.values() for m in ms))


def backends_for(family: str) -> tuple[str, ...]:
    return tuple(b.name for b in REGISTRY.values() if family in b.intervals)


#: each family's default backend
DEFAULT_BACKENDS = {"gaussian": "lme4", "binomial": "lme4", "ordinal": "clmm"}


def default_backend(family: str) -> str:
    """The default backend of ``family`` (lme4 for gaussian and binomial, clmm for ordinal)."""
    check_choice("family", family, FAMILIES)
    return DEFAULT_BACKENDS[family]


def _bambi_gaussian(frame: pd.DataFrame, spec: LmmSpec, options: FitOptions) -> RawFit:
    from .bambi_fit import fit_bambi

    return fit_bambi(frame, spec.formula, "gaussian", options.draws, options.chains, options.seed)


register(Backend("lme4", {"gaussian": ("wald", "profile", "boot", "none"), "binomial": ("wald", "profile", "boot", "none")},
                 "humaneval_power.fitting.lme4:fit_lmm", correlated=True))
register(Backend("statsmodels", {"gaussian": ("wald", "profile", "boot", "none")},
                 "humaneval_power.fitting.statsmodels_lmm:fit_lmm"))
register(Backend("bambi", {"gaussian": ("posterior",), "binomial": ("posterior",), "ordinal": ("posterior",)},
                 "humaneval_power.fitting.registry:_bambi_gaussian", correlated=True,
                 ordinal="humaneval_power.fitting.ordinal_fit:fit_bambi_ordinal"))
register(Backend("clmm", {"ordinal": ("wald",)}, ordinal="humaneval_power.fitting.clmm_r:fit_clmm_r"))
register(Backend("laplace", {"ordinal": ("wald",)}, ordinal="humaneval_power.fitting.clmm:fit_clmm"))
