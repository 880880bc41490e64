"""lme4 + lmerTest through rpy2: the R session, pilot fits (``r_bridge/fit.R``) and the one refit path of the
simulation tiers (``r_bridge/refit.R``, its loop inside R)."""
from __future__ import annotations

import os
import signal
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..errors import BackendUnavailableError

if TYPE_CHECKING:
    from .types import FitOptions, LmmSpec, RawFit

INSTALL_HINT = (
    "install R, lme4 and lmerTest (Debian: apt-get install r-base-core r-cran-lme4 r-cran-lmertest), "
    "then pip install 'humaneval-power[r]' (rpy2>=3.5.11,<3.6); `make setup` does both. "
    "Without R: `hepower fit --backend statsmodels` (Gaussian: same estimates, tests and intervals), "
    "`likert power --method fast` or `statsmodels`"
)


def r_bridge_dir() -> Path:
    """Folder holding the R sources: package data of ``humaneval_power.r_bridge`` (``HEPOWER_R_BRIDGE`` overrides)."""
    env = os.environ.get("HEPOWER_R_BRIDGE")
    if env:
        return Path(env)
    from importlib.resources import files

    return Path(str(files("humaneval_power.r_bridge")))


_ctrl_c = threading.Event()  # Ctrl-C arrived while R was running
_delivered = threading.Event()  # ... and R has been told
_armed = threading.Event()  # r_interruptible's handler is in place (main thread)


def _on_sigint(signum: int, frame: Any) -> None:
    _ctrl_c.set()


def _r_events() -> None:
    """Called by R from time to time while it computes: pass a pending Ctrl-C on to R, once."""
    if _ctrl_c.is_set() and not _delivered.is_set():
        _delivered.set()
        raise KeyboardInterrupt  # rpy2 turns this into R's interrupt, which ends the R call


def _r_console(text: str) -> None:
    """R's console output: the library never prints (warnings are collected in R)."""


@contextmanager
def r_interruptible() -> Iterator[None]:
    """Let Ctrl-C stop the R code run inside: KeyboardInterrupt once R has returned.

    Embedded R takes over SIGINT badly (rpy2 3.5 raises the KeyboardInterrupt inside
    a cffi callback, where it is lost and the run continues). Here SIGINT only sets a
    flag; R hears of it at its next event check (sub-second, also inside lme4's
    optimisers), aborts, and the KeyboardInterrupt is raised in Python. Where Ctrl-C
    is not Python's (a worker ignoring SIGINT, a thread), nothing changes.
    """
    if threading.current_thread() is not threading.main_thread() or (
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    _ctrl_c.clear()
    _delivered.clear()
    old = signal.signal(signal.SIGINT, _on_sigint)
    _armed.set()
    try:
        yield
    except Exception as exc:
        if _ctrl_c.is_set() and type(exc).__module__.startswith("rpy2"):  # R's error for the interrupt
            raise KeyboardInterrupt from None
        raise
    finally:
        _armed.clear()
        signal.signal(signal.SIGINT, old)
    if _ctrl_c.is_set():
        raise KeyboardInterrupt


def r_session() -> Any:
    """R with the bridge loaded (started on first use), interruptible by Ctrl-C, with rpy2's
    conversion rules in the current context."""
    if _start_r.cache_info().currsize:
        return _with_conversion(_start_r())
    with r_interruptible():
        return _with_conversion(_start_r())


def _with_conversion(ro: Any) -> Any:
    """rpy2 keeps its conversion rules in a context variable set where R was started: a task run in
    another thread or context (a Dask worker's) has none and fails with "Conversion rules for
    `rpy2.robjects` appear to be missing". Set the default rules there."""
    from rpy2.robjects import conversion

    if conversion.get_conversion() is conversion.missingconverter:
        conversion.set_conversion(ro.default_converter)
    return ro


@lru_cache(maxsize=1)
def _start_r() -> Any:
    """Start R once per process and load the bridge; a clear error if impossible."""
    try:
        with warnings.catch_warnings():
            if threading.current_thread() is not threading.main_thread():  # a Dask worker's task thread, whose
                warnings.filterwarnings("ignore", "R is not initialized by the main thread")  # Ctrl-C is not Python's
            import rpy2.robjects as ro
        from rpy2.rinterface_lib import callbacks
    except Exception as exc:  # noqa: BLE001 - ImportError, or rpy2 failing to find R
        raise BackendUnavailableError(f"the lme4 backend is unavailable ({exc.__class__.__name__}: {exc}); {INSTALL_HINT}") from None
    from ..executors.local import drop_r_library_path

    drop_r_library_path()  # else every Python started from here on may load the system's libpython
    if _armed.is_set() and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _on_sigint)  # starting R, rpy2 reset it: Ctrl-C would be lost while R loads
    callbacks.processevents = _r_events
    callbacks.consolewrite_print = _r_console
    callbacks.consolewrite_warnerror = _r_console
    missing = [p for p in ("lme4", "lmerTest") if not ro.r(f'isTRUE(requireNamespace("{p}", quietly = TRUE))')[0]]
    if missing:
        raise BackendUnavailableError(f"R lacks {', '.join(missing)}; {INSTALL_HINT}")
    for name in ("refit.R", "fit.R"):
        source = r_bridge_dir() / name
        if not source.exists():
            raise BackendUnavailableError(f"R bridge not found at {source} (set HEPOWER_R_BRIDGE)")
        ro.r["source"](str(source))
    return ro


def available() -> tuple[bool, str]:
    """Whether the backend works here, and if not, why."""
    try:
        r_session()
    except BackendUnavailableError as exc:
        return False, str(exc)
    return True, ""


def versions() -> dict[str, str]:
    """Versions of R, lme4 and lmerTest."""
    ro = r_session()
    v = ro.r["hepower_versions"]()
    return dict(zip(v.names, v))


def r_data_frame(columns: dict[str, np.ndarray]) -> Any:
    """An R data frame of the columns (integer arrays become factors, the others numeric)."""
    ro = r_session()
    conv = {}
    for name, col in columns.items():
        col = np.asarray(col)
        if col.dtype.kind in "iu":
            conv[name] = ro.vectors.FactorVector(ro.IntVector(col.astype(int).tolist()))
        else:
            conv[name] = ro.FloatVector(col.astype(float).tolist())
    return ro.DataFrame(conv)


def refit_many(
    columns: dict[str, np.ndarray],
    responses: np.ndarray,
    formula: str,
    contrast: str | np.ndarray,
    reml: bool,
    satterthwaite: bool = True,
    varying: dict[str, np.ndarray] | None = None,
    start: np.ndarray | None = None,
) -> pd.DataFrame:
    """lmer (+ lmerTest's ``contest1D``) of ``formula`` on each column of ``responses`` (n_obs x n_fits), inside R.

    ``columns`` are the design columns (integer arrays become factors). ``contrast``: a coefficient's name,
    or a vector over the fixed effects (model-matrix order). ``satterthwaite=False``: no df (NaN).
    ``varying``: integer matrices (n_obs x n_fits) replacing those columns fit by fit (e.g. a random worker
    assignment drawn anew per study). ``start``: relative SDs (n_fits x K, row k for the random term on the
    grouping column ``g{k}``) to start lme4's optimiser from instead of theta = 1. Returns estimate, se, df,
    singular, criterion (REML criterion or deviance), sigma, failed, warned per fit.
    """
    ro = r_session()
    n_fits = np.shape(responses)[1]
    r_contrast = contrast if isinstance(contrast, str) else ro.FloatVector(np.asarray(contrast, float).ravel().tolist())
    r_varying = ro.r["list"](**{k: r_matrix(v) for k, v in varying.items()}) if varying else ro.NULL
    r_start = ro.NULL if start is None else r_matrix(np.asarray(start, float).reshape(n_fits, -1).T)
    with r_interruptible():
        res = ro.r["hepower_refit"](r_data_frame(columns), r_matrix(responses), formula, r_contrast, reml,
                                    satterthwaite, r_varying, r_start)
    return _matrix_frame(res, ["estimate", "se", "df", "singular", "criterion", "sigma", "failed", "warned"])


def refit_glmm_many(columns: dict[str, np.ndarray], responses: np.ndarray, lrt: bool) -> pd.DataFrame:
    """Logistic GLMM ``y ~ 1 + (1|worker) + (1|item)`` on each column of 0/1 ``responses``, inside R.

    Returns estimate, se, p_lrt (NaN unless ``lrt``), singular, failed, warned per fit.
    """
    ro = r_session()
    with r_interruptible():
        res = ro.r["hepower_refit_glmm"](r_data_frame(columns), r_matrix(responses), lrt)
    return _matrix_frame(res, ["estimate", "se", "p_lrt", "singular", "failed", "warned"])


def r_matrix(values: np.ndarray) -> Any:
    """A numeric R matrix (column-major) from a 2-D array."""
    ro = r_session()
    y = np.asarray(values, dtype=float)
    return ro.r["matrix"](ro.FloatVector(y.ravel(order="F").tolist()), nrow=y.shape[0])


def _matrix_frame(res: Any, columns: list[str]) -> pd.DataFrame:
    """An R matrix with one row per fit as a DataFrame."""
    arr = np.asarray(list(res), dtype=float)
    return pd.DataFrame(arr.reshape((-1, len(columns)), order="F"), columns=columns)


def _get(res: Any, name: str) -> Any:
    """An element of an R list, or None for R NULL."""
    ro = r_session()
    value = res.rx2(name)
    return None if value is ro.NULL or isinstance(value, type(ro.NULL)) else value


def _components(res: Any, intervals: str) -> tuple[pd.DataFrame, pd.DataFrame, float, tuple[float, float]]:
    """Variance components, correlations, sigma and its interval from an R fit result."""
    from .types import split_component_name, wald_sd_intervals

    vc = _get(res, "varcorr")
    grp = [str(g) for g in vc.rx2("grp")]
    var1 = [str(v) for v in vc.rx2("var1")]
    var2 = [str(v) for v in vc.rx2("var2")]
    sdcor = np.asarray(list(vc.rx2("sdcor")), float)
    base = [g.split(".")[0] if g != "Residual" else g for g in grp]
    comp = [(b, v1, sd) for b, v1, v2, sd in zip(base, var1, var2, sdcor) if b != "Residual" and v2 == ""]
    cors = [(b, v1, v2, c) for b, v1, v2, c in zip(base, var1, var2, sdcor) if b != "Residual" and v2 != ""]
    components = pd.DataFrame(comp, columns=["group", "term", "sd"])
    components["lower"] = np.nan
    components["upper"] = np.nan
    correlations = pd.DataFrame(cors, columns=["group", "term1", "term2", "cor"])
    sigma_rows = [sd for g, sd in zip(grp, sdcor) if g == "Residual"]
    sigma = float(sigma_rows[0]) if sigma_rows else float("nan")
    sigma_ci = (float("nan"), float("nan"))
    if intervals == "wald":
        theta = np.asarray(list(res.rx2("theta")), float)
        vv = np.asarray(list(res.rx2("vcov_varpar")), float)
        if len(theta) == len(components) and vv.size == (len(theta) + 1) ** 2:
            cis = wald_sd_intervals(theta, sigma, vv.reshape(len(theta) + 1, -1, order="F"))
            components["lower"] = [c[0] for c in cis[:-1]]
            components["upper"] = [c[1] for c in cis[:-1]]
            sigma_ci = cis[-1]
    elif intervals in ("profile", "boot"):
        ci = _get(res, "ci")
        if ci is not None:
            for name, lo, hi in zip(ci.rx2("name"), ci.rx2("lower"), ci.rx2("upper")):
                name = str(name)
                if name == "sigma":
                    sigma_ci = (float(lo), float(hi))
                elif name.startswith("sd_"):
                    g, t = split_component_name(name)
                    hit = (components.group == g) & (components.term == t)
                    components.loc[hit, "lower"] = float(lo)
                    components.loc[hit, "upper"] = float(hi)
    return components, correlations, sigma, sigma_ci


def _coefficients(res: Any, gaussian: bool) -> pd.DataFrame:
    names = [str(n) for n in res.rx2("coef_names")]
    vals = np.asarray(list(res.rx2("coef")), float).reshape(len(names), -1, order="F")
    if gaussian:  # Estimate, SE, df, t, p
        return pd.DataFrame({"term": names, "estimate": vals[:, 0], "se": vals[:, 1], "df": vals[:, 2],
                             "t": vals[:, 3], "p_value": vals[:, 4]})
    return pd.DataFrame({"term": names, "estimate": vals[:, 0], "se": vals[:, 1], "df": np.inf,
                         "z": vals[:, 2], "p_value": vals[:, 3]})


def fit_lmm(frame: pd.DataFrame, spec: LmmSpec, options: FitOptions) -> RawFit:
    """Fit a Gaussian LMM with lme4 + lmerTest (Satterthwaite df)."""
    return _fit(frame, spec.formula, "gaussian", options.intervals, options.n_boot, options.seed, options.reml)


def fit_glmm(frame: pd.DataFrame, formula: str, intervals: str = "wald", n_boot: int = 500, seed: int = 1) -> RawFit:
    """Fit a logistic GLMM with lme4 (Laplace) to 0/1 scores; a score of 1/2 (a split tie) counts as
    half a win and half a loss (see ``hepower_fit_glmm`` in ``r_bridge/fit.R``)."""
    return _fit(frame, formula, "binomial", intervals, n_boot, seed, False)


def _fit(frame: pd.DataFrame, formula: str, family: str, intervals: str, n_boot: int, seed: int,
         reml: bool) -> RawFit:
    from rpy2.rinterface_lib.embedded import RRuntimeError

    from ..errors import InputError

    ro = r_session()
    cols = {c: frame[c].to_numpy() for c in frame.columns}
    r_interval = intervals if intervals in ("profile", "boot") else "none"
    try:
        with r_interruptible():
            if family == "gaussian":
                res = ro.r["hepower_fit_lmm"](r_data_frame(cols), formula, reml, r_interval, n_boot, seed)
            else:
                res = ro.r["hepower_fit_glmm"](r_data_frame(cols), formula, r_interval, n_boot, seed)
    except RRuntimeError as exc:
        why = str(exc).strip().splitlines()[-1].strip()
        hint = ("; the fit had not reached its optimum, so its profile is unusable: try --intervals boot or wald"
                if "new, lower deviance" in why else "")
        raise InputError(f"lme4 could not fit the model: {why}{hint}") from None
    return raw_fit(res, family, intervals)


def extract_lmm(r_model: Any, intervals: str = "wald", n_boot: int = 500, seed: int = 1) -> RawFit:
    """Read a Gaussian lmerMod fitted elsewhere (e.g. by pymer4) the way :func:`fit_lmm` reads its own."""
    ro = r_session()
    r_interval = intervals if intervals in ("profile", "boot") else "none"
    with r_interruptible():
        res = ro.r["hepower_extract_lmm"](r_model, r_interval, n_boot, seed)
    return raw_fit(res, "gaussian", intervals)


def raw_fit(res: Any, family: str, intervals: str) -> RawFit:
    """The :class:`~.types.RawFit` of an R fit result (``hepower_fit_lmm``, ``hepower_fit_glmm`` and alike)."""
    from .types import RawFit
    components, correlations, sigma, sigma_ci = _components(res, intervals if family == "gaussian" else
                                                            (intervals if intervals != "wald" else "none"))
    return RawFit(
        backend="lme4",
        coefficients=_coefficients(res, family == "gaussian"),
        components=components,
        correlations=correlations,
        sigma=sigma if family == "gaussian" else float("nan"),
        sigma_interval=sigma_ci,
        singular=bool(res.rx2("singular")[0]),
        warnings=tuple(dict.fromkeys(str(w) for w in res.rx2("warnings"))),
        versions=versions(),
        criterion=float(res.rx2("criterion")[0]),
    )
