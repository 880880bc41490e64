"""Analyse a completed study's ordinal ratings: one cumulative-link mixed model across all systems.

``analyze(..., family="ordinal")`` (``hepower analyze --family ordinal``) reads integer ratings as
``hepower fit --family ordinal`` does (:func:`~humaneval_power.fitting.ratings.read_ratings`) and fits

    rating ~ system + (1 | worker) + (1 | worker:system) + (1 | item) + (1 | item:system)

(cumulative logit or probit, flexible thresholds; a term the design does not identify is left out and named:
:func:`~humaneval_power.fitting.ordinal_fit.identified_terms`) by R ``ordinal::clmm`` (``backend="clmm"``) or
the no-R Laplace CLMM (``"laplace"``, the same likelihood). It gives what ``anova(m0, m)`` and ``emmeans`` give
for a clmm fit:

* the test of "all systems equal": first the Bartlett-corrected likelihood ratio (the planner's default
  ordinal test, :func:`bartlett_test`: ``bootstrap`` data sets simulated from the fitted model without
  ``system``, seeded by ``seed``), then the plain likelihood ratio against the model without ``system``
  (chi-square, ``anova``) and the Wald chi-square of the system effects (``joint_tests``' F times its df);
* estimated marginal means of every system on the latent scale (emmeans' default ``mode = "latent"``: the
  linear predictor minus the mean threshold), as mean rating (``mode = "mean.class"``: sum_k k P(Y = k)) and as
  category probabilities (``mode = "prob"``), with delta-method SEs and Wald intervals; emmeans ignores clmm's
  random effects, so the last two are for a typical worker and item (random effects 0). The same quantities
  averaged over the fitted random effects (the population of workers and items,
  :class:`~humaneval_power.ordinal_process.OrdinalProcess`) are given beside them as point estimates;
* contrasts (all pairs or against the baseline) on the latent scale: ``df="satterthwaite"`` (default) t tests
  with the latent working model's Satterthwaite df (the planner's ``t`` test,
  :func:`~humaneval_power.ordinal_process.contrast_satterthwaite_df`), ``"asymptotic"`` emmeans' z (df =
  Inf); adjusted over the family as the Gaussian analysis adjusts them
  (:func:`~humaneval_power.completed_study.inference.contrast_table`). ``effect_size`` is the difference over
  the latent SD of a single rating (the link's residual SD and the random effects' together).

``backend="bambi"`` gives the posterior instead (:func:`posterior_ordinal`, :class:`OrdinalPosterior`): the same
means, probabilities and latent contrasts as posterior means, SDs and HDIs, with P(better); no p-values.
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
from ..fitting.clmm import BARTLETT_DRAWS, BOUNDARY_SD, TERMS, check_link, crossed_groups, fit_clmm_many, simulate_clmm
from ..fitting.ordinal_fit import fit_ordinal
from ..fitting.ratings import PilotData, read_ratings
from ..ordinal_process import LatentDesign, OrdinalProcess
from ..validation import check_choice
from .backends import ORDINAL_BACKENDS
from .inference import ADJUST_TEXT, DF_METHODS, INTERVAL_TEXT, contrast_table
from .layout import check_data, design_summary
from .model_ladder import RANDOM
from .report import category_figure, markdown_sections, note_lines, text_table, warnings_section

#: the backend of the posterior (bambi's cumulative family: :class:`OrdinalPosterior`)
POSTERIOR_BACKEND = "bambi"
#: the latent residual's SD under each link (fixed by the link)
LINK_SD = {"logit": math.pi / math.sqrt(3), "probit": 1.0}
#: how each backend fits, in words (methods paragraph)
#: the reference distribution of the ordinal contrasts (``df``): the latent working model's Satterthwaite t (the
#: planner's ``t`` test) or asymptotic z (emmeans' df = Inf for clmm)
ORDINAL_DF = ("satterthwaite", "asymptotic")
#: every ``--df`` of ``analyze``: the Gaussian analysis's and the ordinal one's
ANALYZE_DF = tuple(dict.fromkeys((*DF_METHODS, *ORDINAL_DF)))
ENGINE_TEXT = {"clmm": "R's ordinal::clmm, Laplace approximation",
               "laplace": "humaneval-power's Laplace CLMM, ordinal::clmm's likelihood without R"}
_STEP = 1e-5  # central-difference step of the delta method (thresholds and effects are O(1))


@dataclass(frozen=True, eq=False)
class WaldInference:
    """Asymptotic inference on the parameters (thresholds, beta) of a CLMM fit: emmeans' for clm and clmm
    (normal reference, df = Inf); ``contrasts`` and ``vcov`` as :mod:`.inference` expects them."""

    beta: np.ndarray  #: thresholds then effects
    vcov: np.ndarray
    #: the df of a row (``df="satterthwaite"``: :func:`~humaneval_power.ordinal_process.contrast_satterthwaite_df`);
    #: None: asymptotic (df = Inf, the z test)
    df_of: Callable[[np.ndarray], float] | None = None

    def contrasts(self, rows: np.ndarray) -> pd.DataFrame:
        """estimate, se, df (Inf when asymptotic), t (z when asymptotic) and two-sided p of each row."""
        rows = np.atleast_2d(np.asarray(rows, float))
        est = rows @ self.beta
        se = np.sqrt(np.einsum("ip,pq,iq->i", rows, self.vcov, rows))
        t = est / se
        df = np.full(len(rows), np.inf) if self.df_of is None else np.array([self.df_of(r) for r in rows])
        p = np.where(np.isinf(df), 2 * stats.norm.sf(np.abs(t)), 2 * stats.t.sf(np.abs(t), df))
        return pd.DataFrame({"estimate": est, "se": se, "df": df, "t": t, "p_value": p})

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
    omnibus: pd.DataFrame        #: test, chi2, df, p_value (Bartlett-corrected LR first when bootstrapped, LR, Wald)
    means: pd.DataFrame          #: system, emmean (latent), se, ci_low, ci_high, mean_rating, mean_rating_se,
    #: mean_rating_ci_low, mean_rating_ci_high, mean_rating_population, observed_mean, n_ratings
    probabilities: pd.DataFrame  #: system, rating, probability, se, ci_low, ci_high, population, observed
    contrasts: pd.DataFrame      #: system, versus, estimate, se, df and t (z when asymptotic), p_value, p_adjusted,
    #: ci_low, ci_high, effect_size
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
    df: str = "asymptotic"       #: the contrasts' reference (:data:`ORDINAL_DF`)
    bootstrap: int = 0           #: the Bartlett factor's bootstrap draws (0: no Bartlett-corrected test)

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
        def one(row: Any) -> str:
            extra = (f" (Bartlett factor {row.bartlett_factor:.3f} from {row.draws:.0f} parametric-bootstrap draws)"
                     if row.test.startswith("Bartlett") else "")
            return f"{row.test} chi2({row.df:.0f}) = {row.chi2:.2f}, p = {row.p_value:.3g}{extra}"
        return "; ".join(one(r) for r in self.omnibus.itertuples())

    def _contrast_test(self) -> str:
        return ("asymptotic z tests (emmeans' df = Inf)" if self.df == "asymptotic" else
                "t tests with the Satterthwaite df of the latent working model (the linear mixed model of the latent "
                "scale with the fitted variance components and the link's residual variance)")

    def methods(self) -> str:
        """A methods paragraph for the paper."""
        which = ("every pair of systems" if self.family == "pairs"
                 else f"each system with {self.contrasts.versus.iloc[0]}")
        return (f"We fitted the cumulative {self.link} mixed model `{self.model}` with flexible thresholds by "
                f"maximum likelihood ({ENGINE_TEXT[self.backend]}). We tested whether all systems are rated alike "
                f"by a likelihood-ratio test against the model without systems"
                + (" (Bartlett-corrected: the likelihood ratio divided by its mean over data sets simulated from the "
                   "fitted model without systems, times its df)" if self.bootstrap else "")
                + f" and by a Wald test ({self._tests()}). "
                f"Estimated marginal means are on the latent scale (the linear predictor minus the mean threshold), "
                "and, for a typical worker and item, as mean rating and category probabilities (emmeans' latent, "
                "mean.class and prob modes; delta-method standard errors). We compared " + which
                + f" on the latent scale by {self._contrast_test()}, adjusting p-values and {self.level:.0%} intervals by "
                f"{self.adjustment_text()}."
                + (" Differences are log cumulative odds ratios." if self.link == "logit" else "")
                + " Effect sizes are latent differences divided by the latent SD of a single rating (the link's "
                "residual and the random effects together).")

    def markdown(self) -> str:
        """A short Markdown report: the methods paragraph and the tables."""
        return markdown_sections(
            f"Ordinal analysis of {Path(self.source).name}", self.methods(),
            [("Design", self.design), ("Test of all systems equal", self.omnibus),
             (f"Estimated marginal means ({self.level:.0%} intervals)", self.means),
             ("Category probabilities", self.probabilities), ("Contrasts (latent scale)", self.contrasts),
             ("Thresholds", self.thresholds), ("Variance components (latent scale)", self.components)], self.notes)

    def __str__(self) -> str:
        d = dict(zip(self.design.name, self.design.value))
        wide = self.probabilities.pivot(index="system", columns="rating", values="probability").loc[list(self.means.system)]
        parts = [
            (f"{self.source}: {d['ratings']} ratings of {d['systems']} systems by {d['workers']} workers on "
             f"{d['items']} items ({d['crossing']})"),
            f"model: {self.model} (cumulative {self.link}, {self.backend}); log-likelihood {self.loglik:.6f}",
            "effect_size = latent difference / latent SD of a single rating",
            "", "variance components (latent scale):", text_table(self.components),
            "", "thresholds:", text_table(self.thresholds),
            "", f"all systems equal: {self._tests()}",
            "", (f"estimated marginal means ({self.level:.0%} intervals; emmean on the latent scale, mean_rating for a "
                 "typical worker and item, mean_rating_population averaged over workers and items):"),
            text_table(self.means),
            "", "category probabilities (typical worker and item):", wide.to_string(float_format=lambda v: f"{v:.3f}"),
            "", f"contrasts ({self.family}, latent scale); adjustment: {self.adjustment_text()}:",
            text_table(self.contrasts),
        ]
        return "\n".join(parts + note_lines(self.notes))

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
        sections += warnings_section([*self.notes, ("No design check: the report's simulated Type-I error and "
                                                    "sensitivity are computed for the Gaussian analysis (--family "
                                                    "gaussian).")])
        return f"Ordinal analysis of {Path(self.source).name}", sections


@dataclass(frozen=True, eq=False)
class OrdinalPosterior:
    """``analyze(..., family="ordinal", backend="bambi")``: the posterior of the cumulative-link model (bambi's
    ``cumulative`` family, default priors): posterior means, SDs, HDIs and P(better), never p-values."""

    design: pd.DataFrame
    components: pd.DataFrame     #: component, sd (posterior median), variance, share, status
    thresholds: pd.DataFrame     #: threshold, estimate (posterior mean), sd
    means: pd.DataFrame          #: system, emmean (latent), sd, hdi_low, hdi_high, mean_rating, mean_rating_sd,
    #: mean_rating_hdi_low, mean_rating_hdi_high, mean_rating_population, observed_mean, n_ratings
    probabilities: pd.DataFrame  #: system, rating, probability, sd, hdi_low, hdi_high, population, observed
    contrasts: pd.DataFrame      #: system, versus, estimate, sd, hdi_low, hdi_high, prob_greater, effect_size
    model: str
    link: str
    family: str                  #: the contrast family: "pairs" or "baseline"
    level: float
    seed: int
    draws: int
    chains: int
    source: str
    n_draws: int                 #: the joint posterior draws summarised
    notes: tuple[str, ...] = ()
    versions: dict[str, str] = field(default_factory=dict)
    data: PilotData | None = field(default=None, repr=False)

    backend = "bambi"
    adjust = "none"
    scale = None

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables by name: design, components, thresholds, means, probabilities, contrasts."""
        return {"design": self.design, "components": self.components, "thresholds": self.thresholds,
                "means": self.means, "probabilities": self.probabilities, "contrasts": self.contrasts}

    def records(self, paper: bool = False) -> list[dict[str, Any]]:
        """One record per contrast (``--json``): posterior summaries, ``inference: posterior``, no p-values."""
        if paper:
            raise InputError("--paper-records applies to --family gaussian, not to ordinal ratings")
        extra = {"inference": "posterior", "level": self.level, "model": self.model, "backend": self.backend,
                 "family": "ordinal", "link": self.link, "scale": "latent"}
        return [{**rec, **extra} for rec in self.contrasts.to_dict("records")]

    def methods(self) -> str:
        """A methods paragraph for the paper."""
        return (f"We fitted the Bayesian cumulative {self.link} mixed model `{self.model}` with flexible thresholds "
                f"and bambi's default priors (its cumulative family; PyMC, {self.chains} chains of {self.draws} draws "
                f"after as many tuning steps, seed {self.seed}; summaries from {self.n_draws} joint draws). For each "
                f"system we report the posterior of its latent mean (the linear predictor minus the mean threshold), "
                "of its mean rating and of its category probabilities for a typical worker and item; for each "
                f"contrast on the latent scale its posterior mean and SD, the {self.level:.0%} highest-density "
                "interval and the posterior probability that the first system is rated higher (P(better)). These are "
                "posterior quantities: no p-values, and no multiplicity adjustment.")

    def markdown(self) -> str:
        """The Markdown report: methods paragraph and tables."""
        return markdown_sections(
            f"Bayesian ordinal analysis of {Path(self.source).name}", self.methods(),
            [("Design", self.design), (f"Posterior means ({self.level:.0%} HDI)", self.means),
             ("Category probabilities", self.probabilities),
             ("Posterior of each contrast (latent scale)", self.contrasts), ("Thresholds", self.thresholds),
             ("Variance components (posterior medians, latent scale)", self.components)], self.notes)

    def __str__(self) -> str:
        parts = [(f"{self.source}: posterior of {self.model} (bambi cumulative {self.link}, {self.chains} x "
                  f"{self.draws} draws, seed {self.seed}); posterior quantities, not p-values"),
                 "", "variance components (posterior medians, latent scale):", text_table(self.components),
                 "", f"posterior means ({self.level:.0%} HDI; emmean latent, mean_rating for a typical worker and item):",
                 text_table(self.means),
                 "", (f"posterior of each contrast (latent scale): mean, SD, {self.level:.0%} HDI, prob_greater = "
                      "P(system > versus | data):"), text_table(self.contrasts)]
        return "\n".join(parts + note_lines(self.notes))

    def figure(self) -> Any:
        """Posterior latent means (left) and contrasts (right) with their HDIs (filled: P(better) beyond the level)."""
        from ..plots import plot_intervals

        hdi_names = {"hdi_low": "ci_low", "hdi_high": "ci_high"}
        p = self.contrasts["prob_greater"]
        con = self.contrasts.rename(columns=hdi_names).assign(
            label=self.contrasts["system"] + " - " + self.contrasts["versus"],
            significant=(p >= self.level) | (p <= 1 - self.level))
        return plot_intervals([
            (self.means.rename(columns={"system": "label", "emmean": "estimate", **hdi_names}),
             f"posterior latent means, {self.level:.0%} HDI", "latent scale", None),
            (con, f"contrasts, {self.level:.0%} HDI", "latent difference", 0.0)], title=Path(self.source).name)

    def report_sections(self, check: Any = None) -> tuple[str, list[tuple[str, list[Any]]]]:
        """Title and sections of the report, with the category-probability figure."""
        sections: list[tuple[str, list[Any]]] = [
            ("Methods (for the paper)", [self.methods()]), ("Design", [self.design]),
            (f"Posterior means ({self.level:.0%} HDI)", [self.means, self.figure()]),
            ("Category probabilities", [
                ("probability: posterior mean for a typical worker and item; population: averaged over the random "
                 "effects; observed: the share of ratings."),
                category_figure(self.probabilities, f"{Path(self.source).name}: category probabilities"),
                self.probabilities]),
            ("Posterior of each contrast (latent scale)", [self.contrasts]),
            ("Thresholds", [self.thresholds]),
            ("Variance components (posterior medians, latent scale)", [self.components]),
            *warnings_section(self.notes)]
        return f"Bayesian ordinal analysis of {Path(self.source).name}", sections


# -- the analysis ------------------------------------------------------------------------------


def check_ordinal_options(random: str, df: str, backend: str | None, link: str | None, keep_singular: bool,
                          agreement_metric: str, reliability_target: float) -> tuple[str, str]:
    """Refuse what the ordinal analysis does not offer; the backend and link to use."""
    check_choice("random-effect structure", random, RANDOM)
    if random != "invariant" or keep_singular:
        raise InputError(f"{'--keep-singular' if keep_singular else '--random ' + random} does not apply to --family "
                         "ordinal: clmm fits random intercepts only (worker, item, worker x system, item x system)")
    if df not in ORDINAL_DF:
        raise InputError(f"--df {df} does not apply to --family ordinal: its contrasts use satterthwaite (the latent "
                         "working model's df) or asymptotic (z, emmeans' df = Inf for clmm)")
    backend = backend or ORDINAL_BACKENDS[0]
    if backend not in (*ORDINAL_BACKENDS, POSTERIOR_BACKEND):
        raise InputError(f"--backend {backend} does not fit ordinal models; --family ordinal uses "
                         + ", ".join(ORDINAL_BACKENDS) + f" (R ordinal::clmm, or the Laplace CLMM without R) or "
                         f"{POSTERIOR_BACKEND} (the posterior of bambi's cumulative family)")
    if agreement_metric != "interval" or reliability_target != 0.8:
        raise InputError("--agreement-metric and --reliability-target apply to --family gaussian")
    return backend, check_link(link or "logit")


def analyze_ordinal(
    ratings: str | Path | pd.DataFrame,
    worker: str | None, item: str | None, system: str | None, score: str | None,
    where: dict[str, str] | None, baseline: str | None, scale: tuple[float, float] | None,
    systems: Sequence[str] | None, duplicates: str, contrasts: str, adjust: str, backend: str, link: str,
    level: float, seed: int, progress: Callable[[str], None] | None = None, draws: int = 1000, chains: int = 2,
    df: str = "satterthwaite", bootstrap: int = BARTLETT_DRAWS,
) -> OrdinalAnalysis | OrdinalPosterior:
    """The ordinal analysis (options checked by ``analyze``): fit, null fit, tests, means, contrasts (with
    ``backend="bambi"``: :func:`posterior_ordinal`, ``draws`` per chain, ``chains``). ``df``: the contrasts'
    reference (:data:`ORDINAL_DF`); ``bootstrap``: the Bartlett-corrected LRT's parametric-bootstrap draws (0: none),
    seeded by ``seed``."""
    from ..fitting import registry

    data = read_ratings(ratings, worker, item, system, score, baseline, systems, where, scale, duplicates, family="ordinal")
    check_data(data)
    if backend == POSTERIOR_BACKEND:
        return posterior_ordinal(data, contrasts, link, level, seed, draws, chains, progress)
    report = progress or (lambda message: None)
    full = fit_ordinal(data, backend, link, progress=progress)
    fit, f, names = full.fit, data.frame, list(data.systems)
    levels = tuple(data.extra["levels"])
    groups = {t: g for t, g in _groups(f).items() if t in full.terms}
    report(f"fitting the model without systems ({backend}) for the likelihood-ratio test ...")
    null = registry.REGISTRY.get(backend).ordinal_fitter()(f["score"].to_numpy(), None, groups, link=link,
                                                           scale=(levels[0], levels[-1]), hessian=False)
    K1, p = len(fit.thresholds), len(fit.beta)
    inference = WaldInference(np.concatenate([fit.thresholds, fit.beta]), (fit.cov + fit.cov.T) / 2)
    if not np.all(np.isfinite(inference.vcov)):
        raise InputError(f"the {backend} fit has no covariance ({'; '.join(fit.warnings) or fit.message}): "
                         "the tests cannot be computed")
    rows = _emm_rows(len(names), K1, p)
    lr = max(0.0, 2 * (fit.loglik - null.loglik))
    tests = [{"test": "likelihood ratio", "chi2": lr, "df": float(p), "p_value": float(stats.chi2.sf(lr, p))},
             {"test": "Wald", **inference.wald(rows[1:] - rows[0])}]
    X = np.column_stack([(f["system"] == s).to_numpy(float) for s in names[1:]])
    boot_notes: list[str] = []
    if bootstrap:
        report(f"fitting {bootstrap} parametric-bootstrap data sets of the model without systems (Bartlett factor) ...")
        null_params = np.concatenate([null.thresholds, np.abs(null.sds)])
        tests.insert(0, bartlett_test(lr, X, groups, null_params, link, (levels[0], levels[-1]), bootstrap, seed,
                                      boot_notes))
    omnibus = pd.DataFrame(tests)

    sds = full.sds
    latent_sd = math.sqrt(LINK_SD[link] ** 2 + sum(v * v for v in sds.values()))
    sd_vec = np.array([sds[f"sd_{t.replace(':', '_')}"] for t in groups])
    latent = None if df == "asymptotic" else LatentDesign.of(groups, X).at(sd_vec, link)  # once for every row
    df_of = None if latent is None else (lambda row: latent.df(row[K1:]))
    tested = WaldInference(inference.beta, inference.vcov, df_of)
    # contrast_table needs ``contrasts(rows)`` and ``vcov`` of its inference: WaldInference has both
    table = contrast_table(cast(Any, tested), rows, names, contrasts, adjust, level, seed, latent_sd, report)
    if df == "asymptotic":
        table = table.drop(columns="df").rename(columns={"t": "z"})
    means, probs = _emmeans(inference, rows, names, levels, link, sds, level, f)
    components = _components(sds, link, full.terms)
    thresholds = pd.DataFrame({"threshold": fit.threshold_names, "estimate": fit.thresholds, "se": fit.se[:K1]})
    notes = list(data.notes) + list(full.unidentified) + list(full.warnings()) + boot_notes
    if not null.converged:
        notes.append(f"the model without systems did not converge (max |gradient| {null.max_grad:.2g}): the "
                     "likelihood-ratio test is approximate")
    return OrdinalAnalysis(
        design=design_summary(data), components=components, thresholds=thresholds, omnibus=omnibus, means=means,
        probabilities=probs, contrasts=table, model=full.model.rsplit(" (cumulative", 1)[0], backend=backend, link=link,
        adjust=adjust, family=contrasts, level=level, seed=seed, source=data.source, loglik=float(fit.loglik),
        notes=tuple(dict.fromkeys(notes)), versions=dict(full.versions), data=data, df=df, bootstrap=bootstrap)


def bartlett_test(lr: float, X: np.ndarray, groups: dict[str, np.ndarray], null_params: np.ndarray, link: str,
                  scale: tuple[int, int], draws: int, seed: int, notes: list[str] | None = None) -> dict[str, Any]:
    """The Bartlett-corrected likelihood-ratio test of all q = ``X.shape[1]`` system effects 0: LR q / mean(LR*)
    against chi-square(q), LR* the likelihood ratios of ``draws`` data sets simulated from the fitted model without
    systems (``null_params`` = thresholds, SDs in the order of ``groups``; :func:`~..fitting.clmm.simulate_clmm`)
    and fitted by the fast path (:func:`~..fitting.clmm.fit_clmm_many`), as the planner's ``bartlett`` test (q = 1:
    its very computation). With q > 1 the model without systems of each draw is fitted as the null of a
    one-column model (its log-likelihood: that model's minus LR / 2). Failed draws are left out (named in
    ``notes``)."""
    q = X.shape[1]
    Y = simulate_clmm(np.zeros((len(X), 0)), groups, np.repeat(null_params[None, :], draws, axis=0), link=link,
                      rng=np.random.default_rng(seed), lowest=scale[0])
    if q == 1:
        boot = fit_clmm_many(Y, X, groups, coef=0, scale=scale, link=link, lrt=True, information=False).lr
    else:
        one = fit_clmm_many(Y, X[:, :1], groups, coef=0, scale=scale, link=link, lrt=True, information=False)
        all_ = fit_clmm_many(Y, X, groups, coef=0, scale=scale, link=link, information=False)
        boot = np.maximum(0.0, 2 * (all_.loglik - (one.loglik - one.lr / 2)))
    ok = boot[np.isfinite(boot)]
    if not len(ok):
        raise InputError(f"every one of the {draws} bootstrap data sets failed to fit: no Bartlett-corrected test")
    if len(ok) < draws and notes is not None:
        notes.append(f"{draws - len(ok)} of {draws} bootstrap data sets failed to fit (e.g. a category unused); the "
                     "Bartlett factor averages the others")
    factor = float(ok.mean()) / q
    return {"test": "Bartlett-corrected likelihood ratio", "chi2": lr / factor, "df": float(q),
            "p_value": float(stats.chi2.sf(lr / factor, q)), "bartlett_factor": factor, "draws": len(ok)}


def posterior_ordinal(data: PilotData, contrasts: str, link: str, level: float, seed: int, draws: int, chains: int,
                      progress: Callable[[str], None] | None = None) -> OrdinalPosterior:
    """The posterior of every system's latent mean, mean rating, category probabilities and latent contrast from
    one bambi fit (:func:`~humaneval_power.fitting.ordinal_fit.fit_bambi_ordinal`: at most its 2,000 exported
    joint draws are summarised)."""
    from .bayesian import hdi
    from .inference import family_indices

    full = fit_ordinal(data, "bambi", link, progress=progress, draws=draws, chains=chains, seed=seed)
    post = full.fit.draws or {}
    f, names, levels = data.frame, list(data.systems), tuple(data.extra["levels"])
    K1, p = post["thresholds"].shape[1], post["beta"].shape[1]
    rows = _emm_rows(len(names), K1, p)
    params = np.column_stack([post["thresholds"], post["beta"]])
    sd_draws = {f"sd_{t.replace(':', '_')}": post["sds"][:, j] for j, t in enumerate(full.fit.sd_names)}
    latent = params @ rows.T
    typical = np.stack([_on_rating_scale(x, rows, levels, link) for x in params])
    population = np.stack([_on_rating_scale(x, rows, levels, link, {k: float(v[d]) for k, v in sd_draws.items()})
                           for d, x in enumerate(params)]).mean(axis=0)

    def summary(values: np.ndarray) -> dict[str, float]:
        lo, hi = hdi(values, level)
        return {"mean": float(values.mean()), "sd": float(values.std(ddof=1)), "hdi_low": lo, "hdi_high": hi}

    latent_sd = np.sqrt(LINK_SD[link] ** 2 + sum(v ** 2 for v in sd_draws.values()))
    rows_out = []
    for a, b in family_indices(names, contrasts):
        diff = latent[:, a] - latent[:, b]
        rec = summary(diff)
        rows_out.append({"system": names[a], "versus": names[b], "estimate": rec.pop("mean"), **rec,
                         "prob_greater": float((diff > 0).mean()), "effect_size": float((diff / latent_sd).mean())})
    lat = pd.DataFrame([summary(latent[:, j]) for j in range(len(names))])
    mr = pd.DataFrame([summary(typical[:, j, -1]) for j in range(len(names))])
    shares, observed_means, counts = _observed(f, names, levels)
    means = pd.DataFrame({"system": names, "emmean": lat["mean"], "sd": lat["sd"], "hdi_low": lat["hdi_low"],
                          "hdi_high": lat["hdi_high"], "mean_rating": mr["mean"], "mean_rating_sd": mr["sd"],
                          "mean_rating_hdi_low": mr["hdi_low"], "mean_rating_hdi_high": mr["hdi_high"],
                          "mean_rating_population": population[:, -1], "observed_mean": observed_means,
                          "n_ratings": counts})
    cells = [summary(typical[:, j, k]) for j in range(len(names)) for k in range(len(levels))]
    probs = pd.DataFrame({"system": np.repeat(names, len(levels)), "rating": np.tile(levels, len(names)),
                          "probability": [c["mean"] for c in cells], "sd": [c["sd"] for c in cells],
                          "hdi_low": [c["hdi_low"] for c in cells], "hdi_high": [c["hdi_high"] for c in cells],
                          "population": population[:, :-1].ravel(), "observed": shares.ravel()})
    thresholds = pd.DataFrame({"threshold": full.fit.threshold_names, "estimate": post["thresholds"].mean(axis=0),
                               "sd": post["thresholds"].std(axis=0, ddof=1)})
    notes = list(data.notes) + list(full.unidentified) + list(full.warnings())
    return OrdinalPosterior(
        design=design_summary(data), components=_components(full.sds, link, full.terms), thresholds=thresholds,
        means=means, probabilities=probs, contrasts=pd.DataFrame(rows_out),
        model=full.model.rsplit(" (cumulative", 1)[0], link=link, family=contrasts, level=level, seed=seed,
        draws=draws, chains=chains, source=data.source, n_draws=len(params), notes=tuple(dict.fromkeys(notes)),
        versions=dict(full.versions), data=data)


def _emm_rows(systems: int, K1: int, p: int) -> np.ndarray:
    """Each system's latent mean as a row over (thresholds, effects): minus the mean threshold, plus its effect."""
    rows = np.zeros((systems, K1 + p))
    rows[:, :K1] = -1.0 / K1
    rows[1:, K1:] = np.eye(p)
    return rows


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


def _on_rating_scale(params: np.ndarray, rows: np.ndarray, levels: tuple[int, ...], link: str,
                     sds: dict[str, float] | None = None) -> np.ndarray:
    """Per system (rows of ``rows``): the K category probabilities then the mean rating at parameters (thresholds,
    effects) ``params``; for a typical worker and item, or with ``sds`` averaged over the random effects."""
    K1 = len(levels) - 1
    proc = _process(params[:K1], link, levels[0], sds)
    eta = rows[:, K1:] @ params[K1:]
    return np.column_stack([proc.probabilities(eta), proc.mean_rating(eta)])


def _observed(frame: pd.DataFrame, names: list[str], levels: tuple[int, ...]) -> tuple[np.ndarray, list[float], list[int]]:
    """Each system's share of each rating, its mean rating and its number of ratings."""
    counts = pd.crosstab(frame["system"], frame["score"].astype(int)).reindex(index=names, columns=list(levels),
                                                                              fill_value=0).to_numpy(float)
    means = [float(frame.loc[frame["system"] == s, "score"].mean()) for s in names]
    return counts / counts.sum(axis=1, keepdims=True), means, [int(n) for n in counts.sum(axis=1)]


def _emmeans(inference: WaldInference, rows: np.ndarray, names: list[str], levels: tuple[int, ...], link: str,
             sds: dict[str, float], level: float, frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """emmeans' latent, mean.class and prob EMMs (delta method) and the population-averaged mean and
    probabilities (the fitted random effects integrated out; point estimates)."""
    theta = inference.beta
    values = _on_rating_scale(theta, rows, levels, link)
    jac = np.empty((values.size, len(theta)))
    for j in range(len(theta)):
        step = np.zeros(len(theta))
        step[j] = _STEP
        jac[:, j] = ((_on_rating_scale(theta + step, rows, levels, link)
                      - _on_rating_scale(theta - step, rows, levels, link)).ravel() / (2 * _STEP))
    se = np.sqrt(np.maximum(np.einsum("ip,pq,iq->i", jac, inference.vcov, jac), 0.0)).reshape(values.shape)
    z = stats.norm.ppf(1 - (1 - level) / 2)
    pop = _on_rating_scale(theta, rows, levels, link, sds)
    shares, observed_means, counts = _observed(frame, names, levels)
    latent = inference.contrasts(rows)
    means = pd.DataFrame({
        "system": names, "emmean": latent["estimate"], "se": latent["se"],
        "ci_low": latent["estimate"] - z * latent["se"], "ci_high": latent["estimate"] + z * latent["se"],
        "mean_rating": values[:, -1], "mean_rating_se": se[:, -1],
        "mean_rating_ci_low": values[:, -1] - z * se[:, -1], "mean_rating_ci_high": values[:, -1] + z * se[:, -1],
        "mean_rating_population": pop[:, -1], "observed_mean": observed_means, "n_ratings": counts})
    prob, prob_se = values[:, :-1], se[:, :-1]
    probs = pd.DataFrame({
        "system": np.repeat(names, len(levels)), "rating": np.tile(levels, len(names)), "probability": prob.ravel(),
        "se": prob_se.ravel(), "ci_low": (prob - z * prob_se).ravel(), "ci_high": (prob + z * prob_se).ravel(),
        "population": pop[:, :-1].ravel(), "observed": shares.ravel()})
    return means, probs


__all__ = ["ANALYZE_DF", "ENGINE_TEXT", "LINK_SD", "ORDINAL_DF", "POSTERIOR_BACKEND", "OrdinalAnalysis",
           "OrdinalPosterior", "WaldInference", "analyze_ordinal", "bartlett_test", "check_ordinal_options",
           "posterior_ordinal"]
