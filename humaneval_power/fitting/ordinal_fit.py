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
from .bambi_fit import p_direction
from .clmm import BOUNDARY_SD, TERMS, ClmmFit, check_link, crossed_groups, ordinal_codes
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

    @property
    def posterior(self) -> bool:
        """Whether the fit is a posterior (bambi): medians, equal-tailed intervals, no tests."""
        return self.fit.draws is not None

    def _quantiles(self, values: np.ndarray) -> list[float]:
        return [float(v) for v in np.quantile(values, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])]

    def interval(self, kind: str, j: int) -> list[float]:
        """The 95% interval of ``thresholds[j]`` or ``beta[j]`` (``kind``): Wald, or the posterior's quantiles."""
        f = self.fit
        if f.draws is not None:
            return self._quantiles(f.draws[kind][:, j])
        est, k = (f.thresholds[j], j) if kind == "thresholds" else (f.beta[j], len(f.thresholds) + j)
        return self.wald(float(est), float(f.se[k]))

    def sd_intervals(self) -> tuple[dict[str, list[float]], tuple[str, ...]]:
        """Wald intervals of the SDs on the log-SD scale, and warnings for those not reported."""
        out: dict[str, list[float]] = {}
        dropped = []
        se = dict(zip(self.fit.sd_names, self.fit.sd_se)) if len(self.fit.sd_se) else {}
        for term in TERMS:
            name, sd, s = _sd_name(term), self.sds[_sd_name(term)], float(se.get(term, math.nan))
            if term not in self.terms or self.intervals == "none":
                out[name] = [math.nan, math.nan]
            elif self.fit.draws is not None:
                out[name] = self._quantiles(self.fit.draws["sds"][:, self.fit.sd_names.index(term)])
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
        if not self.fit.converged and not self.posterior:
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
            lo, hi = self.interval("thresholds", k)
            shared.update({f"threshold_{name}": float(fit.thresholds[k]), f"threshold_{name}_se": float(se[k]),
                           f"threshold_{name}_ci_low": lo, f"threshold_{name}_ci_high": hi})
        for name, value in self.sds.items():
            shared[name] = value
            shared[f"{name}_ci_low"], shared[f"{name}_ci_high"] = sd_ci[name]
        shared.update({"loglik": fit.loglik, "converged": fit.converged})
        out = []
        for j, system in enumerate(self.systems[1:]):
            est, s = float(fit.beta[j]), float(fit.se_beta[j])
            z = est / s if s > 0 and not self.posterior else math.nan  # a posterior has no test
            lo, hi = self.interval("beta", j)
            test = ({"p_direction": p_direction(fit.draws["beta"][:, j])} if fit.draws is not None
                    else {"p_value": float(2 * stats.norm.sf(abs(z)))})
            out.append({**common, "system": system, "baseline": base, "effect": est, "effect_se": s, "z": z,
                        **test, "effect_ci_low": lo, "effect_ci_high": hi, **shared})
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
            **({"p_direction": {r["system"]: r["p_direction"] for r in recs}} if self.posterior
               else {"p_value": {r["system"]: r["p_value"] for r in recs}}),
            "intervals": {"method": self.intervals, "level": LEVEL,
                          "thresholds": [self.interval("thresholds", k) for k in range(len(fit.thresholds))],
                          "effects": {r["system"]: [r["effect_ci_low"], r["effect_ci_high"]] for r in recs},
                          **sd_ci},
        }
        return OrdinalParams(thresholds=tuple(float(v) for v in fit.thresholds), sds=self.sds, link=fit.link,
                             scale=tuple(self.data.extra["levels"]), systems=self.systems,
                             effects={r["system"]: r["effect"] for r in recs},
                             name=f"{', '.join(self.systems[1:])} vs {self.systems[0]} (ordinal)", provenance=prov,
                             draws=self.posterior_draws())

    def posterior_draws(self) -> dict[str, Any] | None:
        """The posterior draws in the parameter file's form (thresholds, the four SDs, effects), or None."""
        d = self.fit.draws
        if d is None:
            return None
        zeros = np.zeros(len(d["thresholds"]))
        sds = {_sd_name(t): (d["sds"][:, self.fit.sd_names.index(t)] if t in self.terms else zeros) for t in TERMS}
        return {"thresholds": d["thresholds"].tolist(), **{k: v.tolist() for k, v in sds.items()},
                "effects": {s: d["beta"][:, j].tolist() for j, s in enumerate(self.systems[1:])}}

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
                 f"model: {self.model}",
                 (f"posterior medians; 95% equal-tailed intervals ({len(fit.draws['beta'])} draws kept)"
                  if fit.draws is not None else f"log-likelihood (Laplace): {fit.loglik:.6f}"),
                 f"\nthresholds (latent scale; 95% {'posterior' if self.posterior else 'Wald'} interval):"]
        th = pd.DataFrame({"threshold": fit.threshold_names, "estimate": fit.thresholds, "se": fit.se[:len(fit.thresholds)]})
        th[["lower", "upper"]] = [self.interval("thresholds", k) for k in range(len(th))]
        if self.posterior:
            th = th.rename(columns={"se": "posterior sd"})
        lines.append(th.to_string(index=False, float_format=fmt))
        lines.append("\nfixed effects (latent shift from the baseline; positive = higher ratings"
                     + ("; log cumulative odds ratio" if fit.link == "logit" else "") + "):")
        recs = self.records()
        test = "p_direction" if self.posterior else "p_value"
        co = pd.DataFrame({"term": [f"{r['system']} vs {r['baseline']}" for r in recs],
                           **{k: [r[k] for r in recs] for k in ("effect", "effect_se", "z", test,
                                                                  "effect_ci_low", "effect_ci_high")}})
        co.columns = ["term", "estimate", "se", "z", "p" if test == "p_value" else test, "lower", "upper"]
        if self.posterior:
            co = co.drop(columns=["z"]).rename(columns={"se": "posterior sd"})
        lines.append(co.to_string(index=False, float_format=fmt))
        lines.append(f"\nvariance components (latent SD; 95% interval: {self.intervals}"
                     + ("):" if self.posterior else ", on the log-SD scale):"))
        sd_ci, _ = self.sd_intervals()
        comp = pd.DataFrame({"component": [t.replace(":", " x ") for t in TERMS],
                             "sd": [self.sds[_sd_name(t)] for t in TERMS],
                             "lower": [sd_ci[_sd_name(t)][0] for t in TERMS],
                             "upper": [sd_ci[_sd_name(t)][1] for t in TERMS]})
        comp.loc[comp["upper"].isna(), "lower"] = np.nan
        lines.append(comp.to_string(index=False, na_rep="", float_format=fmt))
        zeros = [t.replace(":", " x ") for t in self.terms if self.sds[_sd_name(t)] < BOUNDARY_SD and not self.posterior]
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
    draws: int | None = None,
    chains: int = 2,
    seed: int = 1,
) -> OrdinalFitResult:
    """Fit the cumulative-link mixed model to ordinal pilot ratings (:func:`.ratings.read_ratings` with ``family="ordinal"``).

    ``backend``: a registered ordinal backend (default: the first, ``clmm``; ``laplace`` needs no R);
    ``link``: ``logit`` or ``probit``; ``random``: ``invariant`` (the only structure; None is it);
    ``intervals``: ``wald`` (module docstring), ``posterior`` (bambi). ``progress`` receives a line of text
    before the fit. ``draws``, ``chains``, ``seed``: bambi's posterior draws per chain (default 1000, as many
    tuning steps), chains and seed; the draws are stored in the parameter file (for ``--assurance``).
    """
    if data.family != "ordinal":
        raise InputError(f"fit_ordinal needs ordinal ratings (read_ratings(..., family='ordinal')), got {data.family} data")
    check_link(link)
    if random not in (None, *ORDINAL_RANDOM):
        raise InputError(f"random-effect structure {random!r} is not available for ordinal fits: clmm fits random "
                         f"intercepts only ({', '.join(ORDINAL_RANDOM)}: worker, worker x system, item, item x system)")
    spec = registry.REGISTRY.get(backend or registry.default_backend("ordinal"))
    method = spec.resolve_intervals("ordinal", intervals)
    fitter = spec.ordinal_fitter()
    sampled = "posterior" in spec.intervals["ordinal"]
    if draws and not sampled:
        raise InputError("parameter draws of ordinal fits come from --backend bambi (its posterior); "
                         f"the {spec.name} backend gives none")
    options = {"draws": draws or 1000, "chains": chains, "seed": seed} if sampled else {}
    f = data.frame
    groups, unidentified = identified_terms(f)
    X = np.column_stack([(f["system"] == s).to_numpy(float) for s in data.systems[1:]])
    levels = data.extra["levels"]
    if progress is not None:
        progress(f"fitting {len(f):,} ordinal ratings of {len(data.systems)} systems with {spec.name}"
                 + (" (starting R first)" if spec.name == "clmm" else "") + " ...")
    fit = fitter(f["score"].to_numpy(), X, groups, link=link, scale=(levels[0], levels[-1]),
                 beta_names=data.systems[1:], **options)
    versions = {"backend": fit.backend}
    return OrdinalFitResult(data, fit, tuple(groups), unidentified, method, versions)


def fit_bambi_ordinal(
    ratings: np.ndarray, X: np.ndarray, groups: dict[str, np.ndarray], *, link: str = "logit",
    scale: tuple[int, int], beta_names: tuple[str, ...], draws: int = 1000, chains: int = 2, seed: int = 1,
) -> ClmmFit:
    """The model of :func:`.clmm.fit_clmm` by bambi's ``cumulative`` family (default priors; P(Y <= k) =
    F(threshold_k - eta), clmm's sign): posterior medians as the estimates, the posterior covariance of
    (thresholds, beta) as ``cov``, posterior SDs of the SDs as ``sd_se``, at most
    :data:`~.bambi_fit.MAX_EXPORTED_DRAWS` joint draws in ``draws``; R-hat above 1.01 and divergent
    transitions are named in the warnings."""
    import logging
    import warnings as py_warnings

    from .bambi_fit import MAX_EXPORTED_DRAWS, _import_bambi

    bmb = _import_bambi()
    y, levels = ordinal_codes(ratings, scale)
    frame = pd.DataFrame({"y": pd.Categorical(np.asarray(levels)[y], categories=list(levels), ordered=True)})
    for j in range(X.shape[1]):
        frame[f"x{j + 1}"] = X[:, j]
    for t, name in enumerate(groups):
        frame[f"g{t + 1}"] = "g" + np.asarray(groups[name]).astype(str)
    formula = "y ~ " + " + ".join([f"x{j + 1}" for j in range(X.shape[1])] + [f"(1|g{t + 1})" for t in range(len(groups))])
    for name in ("pymc", "pytensor", "bambi", "arviz"):
        logging.getLogger(name).setLevel(logging.ERROR)
    import arviz

    names = ["threshold", *(f"x{j + 1}" for j in range(X.shape[1])), *(f"1|g{t + 1}_sigma" for t in range(len(groups)))]
    with py_warnings.catch_warnings(record=True):
        py_warnings.simplefilter("always")
        model = bmb.Model(formula, frame, family="cumulative", link=link)
        idata = model.fit(draws=draws, tune=draws, chains=chains, random_seed=seed, progressbar=False, cores=1,
                          target_accept=0.95)
        rhat = float(np.nanmax(arviz.rhat(idata, var_names=names).to_array().values)) if chains > 1 else math.nan
    post = idata.posterior
    flat = {v: post[v].values.reshape(-1, *post[v].shape[2:]) for v in post.data_vars}
    th = flat["threshold"]
    beta = np.column_stack([flat[f"x{j + 1}"] for j in range(X.shape[1])])
    sds = np.column_stack([flat[f"1|g{t + 1}_sigma"] for t in range(len(groups))])
    keep = np.sort(np.random.default_rng(seed).choice(len(th), size=min(len(th), MAX_EXPORTED_DRAWS), replace=False))
    divergent = int(idata.sample_stats["diverging"].values.sum())
    notes = ((f"{divergent} divergent transitions: treat the intervals with care",) if divergent else ()) + (
        (f"max R-hat {rhat:.3f} > 1.01: run longer (--draws)",) if rhat > 1.01 else ()) + (
        ("one chain: convergence (R-hat) not checked; use --chains 2 or more",) if chains == 1 else ())
    return ClmmFit(
        thresholds=np.median(th, axis=0), threshold_names=tuple(f"{levels[k]}|{levels[k + 1]}" for k in range(len(levels) - 1)),
        beta=np.median(beta, axis=0), beta_names=tuple(beta_names), sds=np.median(sds, axis=0), sd_names=tuple(groups),
        loglik=math.nan, cov=np.atleast_2d(np.cov(np.column_stack([th, beta]), rowvar=False)), link=link, levels=levels,
        n_obs=len(y), converged=not (rhat > 1.01 or divergent), message="; ".join(notes) or "sampled",
        n_iter=len(th), max_grad=math.nan, backend=f"bambi {bmb.__version__} (cumulative)", warnings=notes,
        sd_se=sds.std(axis=0), draws={"thresholds": th[keep].round(6), "beta": beta[keep].round(6), "sds": sds[keep].round(6)},
    )


__all__ = ["ORDINAL_RANDOM", "ORDINAL_SD_NAMES", "OrdinalFitResult", "fit_ordinal", "identified_terms"]
