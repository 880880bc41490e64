"""R ``ordinal::clmm`` through rpy2: the reference CLMM fit, as a :class:`~.clmm.ClmmFit`."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from ..errors import BackendUnavailableError, InputError
from .clmm import ClmmFit, check_link, ordinal_codes


@lru_cache(maxsize=1)
def _r_clmm() -> Any:
    """R (started by the lme4 bridge) with ``r_bridge/clmm.R`` loaded, or BackendUnavailableError."""
    from . import lme4

    ro = lme4.r_session()
    if not ro.r('isTRUE(requireNamespace("ordinal", quietly = TRUE))')[0]:
        raise BackendUnavailableError("R lacks the ordinal package (Debian: apt-get install r-cran-ordinal)")
    ro.r["source"](str(lme4.r_bridge_dir() / "clmm.R"))
    return ro


def available() -> tuple[bool, str]:
    """Whether ``ordinal::clmm`` can be used here, and if not, why."""
    try:
        _r_clmm()
    except BackendUnavailableError as exc:
        return False, str(exc)
    return True, ""


def fit_clmm_r(
    ratings: np.ndarray | Sequence[float],
    X: np.ndarray | None = None,
    groups: Mapping[str, Sequence[object] | np.ndarray] | None = None,
    *,
    link: str = "logit",
    scale: tuple[int, int] | None = None,
    beta_names: Sequence[str] | None = None,
    tight: bool = False,
    hessian: bool = True,
) -> ClmmFit:
    """The model of :func:`~.clmm.fit_clmm` fitted by ``ordinal::clmm`` (Laplace, nlminb).

    ``tight`` tightens clmm's stopping rules (inner gradTol 1e-8, nlminb rel.tol 1e-12): with its
    defaults clmm stops with gradients near 1e-4, which can leave thresholds ~5e-4 from the optimum.
    ``hessian=False``: clmm without its numerical Hessian (``Hess = FALSE``, a third of the fit): the same
    estimates and likelihood, ``cov`` and ``sd_se`` NaN (e.g. a null model fitted for its likelihood).
    """
    from rpy2.rinterface_lib.embedded import RRuntimeError

    from . import lme4

    check_link(link)
    y, levels = ordinal_codes(ratings, scale)
    N = len(y)
    Xm = np.zeros((N, 0)) if X is None else np.asarray(X, dtype=float).reshape(N, -1)
    p = Xm.shape[1]
    groups = dict(groups or {})
    ro = _r_clmm()
    cols: dict[str, Any] = {"y": ro.IntVector((y + levels[0]).tolist())}
    for j in range(p):
        cols[f"x{j + 1}"] = ro.FloatVector(Xm[:, j].tolist())
    for t, name in enumerate(groups):
        g = np.asarray(groups[name])
        if g.shape != (N,):
            raise InputError(f"random-effect grouping {name!r} has {g.size} entries for {N} ratings")
        cols[f"g{t + 1}"] = ro.StrVector(g.astype(str).tolist())
    rhs = [f"x{j + 1}" for j in range(p)] + [f"(1|g{t + 1})" for t in range(len(groups))]
    formula = "y ~ " + (" + ".join(rhs) if rhs else "1")
    try:
        with lme4.r_interruptible():
            res = ro.r["hepower_fit_clmm"](ro.DataFrame(cols), formula, ro.IntVector(list(levels)), link, tight, hessian)
    except RRuntimeError as exc:
        raise InputError(f"clmm could not fit the model: {str(exc).strip().splitlines()[-1].strip()}") from None
    get = lambda name: np.asarray(list(res.rx2(name)), dtype=float)
    with np.errstate(invalid="ignore"):  # NA (an SD at the boundary, not in clmm's vcov)
        sd_se = np.sqrt(get("sd_var"))
    sd_r = dict(zip([str(s) for s in res.rx2("sd_names")], zip(get("sd"), sd_se)))
    names = list(groups)
    nfe = len(levels) - 1 + p
    code = int(get("convergence")[0])
    return ClmmFit(
        thresholds=get("alpha"), threshold_names=tuple(f"{levels[k]}|{levels[k + 1]}" for k in range(len(levels) - 1)),
        beta=get("beta"), beta_names=tuple(beta_names) if beta_names is not None else tuple(f"x{j + 1}" for j in range(p)),
        sds=np.array([sd_r[f"g{t + 1}"][0] for t in range(len(names))]), sd_names=tuple(names),
        sd_se=np.array([sd_r[f"g{t + 1}"][1] for t in range(len(names))]),
        loglik=float(get("loglik")[0]), cov=get("vcov").reshape(nfe, nfe, order="F"), link=link, levels=levels,
        n_obs=N, converged=code == 0, message=str(res.rx2("message")[0]), n_iter=int(get("niter")[0]),
        max_grad=float(get("max_grad")[0]), backend=f"clmm (ordinal {res.rx2('version')[0]})",
        warnings=tuple(dict.fromkeys(str(w) for w in res.rx2("warnings"))),
    )
