"""Ordinal pilot ratings -> cumulative-link mixed model -> ordinal parameter file (``hepower fit --family ordinal``).

The model (docs/ordinal.md): ``rating ~ system + (1 | worker) + (1 | worker:system) + (1 | item) +
(1 | item:system)``, cumulative logit or probit, treatment coding against the baseline, the four latent
SDs of the coding-invariant model (the Likert planner's invariant model; clmm fits random intercepts only,
so the slope and per-system structures are not available). Fitted by a registered ordinal backend
(:mod:`.registry`: ``clmm``, R ``ordinal::clmm``; ``laplace``, :func:`.clmm.fit_clmm`, no R).

Intervals (``wald``): thresholds and effects est +- z SE from the observed information; the SDs on the
log-SD scale, sd * exp(+-z SE(sd) / sd), from the same information (clmm's Hessian in (thresholds, beta,
SDs)): the log scale keeps the interval positive and is the Gaussian fits' ``wald`` rule. It is not
reported (NaN, with a warning) for an SD at the boundary or when its ends are more than
:data:`~.types.WALD_MAX_RATIO` apart, where the delta method says nothing.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from ..errors import InputError
from ..params import ORDINAL_SD_NAMES, OrdinalParams
from . import registry
from .clmm import BOUNDARY_SD, TERMS, ClmmFit, check_link, crossed_groups
from .ratings import PilotData
from .types import WALD_MAX_RATIO

#: random-effect structures of the ordinal fit (the Gaussian ``invariant`` model; clmm has no random slopes)
ORDINAL_RANDOM = ("invariant",)
LEVEL = 0.95


def _sd_name(term: str) -> str:
    return "sd_" + term.replace(":", "_")


def identified_terms(frame: pd.DataFrame, terms: tuple[str, ...] = TERMS) -> tuple[dict[str, np.ndarray], tuple[str, ...]]:
    """The grouping arrays of the random terms the design identifies, and why others were left out.

    Left out (exported as SD 0): a term with one rating per level (it is the latent residual, fixed by
    the link: with probit exactly confounded with the scale of the thresholds and effects), a term with
    one level, and a term grouping the ratings exactly as an earlier term does (e.g. worker:system when
    every worker rates one system).
    """
    groups = crossed_groups(frame["worker"], frame["item"], frame["system"], terms)
    kept: dict[str, np.ndarray] = {}
    codes: dict[str, np.ndarray] = {}
    notes = []
    for term, g in groups.items():
        c = pd.factorize(g)[0]
        label = term.replace(":", " x ")
        same = next((t for t, k in codes.items() if np.array_equal(k, c)), None)
        if c.max() + 1 == len(c):
            notes.append(f"{label}: one rating per level, so it is the latent residual (fixed by the link); "
                         "fitted without it (exported as 0)")
        elif c.max() == 0:
            notes.append(f"{label}: a single level, confounded with the thresholds; fitted without it (exported as 0)")
        elif same is not None:
            notes.append(f"{label} groups the ratings exactly as {same.replace(':', ' x ')}: only their total is "
                         f"estimated; fitted without {label} (exported as 0)")
        else:
            kept[term], codes[term] = g, c
    return kept, tuple(notes)


@dataclass(frozen=True)
class OrdinalFitResult:
    """A fitted ordinal pilot: the CLMM fit, its intervals, records and parameter file."""

    data: PilotData
    fit: ClmmFit
    terms: tuple[str, ...]  #: the random terms fitted
    unidentified: tuple[str, ...]  #: terms left out, and why
    intervals: str
    versions: dict[str, str]

    @property
    def systems(self) -> tuple[str, ...]:
        return self.data.systems

    @property
    def sds(self) -> dict[str, float]:
        """The four latent SDs (0 for a term not fitted)."""
        fitted = self.fit.sd
        return {_sd_name(t): abs(float(fitted.get(t, 0.0))) for t in TERMS}

    def _z(self) -> float:
        return float(stats.norm.isf((1 - LEVEL) / 2))

    def wald(self, estimate: float, se: float) -> list[float]:
        """est -+ z SE."""
        return [estimate - self._z() * se, estimate + self._z() * se]

    def sd_intervals(self) -> tuple[dict[str, list[float]], tuple[str, ...]]:
        """Wald intervals of the SDs on the log-SD scale, and warnings for those not reported."""
        out: dict[str, list[float]] = {}
        dropped = []
        se = dict(zip(self.fit.sd_names, self.fit.sd_se)) if len(self.fit.sd_se) else {}
        for term in TERMS:
            name, sd, s = _sd_name(term), self.sds[_sd_name(term)], float(se.get(term, math.nan))
            if term not in self.terms or self.intervals == "none":
                out[name] = [math.nan, math.nan]
            elif sd < BOUNDARY_SD:
                out[name] = [0.0, math.nan]
            else:
                half = min(self._z() * s / sd, 700.0)
                lo, hi = sd * math.exp(-half), sd * math.exp(half)
                if not (math.isfinite(lo) and hi <= WALD_MAX_RATIO * lo):
                    dropped.append(f"{term.replace(':', ' x ')} [{lo:.2g}, {hi:.2g}]")
                    lo = hi = math.nan
                out[name] = [lo, hi]
        warn = ((f"Wald interval unreliable, not reported (its ends are more than {WALD_MAX_RATIO:g}x apart: the "
                 "likelihood is flat in this SD, far from quadratic in log SD): " + "; ".join(dropped)),) if dropped else ()
        return out, warn

    def warnings(self) -> tuple[str, ...]:
        """The backend's warnings, non-convergence, and unreliable SD intervals."""
        out = list(self.fit.warnings)
        if not self.fit.converged:
            out.append(f"the fit did not converge (max |gradient| {self.fit.max_grad:.2g}; {self.fit.message})")
        return tuple(out) + self.sd_intervals()[1]

    @property
    def model(self) -> str:
        """The model in R's notation (the link and the latent scale in words)."""
        terms = "".join(f" + (1 | {t})" for t in self.terms)
        return f"rating ~ system{terms} (cumulative {self.fit.link}, flexible thresholds)"

    def records(self) -> list[dict[str, Any]]:
        """One flat record per comparison (system vs baseline), the CLI's ``--json``: effect with SE, z, p and
        Wald interval, the four SDs with their intervals, the thresholds (shared by every record)."""
        fit, base = self.fit, self.systems[0]
        sd_ci, _ = self.sd_intervals()
        common: dict[str, Any] = {"backend": fit.backend, "family": "ordinal", "link": fit.link, **self.data.counts()}
        shared: dict[str, Any] = {}
        se = fit.se
        for k, name in enumerate(fit.threshold_names):
            lo, hi = self.wald(float(fit.thresholds[k]), float(se[k]))
            shared.update({f"threshold_{name}": float(fit.thresholds[k]), f"threshold_{name}_se": float(se[k]),
                           f"threshold_{name}_ci_low": lo, f"threshold_{name}_ci_high": hi})
        for name, value in self.sds.items():
            shared[name] = value
            shared[f"{name}_ci_low"], shared[f"{name}_ci_high"] = sd_ci[name]
        shared.update({"loglik": fit.loglik, "converged": fit.converged})
        out = []
        for j, system in enumerate(self.systems[1:]):
            est, s = float(fit.beta[j]), float(fit.se_beta[j])
            z = est / s if s > 0 else math.nan
            lo, hi = self.wald(est, s)
            out.append({**common, "system": system, "baseline": base, "effect": est, "effect_se": s, "z": z,
                        "p_value": float(2 * stats.norm.sf(abs(z))), "effect_ci_low": lo, "effect_ci_high": hi,
                        **shared})
        return out

    def to_params(self) -> OrdinalParams:
        """The planner's parameters: thresholds, the four latent SDs, the fitted effects, with provenance."""
        fit = self.fit
        recs = self.records()
        sd_ci, _ = self.sd_intervals()
        prov = {
            "source": self.data.source, "sha256": self.data.sha256, **self.data.counts(), "family": "ordinal",
            "baseline": self.systems[0], "backend": fit.backend, "versions": self.versions, "model": self.model,
            "random": "invariant", "loglik": fit.loglik, "converged": fit.converged, "max_gradient": fit.max_grad,
            "unidentified": list(self.unidentified), "warnings": list(self.warnings()), "notes": list(self.data.notes),
            "threshold_se": [float(v) for v in fit.se[:len(fit.thresholds)]],
            "effect_se": {r["system"]: r["effect_se"] for r in recs},
            "p_value": {r["system"]: r["p_value"] for r in recs},
            "intervals": {"method": self.intervals, "level": LEVEL,
                          "thresholds": [self.wald(float(t), float(s)) for t, s in zip(fit.thresholds, fit.se)],
                          "effects": {r["system"]: [r["effect_ci_low"], r["effect_ci_high"]] for r in recs},
                          **sd_ci},
        }
        return OrdinalParams(thresholds=tuple(float(v) for v in fit.thresholds), sds=self.sds, link=fit.link,
                             scale=tuple(self.data.extra["levels"]), systems=self.systems,
                             effects={r["system"]: r["effect"] for r in recs},
                             name=f"{', '.join(self.systems[1:])} vs {self.systems[0]} (ordinal)", provenance=prov)

    def to_params_file(self) -> dict[str, Any]:
        """The parameter-file document (one for all systems: the thresholds and SDs are shared)."""
        return self.to_params().to_json()

    def summary(self) -> str:
        """A readable summary: thresholds, effects with SE, z, p and intervals; latent SDs with intervals."""
        fit, c = self.fit, self.data.counts()
        fmt = lambda v: f"{v:.4g}"
        lines = [(f"ordinal (cumulative {fit.link}) mixed model, backend {fit.backend}: {c['n_ratings']} ratings, "
                 f"{c['n_workers']} workers, {c['n_items']} items, {c['n_systems']} systems (baseline {self.systems[0]}), "
                 f"categories {fit.levels[0]}..{fit.levels[-1]}"),
                 f"model: {self.model}", f"log-likelihood (Laplace): {fit.loglik:.6f}",
                 "\nthresholds (latent scale; 95% Wald interval):"]
        th = pd.DataFrame({"threshold": fit.threshold_names, "estimate": fit.thresholds, "se": fit.se[:len(fit.thresholds)]})
        th[["lower", "upper"]] = [self.wald(e, s) for e, s in zip(th.estimate, th.se)]
        lines.append(th.to_string(index=False, float_format=fmt))
        lines.append("\nfixed effects (latent shift from the baseline; positive = higher ratings"
                     + ("; log cumulative odds ratio" if fit.link == "logit" else "") + "):")
        recs = self.records()
        co = pd.DataFrame({"term": [f"{r['system']} vs {r['baseline']}" for r in recs],
                           **{k: [r[k] for r in recs] for k in ("effect", "effect_se", "z", "p_value",
                                                                  "effect_ci_low", "effect_ci_high")}})
        co.columns = ["term", "estimate", "se", "z", "p", "lower", "upper"]
        lines.append(co.to_string(index=False, float_format=fmt))
        lines.append(f"\nvariance components (latent SD; 95% interval: {self.intervals}, on the log-SD scale):")
        sd_ci, _ = self.sd_intervals()
        comp = pd.DataFrame({"component": [t.replace(":", " x ") for t in TERMS],
                             "sd": [self.sds[_sd_name(t)] for t in TERMS],
                             "lower": [sd_ci[_sd_name(t)][0] for t in TERMS],
                             "upper": [sd_ci[_sd_name(t)][1] for t in TERMS]})
        comp.loc[comp["upper"].isna(), "lower"] = np.nan
        lines.append(comp.to_string(index=False, na_rep="", float_format=fmt))
        zeros = [t.replace(":", " x ") for t in self.terms if self.sds[_sd_name(t)] < BOUNDARY_SD]
        if zeros:
            lines.append("\nat the boundary (SD below 1e-3): " + "; ".join(zeros))
        lines += [f"not identifiable: {n}" for n in self.unidentified]
        lines += [f"warning ({fit.backend}): {w}" for w in self.warnings()]
        lines += [f"note: {n}" for n in self.data.notes]
        return "\n".join(lines)


def fit_ordinal(
    data: PilotData,
    backend: str | None = None,
    link: str = "logit",
    random: str | None = None,
    intervals: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> OrdinalFitResult:
    """Fit the cumulative-link mixed model to ordinal pilot ratings (:func:`.ratings.read_ordinal_ratings`).

    ``backend``: a registered ordinal backend (default: the first, ``clmm``; ``laplace`` needs no R);
    ``link``: ``logit`` or ``probit``; ``random``: ``invariant`` (the only structure; None is it);
    ``intervals``: ``wald`` (module docstring). ``progress`` receives a line of text before the fit.
    """
    if data.family != "ordinal":
        raise InputError(f"fit_ordinal needs ordinal ratings (read_ordinal_ratings), got {data.family} data")
    check_link(link)
    if random not in (None, *ORDINAL_RANDOM):
        raise InputError(f"random-effect structure {random!r} is not available for ordinal fits: clmm fits random "
                         f"intercepts only ({', '.join(ORDINAL_RANDOM)}: worker, worker x system, item, item x system)")
    spec = registry.get(backend or registry.default_backend("ordinal"))
    method = spec.resolve_intervals("ordinal", intervals)
    fitter = spec.ordinal_fitter()
    f = data.frame
    groups, unidentified = identified_terms(f)
    X = np.column_stack([(f["system"] == s).to_numpy(float) for s in data.systems[1:]])
    levels = data.extra["levels"]
    if progress is not None:
        progress(f"fitting {len(f):,} ordinal ratings of {len(data.systems)} systems with {spec.name}"
                 + (" (starting R first)" if spec.name == "clmm" else "") + " ...")
    fit = fitter(f["score"].to_numpy(), X, groups, link=link, scale=(levels[0], levels[-1]),
                 beta_names=data.systems[1:])
    versions = {"backend": fit.backend}
    return OrdinalFitResult(data, fit, tuple(groups), unidentified, method, versions)


__all__ = ["ORDINAL_RANDOM", "ORDINAL_SD_NAMES", "OrdinalFitResult", "fit_ordinal", "identified_terms"]
