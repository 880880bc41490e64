"""Analyse a completed study's ordinal ratings: one cumulative-link mixed model across all systems.

``analyze(..., family="ordinal")`` (``hepower analyze --family ordinal``) reads integer ratings as
``hepower fit --family ordinal`` does (:func:`~humaneval_power.fitting.ratings.read_ordinal_ratings`) and fits

    rating ~ system + (1 | worker) + (1 | worker:system) + (1 | item) + (1 | item:system)

(cumulative logit or probit, flexible thresholds; a term the design does not identify is left out and named:
:func:`~humaneval_power.fitting.ordinal_fit.identified_terms`) by R ``ordinal::clmm`` (``backend="clmm"``) or
the no-R Laplace CLMM (``"laplace"``, the same likelihood). It gives what ``anova(m0, m)`` and ``emmeans`` give
for a clmm fit:

* the test of "all systems equal": the likelihood ratio against the model without ``system`` (chi-square,
  ``anova``) and the Wald chi-square of the system effects (``joint_tests``' F times its df);
* estimated marginal means of every system on the latent scale (emmeans' default ``mode = "latent"``: the
  linear predictor minus the mean threshold), as mean rating (``mode = "mean.class"``: sum_k k P(Y = k)) and as
  category probabilities (``mode = "prob"``), with delta-method SEs and Wald intervals; emmeans ignores clmm's
  random effects, so the last two are for a typical worker and item (random effects 0). The same quantities
  averaged over the fitted random effects (the population of workers and items,
  :class:`~humaneval_power.ordinal_process.OrdinalProcess`) are given beside them as point estimates;
* contrasts (all pairs or against the baseline) on the latent scale with asymptotic z tests (emmeans' df =
  Inf), adjusted over the family as the Gaussian analysis adjusts them
  (:func:`~humaneval_power.completed_study.inference.contrast_table`). ``effect_size`` is the difference over
  the latent SD of a single rating (the link's residual SD and the random effects' together).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
from scipy import stats

from ..errors import InputError
from ..fitting.clmm import BOUNDARY_SD, TERMS, check_link, crossed_groups
from ..fitting.ordinal_fit import fit_ordinal
from ..fitting.ratings import PilotData, read_ordinal_ratings
from ..ordinal_process import OrdinalProcess
from ..validation import check_choice
from .backends import ORDINAL_BACKENDS
from .inference import ADJUST_TEXT, CONTRASTS, INTERVAL_TEXT, contrast_table
from .layout import check_data, design_summary
from .model_ladder import RANDOM
from .report import category_figure, markdown_table

#: the latent residual's SD under each link (fixed by the link)
LINK_SD = {"logit": math.pi / math.sqrt(3), "probit": 1.0}
#: how each backend fits, in words (methods paragraph)
ENGINE_TEXT = {"clmm": "R's ordinal::clmm, Laplace approximation",
               "laplace": "humaneval-power's Laplace CLMM, ordinal::clmm's likelihood without R"}
_STEP = 1e-5  # central-difference step of the delta method (thresholds and effects are O(1))


@dataclass(frozen=True, eq=False)
class WaldInference:
    """Asymptotic inference on the parameters (thresholds, beta) of a CLMM fit: emmeans' for clm and clmm
    (normal reference, df = Inf); ``contrasts`` and ``vcov`` as :mod:`.inference` expects them."""

    beta: np.ndarray  #: thresholds then effects
    vcov: np.ndarray

    def contrasts(self, rows: np.ndarray) -> pd.DataFrame:
        """estimate, se, df (inf), t (the z statistic) and two-sided normal p of each row."""
        rows = np.atleast_2d(np.asarray(rows, float))
        est = rows @ self.beta
        se = np.sqrt(np.einsum("ip,pq,iq->i", rows, self.vcov, rows))
        z = est / se
        return pd.DataFrame({"estimate": est, "se": se, "df": np.inf, "t": z, "p_value": 2 * stats.norm.sf(np.abs(z))})

    def wald(self, rows: np.ndarray) -> dict[str, float]:
        """Wald chi-square of ``rows @ beta = 0`` (emmeans' ``joint_tests``: F = chi2 / df, df2 = Inf)."""
        lb = rows @ self.beta
        chi2 = float(lb @ np.linalg.solve(rows @ self.vcov @ rows.T, lb))
        q = int(np.linalg.matrix_rank(rows))
        return {"chi2": chi2, "df": float(q), "p_value": float(stats.chi2.sf(chi2, q))}


@dataclass(frozen=True, eq=False)
class OrdinalAnalysis:
    """What ``analyze(..., family="ordinal")`` found: tables (:meth:`tables`), contrast records (:meth:`records`)."""

    design: pd.DataFrame         #: name, value
    components: pd.DataFrame     #: component, sd, variance, share (latent scale; the residual fixed by the link)
    thresholds: pd.DataFrame     #: threshold, estimate, se
    omnibus: pd.DataFrame        #: test, chi2, df, p_value (likelihood ratio, Wald)
    means: pd.DataFrame          #: system, emmean (latent), se, ci_low, ci_high, mean_rating, mean_rating_se,
    #: mean_rating_ci_low, mean_rating_ci_high, mean_rating_population, observed_mean, n_ratings
    probabilities: pd.DataFrame  #: system, rating, probability, se, ci_low, ci_high, population, observed
    contrasts: pd.DataFrame      #: system, versus, estimate, se, z, p_value, p_adjusted, ci_low, ci_high, effect_size
    model: str
    backend: str
    link: str
    adjust: str
    family: str                  #: the contrast family: "pairs" or "baseline"
    level: float
    seed: int
    source: str
    loglik: float
    notes: tuple[str, ...] = ()
    versions: dict[str, str] = field(default_factory=dict)
    data: PilotData | None = field(default=None, repr=False)

    scale = None      #: scores are categories, never rescaled (the report's shared code reads it)
    singular = property(lambda self: bool((self.components["sd"].iloc[:-1] < BOUNDARY_SD).any()))

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables by name: design, components, thresholds, omnibus, means, probabilities, contrasts."""
        return {"design": self.design, "components": self.components, "thresholds": self.thresholds,
                "omnibus": self.omnibus, "means": self.means, "probabilities": self.probabilities,
                "contrasts": self.contrasts}

    def adjustment_text(self) -> str:
        """Which family the adjustment covers, in words."""
        return ADJUST_TEXT[self.adjust].format(n=len(self.contrasts), k=len(self.means), seed=self.seed)

    def records(self, paper: bool = False) -> list[dict[str, Any]]:
        """One record per contrast (the CLI's ``--json``); ``paper`` is refused (computed for interval ratings)."""
        if paper:
            raise InputError("--paper-records applies to --family gaussian, not to ordinal ratings")
        extra = {"adjust": self.adjust, "model": self.model, "backend": self.backend, "family": "ordinal",
                 "link": self.link, "scale": "latent"}
        return [{**rec, **extra} for rec in self.contrasts.to_dict("records")]

    def _tests(self) -> str:
        lr, wald = (self.omnibus.iloc[i] for i in (0, 1))
        return (f"likelihood ratio chi2({lr.df:.0f}) = {lr.chi2:.2f}, p = {lr.p_value:.3g}; Wald chi2({wald.df:.0f}) "
                f"= {wald.chi2:.2f}, p = {wald.p_value:.3g}")

    def methods(self) -> str:
        """A methods paragraph for the paper."""
        which = ("every pair of systems" if self.family == "pairs"
                 else f"each system with {self.contrasts.versus.iloc[0]}")
        return (f"We fitted the cumulative {self.link} mixed model `{self.model}` with flexible thresholds by "
                f"maximum likelihood ({ENGINE_TEXT[self.backend]}). We tested whether all systems are rated alike "
                f"by a likelihood-ratio test against the model without systems and by a Wald test ({self._tests()}). "
                f"Estimated marginal means are on the latent scale (the linear predictor minus the mean threshold), "
                "and, for a typical worker and item, as mean rating and category probabilities (emmeans' latent, "
                "mean.class and prob modes; delta-method standard errors). We compared " + which
                + f" on the latent scale by asymptotic z tests, adjusting p-values and {self.level:.0%} intervals by "
                f"{self.adjustment_text()}."
                + (" Differences are log cumulative odds ratios." if self.link == "logit" else "")
                + " Effect sizes are latent differences divided by the latent SD of a single rating (the link's "
                "residual and the random effects together).")

    def markdown(self) -> str:
        """A short Markdown report: the methods paragraph and the tables."""
        sections = [f"# Ordinal analysis of {Path(self.source).name}", "", self.methods(), ""]
        for title, table in self._titled_tables():
            sections += [f"## {title}", "", markdown_table(table), ""]
        if self.notes:
            sections += ["## Notes", "", *(f"- {n}" for n in self.notes), ""]
        return "\n".join(sections)

    def _titled_tables(self) -> list[tuple[str, pd.DataFrame]]:
        return [("Design", self.design), ("Test of all systems equal", self.omnibus),
                (f"Estimated marginal means ({self.level:.0%} intervals)", self.means),
                ("Category probabilities", self.probabilities), ("Contrasts (latent scale)", self.contrasts),
                ("Thresholds", self.thresholds), ("Variance components (latent scale)", self.components)]

    def __str__(self) -> str:
        fmt = {"float_format": lambda v: f"{v:.4g}", "index": False}
        d = dict(zip(self.design.name, self.design.value))
        wide = self.probabilities.pivot(index="system", columns="rating", values="probability").loc[list(self.means.system)]
        parts = [
            (f"{self.source}: {d['ratings']} ratings of {d['systems']} systems by {d['workers']} workers on "
             f"{d['items']} items ({d['crossing']})"),
            f"model: {self.model} (cumulative {self.link}, {self.backend}); log-likelihood {self.loglik:.6f}",
            "effect_size = latent difference / latent SD of a single rating",
            "", "variance components (latent scale):", self.components.to_string(**fmt),
            "", "thresholds:", self.thresholds.to_string(**fmt),
            "", f"all systems equal: {self._tests()}",
            "", (f"estimated marginal means ({self.level:.0%} intervals; emmean on the latent scale, mean_rating for a "
                 "typical worker and item, mean_rating_population averaged over workers and items):"),
            self.means.to_string(**fmt),
            "", "category probabilities (typical worker and item):", wide.to_string(float_format=lambda v: f"{v:.3f}"),
            "", f"contrasts ({self.family}, latent scale); adjustment: {self.adjustment_text()}:",
            self.contrasts.to_string(**fmt),
        ]
        if self.notes:
            parts += ["", *(f"note: {n}" for n in self.notes)]
        return "\n".join(parts)

    def figure(self) -> Any:
        """Latent marginal means (left) and the contrasts with their adjusted intervals (right)."""
        from ..plots import plot_intervals

        alpha = 1 - self.level
        means = self.means.rename(columns={"system": "label", "emmean": "estimate"})
        con = self.contrasts.assign(label=self.contrasts["system"] + " - " + self.contrasts["versus"],
                                    significant=self.contrasts["p_adjusted"] <= alpha)
        return plot_intervals([
            (means, f"latent marginal means, {self.level:.0%} CIs", "latent scale", None),
            (con, f"contrasts, {INTERVAL_TEXT[self.adjust]} {self.level:.0%} CIs (filled: p_adj <= {alpha:g})",
             "latent difference" + (" (log cumulative odds ratio)" if self.link == "logit" else ""), 0.0)],
            title=Path(self.source).name)

    def report_sections(self, check: Any = None) -> tuple[str, list[tuple[str, list[Any]]]]:
        """Title and sections of the report (see :mod:`.report`), with the category-probability figure."""
        sections: list[tuple[str, list[Any]]] = [
            ("Methods (for the paper)", [self.methods()]),
            ("Design", [self.design]),
            ("Model", [(f"`{self.model}`, cumulative {self.link} link, flexible thresholds, fitted by "
                       f"{ENGINE_TEXT[self.backend]}. Ratings are ordered categories: the model places each "
                       "system on a latent scale cut by the thresholds, with random effects for workers, items and "
                       "their interactions with the system on that scale."), self.thresholds]),
            ("Test of all systems equal", [self.omnibus, self._tests() + "."]),
            (f"Estimated marginal means ({self.level:.0%} intervals)", [
                ("emmean: latent scale; mean_rating: expected rating for a typical worker and item (random effects "
                "0, emmeans' mean.class); mean_rating_population: averaged over the fitted workers' and items' "
                "random effects; observed_mean: the raw mean."), self.means, self.figure()]),
            ("Category probabilities", [
                ("probability: for a typical worker and item (emmeans' prob mode), with delta-method SE; "
                "population: averaged over the random effects; observed: the share of ratings."),
                category_figure(self.probabilities, f"{Path(self.source).name}: category probabilities"),
                self.probabilities]),
            ("Contrasts (latent scale)", [f"Family: {self.family}; adjustment: {self.adjustment_text()}.",
                                          self.contrasts]),
            ("Variance components (latent scale)", [self.components]),
        ]
        warns = list(self.notes) + [("No design check: the report's simulated Type-I error and sensitivity are "
                                    "computed for the Gaussian analysis (--family gaussian).")]
        sections.append(("Warnings", ["\n".join(f"- {w}" for w in warns)]))
        return f"Ordinal analysis of {Path(self.source).name}", sections


# -- the analysis ------------------------------------------------------------------------------


def check_ordinal_options(random: str, df: str, backend: str | None, link: str | None, keep_singular: bool,
                          agreement_metric: str, reliability_target: float) -> tuple[str, str]:
    """Refuse what the ordinal analysis does not offer; the backend and link to use."""
    check_choice("random-effect structure", random, RANDOM)
    if random != "invariant" or keep_singular:
        raise InputError(f"{'--keep-singular' if keep_singular else '--random ' + random} does not apply to --family "
                         "ordinal: clmm fits random intercepts only (worker, item, worker x system, item x system)")
    if df != "satterthwaite":
        raise InputError(f"--df {df} does not apply to --family ordinal: its tests are asymptotic (z and chi-square, "
                         "emmeans' df = Inf for clmm)")
    backend = backend or ORDINAL_BACKENDS[0]
    if backend == "bambi":
        raise InputError("--backend bambi is not offered with --family ordinal yet (posterior contrasts of a "
                         "cumulative model); use clmm or laplace")
    if backend not in ORDINAL_BACKENDS:
        raise InputError(f"--backend {backend} does not fit ordinal models; --family ordinal uses "
                         + " or ".join(ORDINAL_BACKENDS) + " (R ordinal::clmm, or the Laplace CLMM without R)")
    if agreement_metric != "interval" or reliability_target != 0.8:
        raise InputError("--agreement-metric and --reliability-target apply to --family gaussian")
    return backend, check_link(link or "logit")


def analyze_ordinal(
    ratings: str | Path | pd.DataFrame,
    worker: str | None, item: str | None, system: str | None, score: str | None,
    where: dict[str, str] | None, baseline: str | None, scale: tuple[float, float] | None,
    systems: Sequence[str] | None, duplicates: str, contrasts: str, adjust: str, backend: str, link: str,
    level: float, seed: int, progress: Callable[[str], None] | None = None,
) -> OrdinalAnalysis:
    """The ordinal analysis (options checked by ``analyze``): fit, null fit, tests, means, contrasts."""
    from ..fitting import registry

    data = read_ordinal_ratings(ratings, worker, item, system, score, baseline, systems, where, scale, duplicates)
    check_data(data)
    check_choice("contrasts", contrasts, CONTRASTS)
    report = progress or (lambda message: None)
    full = fit_ordinal(data, backend, link, progress=progress)
    fit, f, names = full.fit, data.frame, list(data.systems)
    levels = tuple(data.extra["levels"])
    groups = {t: g for t, g in _groups(f).items() if t in full.terms}
    report(f"fitting the model without systems ({backend}) for the likelihood-ratio test ...")
    null = registry.get(backend).ordinal_fitter()(f["score"].to_numpy(), None, groups, link=link,
                                                  scale=(levels[0], levels[-1]))
    K1, p = len(fit.thresholds), len(fit.beta)
    inference = WaldInference(np.concatenate([fit.thresholds, fit.beta]), (fit.cov + fit.cov.T) / 2)
    if not np.all(np.isfinite(inference.vcov)):
        raise InputError(f"the {backend} fit has no covariance ({'; '.join(fit.warnings) or fit.message}): "
                         "the tests cannot be computed")
    rows = np.zeros((len(names), K1 + p))
    rows[:, :K1] = -1.0 / K1
    rows[1:, K1:] = np.eye(p)
    lr = max(0.0, 2 * (fit.loglik - null.loglik))
    omnibus = pd.DataFrame([
        {"test": "likelihood ratio", "chi2": lr, "df": float(p), "p_value": float(stats.chi2.sf(lr, p))},
        {"test": "Wald", **inference.wald(rows[1:] - rows[0])}])

    sds = full.sds
    latent_sd = math.sqrt(LINK_SD[link] ** 2 + sum(v * v for v in sds.values()))
    # contrast_table needs ``contrasts(rows)`` and ``vcov`` of its inference: WaldInference has both (df = Inf)
    table = contrast_table(cast(Any, inference), rows, names, contrasts, adjust, level, seed, latent_sd, report)
    table = table.drop(columns="df").rename(columns={"t": "z"})
    means, probs = _emmeans(inference, rows, names, levels, link, sds, level, f)
    components = _components(sds, link, full.terms)
    thresholds = pd.DataFrame({"threshold": fit.threshold_names, "estimate": fit.thresholds, "se": fit.se[:K1]})
    notes = list(data.notes) + list(full.unidentified) + list(full.warnings())
    if not null.converged:
        notes.append(f"the model without systems did not converge (max |gradient| {null.max_grad:.2g}): the "
                     "likelihood-ratio test is approximate")
    return OrdinalAnalysis(
        design=design_summary(data), components=components, thresholds=thresholds, omnibus=omnibus, means=means,
        probabilities=probs, contrasts=table, model=full.model.rsplit(" (cumulative", 1)[0], backend=backend, link=link,
        adjust=adjust, family=contrasts, level=level, seed=seed, source=data.source, loglik=float(fit.loglik),
        notes=tuple(dict.fromkeys(notes)), versions=dict(full.versions), data=data)


def _groups(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    return crossed_groups(frame["worker"], frame["item"], frame["system"], TERMS)


def _components(sds: dict[str, float], link: str, fitted: tuple[str, ...]) -> pd.DataFrame:
    """The latent SDs (0 for a term not fitted) and the link's fixed residual, with each one's share."""
    names = {f"sd_{t.replace(':', '_')}": t.replace(":", " x ") for t in TERMS}
    def status(term: str, sd: float) -> str:
        if term not in fitted:
            return "not identified (0)"
        return f"fitted, at the boundary (below {BOUNDARY_SD:g})" if sd < BOUNDARY_SD else "fitted"

    rows = [(names[k], v, status(names[k].replace(" x ", ":"), v)) for k, v in sds.items()]
    rows.append(("latent residual", LINK_SD[link], f"fixed by the {link} link"))
    table = pd.DataFrame(rows, columns=["component", "sd", "status"])
    table.insert(2, "variance", table["sd"] ** 2)
    table.insert(3, "share", table["variance"] / table["variance"].sum())
    return table


def _process(theta: np.ndarray, link: str, lowest: int, sds: dict[str, float] | None = None) -> OrdinalProcess:
    """The cumulative-link model at thresholds ``theta``: with ``sds`` its random effects (averaged over), else none."""
    sd = sds or {}
    return OrdinalProcess(tuple(float(v) for v in theta), link, sd.get("sd_worker", 0.0),
                          sd.get("sd_worker_system", 0.0), sd.get("sd_item", 0.0), sd.get("sd_item_system", 0.0),
                          lowest=lowest)


def _emmeans(inference: WaldInference, rows: np.ndarray, names: list[str], levels: tuple[int, ...], link: str,
             sds: dict[str, float], level: float, frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """emmeans' latent, mean.class and prob EMMs (delta method) and the population-averaged mean and
    probabilities (the fitted random effects integrated out; point estimates)."""
    K1 = len(levels) - 1
    S = len(names)

    def conditional(params: np.ndarray) -> np.ndarray:
        """Per system: K probabilities then the mean rating, at random effects 0."""
        proc = _process(params[:K1], link, levels[0])
        eta = rows[:, K1:] @ params[K1:]
        return np.column_stack([proc.probabilities(eta), proc.mean_rating(eta)]).ravel()

    theta = inference.beta
    values = conditional(theta)
    jac = np.empty((len(values), len(theta)))
    for j in range(len(theta)):
        step = np.zeros(len(theta))
        step[j] = _STEP
        jac[:, j] = (conditional(theta + step) - conditional(theta - step)) / (2 * _STEP)
    se = np.sqrt(np.maximum(np.einsum("ip,pq,iq->i", jac, inference.vcov, jac), 0.0))
    values, se = values.reshape(S, K1 + 2), se.reshape(S, K1 + 2)
    z = stats.norm.ppf(1 - (1 - level) / 2)
    eta = rows[:, K1:] @ theta[K1:]
    pop = _process(theta[:K1], link, levels[0], sds)
    counts = frame.groupby("system").size()
    observed = (pd.crosstab(frame["system"], frame["score"].astype(int)).reindex(index=names, columns=list(levels),
                                                                                  fill_value=0))
    latent = inference.contrasts(rows)
    means = pd.DataFrame({
        "system": names, "emmean": latent["estimate"], "se": latent["se"],
        "ci_low": latent["estimate"] - z * latent["se"], "ci_high": latent["estimate"] + z * latent["se"],
        "mean_rating": values[:, -1], "mean_rating_se": se[:, -1],
        "mean_rating_ci_low": values[:, -1] - z * se[:, -1], "mean_rating_ci_high": values[:, -1] + z * se[:, -1],
        "mean_rating_population": pop.mean_rating(eta),
        "observed_mean": [float(frame.loc[frame["system"] == s, "score"].mean()) for s in names],
        "n_ratings": [int(counts[s]) for s in names]})
    prob, prob_se = values[:, :-1], se[:, :-1]
    probs = pd.DataFrame({
        "system": np.repeat(names, len(levels)), "rating": np.tile(levels, S), "probability": prob.ravel(),
        "se": prob_se.ravel(), "ci_low": (prob - z * prob_se).ravel(), "ci_high": (prob + z * prob_se).ravel(),
        "population": pop.probabilities(eta).ravel(),
        "observed": (observed.to_numpy(float) / observed.to_numpy(float).sum(axis=1, keepdims=True)).ravel()})
    return means, probs


__all__ = ["ENGINE_TEXT", "LINK_SD", "OrdinalAnalysis", "WaldInference", "analyze_ordinal",
           "check_ordinal_options"]
