"""statsmodels MixedLM for the crossed worker/item model (no R needed; z tests only)."""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from .model import RawFit


def fit_crossed_many(columns: dict[str, np.ndarray], responses: np.ndarray, reml: bool) -> pd.DataFrame:
    """Fit y ~ x + (1 + x || worker) + (1 + x || item) to each column of ``responses`` (n_obs x n_fits).

    The power simulation's statsmodels path: the same fit as ``hepower fit --backend statsmodels``.
    Failures are recorded, not raised.
    """
    base = pd.DataFrame(columns)
    rows = []
    for j in range(responses.shape[1]):
        try:
            fit = fit_lmm_statsmodels(base.assign(score=responses[:, j]), ("x",), reml=reml)
            co = fit.coefficients.set_index("term").loc["x"]
            est, se = float(co.estimate), float(co.se)
            rows.append((est, se, np.nan, fit.singular, not (np.isfinite(est) and np.isfinite(se)), bool(fit.warnings)))
        except (np.linalg.LinAlgError, ValueError):
            rows.append((np.nan, np.nan, np.nan, False, True, True))
    return pd.DataFrame(rows, columns=["estimate", "se", "df", "singular", "failed", "warned"]).astype(float)


def _start_from_pairs(frame: pd.DataFrame, columns: tuple[str, ...], names: list[str]):
    """Starting values for the treatment-coded model from one two-system fit per comparison."""
    from statsmodels.regression.mixed_linear_model import MixedLMParams

    slope: dict[str, float] = {}
    icpt: dict[str, list[float]] = {"worker": [], "item": []}
    scales = []
    for col in columns:
        others = [c for c in columns if c != col]
        rows = (frame[others] == 0).all(axis=1)
        pair = frame.loc[rows, ["worker", "item", "score"]].assign(x=frame.loc[rows, col] - 0.5)
        fit = fit_lmm_statsmodels(pair, ("x",))
        sd = fit.components.set_index(["group", "term"])["sd"]
        for g in ("worker", "item"):
            slope[f"{g}|{col}"] = float(sd[(g, "x")]) ** 2
            icpt[g].append(max(float(sd[(g, "(Intercept)")]) ** 2 - float(sd[(g, "x")]) ** 2 / 4, 0.0))
        scales.append(fit.sigma**2)
    scale = float(np.mean(scales))
    var = {**slope, **{f"{g}|(Intercept)": float(np.mean(v)) for g, v in icpt.items()}}
    vcomp = np.array([max(var[n], 1e-4 * scale) / scale for n in names])
    x = np.column_stack([np.ones(len(frame))] + [frame[c].to_numpy(float) for c in columns])
    fe = np.linalg.lstsq(x, frame["score"].to_numpy(float), rcond=None)[0]
    return MixedLMParams.from_components(fe, cov_re=np.zeros((0, 0)), vcomp=vcomp)


def fit_lmm_statsmodels(frame: pd.DataFrame, columns: tuple[str, ...], dropped: frozenset = frozenset(),
                        reml: bool = True) -> "RawFit":
    """(RE)ML fit of the crossed model as variance components (no R; z tests; no SD intervals).

    All rows form one group; each random effect is a variance component.
    """
    from scipy import stats
    from statsmodels.regression.mixed_linear_model import MixedLM
    from statsmodels.tools.sm_exceptions import ConvergenceWarning

    from .model import GROUPS, RawFit

    vc: dict[str, str] = {}
    keys: list[tuple[str, str]] = []
    for g in GROUPS:
        for term in ("(Intercept)",) + columns:
            if (g, term) in dropped:
                continue
            vc[f"{g}|{term}"] = f"0 + C({g})" if term == "(Intercept)" else f"0 + C({g}):{term}"
            keys.append((g, term))
    fixed = "score ~ 1" + "".join(f" + {c}" for c in columns)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = MixedLM.from_formula(fixed, frame, groups=np.ones(len(frame)), vc_formula=vc, re_formula="0",
                                     use_sparse=True)
        if len(columns) > 1 and not dropped:
            # Many components: Powell is too slow (>10 min for 28 on DialSummEval); start L-BFGS
            # from the two-system fits of each comparison instead.
            start = _start_from_pairs(frame, columns, list(model.exog_vc.names))
            res = model.fit(reml=reml, method=["lbfgs"], start_params=start, maxiter=5_000)
        else:
            # Gradient methods alone stop far from the optimum on crossed designs (seen on DialSummEval
            # AMT: REML criterion -362.5 vs -397.4); Powell gets there, L-BFGS then polishes.
            res = model.fit(reml=reml, method=["powell"], maxiter=20_000)
            try:
                polished = model.fit(reml=reml, method=["lbfgs"], start_params=res.params_object, maxiter=5_000)
                if polished.llf > res.llf:
                    res = polished
            except (np.linalg.LinAlgError, ValueError):
                pass
    names = list(model.exog_vc.names)
    sds = dict(zip(names, np.sqrt(np.maximum(np.asarray(res.vcomp), 0.0))))
    sigma = float(np.sqrt(res.scale))
    components = pd.DataFrame([(g, t, float(sds[f"{g}|{t}"])) for g, t in keys], columns=["group", "term", "sd"])
    components["lower"] = np.nan
    components["upper"] = np.nan
    fe, se = res.fe_params, res.bse_fe
    z = fe / se
    coefficients = pd.DataFrame({
        "term": ["(Intercept)" if n == "Intercept" else n for n in fe.index],
        "estimate": fe.to_numpy(), "se": se.to_numpy(), "df": np.inf, "z": z.to_numpy(),
        "p_value": 2 * stats.norm.sf(np.abs(z.to_numpy())),
    })
    msgs = tuple(dict.fromkeys(str(w.message).splitlines()[0] for w in caught
                               if issubclass(w.category, (ConvergenceWarning, UserWarning, RuntimeWarning))))
    return RawFit(
        backend="statsmodels",
        coefficients=coefficients,
        components=components,
        correlations=pd.DataFrame(columns=["group", "term1", "term2", "cor"]),
        sigma=sigma,
        sigma_interval=(np.nan, np.nan),
        singular=bool((components.sd <= 1e-4 * sigma).any()),
        warnings=msgs,
        versions={"statsmodels": __import__("statsmodels").__version__},
        criterion=float(-2 * res.llf),
    )
