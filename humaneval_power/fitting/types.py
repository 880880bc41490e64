"""Types and helpers shared by :mod:`.model` and the fitting backends (no backend imports here).

``Design``: how validated pilot data become a model (contrast columns, random
terms); ``RawFit``: what a backend returns; ``FitResult``: a fit with its
per-comparison planner records.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError
from ..params import SD_NAMES, LikertParams
from .ratings import PilotData

GROUPS = ("worker", "item")
#: a variance component is "at zero" when its SD is below this share of the residual SD (lme4's tolerance)
ZERO_TOL = 1e-4


@dataclass(frozen=True)
class LmmSpec:
    """One Gaussian model to fit: fixed columns besides the intercept and random components (group, term)."""

    columns: tuple[str, ...]
    components: tuple[tuple[str, str], ...]
    correlated: bool = False

    @property
    def formula(self) -> str:
        """lme4 formula (separate terms when uncorrelated, so single ones can be dropped)."""
        lhs = "score ~ 1" + "".join(f" + {c}" for c in self.columns)
        terms = []
        for g in dict.fromkeys(g for g, _ in self.components):
            kept = [t for h, t in self.components if h == g]
            if self.correlated and len(kept) > 1:
                inner = ("1" if "(Intercept)" in kept else "0") + "".join(f" + {t}" for t in kept if t != "(Intercept)")
                terms.append(f"({inner} | {g})")
            else:
                terms += [f"(1 | {g})" if t == "(Intercept)" else f"(0 + {t} | {g})" for t in kept]
        return lhs + "".join(f" + {t}" for t in terms)


@dataclass(frozen=True)
class FitOptions:
    """How a backend fits: interval method and its settings, REML or ML, an optional progress callback."""

    intervals: str = "wald"
    n_boot: int = 500
    seed: int = 1
    draws: int = 1000
    chains: int = 2
    reml: bool = True
    progress: Callable[[str], None] | None = None

    def report(self, message: str) -> None:
        """Pass a progress message to the callback, if any."""
        if self.progress is not None:
            self.progress(message)


@dataclass(frozen=True)
class RawFit:
    """What a backend returns, in backend-neutral form.

    ``components``: group, term, sd, lower, upper (NaN when not available).
    ``coefficients``: term, estimate, se, df, p_value.
    """

    backend: str
    coefficients: pd.DataFrame
    components: pd.DataFrame
    correlations: pd.DataFrame
    sigma: float
    sigma_interval: tuple[float, float]
    singular: bool
    warnings: tuple[str, ...]
    versions: dict[str, str]
    criterion: float = math.nan
    draws: dict[str, list[float]] | None = None


#: random-effect structures of the Gaussian model (see :class:`Design`)
RANDOM = ("invariant", "slopes", "per-system")
#: how each structure's SDs become a pair's planner parameters (mean-difference coding), for the provenance
PARAMETERISATION = {
    "slopes": "Card et al.'s slope model; with more than two systems the pair's intercept SD is "
              "sqrt(sd_int^2 + sd_slope^2 / 4) (treatment coding)",
    "invariant": "coding-invariant variance components: sd_slope^2 = 2 tau^2, sd_intercept^2 = sigma^2 + tau^2 / 2 "
                 "(tau: group x system SD, sigma: group SD); the reverse exists only when "
                 "sd_intercept^2 >= sd_slope^2 / 4",
    "per-system": "one SD per system (a: baseline, b: system): sd_slope^2 = a^2 + b^2, "
                  "sd_intercept^2 = (a^2 + b^2) / 4, covariance (b^2 - a^2) / 2",
}


def group_codes(frame: pd.DataFrame, group: str) -> np.ndarray:
    """0-based level codes of a grouping factor of the model frame; ``"a:b"`` is the interaction of a and b."""
    cols = group.split(":")
    if len(cols) == 1:
        return pd.factorize(frame[group])[0]
    return pd.MultiIndex.from_frame(frame[cols]).factorize()[0]


@dataclass(frozen=True)
class Design:
    """How pilot data become a model: contrast columns and random-effect structure.

    ``columns[k]`` codes ``systems[k + 1]`` against the baseline: x = -1/2, +1/2
    for two systems, treatment indicators for more. ``random``:

    - ``slopes`` (Card et al.): ``(1 + contrasts || worker) + (1 + contrasts || item)``;
    - ``invariant``: ``(1 | worker) + (1 | worker:system) + (1 | item) + (1 | item:system)``,
      the same four components whatever the number of systems or the coding;
    - ``per-system``: ``(0 + system || worker) + (0 + system || item)``, one SD per system
      (indicator columns ``s0``, ``s1``, ... in the order of ``systems``).
    """

    systems: tuple[str, ...]
    columns: tuple[str, ...]
    family: str
    random: str = "slopes"

    @classmethod
    def for_data(cls, data: PilotData, random: str | None = None) -> Design:
        """``random=None``: Card et al.'s slopes for two systems, the coding-invariant model for more."""
        if data.family == "binomial":
            return cls(data.systems, (), "binomial")
        if random is None:
            random = "slopes" if len(data.systems) == 2 else "invariant"
        if random not in RANDOM:
            raise InputError(f"unknown random-effect structure {random!r}; choose one of {', '.join(RANDOM)}")
        cols = ("x",) if len(data.systems) == 2 else tuple(f"c{k}" for k in range(1, len(data.systems)))
        return cls(data.systems, cols, "gaussian", random)

    def indicator(self, system: str) -> str:
        """Name of the per-system indicator column of ``system``."""
        return f"s{self.systems.index(system)}"

    def model_frame(self, data: PilotData) -> pd.DataFrame:
        """Integer-coded worker/item/system, the contrast columns (and per-system indicators)."""
        f = data.frame
        out = pd.DataFrame({
            "worker": pd.factorize(f["worker"])[0] + 1,
            "item": pd.factorize(f["item"])[0] + 1,
            "system": f["system"].map({s: k + 1 for k, s in enumerate(self.systems)}).to_numpy(int),
            "score": f["score"].to_numpy(float),
        })
        if self.columns == ("x",):
            out["x"] = np.where(f["system"] == self.systems[1], 0.5, -0.5)
        else:
            for col, system in zip(self.columns, self.systems[1:]):
                out[col] = (f["system"] == system).astype(float).to_numpy()
        if self.random == "per-system":
            for system in self.systems:
                out[self.indicator(system)] = (f["system"] == system).astype(float).to_numpy()
        if "w" in f:
            out["w"] = f["w"].to_numpy(float)
        return out

    def components(self) -> list[tuple[str, str]]:
        """(group, term) of every random effect of the full model."""
        if self.random == "invariant":
            return [(h, "(Intercept)") for g in GROUPS for h in (g, f"{g}:system")]
        if self.random == "per-system":
            return [(g, self.indicator(s)) for g in GROUPS for s in self.systems]
        return [(g, t) for g in GROUPS for t in ("(Intercept)",) + self.columns]

    def contrast_components(self, system: str) -> list[tuple[str, str]]:
        """The components whose variance enters the comparison of ``system`` with the baseline."""
        if self.random == "invariant":
            return [(f"{g}:system", "(Intercept)") for g in GROUPS]
        if self.random == "per-system":
            return [(g, self.indicator(s)) for g in GROUPS for s in (self.systems[0], system)]
        return [(g, self.columns[self.systems.index(system) - 1]) for g in GROUPS]

    def pair_moments(self, sd: Callable[[str, str], Any], system: str, group: str, cov: Any = 0.0) -> tuple[Any, Any, Any]:
        """Variances of a pair's mean (the planner's intercept) and difference (its slope), and their covariance.

        For one group (worker or item), ``system`` against the baseline; ``sd(group, term)``
        gives a component's SD (numbers or arrays of draws), ``cov`` the intercept-slope
        covariance of a correlated slope model. Coding-invariant: sigma1^2 = 2 tau^2,
        sigma0^2 = sigma^2 + tau^2 / 2; per-system SDs a, b: (a^2 + b^2) / 4, a^2 + b^2, (b^2 - a^2) / 2.
        """
        if self.random == "invariant":
            s0, tau = sd(group, "(Intercept)"), sd(f"{group}:system", "(Intercept)")
            return s0**2 + tau**2 / 2, 2 * tau**2, 0 * s0
        if self.random == "per-system":
            a, b = sd(group, self.indicator(self.systems[0])), sd(group, self.indicator(system))
            return (a**2 + b**2) / 4, a**2 + b**2, (b**2 - a**2) / 2
        col = self.columns[self.systems.index(system) - 1]
        i, s = sd(group, "(Intercept)"), sd(group, col)
        if self.columns == ("x",):
            return i**2, s**2, cov
        return i**2 + s**2 / 4 + cov, s**2, cov + s**2 / 2

    def spec(self, correlated: bool = False, dropped: frozenset[tuple[str, str]] = frozenset()) -> LmmSpec:
        """The Gaussian model with some components dropped."""
        return LmmSpec(self.columns, tuple(c for c in self.components() if c not in dropped), correlated)

    def formula(self, correlated: bool = False, dropped: frozenset[tuple[str, str]] = frozenset()) -> str:
        """lme4 formula (separate terms when uncorrelated, so single ones can be dropped)."""
        return self.spec(correlated, dropped).formula


def wald_sd_intervals(theta: np.ndarray, sigma: float, vcov: np.ndarray, level: float = 0.95) -> list[tuple[float, float]]:
    """Delta-method intervals on the log-SD scale for sd_k = theta_k * sigma and sigma itself.

    ``vcov``: covariance of (theta..., sigma) (lmerTest's ``vcov_varpar``). An SD
    at zero gets [0, NaN]: the log scale has no upper bound there.
    """
    from scipy import stats

    z = stats.norm.isf((1 - level) / 2)
    m = len(theta)
    out = []
    for k in range(m + 1):
        grad = np.zeros(m + 1)
        if k < m:
            grad[k], grad[m], sd = sigma, theta[k], theta[k] * sigma
        else:
            grad[m], sd = 1.0, sigma
        var = float(grad @ vcov @ grad)
        if sd <= ZERO_TOL * sigma or not np.isfinite(var) or var <= 0:
            out.append((0.0 if sd <= ZERO_TOL * sigma else float("nan"), float("nan")))
            continue
        half = min(z * np.sqrt(var) / sd, 700.0)  # exp() of more overflows: the interval is [0, inf) anyway
        out.append((sd * float(np.exp(-half)), sd * float(np.exp(half))))
    return out


#: a Wald SD interval whose ends are more than this factor apart is not reported (see :func:`unreliable_wald`)
WALD_MAX_RATIO = 100.0


def unreliable_wald(design: Design, raw: RawFit) -> RawFit:
    """``raw`` with the Wald SD intervals spanning more than ``WALD_MAX_RATIO`` removed (NaN) and named in a warning.

    Such an interval (e.g. [3.9e-6, 21.2]) comes from an SD near zero, where the
    deviance is flat and far from quadratic in log SD: the delta method says
    nothing there. Profile intervals do.
    """
    comp = raw.components.copy()
    wide = (comp["upper"] > WALD_MAX_RATIO * comp["lower"]).to_numpy()
    names = [f"{component_label(design, g, t)} [{lo:.2g}, {hi:.2g}]"
             for g, t, lo, hi in comp.loc[wide, ["group", "term", "lower", "upper"]].itertuples(index=False)]
    sigma_ci = raw.sigma_interval
    if sigma_ci[1] > WALD_MAX_RATIO * sigma_ci[0]:
        names.append(f"residual [{sigma_ci[0]:.2g}, {sigma_ci[1]:.2g}]")
        sigma_ci = (math.nan, math.nan)
    if not names:
        return raw
    comp.loc[wide, ["lower", "upper"]] = math.nan
    note = ("Wald interval unreliable, not reported (the SD is near zero, where the log-SD delta method fails; "
            "use --intervals profile): " + "; ".join(names))
    return replace(raw, components=comp, sigma_interval=sigma_ci, warnings=raw.warnings + (note,))


def component_label(design: Design, group: str, term: str) -> str:
    """Human name of a variance component, e.g. 'worker slope of F vs A', 'item x system'."""
    if design.family == "binomial":
        return f"{group} intercept ({term} vs {design.systems[0]})"
    if ":" in group:
        return group.replace(":", " x ")
    if term == "(Intercept)":
        return f"{group} intercept"
    if design.random == "per-system":
        return f"{group} SD of {design.systems[int(term[1:])]}"
    system = design.systems[1 + design.columns.index(term)]
    return f"{group} slope of {system} vs {design.systems[0]}"


def zero_components(design: Design, raw: RawFit) -> list[tuple[str, str]]:
    """(group, term) of the components estimated at zero."""
    c = raw.components
    tol = ZERO_TOL * (raw.sigma if math.isfinite(raw.sigma) else 1.0)
    return [(g, t) for g, t, sd in zip(c["group"], c["term"], c["sd"]) if sd <= tol]


@dataclass(frozen=True)
class FitResult:
    """A fitted pilot: per-comparison records (system vs baseline) and everything behind them."""

    data: PilotData
    design: Design
    raw: RawFit
    correlated: bool
    intervals: str
    dropped: tuple[tuple[str, str, str], ...] = ()  #: (group, term, why)
    steps: tuple[str, ...] = ()  #: what --simplify did, in order
    records: list[dict[str, Any]] = field(default_factory=list)
    unidentified: tuple[str, ...] = ()  #: variance components the design cannot separate, and what was fitted

    @property
    def zero_components(self) -> list[str]:
        return [component_label(self.design, g, t) for g, t in zero_components(self.design, self.raw)]

    def flat_records(self) -> list[dict[str, Any]]:
        """One flat record per comparison (the CLI's --json): intervals as NAME_ci_low / NAME_ci_high,
        correlations as cor_GROUP."""
        flat = []
        for rec in self.records:
            r = {k: v for k, v in rec.items() if k not in ("intervals", "correlations")}
            for name, (lo, hi) in rec.get("intervals", {}).items():
                r[f"{name}_ci_low"], r[f"{name}_ci_high"] = lo, hi
            for group, cor in (rec.get("correlations") or {}).items():
                r[f"cor_{group}"] = cor
            flat.append(r)
        return flat

    def comparison(self, system: str | None = None) -> dict[str, Any]:
        """The record of one comparison (the only one when there are two systems)."""
        if system is None:
            if len(self.records) != 1:
                raise InputError("several comparisons: name one ({})".format(", ".join(r["system"] for r in self.records)))
            return self.records[0]
        for r in self.records:
            if r["system"] == system:
                return r
        raise InputError(f"no comparison for system {system!r}; have {', '.join(r['system'] for r in self.records)}")

    def provenance(self, system: str) -> dict[str, Any]:
        """Where a parameter set comes from: input, counts, backend, convergence, intervals."""
        rec = self.comparison(system)
        return {
            "source": self.data.source,
            "sha256": self.data.sha256,
            **self.data.counts(),
            "family": self.design.family,
            "baseline": self.design.systems[0],
            "system": system,
            "backend": self.raw.backend,
            "versions": self.raw.versions,
            "model": self.design.formula(self.correlated, frozenset((g, t) for g, t, _ in self.dropped))
            if self.design.family == "gaussian" else "won ~ 1 + (1 | worker) + (1 | item) (logistic)",
            "random": self.design.random if self.design.family == "gaussian" else None,
            "parameterisation": PARAMETERISATION.get(self.design.random) if self.design.family == "gaussian" else None,
            "singular": self.raw.singular,
            "zero_components": self.zero_components,
            "unidentified": list(self.unidentified),
            "simplified": list(self.steps),
            "warnings": list(self.raw.warnings) + list(rec.get("notes", [])),
            "notes": list(self.data.notes),
            "original_scale": list(self.data.scale) if self.data.scale else None,
            "effect": rec["effect"],
            "effect_se": rec["effect_se"],
            "df": rec["df"],
            "p_value": rec["p_value"],
            "intervals": {"method": self.intervals, **rec.get("intervals", {})},
        }

    def to_params_doc(self, system: str | None = None) -> dict[str, Any]:
        """The parameter-file document of one comparison."""
        rec = self.comparison(system)
        prov = self.provenance(rec["system"])
        if self.design.family == "binomial":
            doc = {
                "schema": "humaneval-power/h2h-params",
                "version": 1,
                "family": "binomial",
                "name": f"{rec['system']} vs {rec['baseline']}",
                "intercept": rec["effect"],
                "sd_worker": rec["sd_worker"],
                "sd_item": rec["sd_item"],
                **({"p_tie": rec["p_tie"], "ties": rec["ties"]} if "p_tie" in rec else {}),
                "separation": rec["separation"],
                **({"separation_reason": rec["separation_reason"]} if rec["separation"] else {}),
                "provenance": prov,
            }
        else:
            params = LikertParams(
                intercept=rec["intercept"],
                **{k: rec[k] for k in SD_NAMES},
                scale=(0.0, 1.0) if self.data.scale else None,
                effect=rec["effect"],
                name=f"{rec['system']} vs {rec['baseline']}",
                provenance=prov,
            )
            doc = params.to_json()
            doc["correlations"] = rec.get("correlations")
        if self.raw.draws:
            key = "posterior_draws" if self.raw.backend == "bambi" else "bootstrap_draws"
            doc[key] = comparison_draws(self.design, self.raw.draws, rec["system"])
        return doc

    def to_params_file(self) -> dict[str, Any]:
        """One comparison: its document; several: a set keyed by system."""
        if len(self.records) == 1:
            return self.to_params_doc()
        return {
            "schema": "humaneval-power/params-set",
            "version": 1,
            "baseline": self.design.systems[0],
            "comparisons": {r["system"]: self.to_params_doc(r["system"]) for r in self.records},
        }

    def summary(self) -> str:
        """A readable summary: fixed effects with SE, df, p; variance components with intervals."""
        c = self.data.counts()
        lines = [
            (f"{self.design.family} mixed model, backend {self.raw.backend}: {c['n_ratings']} ratings, "
             f"{c['n_workers']} workers, {c['n_items']} items, {c['n_systems']} systems (baseline {self.design.systems[0]})"),
        ]
        if self.design.family == "gaussian":
            lines.append("model: " + self.design.formula(self.correlated, frozenset((g, t) for g, t, _ in self.dropped)))
        lines.append("\nfixed effects (difference from the baseline):")
        co = self.raw.coefficients.copy()
        names = dict(zip(self.design.columns, (f"{s} vs {self.design.systems[0]}" for s in self.design.systems[1:])))
        co["term"] = [names.get(t, t) for t in co["term"]]
        lines.append(co.dropna(axis=1, how="all").to_string(index=False, float_format=lambda v: f"{v:.4g}"))  # bambi: no p, df
        lines.append("\nvariance components (SD; 95% interval: " + self.intervals + "):")
        order = {gt: k for k, gt in enumerate(self.design.components())}
        comp = self.raw.components.copy()
        comp = comp.iloc[sorted(range(len(comp)), key=lambda r: order.get((comp.group.iloc[r], comp.term.iloc[r]), r))]
        comp.insert(0, "component", [component_label(self.design, g, t) for g, t in zip(comp.group, comp.term)])
        if {"lower", "upper"} <= set(comp.columns):  # an interval not reported (an SD at or near zero) is left empty
            comp.loc[comp["upper"].isna(), "lower"] = np.nan
        lines.append(comp.drop(columns=["group", "term"]).to_string(index=False, na_rep="",
                                                                     float_format=lambda v: f"{v:.4g}"))
        if self.design.family == "gaussian":
            lo, hi = self.raw.sigma_interval
            lines.append(f"residual SD {self.raw.sigma:.4g}" + (f" [{lo:.4g}, {hi:.4g}]" if np.isfinite(hi) else ""))
        if self.correlated and not self.raw.correlations.empty:
            lines.append(self.raw.correlations.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        zeros = self.zero_components
        if zeros:
            lines.append("\nsingular fit: estimated at zero: " + "; ".join(zeros))
        elif self.raw.singular:
            lines.append("\nsingular fit: no SD is at zero, but a random-effect covariance matrix is degenerate "
                         "(rank-deficient, e.g. a correlation at +-1); refit without --correlated or with --simplify")
        for text in self.unidentified:
            lines.append(f"not identifiable: {text}")
        for step in self.steps:
            lines.append(f"simplify: {step}")
        for w in self.raw.warnings:
            lines.append(f"warning ({self.raw.backend}): {w}")
        for note in dict.fromkeys(n for r in self.records for n in r.get("notes", [])):
            lines.append(f"warning: {note}")
        for n in self.data.notes:
            lines.append(f"note: {n}")
        return "\n".join(lines)


def comparison_draws(design: Design, draws: dict[str, list[float]], system: str) -> dict[str, list[float]]:
    """Draws (posterior or bootstrap) of one comparison's exported parameters (same conversions as the
    point estimates; ``effect`` only where the fixed effects were drawn)."""
    if design.family == "binomial":
        prefix = system + ":"
        return {k[len(prefix):]: v for k, v in draws.items() if k.startswith(prefix)}
    col = design.columns[design.systems.index(system) - 1]
    zeros = np.zeros(len(draws["sigma"]))
    out = {"sd_residual": draws["sigma"]}
    if f"b|{col}" in draws:
        out["effect"] = draws[f"b|{col}"]
    for g in GROUPS:
        var_int, var_slope, _ = design.pair_moments(lambda h, t: np.asarray(draws.get(f"{h}|{t}", zeros)), system, g)
        out[f"sd_{g}_slope"] = np.sqrt(var_slope).tolist()
        out[f"sd_{g}_intercept"] = np.sqrt(var_int).tolist()
    return out


def split_component_name(name: str) -> tuple[str, str]:
    """lme4 profile names 'sd_x|item', 'sd_(Intercept)|worker' -> (group, term)."""
    m = re.match(r"sd_(.+)\|([^|.]+)(\.\d+)?$", name)
    if not m:
        raise ValueError(name)
    return m.group(2), m.group(1)
