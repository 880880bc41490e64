"""statsmodels MixedLM for the crossed worker/item model (no R needed; z tests only)."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd


def fit_crossed(data: pd.DataFrame, reml: bool) -> tuple[float, float, bool, bool]:
    """Fit y ~ x + independent worker/item intercepts and slopes as variance components.

    Crossed effects are expressed as variance components within one all-data
    group. Returns (estimate of x, its SE, singular, warned).
    """
    import statsmodels.formula.api as smf
    from statsmodels.tools.sm_exceptions import ConvergenceWarning

    vc = {
        "worker": "0 + C(worker)",
        "worker_x": "0 + C(worker):x",
        "item": "0 + C(item)",
        "item_x": "0 + C(item):x",
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = smf.mixedlm("y ~ x", data, groups=np.ones(len(data)), vc_formula=vc, re_formula="0")
        res = model.fit(reml=reml, method=["lbfgs"])
    warned = any(issubclass(w.category, (ConvergenceWarning, RuntimeWarning, UserWarning)) for w in caught)
    singular = bool(np.any(np.asarray(res.vcomp) < 1e-8 * res.scale))
    return float(res.fe_params["x"]), float(res.bse_fe["x"]), singular, warned


def fit_crossed_many(columns: dict[str, np.ndarray], responses: np.ndarray, reml: bool) -> pd.DataFrame:
    """Fit each column of ``responses`` (n_obs x n_fits); failures are recorded, not raised."""
    base = pd.DataFrame(columns)
    rows = []
    for j in range(responses.shape[1]):
        data = base.assign(y=responses[:, j])
        try:
            est, se, singular, warned = fit_crossed(data, reml)
            failed = not (np.isfinite(est) and np.isfinite(se))
        except (np.linalg.LinAlgError, ValueError):
            est, se, singular, warned, failed = np.nan, np.nan, False, True, True
        rows.append((est, se, np.nan, singular, failed, warned))
    return pd.DataFrame(rows, columns=["estimate", "se", "df", "singular", "failed", "warned"]).astype(float)
