"""lmerTest's Satterthwaite inference for any linear function of the fixed effects, from either backend.

lmerTest keeps four things from a REML fit: the fixed effects ``beta``, their
covariance ``V``, the covariance of the variance parameters ``A`` (``vcov_varpar``,
over varpar = (theta..., sigma)) and the Jacobian ``J_k = dV/dvarpar_k``. From them

* ``contest1D``: for a row ``l``, estimate ``l'b``, ``se = sqrt(l'Vl)`` and
  ``df = 2 (l'Vl)^2 / (g' A g)``, ``g_k = l' J_k l``;
* ``contestMD`` (the F test of ``L b = 0``, e.g. ``anova(m, ddf = "Satterthwaite")``):
  eigen-decompose ``L V L' = P D P'``, keep the ``q`` eigenvalues above
  ``sqrt(eps) * d_1``, ``F = sum((P'Lb)_m^2 / d_m) / q``; each rotated row gets its
  own ``nu_m`` as above and the denominator df is ``2E / (E - q)``,
  ``E = sum(nu_m / (nu_m - 2))`` (2 if any ``nu_m <= 2``; their mean if all equal).

:func:`lme4_inference` reads the four from lmerTest itself (``r_bridge/analyze.R``);
:func:`statsmodels_inference` computes them with the no-R solver of :mod:`.vc_reml`
(the Jacobian exactly, ``A`` as :meth:`~.vc_reml.CrossedComponentsModel.satterthwaite` does).

:class:`KenwardRogerInference` is the same interface with pbkrtest's Kenward-Roger method
(what lmerTest's ``ddf = "Kenward-Roger"`` and emmeans' ``lmer.df = "kenward-roger"`` call):
the adjusted covariance ``Phi_A`` (``vcovAdj``) replaces ``V`` in every SE and F statistic,
and the df are ``Lb_ddf`` / ``KRmodcomp``'s from ``V``, ``Phi_A``'s ``P`` list and ``W``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from .types import LmmSpec, RawFit

#: lmerTest's rank tolerance for the F test: sqrt(.Machine$double.eps)
RANK_EPS = math.sqrt(np.finfo(float).eps)


@dataclass(frozen=True, eq=False)
class FixedEffectsInference:
    """``beta`` (p), ``vcov`` (p x p), ``jacobian`` (m x p x p, dV/dvarpar) and ``vcov_varpar`` (m x m)."""

    beta: np.ndarray
    vcov: np.ndarray
    jacobian: np.ndarray
    vcov_varpar: np.ndarray

    def _df(self, rows: np.ndarray, variances: np.ndarray) -> np.ndarray:
        grads = np.einsum("ip,kpq,iq->ik", rows, self.jacobian, rows)
        denom = np.einsum("ik,kl,il->i", grads, self.vcov_varpar, grads)
        return np.divide(2 * variances**2, denom, out=np.full(len(rows), np.inf), where=denom > 0)

    def contrasts(self, rows: np.ndarray) -> pd.DataFrame:
        """estimate, se, df (Satterthwaite), t and two-sided p of each row of ``rows`` (lmerTest's contest1D)."""
        from scipy import stats

        rows = np.atleast_2d(np.asarray(rows, float))
        est = rows @ self.beta
        var = np.einsum("ip,pq,iq->i", rows, self.vcov, rows)
        se = np.sqrt(var)
        df = self._df(rows, var)
        t = est / se
        return pd.DataFrame({"estimate": est, "se": se, "df": df, "t": t, "p_value": 2 * stats.t.sf(np.abs(t), df)})

    def f_test(self, rows: np.ndarray) -> dict[str, float]:
        """F test of ``rows @ beta = 0`` with Satterthwaite denominator df (lmerTest's contestMD)."""
        from scipy import stats

        rows = np.atleast_2d(np.asarray(rows, float))
        values, vectors = np.linalg.eigh(rows @ self.vcov @ rows.T)
        values, vectors = values[::-1], vectors[:, ::-1]  # decreasing, as R's eigen()
        q = int((values > max(RANK_EPS * values[0], 0.0)).sum())
        rotated = vectors[:, :q].T @ rows
        d = values[:q]
        f = float(((rotated @ self.beta) ** 2 / d).sum() / q)
        nu = self._df(rotated, d)
        ddf = fisher_ddf(nu)
        return {"F": f, "num_df": float(q), "den_df": ddf, "p_value": float(stats.f.sf(f, q, ddf))}


@dataclass(frozen=True, eq=False)
class KenwardRogerInference:
    """pbkrtest's Kenward-Roger inference: ``beta``, unadjusted ``vcov0``, adjusted ``vcov``, ``P`` (m x p x p), ``W``."""

    beta: np.ndarray
    vcov0: np.ndarray
    vcov: np.ndarray
    p_list: np.ndarray
    w: np.ndarray

    def _adjust(self, rows: np.ndarray) -> tuple[float, float, float]:
        """pbkrtest's ``.KR_adjust`` for the hypothesis ``rows``: (ddf, F scaling, q)."""
        theta = rows.T @ np.linalg.solve(rows @ self.vcov0 @ rows.T, rows)
        u = np.einsum("ab,kbc,cd->kad", theta @ self.vcov0, self.p_list, self.vcov0)
        traces = np.einsum("kaa->k", u)
        a1 = float(traces @ self.w @ traces)  # sum over i, j (both triangles) = pbkrtest's e-weighted upper one
        a2 = float(np.einsum("ij,iab,jba->", self.w, u, u))
        q = float(np.linalg.matrix_rank(rows))
        b = (a1 + 6 * a2) / (2 * q)
        g = ((q + 1) * a1 - (q + 4) * a2) / ((q + 2) * a2)
        denom = 3 * q + 2 * (1 - g)
        c1, c2, c3 = g / denom, (q - g) / denom, (q + 2 - g) / denom
        v0 = 1 + c1 * b
        v0 = 0.0 if abs(v0) < 1e-10 else v0
        v1, v2 = 1 - c2 * b, 1 - c3 * b
        x = 1 - a2 / q
        ratio = 1.0 if abs(x) < 1e-14 and abs(v1) < 1e-14 else x / v1  # pbkrtest's .divZero
        rho = ratio**2 * v0 / v2 / q
        ddf = 4 + (q + 2) / (q * rho - 1)
        scaling = 1.0 if abs(ddf - 2) < 0.01 else ddf * (1 - a2 / q) / (ddf - 2)
        return ddf, scaling, q

    def contrasts(self, rows: np.ndarray) -> pd.DataFrame:
        """estimate, adjusted se, Kenward-Roger df (``Lb_ddf``), t and p of each row (lmerTest's contest1D, KR)."""
        from scipy import stats

        rows = np.atleast_2d(np.asarray(rows, float))
        est = rows @ self.beta
        se = np.sqrt(np.einsum("ip,pq,iq->i", rows, self.vcov, rows))
        df = np.array([self._adjust(r[None, :])[0] for r in rows])
        t = est / se
        return pd.DataFrame({"estimate": est, "se": se, "df": df, "t": t, "p_value": 2 * stats.t.sf(np.abs(t), df)})

    def f_test(self, rows: np.ndarray) -> dict[str, float]:
        """Kenward-Roger's scaled F test of ``rows @ beta = 0`` (pbkrtest's KRmodcomp, lmerTest's anova)."""
        from scipy import stats

        rows = np.atleast_2d(np.asarray(rows, float))
        ddf, scaling, q = self._adjust(rows)
        lb = rows @ self.beta
        f = scaling * float(lb @ np.linalg.solve(rows @ self.vcov @ rows.T, lb)) / q
        return {"F": f, "num_df": q, "den_df": ddf, "p_value": float(stats.f.sf(f, q, ddf))}


def fisher_ddf(nu: np.ndarray, tol: float = 1e-8) -> float:
    """lmerTest's ``get_Fstat_ddf``: the denominator df of an F built from t statistics with df ``nu``."""
    nu = np.asarray(nu, float)
    if len(nu) == 1:
        return float(nu[0])
    if np.all(np.abs(np.diff(nu)) < tol):
        return float(nu.mean())
    if np.any(nu <= 2):
        return 2.0
    e = float((nu / (nu - 2)).sum())
    return 2 * e / (e - len(nu))


#: Kenward-Roger is dense in the ratings. pbkrtest's ``vcovAdj`` holds Sigma^-1, its Cholesky factor, a
#: transpose and ``G_r Sigma^-1`` for each of the m variance parameters (m + 3 matrices of n x n doubles);
#: the no-R ``kenward_roger_dense`` holds four. Time grows as n^3: measured on 2 shared cores, pbkrtest 11 s at
#: 900 ratings and 49 s at 1,500 (1.5e-8 n^3 s), the no-R code 1-3 s at 900 (4e-9 n^3 s).
KR_SECONDS_PER_CUBE = {"lme4": 1.5e-8, "statsmodels": 4e-9}
#: above this many ratings --df kenward-roger is refused: lme4 (pbkrtest) ~7 min and 0.6 GB at 3,000 for the
#: invariant model, the no-R code ~4 min and 0.5 GB at 4,000
KR_MAX_RATINGS = {"lme4": 3000, "statsmodels": 4000}


def kenward_roger_cost(n: int, parameters: int, backend: str) -> tuple[float, float]:
    """Estimated peak memory (bytes) and time (seconds) of Kenward-Roger's adjusted covariance on ``n`` ratings
    with ``parameters`` variance parameters (the residual's included)."""
    matrices = parameters + 3 if backend == "lme4" else 4
    return 8.0 * n * n * matrices, KR_SECONDS_PER_CUBE[backend] * float(n) ** 3


def variance_parameters(spec: LmmSpec) -> int:
    """The model's variance parameters, the residual's included (a correlated term of t effects has t(t+1)/2)."""
    sizes = [sum(1 for h, _ in spec.components if h == g) for g in dict.fromkeys(g for g, _ in spec.components)]
    return 1 + (sum(t * (t + 1) // 2 for t in sizes) if spec.correlated else sum(sizes))


def check_kenward_roger(n: int, parameters: int, backend: str) -> str:
    """Refuse Kenward-Roger above ``KR_MAX_RATINGS[backend]`` ratings with the estimated cost; below, the
    estimate in words (for a progress line)."""
    from ..errors import InputError
    from ..progress import format_duration

    memory, seconds = kenward_roger_cost(n, parameters, backend)
    what = "pbkrtest's vcovAdj (lme4)" if backend == "lme4" else "Kenward-Roger without R"
    cost = (f"{what} builds dense {n} x {n} matrices of the ratings: about {memory / 1e9:.2g} GB and "
            f"{format_duration(seconds)} (estimated)")
    if n > KR_MAX_RATINGS[backend]:
        other = "statsmodels" if backend == "lme4" else "lme4"
        alt = f"--backend {other} or " if n <= KR_MAX_RATINGS[other] else ""
        raise InputError(f"--df kenward-roger: {cost}, over the limit of {KR_MAX_RATINGS[backend]:,} ratings; "
                         f"use {alt}--df satterthwaite")
    return cost


def lme4_inference(frame: pd.DataFrame, spec: LmmSpec, kenward_roger: bool = False,
                   progress: Any = None) -> tuple[RawFit, FixedEffectsInference | KenwardRogerInference]:
    """Fit ``spec`` by REML with lme4 + lmerTest; the fit and lmerTest's own beta, V, J and A
    (``kenward_roger``: pbkrtest's adjusted covariance instead, :class:`KenwardRogerInference`, refused
    above ``KR_MAX_RATINGS`` with its estimated cost, which ``progress`` hears of below it)."""
    from rpy2.rinterface_lib.embedded import RRuntimeError

    from ..errors import InputError
    from . import lme4

    if kenward_roger:
        cost = check_kenward_roger(len(frame), variance_parameters(spec), "lme4")
        if progress is not None:
            progress(cost)
    ro = lme4.r_session()
    if not ro.r('exists("hepower_analyze_lmm")')[0]:
        ro.r["source"](str(lme4.r_bridge_dir() / "analyze.R"))
    try:
        with lme4.r_interruptible():
            res = ro.r["hepower_analyze_lmm"](lme4.r_data_frame({c: frame[c].to_numpy() for c in frame.columns}),
                                              spec.formula, kenward_roger)
    except RRuntimeError as exc:
        raise InputError(f"lme4 could not fit the model: {str(exc).strip().splitlines()[-1].strip()}") from None
    raw = lme4.raw_fit(res, "gaussian", "none")
    p = len(raw.coefficients)
    m = int(res.rx2("n_jac")[0])
    arr = {name: np.asarray(list(res.rx2(name)), float) for name in ("beta", "vcov_beta", "jac", "vcov_varpar")}
    if kenward_roger:
        k = int(res.rx2("kr_n")[0])
        kr = {name: np.asarray(list(res.rx2(name)), float) for name in ("vcov_adj", "kr_p", "kr_w")}
        return raw, KenwardRogerInference(arr["beta"], arr["vcov_beta"].reshape(p, p, order="F"),
                                          kr["vcov_adj"].reshape(p, p, order="F"),
                                          kr["kr_p"].reshape(k, p, p).transpose(0, 2, 1), kr["kr_w"].reshape(k, k, order="F"))
    jac = arr["jac"].reshape(m, p, p).transpose(0, 2, 1)  # each matrix column-major
    inference = FixedEffectsInference(arr["beta"], arr["vcov_beta"].reshape(p, p, order="F"), jac,
                                      arr["vcov_varpar"].reshape(m, m, order="F"))
    return raw, inference


def kenward_roger_dense(x: np.ndarray, beta: np.ndarray, z: Any, component: np.ndarray, variances: np.ndarray,
                        sigma2: float) -> KenwardRogerInference:
    """pbkrtest's ``vcovAdj`` for a variance-components model, without R (dense in the ratings).

    ``Sigma = sum_r v_r Z_r Z_r' + sigma2 I`` with ``Z_r`` the columns of the sparse ``z`` whose
    ``component`` is r; the parameters are the variances (the residual's last), as pbkrtest's
    ``get_SigmaG``: ``P_r = -X'S^-1 G_r S^-1 X``, ``Q_rs = X'S^-1 G_r S^-1 G_s S^-1 X``,
    ``IE2_rs = tr(S^-1 G_r S^-1 G_s) - 2 tr(Phi Q_rs) + tr(Phi P_r Phi P_s)``, ``W = 2 IE2^-1``,
    ``Phi_A = Phi + 2 Phi U Phi``, ``U = sum_rs W_rs (Q_rs - P_r Phi P_s)`` (``G_r = Z_r Z_r'``, ``G = I``).
    """
    import scipy.sparse as sp
    from scipy import linalg

    n = x.shape[0]
    zs = [z[:, component == r].tocsc() for r in range(len(variances))] + [sp.identity(n, format="csc")]
    sigma = sigma2 * np.eye(n)
    for v, zr in zip(variances, zs):
        sigma += v * (zr @ zr.T).toarray()
    sinv = linalg.cho_solve(linalg.cho_factor(sigma, lower=True), np.eye(n))
    phi = np.linalg.inv(x.T @ sinv @ x)
    a = [np.asarray((zr.T @ sinv).T) for zr in zs]  # S^-1 Z_r
    b = [ar.T @ x for ar in a]                        # Z_r' S^-1 X
    p_list = np.stack([-br.T @ br for br in b])
    m = len(zs)
    ie2, q = np.empty((m, m)), {}
    for r in range(m):
        for s in range(r, m):
            c = np.asarray(zs[r].T @ a[s])            # Z_r' S^-1 Z_s
            q[r, s] = b[r].T @ c @ b[s]
            q[s, r] = q[r, s].T
            ie2[r, s] = ie2[s, r] = (float((c**2).sum()) - 2 * float((phi * q[r, s]).sum())
                                     + float(np.trace(phi @ p_list[r] @ phi @ p_list[s])))
    w = 2 * (np.linalg.inv(ie2) if np.abs(np.linalg.eigvalsh(ie2)).min() > 1e-10 else np.linalg.pinv(ie2))
    u = sum(w[r, s] * (q[r, s] - p_list[r] @ phi @ p_list[s]) for r in range(m) for s in range(m))
    u = (u + u.T) / 2
    return KenwardRogerInference(np.asarray(beta, float), phi, phi + 2 * phi @ u @ phi, p_list, w)


def statsmodels_inference(frame: pd.DataFrame, spec: LmmSpec, progress: Any = None,
                          kenward_roger: bool = False) -> tuple[RawFit, FixedEffectsInference | KenwardRogerInference]:
    """Fit ``spec`` without R (:func:`.statsmodels_lmm.fit_components`); its beta, V, exact J and A
    (:meth:`~.vc_reml.CrossedComponentsModel.satterthwaite`, from the fit itself: nothing is refitted).
    ``kenward_roger``: :func:`kenward_roger_dense` at the same optimum instead.
    """
    from .statsmodels_lmm import fit_components

    if kenward_roger:
        cost = check_kenward_roger(len(frame), variance_parameters(spec), "statsmodels")
        if progress is not None:
            progress(cost)
    raw, model, fit, satt = fit_components(frame, spec.columns, spec.components, intervals="none", progress=progress)
    if kenward_roger:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1):
            return raw, kenward_roger_dense(model.x, fit.beta, model.z, model.component, fit.gamma * fit.sigma2,
                                            fit.sigma2)
    return raw, FixedEffectsInference(fit.beta, fit.beta_cov, satt.jacobian, satt.vcov_varpar)
