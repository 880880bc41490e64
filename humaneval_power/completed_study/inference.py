"""Inference on the fixed effects of a completed study's fit: the F test, marginal means, adjusted contrasts.

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

The lme4 backend reads the four from lmerTest itself (``r_bridge/analyze.R``); the no-R
backend computes them with the solver of :mod:`humaneval_power.fitting.vc_reml` (the Jacobian
exactly, ``A`` as its ``CrossedComponentsModel.satterthwaite`` does): :mod:`.backends`.

:class:`KenwardRogerInference` is the same interface with pbkrtest's Kenward-Roger method
(what lmerTest's ``ddf = "Kenward-Roger"`` and emmeans' ``lmer.df = "kenward-roger"`` call):
the adjusted covariance ``Phi_A`` (``vcovAdj``) replaces ``V`` in every SE and F statistic,
and the df are ``Lb_ddf`` / ``KRmodcomp``'s from ``V``, ``Phi_A``'s ``P`` list and ``W``.

:func:`marginal_means` and :func:`contrast_table` give emmeans' estimated marginal means and
contrasts from either, the contrasts adjusted over their family by
:func:`humaneval_power.multiplicity.adjusted`.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..contrasts import family_pairs
from ..multiplicity import adjusted

CONTRASTS = ("pairs", "baseline")
DF_METHODS = ("satterthwaite", "kenward-roger")
#: each df method in words (summary, methods paragraph)
DF_TEXT = {"satterthwaite": "Satterthwaite's method as in lmerTest",
           "kenward-roger": "Kenward and Roger's method as in pbkrtest (standard errors from its adjusted covariance), "
                            "as lmerTest's ddf = \"Kenward-Roger\" and emmeans' lmer.df = \"kenward-roger\""}
DF_NAMES = {"satterthwaite": "Satterthwaite", "kenward-roger": "Kenward-Roger"}
#: how each adjustment is computed, and its family, in words (summary, report, docs)
ADJUST_TEXT = {
    "holm": "Holm's step-down (family-wise error) over the {n} contrasts; intervals Bonferroni-adjusted",
    "bonferroni": "Bonferroni over the {n} contrasts",
    "fdr": "Benjamini-Hochberg false discovery rate over the {n} contrasts; intervals Bonferroni-adjusted",
    "tukey": "Tukey's studentized range for the {k} means (each contrast with its own df)",
    "dunnett": "single-step multivariate t over the {n} contrasts with their estimated correlation "
               "(emmeans' mvt; Dunnett's test for contrasts with a baseline), Monte Carlo, seed {seed}",
    "none": "none ({n} unadjusted tests)",
}
#: how each adjustment's intervals are adjusted (plot titles): holm and fdr intervals are Bonferroni's
INTERVAL_TEXT = {"holm": "Bonferroni-adjusted", "bonferroni": "Bonferroni-adjusted", "fdr": "Bonferroni-adjusted",
                 "tukey": "Tukey-adjusted", "dunnett": "mvt-adjusted", "none": "unadjusted"}

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
        df: np.ndarray = np.divide(2 * variances**2, denom, out=np.full(len(rows), np.inf), where=denom > 0)
        return df

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


#: the inference of either df method (both offer ``beta``, ``vcov``, ``contrasts(rows)`` and ``f_test(rows)``)
Inference = FixedEffectsInference | KenwardRogerInference


def anova_rows(design: Any, frame: pd.DataFrame) -> np.ndarray:
    """The hypothesis "all systems equal" in lmerTest's basis (its type I = type III rows for one factor).

    contestMD's F does not depend on the basis of the hypothesis but its denominator df does
    (unless the design is balanced): lmerTest takes the rows of the system columns of ``t(L)``,
    ``X'X = LU`` (Doolittle, no pivoting), i.e. the unit lower factor of ``X'X = L D L'``.
    """
    x = np.column_stack([np.ones(len(frame))] + [frame[c].to_numpy(float) for c in design.columns])
    chol = np.linalg.cholesky(x.T @ x)
    lower: np.ndarray = chol / np.diag(chol)
    lower[np.abs(lower) < 1e-6] = 0.0  # as lmerTest's doolittle()
    rows: np.ndarray = lower.T[1:]
    return rows


def family_indices(systems: Sequence[str], contrasts: str) -> list[tuple[int, int]]:
    """(system, versus) index pairs: each system against the first, or all pairs (later minus earlier)."""
    return [(upper, lower) for lower, upper in family_pairs(contrasts, len(systems))]


def marginal_means(inference: Inference, rows: np.ndarray, names: Sequence[str], counts: pd.Series,
                   level: float) -> pd.DataFrame:
    """emmeans' estimated marginal mean of each system (``rows``: its fixed-effect row) with its interval."""
    from scipy import stats

    emm = inference.contrasts(rows)
    half = stats.t.ppf(1 - (1 - level) / 2, emm["df"]) * emm["se"]
    return pd.DataFrame({"system": names, "emmean": emm["estimate"], "se": emm["se"], "df": emm["df"],
                         "ci_low": emm["estimate"] - half, "ci_high": emm["estimate"] + half,
                         "n_ratings": [int(counts[s]) for s in names]})


def contrast_table(inference: Inference, rows: np.ndarray, names: Sequence[str], contrasts: str, adjust: str,
                   level: float, seed: int, rating_sd: float,
                   report: Callable[[str], None] = lambda message: None) -> pd.DataFrame:
    """The family ``contrasts`` of differences between system means (``rows``: each system's fixed-effect row):
    estimate, se, df, t, p, p adjusted by ``adjust`` over the family with its intervals, and the effect size
    (the difference over ``rating_sd``)."""
    pairs = family_indices(names, contrasts)
    diffs = np.array([rows[a] - rows[b] for a, b in pairs])
    con = inference.contrasts(diffs)
    cov = diffs @ inference.vcov @ diffs.T
    corr = cov / np.outer(np.sqrt(np.diag(cov)), np.sqrt(np.diag(cov)))
    report(f"{adjust} adjustment of {len(pairs)} contrasts")
    p_adj, crit = adjusted(con["t"].to_numpy(), con["df"].to_numpy(), con["p_value"].to_numpy(), corr, adjust,
                           len(names), level, seed)
    table = pd.DataFrame({"system": [names[a] for a, _ in pairs], "versus": [names[b] for _, b in pairs]})
    table = pd.concat([table, con], axis=1)
    table["p_adjusted"] = p_adj
    table["ci_low"] = table["estimate"] - crit * table["se"]
    table["ci_high"] = table["estimate"] + crit * table["se"]
    table["effect_size"] = table["estimate"] / rating_sd
    return table
