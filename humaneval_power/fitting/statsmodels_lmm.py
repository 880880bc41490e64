"""The no-R backend: statsmodels' MixedLM likelihood, optimised by exact-gradient REML.

statsmodels defines the model (one group, every random effect a variance
component) and its log-likelihood; the optimum is found by
:class:`~humaneval_power.fitting.vc_reml.CrossedComponentsModel` (L-BFGS-B on
the profiled deviance with its exact gradient), because statsmodels' own
optimisers stall on crossed designs (DialSummEval, 14 systems: REML criterion
-213.288 after 4 min against lme4's -213.417). statsmodels' log-likelihood at
the optimum must equal ours, or the fit fails loudly. Fixed effects are GLS
with ``Cov = s^2 (X' H^-1 X)^-1`` (lme4's), tested with lmerTest's
Satterthwaite t; SD intervals are the lme4 backend's Wald intervals.
"""
from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..errors import InputError
from .vc_reml import ComponentsFit, CrossedComponentsModel, Satterthwaite, TooManyEffectsError

if TYPE_CHECKING:
    from .types import FitOptions, LmmSpec, RawFit


#: statsmodels' likelihood check runs on a sample of this many rows of larger data sets
CHECK_ROWS = 1_500


def fit_crossed_many(columns: dict[str, np.ndarray], responses: np.ndarray, reml: bool) -> pd.DataFrame:
    """Fit y ~ x + (1 + x || worker) + (1 + x || item) to each column of ``responses`` (n_obs x n_fits).

    The power simulation's statsmodels path: the same fit as ``hepower fit --backend statsmodels``.
    Failures are recorded, not raised. statsmodels' likelihood is checked on the first study of the
    batch only: the model is the same for all of them, and the check costs as much as the fit.
    """
    base = pd.DataFrame(columns)
    rows = []
    for j in range(responses.shape[1]):
        try:
            fit = fit_lmm_statsmodels(base.assign(score=responses[:, j]), ("x",), reml=reml, intervals="none",
                                      check=j == 0)
            co = fit.coefficients.set_index("term").loc["x"]
            est, se = float(co.estimate), float(co.se)
            rows.append((est, se, float(co.df), fit.singular, not (np.isfinite(est) and np.isfinite(se)), bool(fit.warnings)))
        except (np.linalg.LinAlgError, ValueError):
            rows.append((np.nan, np.nan, np.nan, False, True, True))
    return pd.DataFrame(rows, columns=["estimate", "se", "df", "singular", "failed", "warned"]).astype(float)


def statsmodels_deviance(frame: pd.DataFrame, columns: tuple[str, ...], fit: ComponentsFit, reml: bool) -> float:
    """-2 log-likelihood of statsmodels' MixedLM for the same model at ``fit``'s parameters.

    The model is given to MixedLM as arrays (``score ~ 1 + columns``; one variance component per (group,
    term): the group's indicators times the term), as ``MixedLM.from_formula`` with ``vc_formula``
    ``0 + C(group)[:term]`` builds it, without patsy (which took 90% of the check's time);
    tests/test_vc_reml.py checks the two equal.
    """
    from scipy import sparse
    from statsmodels.regression.mixed_linear_model import MixedLM, MixedLMParams, VCSpec

    from .types import group_codes

    n = len(frame)
    names, mats = [], []
    for g, t in sorted(fit.components, key=lambda gt: f"{gt[0]}|{gt[1]}"):  # from_formula sorts the names
        codes = group_codes(frame, g)
        values = np.ones(n) if t == "(Intercept)" else frame[t].to_numpy(float)
        names.append(f"{g}|{t}")
        mats.append([sparse.csr_array((values, (np.arange(n), codes)), shape=(n, int(codes.max()) + 1))])
    exog = np.column_stack([np.ones(n)] + [frame[c].to_numpy(float) for c in columns])
    model = MixedLM(frame["score"].to_numpy(float), exog, groups=np.ones(n), exog_re=np.zeros((n, 0)),
                    exog_vc=VCSpec(names, [[[str(j) for j in range(m[0].shape[1])]] for m in mats], mats))
    gamma = dict(zip((f"{g}|{t}" for g, t in fit.components), fit.gamma))
    params = MixedLMParams.from_components(fit.beta, cov_re=np.zeros((0, 0)),
                                           vcomp=np.array([gamma[name] for name in model.exog_vc.names]))
    # the attributes MixedLM.fit would set before evaluating its objective
    model.reml, model.cov_pen, model.fe_pen, model._freepat, model._cov_sing = reml, None, None, None, 0
    with np.errstate(all="ignore"):
        return float(-2 * model.loglike(params, profile_fe=False))


def fit_lmm(frame: pd.DataFrame, spec: LmmSpec, options: FitOptions) -> RawFit:
    """The registry's entry: :func:`fit_lmm_statsmodels` of ``spec`` with ``options``."""
    if spec.correlated:
        raise InputError("the statsmodels backend fits uncorrelated random effects only; use --backend lme4")
    return fit_lmm_statsmodels(frame, spec.columns, spec.components, options.reml, options.intervals,
                               n_boot=options.n_boot, seed=options.seed, progress=options.progress)


def fit_lmm_statsmodels(frame: pd.DataFrame, columns: tuple[str, ...],
                        components: tuple[tuple[str, str], ...] | None = None, reml: bool = True,
                        intervals: str = "wald", check: bool = True, n_boot: int = 500,
                        seed: int = 1, progress: Callable[[str], None] | None = None) -> RawFit:
    """(RE)ML fit of the crossed model as variance components, without R.

    Fixed effects get lmerTest's Satterthwaite t tests and, with ``intervals="wald"``,
    the SDs the same log-SD delta-method intervals as the lme4 backend, all
    from the same variance-parameter calculus (:meth:`CrossedComponentsModel.satterthwaite`);
    ``intervals="profile"``: likelihood-profile intervals of the ML deviance, as lme4's;
    ``intervals="boot"``: parametric-bootstrap percentile intervals (``n_boot`` refits), as lme4's.
    ``progress`` receives a line at each stage and every few seconds of the optimisation.
    """
    return fit_components(frame, columns, components, reml, intervals, check, n_boot, seed, progress)[0]


def fit_components(frame: pd.DataFrame, columns: tuple[str, ...],
                   components: tuple[tuple[str, str], ...] | None = None, reml: bool = True,
                   intervals: str = "wald", check: bool = True, n_boot: int = 500, seed: int = 1,
                   progress: Callable[[str], None] | None = None
                   ) -> tuple[RawFit, CrossedComponentsModel, ComponentsFit, Satterthwaite]:
    """:func:`fit_lmm_statsmodels`, also returning the solver's model, its optimum and its
    Satterthwaite calculus (for inference on other contrasts without refitting)."""
    import scipy
    from scipy import stats
    from threadpoolctl import threadpool_limits

    from .types import GROUPS, ZERO_TOL, RawFit

    keys = list(components) if components is not None else [(g, t) for g in GROUPS for t in ("(Intercept)",) + columns]
    # One BLAS thread: a threaded BLAS spins on small matrices (14 DialSummEval systems: 0.37 s instead
    # of 4.2 s for the optimisation) and on a busy machine on large ones too (a 3,450 x 3,450 Cholesky
    # factor: 0.43 s on one thread, 3.0 s on two cores under a load of 5).
    with threadpool_limits(1):
        try:
            model = _model(frame, columns, keys, reml)
        except TooManyEffectsError as exc:
            raise InputError(f"the statsmodels backend cannot fit this design: {exc}; "
                             "use --backend lme4 (sparse algebra)") from exc
        report = progress or (lambda message: None)
        fit = model.fit(progress=progress)
        if check:
            report("checking the criterion against statsmodels' own likelihood")
            _check_against_statsmodels(model, fit, frame, columns, reml)
        report("Satterthwaite df (Hessian of the deviance)")
        satt = model.satterthwaite(fit)
        if intervals != "none":
            report(f"{intervals} intervals of the SDs")
        cis, notes = _sd_intervals(model, fit, satt, intervals, n_boot, seed)
    sigma = math.sqrt(fit.sigma2)
    component_table = pd.DataFrame([(g, t, float(sd), lo, hi) for (g, t), sd, (lo, hi) in zip(keys, fit.sds, cis)],
                              columns=["group", "term", "sd", "lower", "upper"])
    if not fit.converged:
        notes = (f"optimizer did not converge: {fit.message}",) + notes
    se = np.sqrt(np.diag(fit.beta_cov))
    t = fit.beta / se
    coefficients = pd.DataFrame({
        "term": ["(Intercept)", *columns], "estimate": fit.beta, "se": se, "df": satt.df, "t": t,
        "p_value": 2 * stats.t.sf(np.abs(t), satt.df),
    })
    raw = RawFit(
        backend="statsmodels",
        coefficients=coefficients,
        components=component_table,
        correlations=pd.DataFrame(columns=["group", "term1", "term2", "cor"]),
        sigma=sigma,
        sigma_interval=cis[-1],
        singular=bool((component_table.sd <= ZERO_TOL * sigma).any()),
        warnings=notes,
        versions={"statsmodels": __import__("statsmodels").__version__, "scipy": scipy.__version__,
                  "optimizer": "exact-gradient profiled REML, L-BFGS-B"},
        criterion=fit.deviance,
    )
    return raw, model, fit, satt


def _sd_intervals(model: CrossedComponentsModel, fit: ComponentsFit, satt: Satterthwaite, intervals: str,
                  n_boot: int, seed: int) -> tuple[list[tuple[float, float]], tuple[str, ...]]:
    """Intervals of every SD and then sigma, by ``intervals``, and the notes they leave."""
    from .types import wald_sd_intervals

    notes = satt.notes
    if intervals == "wald":
        cis = wald_sd_intervals(fit.theta, math.sqrt(fit.sigma2), satt.vcov_varpar)
    elif intervals == "profile":  # lme4 profiles the ML deviance (it refits REML fits by ML)
        ml = model.as_ml() if model.reml else model
        ml_fit = ml.fit(start=fit.gamma)
        cis = [ml.profile_interval(ml_fit, j) for j in range(model.k + 1)]
    elif intervals == "boot":
        draws, failed = bootstrap_sd_draws(model, fit, n_boot, seed)
        cis = list(zip(*np.quantile(draws, [0.025, 0.975], axis=0).tolist()))  # percentile, as lme4's
        if failed:
            notes += (f"{failed} of {n_boot} bootstrap refits did not converge (kept)",)
    else:
        cis = [(math.nan, math.nan)] * (model.k + 1)
    return cis, notes


def bootstrap_sd_draws(model: CrossedComponentsModel, fit: ComponentsFit, n_boot: int,
                       seed: int) -> tuple[np.ndarray, int]:
    """Parametric bootstrap (lme4's ``bootMer`` for ``confint(method="boot")``): every SD and sigma per refit.

    Each refit starts from the estimate. Returns the (n_boot, k + 1) draws and
    the number of refits that did not converge (kept, as lme4 keeps them). A
    bar on stderr appears when it takes over a second.
    """
    from threadpoolctl import threadpool_limits
    from tqdm import tqdm

    rng = np.random.default_rng(seed)
    draws = np.empty((n_boot, model.k + 1))
    failed = 0
    with threadpool_limits(1):
        for b in tqdm(range(n_boot), unit="refit", delay=1.0, file=sys.stderr, leave=False,
                      disable=not sys.stderr.isatty()):  # no endless carriage-return line in a log file
            refit = model.with_response(model.simulate(fit, rng)).fit(start=fit.gamma)
            draws[b] = np.append(refit.sds, math.sqrt(refit.sigma2))
            failed += not refit.converged
    return draws, failed


def bootstrap_param_draws(frame: pd.DataFrame, spec: LmmSpec, raw: RawFit, n: int, seed: int,
                          reml: bool = True) -> tuple[dict[str, list[float]], int]:
    """Parametric-bootstrap draws of a Gaussian fit made by any backend (for planning with assurance).

    Simulates ``n`` responses from the fitted model (``raw``'s SDs and sigma, the GLS fixed effects
    at them) on the pilot's own layout and refits each (this module's exact-gradient REML, which
    finds lme4's optimum): :func:`bootstrap_sd_draws` at the given estimates. Returns the draws
    keyed ``group|term`` and ``sigma`` (as the bambi backend's) and the number of refits that
    did not converge (kept).
    """
    keys = list(spec.components)
    try:
        model = _model(frame, spec.columns, keys, reml)
    except TooManyEffectsError as exc:
        raise InputError(f"the parametric bootstrap cannot refit this design without R: {exc}") from exc
    comp = raw.components.set_index(["group", "term"])
    sds = np.array([float(comp.loc[k, "sd"]) for k in keys])
    fit = model.at((sds / raw.sigma) ** 2)
    draws, failed = bootstrap_sd_draws(model, fit, n, seed)
    out = {f"{g}|{t}": draws[:, j].round(6).tolist() for j, (g, t) in enumerate(keys)}
    out["sigma"] = draws[:, -1].round(6).tolist()
    return out, failed


def _model(frame: pd.DataFrame, columns: tuple[str, ...], keys: list[tuple[str, str]],
           reml: bool) -> CrossedComponentsModel:
    """The solver's model of ``frame``: intercept and ``columns`` fixed, the ``keys`` (group, term) random."""
    from .types import group_codes

    x = np.column_stack([np.ones(len(frame))] + [frame[c].to_numpy(float) for c in columns])
    return CrossedComponentsModel(x, frame["score"].to_numpy(float),
                                  {g: group_codes(frame, g) for g in dict.fromkeys(g for g, _ in keys)},
                                  {t: frame[t].to_numpy(float) for _, t in keys if t != "(Intercept)"}, keys, reml=reml)


def _check_against_statsmodels(model: CrossedComponentsModel, fit: ComponentsFit, frame: pd.DataFrame,
                               columns: tuple[str, ...], reml: bool) -> None:
    """statsmodels' log-likelihood at the optimum must be ours, or the fit fails loudly.

    statsmodels' likelihood is dense in the random effects (15,000 ratings, 7,350 effects: 5 min and
    GBs): beyond ``CHECK_ROWS`` rows both are compared at the optimum's variances on a fixed random
    sample of rows (the same formula on other data).
    """
    if len(frame) > CHECK_ROWS:
        sample = frame.iloc[np.sort(np.random.default_rng(0).choice(len(frame), CHECK_ROWS, replace=False))]
        try:
            model = _model(sample, columns, list(fit.components), reml)
            fit, frame = model.at(fit.gamma), sample
        except np.linalg.LinAlgError:  # a fixed effect absent from the sample: check on all rows
            pass
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = statsmodels_deviance(frame, columns, fit, reml)
        ours = fit.deviance
        if not math.isfinite(theirs):  # statsmodels gives NaN at an exactly zero component: check just off it
            nudged = model.at(np.maximum(fit.gamma, 1e-10))
            theirs, ours = statsmodels_deviance(frame, columns, nudged, reml), nudged.deviance
    if not abs(theirs - ours) <= 1e-6 * (1 + abs(ours)):
        raise RuntimeError(f"REML criterion disagrees with statsmodels' ({ours:.8g} vs {theirs:.8g})")
