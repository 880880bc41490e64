"""Bayesian fits through bambi + pymc (optional extra ``bayes``): posterior medians,
95% equal-tailed intervals, and the draws of every variance parameter."""
from __future__ import annotations

import logging
import re
import warnings
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..errors import BackendUnavailableError

if TYPE_CHECKING:
    from .types import RawFit

INSTALL_HINT = "pip install 'humaneval-power[bayes]' (bambi, pymc, arviz; matplotlib<3.11)"
#: draws kept per parameter in exported files
MAX_EXPORTED_DRAWS = 2000


def _import_bambi():
    try:
        import bambi
    except Exception as exc:  # noqa: BLE001 (ImportError or a broken pymc/pytensor stack: said, not hidden)
        raise BackendUnavailableError(f"the bambi backend is unavailable ({exc.__class__.__name__}: {exc}); {INSTALL_HINT}") from None
    return bambi


def p_direction(draws: np.ndarray) -> float:
    """Posterior probability that the parameter has the sign of its median (a posterior has no p-value)."""
    draws = np.asarray(draws, float)
    return float(max((draws > 0).mean(), (draws < 0).mean()))


def fit_bambi(frame: pd.DataFrame, formula: str, family: str, draws: int = 1000, chains: int = 2,
              seed: int = 1, every_draw: bool = False) -> RawFit:
    """Fit ``formula`` (lme4 syntax with separate terms) with bambi's default priors.

    Coefficients carry posterior medians, SDs, 95% equal-tailed intervals and ``p_direction``;
    their ``p_value`` and ``df`` are NaN (a posterior has neither). ``draws`` of the result:
    at most ``MAX_EXPORTED_DRAWS`` joint draws rounded to 6 digits, or every draw unrounded (``every_draw``).
    """
    from .types import RawFit

    bmb = _import_bambi()
    data = frame.copy()
    data["worker"] = "w" + data["worker"].astype(str)
    data["item"] = "i" + data["item"].astype(str)
    for name in ("pymc", "pytensor", "bambi"):
        logging.getLogger(name).setLevel(logging.ERROR)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = bmb.Model(formula, data, family=family)
        idata = model.fit(draws=draws, tune=draws, chains=chains, random_seed=seed, progressbar=False, cores=1,
                          target_accept=0.95)
    post = idata.posterior
    flat = {name: post[name].values.reshape(-1) for name in post.data_vars if post[name].ndim == 2}
    comp_rows, all_draws = [], {}
    for name, values in flat.items():
        m = re.match(r"(1|\w+)\|(worker|item|worker:system|item:system)_sigma$", name)
        if m:
            term = "(Intercept)" if m.group(1) == "1" else m.group(1)
            comp_rows.append((m.group(2), term, float(np.median(values)), *np.quantile(values, [0.025, 0.975])))
            all_draws[f"{m.group(2)}|{term}"] = values
    components = pd.DataFrame(comp_rows, columns=["group", "term", "sd", "lower", "upper"])
    coef_rows = []
    for name, values in flat.items():
        if name == "Intercept" or (name in frame.columns and name not in ("worker", "item", "score")):
            term = "(Intercept)" if name == "Intercept" else name
            lo, hi = np.quantile(values, [0.025, 0.975])
            coef_rows.append((term, float(np.median(values)), float(values.std()), float("nan"), lo, hi, float("nan"),
                              p_direction(values)))
            all_draws[f"b|{term}"] = values
    coefficients = pd.DataFrame(coef_rows, columns=["term", "estimate", "se", "df", "lower", "upper", "p_value",
                                                    "p_direction"])
    sigma = flat.get("sigma")
    if sigma is not None:
        all_draws["sigma"] = sigma
    rng = np.random.default_rng(seed)
    n = len(next(iter(all_draws.values())))
    keep = np.sort(rng.choice(n, size=min(n, MAX_EXPORTED_DRAWS), replace=False))
    import arviz

    rhat = float(np.nanmax(arviz.rhat(idata, var_names=list(flat)).to_array().values))
    notes = tuple(dict.fromkeys(str(w.message).splitlines()[0] for w in caught if "rhat" in str(w.message).lower()))
    divergent = int(idata.sample_stats["diverging"].values.sum())
    if divergent:
        notes += (f"{divergent} divergent transitions: treat the intervals with care",)
    if rhat > 1.01:
        notes += (f"max R-hat {rhat:.3f} > 1.01: run longer (--draws)",)
    versions = {"bambi": bmb.__version__, "pymc": __import__("pymc").__version__}
    return RawFit(
        backend="bambi",
        coefficients=coefficients,
        components=components,
        correlations=pd.DataFrame(columns=["group", "term1", "term2", "cor"]),
        sigma=float(np.median(sigma)) if sigma is not None else float("nan"),
        sigma_interval=tuple(np.quantile(sigma, [0.025, 0.975])) if sigma is not None else (np.nan, np.nan),
        singular=False,
        warnings=notes,
        versions=versions,
        draws={k: (np.asarray(v).tolist() if every_draw else np.asarray(v)[keep].round(6).tolist())
               for k, v in all_draws.items()},
    )
