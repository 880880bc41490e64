"""The same fits by lme4 + lmerTest (the reference): a design in the columns and formula of the lme4 refit path."""
from __future__ import annotations

import numpy as np

from .structure import ComponentDesign


def lme4_formula(design: ComponentDesign) -> str:
    """The lmer formula of a design in the column names :func:`refit_lme4` gives R.

    Fixed effects are the columns of ``x`` (``X1``, ``X2``, ... with no
    intercept added); component k is ``(1 | g{k})`` or ``(0 + v{k} | g{k})``.
    """
    fixed = " + ".join(f"X{j + 1}" for j in range(design.x.shape[1]))
    rand = " + ".join(f"(1 | g{k})" if c.values is None else f"(0 + v{k} | g{k})"
                      for k, c in enumerate(design.components))
    return f"y ~ 0 + {fixed} + {rand}"


def refit_lme4(design: ComponentDesign, y: np.ndarray, contrast: np.ndarray, reml: bool = True,
               start: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """lmer + lmerTest's ``contest1D`` (Satterthwaite) on every column of ``y``: the design through
    :func:`humaneval_power.fitting.lme4.refit_many`, the one refit path (looping inside R).

    ``start``: relative SDs (n_studies x K, our component order) to start lme4's
    optimiser from instead of its default theta = 1 (e.g. another solver's optimum).
    Returns arrays estimate, se, df, singular, criterion (REML criterion or
    deviance), sigma, failed, warned (one entry per study). Needs the lme4 backend.
    """
    from .. import lme4

    y = np.asarray(y, float).reshape(design.n, -1)
    cols: dict[str, np.ndarray] = {f"X{j + 1}": design.x[:, j] for j in range(design.x.shape[1])}
    varying = {}
    for k, c in enumerate(design.components):
        lev = np.asarray(c.levels, int) + 1
        cols[f"g{k}"] = lev[0] if c.per_study else lev
        if c.per_study:
            varying[f"g{k}"] = lev.T
        if c.values is not None:
            cols[f"v{k}"] = np.asarray(c.values, float)
    res = lme4.refit_many(cols, y, lme4_formula(design), np.asarray(contrast, float), reml, True, varying, start)
    return {name: res[name].to_numpy() for name in res.columns}
