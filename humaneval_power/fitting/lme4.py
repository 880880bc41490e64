"""lme4 + lmerTest through rpy2: the refit loop of ``r_bridge/refit.R`` runs inside R."""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import BackendUnavailableError

INSTALL_HINT = (
    "install R, lme4 and lmerTest (Debian: apt-get install r-base-core r-cran-lme4 r-cran-lmertest), "
    "then pip install 'humaneval-power[r]' (rpy2>=3.5.11,<3.6); `make setup` does both"
)


def r_bridge_dir() -> Path:
    """Folder holding the R sources (``HEPOWER_R_BRIDGE`` overrides)."""
    env = os.environ.get("HEPOWER_R_BRIDGE")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "r_bridge"


@lru_cache(maxsize=1)
def _r() -> Any:
    """Start R once per process and load the bridge; a clear error if impossible."""
    try:
        import rpy2.robjects as ro
    except Exception as exc:  # ImportError, or rpy2 failing to find R
        raise BackendUnavailableError(f"the lme4 backend is unavailable ({exc.__class__.__name__}: {exc}); {INSTALL_HINT}") from None
    missing = [p for p in ("lme4", "lmerTest") if not ro.r(f'isTRUE(requireNamespace("{p}", quietly = TRUE))')[0]]
    if missing:
        raise BackendUnavailableError(f"R lacks {', '.join(missing)}; {INSTALL_HINT}")
    source = r_bridge_dir() / "refit.R"
    if not source.exists():
        raise BackendUnavailableError(f"R bridge not found at {source} (set HEPOWER_R_BRIDGE)")
    ro.r["source"](str(source))
    return ro


def available() -> tuple[bool, str]:
    """Whether the backend works here, and if not, why."""
    try:
        _r()
    except BackendUnavailableError as exc:
        return False, str(exc)
    return True, ""


def versions() -> dict[str, str]:
    """Versions of R, lme4 and lmerTest."""
    ro = _r()
    v = ro.r["hepower_versions"]()
    return dict(zip(v.names, v))


def _data_frame(columns: dict[str, np.ndarray]) -> Any:
    ro = _r()
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
    coef: str,
    reml: bool,
    satterthwaite: bool,
) -> pd.DataFrame:
    """Fit ``formula`` to each column of ``responses`` (n_obs x n_fits) inside R.

    ``columns`` are the design columns (integer arrays become factors).
    Returns estimate, se, df, singular, failed, warned per fit.
    """
    ro = _r()
    y = np.asarray(responses, dtype=float)
    ymat = ro.r["matrix"](ro.FloatVector(y.ravel(order="F").tolist()), nrow=y.shape[0])
    res = ro.r["hepower_refit"](_data_frame(columns), ymat, formula, coef, reml, satterthwaite)
    arr = np.asarray(list(res), dtype=float).reshape((y.shape[1], 6), order="F")
    return pd.DataFrame(arr, columns=["estimate", "se", "df", "singular", "failed", "warned"])
