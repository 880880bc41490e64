"""Exact REML / ML fits of the fully crossed two-system LMM from sufficient statistics.

Model (x = -1/2 for system A, +1/2 for system B)::

    y = b0 + u[w] + v[i] + (b1 + a[w] + b[i]) * x + e

Per (worker, item) take d = yB - yA and s = yB + yA. Each half is a two-way
crossed layout with strata (workers, items, residual) whose expected mean
squares are ``lambda``::

    residual (d and s pooled)  2 se^2                  df 2 (W-1)(I-1)
    d: workers                 2 se^2 + I sd_ws^2      df W-1
    d: items                   2 se^2 + W sd_is^2      df I-1
    s: workers                 2 se^2 + 4 I sd_wi^2    df W-1
    s: items                   2 se^2 + 4 W sd_ii^2    df I-1

The REML deviance is ``sum df*log(lambda) + SS/lambda`` over these five strata,
minimised under ``lambda_k >= lambda_residual``: a pool-adjacent-violators step
(closed form). ML adds ``log(lambda_dW + lambda_dI - lambda_E)`` and the same
for s, which couples the strata; profiling the strata out leaves three unknowns
solved by Newton (see :func:`fit_ml`).
``b1_hat = mean(d)``, ``Var(b1_hat) = (lambda_dW + lambda_dI - lambda_E) / (W I)``,
and the Satterthwaite df are lmerTest's ``2 v^2 / (g' A g)`` evaluated in
closed form (zero variance components drop out, as in lmerTest).

All functions are vectorised over simulated studies (leading axis).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Arr = np.ndarray

#: Stratum order used in every ``ss``/``lam`` array: residual first, then the
#: four random-effect strata.
STRATA = ("residual", "d_worker", "d_item", "s_worker", "s_item")
#: Variance component that each non-residual stratum carries.
COMPONENTS = ("sd_worker_slope", "sd_item_slope", "sd_worker_intercept", "sd_item_intercept")


def strata_df(workers: int, items: int) -> np.ndarray:
    """Degrees of freedom of the five strata for a W x I fully crossed design."""
    w, i = workers - 1, items - 1
    return np.array([2 * w * i, w, i, w, i], dtype=float)


@dataclass(frozen=True)
class BalancedStats:
    """Sufficient statistics of fully crossed two-system studies.

    ``d_mean`` has shape (n,), ``ss`` shape (n, 5) in :data:`STRATA` order.
    """

    workers: int
    items: int
    d_mean: np.ndarray
    ss: np.ndarray

    def __len__(self) -> int:
        return int(self.d_mean.shape[0])


def _two_way_ss(m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Grand mean and row/column/residual sums of squares of (..., W, I) arrays."""
    grand = m.mean(axis=(-2, -1))
    rows = m.mean(axis=-1)
    cols = m.mean(axis=-2)
    n_w, n_i = m.shape[-2], m.shape[-1]
    ss_rows = n_i * ((rows - grand[..., None]) ** 2).sum(-1)
    ss_cols = n_w * ((cols - grand[..., None]) ** 2).sum(-1)
    resid = m - rows[..., :, None] - cols[..., None, :] + grand[..., None, None]
    return grand, ss_rows, ss_cols, (resid**2).sum(axis=(-2, -1))


def stats_from_ratings(ratings: np.ndarray) -> BalancedStats:
    """Sufficient statistics from ratings of shape (n, W, I, 2) (last axis: system A, B)."""
    r = np.asarray(ratings, dtype=float)
    if r.ndim == 3:
        r = r[None]
    d = r[..., 1] - r[..., 0]
    s = r[..., 1] + r[..., 0]
    d_mean, d_w, d_i, d_e = _two_way_ss(d)
    _, s_w, s_i, s_e = _two_way_ss(s)
    ss = np.stack([d_e + s_e, d_w, d_i, s_w, s_i], axis=-1)
    return BalancedStats(r.shape[-3], r.shape[-2], d_mean, ss)


def expected_lambdas(
    workers: int,
    items: int,
    sd_worker_intercept: float,
    sd_worker_slope: float,
    sd_item_intercept: float,
    sd_item_slope: float,
    sd_residual: float,
) -> np.ndarray:
    """Expected mean squares of the five strata (slope SDs in the mean-difference coding)."""
    e = 2.0 * sd_residual**2
    return np.array(
        [
            e,
            e + items * sd_worker_slope**2,
            e + workers * sd_item_slope**2,
            e + 4.0 * items * sd_worker_intercept**2,
            e + 4.0 * workers * sd_item_intercept**2,
        ]
    )


def draw_stats(
    lam: np.ndarray, workers: int, items: int, effect: float, n: int, rng: np.random.Generator
) -> BalancedStats:
    """Draw the sufficient statistics of ``n`` simulated studies directly (O(1) each)."""
    dfs = strata_df(workers, items)
    v = (lam[1] + lam[2] - lam[0]) / (workers * items)
    d_mean = effect + np.sqrt(v) * rng.standard_normal(n)
    ss = lam[None, :] * rng.chisquare(dfs[None, :], size=(n, 5))
    return BalancedStats(workers, items, d_mean, ss)


@dataclass(frozen=True)
class BalancedFit:
    """Fit of the contrast b1 for each study: estimate, SE, Satterthwaite df (NaN for ML)."""

    estimate: np.ndarray
    se: np.ndarray
    df: np.ndarray
    lam: np.ndarray  #: fitted stratum variances, shape (n, 5)
    at_boundary: np.ndarray  #: (n, 4) bool, a variance component estimated as zero
    converged: np.ndarray  #: (n,) bool
    workers: int
    items: int

    @property
    def singular(self) -> np.ndarray:
        """True where any variance component sits at zero (lme4's ``isSingular``)."""
        return np.asarray(self.at_boundary.any(axis=1))

    def variance_components(self) -> dict[str, np.ndarray]:
        """Fitted SDs in the mean-difference coding, keyed like the parameter file."""
        lam, w, i = self.lam, self.workers, self.items
        exc = np.maximum(lam[:, 1:] - lam[:, :1], 0.0)
        scale = np.array([i, w, 4.0 * i, 4.0 * w])
        out = {name: np.sqrt(exc[:, k] / scale[k]) for k, name in enumerate(COMPONENTS)}
        out["sd_residual"] = np.sqrt(lam[:, 0] / 2.0)
        return out


def _pool_reml(ss: np.ndarray, dfs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Constrained REML optimum: pool strata whose mean square falls below the residual."""
    n = ss.shape[0]
    rows = np.arange(n)
    ms = ss[:, 1:] / dfs[1:]
    order = np.argsort(ms, axis=1)
    pooled = np.zeros((n, 4), dtype=bool)
    num = ss[:, 0].copy()
    den = np.full(n, dfs[0])
    active = np.ones(n, dtype=bool)
    for j in range(4):
        k = order[:, j]
        take = active & (ms[rows, k] < num / den)
        num = num + np.where(take, ss[rows, 1 + k], 0.0)
        den = den + np.where(take, dfs[1 + k], 0.0)
        pooled[rows[take], k[take]] = True
        active &= take
    lam_e = num / den
    lam = np.column_stack([lam_e, np.where(pooled, lam_e[:, None], ms)])
    return lam, pooled


def satterthwaite_df(lam: np.ndarray, pooled: np.ndarray, dfs: np.ndarray) -> np.ndarray:
    """lmerTest's Satterthwaite df for b1 at a (constrained) REML optimum.

    At the optimum the REML Hessian is diagonal in the stratum variances
    (``df/lambda^2``); pooled strata merge into the residual and drop out.
    """
    n_e = dfs[0] + (pooled * dfs[1:]).sum(axis=1)
    c_e = -1.0 + pooled[:, 0] + pooled[:, 1]
    num = lam[:, 1] + lam[:, 2] - lam[:, 0]
    den = (c_e * lam[:, 0]) ** 2 / n_e
    den = den + np.where(pooled[:, 0], 0.0, lam[:, 1] ** 2 / dfs[1])
    den = den + np.where(pooled[:, 1], 0.0, lam[:, 2] ** 2 / dfs[2])
    return num**2 / den


def fit_reml(stats: BalancedStats) -> BalancedFit:
    """REML fit (what ``lmer(REML=TRUE)`` + lmerTest give on the full data)."""
    dfs = strata_df(stats.workers, stats.items)
    lam, pooled = _pool_reml(stats.ss, dfs)
    at_boundary = pooled | (lam[:, 1:] <= lam[:, :1])
    v = (lam[:, 1] + lam[:, 2] - lam[:, 0]) / (stats.workers * stats.items)
    return BalancedFit(
        estimate=stats.d_mean,
        se=np.sqrt(v),
        df=satterthwaite_df(lam, at_boundary, dfs),
        lam=lam,
        at_boundary=at_boundary,
        converged=np.ones(len(stats), dtype=bool),
        workers=stats.workers,
        items=stats.items,
    )


def _inner_terms(e: Arr, m: Arr, s: Arr, nk: Arr) -> tuple[Arr, Arr, Arr, Arr]:
    """The inner ML problem's pieces at residual variance ``e`` and ``m`` (both halves).

    For fixed ``e`` and ``m = lambda_W + lambda_I - e`` (per half) each stratum's
    optimum is ``max(r(m), e)``, ``r(m)`` the positive root of ``r^2/m + n r - S = 0``;
    the half is at its optimum when ``h(m) = sum max(r(m), e) - e - m = 0``.
    Layout: ``s`` (2, 2, n) as (half, stratum, study), ``nk`` (2, 2, 1), ``m`` (2, n).
    Returns ``r``, which strata are interior (``r > e``), ``h`` and ``h'(m)``.
    """
    r = 2.0 * s / (nk + np.sqrt(nk * nk + 4.0 * s / m[:, None]))
    inner = r > e
    lam = np.where(inner, r, e)
    q = r / m[:, None]
    rp = np.where(inner, q * q / (2.0 * q + nk), 0.0)
    return r, inner, lam[:, 0] + lam[:, 1] - e - m, rp[:, 0] + rp[:, 1] - 1.0


def _profile_terms(
    e: Arr, m: Arr, s: Arr, s_e: Arr, n_e: float, nk: Arr, inner: Arr, slope: Arr
) -> tuple[Arr, Arr, Arr, Arr]:
    """Derivative of the ML deviance in ``e`` with the strata profiled out, and its derivative.

    Envelope theorem: ``P'(e) = phi_E'(e) + sum_{k at bound} phi_k'(e) + sum_halves c/m``
    with ``phi(l) = df log l + SS/l`` and ``c = 1 - (interior strata in the half)``;
    ``P''`` adds ``-c/m^2 dm/de`` with ``dm/de = -c/h'(m)`` (implicit differentiation).
    Also returns ``c`` and ``c / (m^2 h'(m))``.
    """
    inv = 1.0 / e
    bound = ~inner
    c = 1.0 - inner[:, 0] - inner[:, 1]
    t1 = np.where(bound, nk - s * inv, 0.0)
    t2 = np.where(bound, 2.0 * s * inv - nk, 0.0)
    cms = c / (m * m * slope)
    f = (n_e - s_e * inv + t1.sum((0, 1))) * inv + (c / m).sum(0)
    fp = (2.0 * s_e * inv - n_e + t2.sum((0, 1))) * inv * inv + (c * cms).sum(0)
    return f, fp, c, cms


def _ml_newton(
    e: Arr, m: Arr, s: Arr, s_e: Arr, n_e: float, nk: Arr, max_iter: int = 10
) -> tuple[Arr, Arr, Arr, Arr]:
    """Joint Newton on (e, m_d, m_s): fast, not globally safeguarded; returns convergence per study."""
    for it in range(max_iter):
        r, inner, h, slope = _inner_terms(e, m, s, nk)
        f, fp, c, cms = _profile_terms(e, m, s, s_e, n_e, nk, inner, slope)
        de = -(f + (h * cms).sum(0)) / fp
        dm = -(h + c * de) / slope
        # h' in [-1, 0) bounds |h| by |dm| + |de|; fp > 0: a minimum of the profile
        ok = (np.abs(de) <= 1e-12 * e) & ((np.abs(dm) <= 1e-12 * m) & (slope < 0)).all(0) & (fp > 0) & (e > 0)
        if ok.all() or it == max_iter - 1:
            break
        e, m = e + de, np.maximum(m + dm, e + de)
    return e.copy(), m, r, ok


def _solve_m(e: Arr, m: Arr, s: Arr, nk: Arr, max_iter: int = 80) -> tuple[Arr, Arr, Arr, Arr, Arr]:
    """The inner problem at fixed ``e``, safeguarded: ``h(e) >= 0``, ``h(sum max(S/n, e) - e) <= 0``
    and ``h' < 0`` at every root (there ``r <= m``, so ``r' <= 1/(2 + n)``), so the root is
    unique; Newton from ``m``, bisecting whenever a step leaves the bracket."""
    lo = np.broadcast_to(e, m.shape)
    hi = np.maximum(s / nk, e).sum(1) - e
    m = np.clip(m, lo, hi)
    for _ in range(max_iter):
        r, inner, h, slope = _inner_terms(e, m, s, nk)
        ok = (np.abs(h) <= 1e-13 * m) | (hi - lo <= 1e-14 * hi)
        if ok.all():
            break
        lo, hi = np.where(h > 0, m, lo), np.where(h < 0, m, hi)
        new = m - h / slope
        m = np.where((slope < 0) & (new >= lo) & (new <= hi), new, 0.5 * (lo + hi))
    return m, r, inner, slope, ok.all(0)


def _ml_profile(
    e: Arr, m: Arr, s: Arr, s_e: Arr, n_e: float, nk: Arr, max_iter: int = 200
) -> tuple[Arr, Arr, Arr, Arr]:
    """Safeguarded Newton on the profiled residual variance ``e`` (the inner problem solved
    exactly at every step). ``P'`` < 0 near 0 and >= 0 from the largest stratum mean square
    (and ``SS_total/N``) on, so a bisection bracket keeps every step safe."""
    lo = np.zeros_like(e)
    hi = np.maximum((s / nk).max(axis=(0, 1)), (s_e + s.sum((0, 1))) / (n_e + nk.sum() + 2.0))
    e, m = np.minimum(e, hi), m.copy()
    done = np.zeros(len(e), dtype=bool)
    for _ in range(max_iter):
        t = np.flatnonzero(~done)
        if not len(t):
            break
        et, st = e[t], s[..., t]
        mt, _, inner, slope, _ = _solve_m(et, m[:, t], st, nk)
        f, fp, _, _ = _profile_terms(et, mt, st, s_e[t], n_e, nk, inner, slope)
        lo[t], hi[t] = np.where(f < 0, et, lo[t]), np.where(f > 0, et, hi[t])
        step = -f / fp
        newton = (fp > 0) & (et + step >= lo[t]) & (et + step <= hi[t])
        done[t] = (newton & (np.abs(step) <= 1e-12 * et)) | (hi[t] - lo[t] <= 1e-13 * hi[t])
        e[t] = np.where(newton, et + step, 0.5 * (lo[t] + hi[t]))
        m[:, t] = mt
    m, r, _, _, ok = _solve_m(e, m, s, nk)
    return e, m, r, done & ok


def fit_ml(stats: BalancedStats) -> BalancedFit:
    """ML fit (``lmer(REML=FALSE)``); df are NaN (the ML test uses a z cut-off).

    The ML deviance is the REML one plus ``log(lambda_dW + lambda_dI - lambda_E)``
    and the same for s. Profiling the strata out leaves the residual variance
    ``e`` and, per half, ``m = lambda_W + lambda_I - lambda_E``: a joint Newton
    step on (e, m_d, m_s) from the REML optimum converges in 4-5 steps; studies
    where it does not are solved by the safeguarded :func:`_ml_profile`.
    """
    dfs = strata_df(stats.workers, stats.items)
    n_e, nk = dfs[0], dfs[1:].reshape(2, 2, 1)
    s_e, s = stats.ss[:, 0], np.ascontiguousarray(stats.ss[:, 1:].T.reshape(2, 2, -1))
    start, _ = _pool_reml(stats.ss, dfs)
    e0 = start[:, 0]
    m0 = np.stack([start[:, 1] + start[:, 2], start[:, 3] + start[:, 4]]) - e0
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        e, m, r, converged = _ml_newton(e0, m0, s, s_e, n_e, nk)
        redo = np.flatnonzero(~converged)
        if len(redo):
            e[redo], m[:, redo], r[..., redo], converged[redo] = _ml_profile(
                e0[redo], m0[:, redo], s[..., redo], s_e[redo], n_e, nk)
    lam = np.column_stack([e, np.maximum(r, e).reshape(4, -1).T])
    return BalancedFit(
        estimate=stats.d_mean,
        se=np.sqrt(m[0] / (stats.workers * stats.items)),
        df=np.full(len(stats), np.nan),
        lam=lam,
        at_boundary=lam[:, 1:] - lam[:, :1] <= 1e-12 * lam[:, :1],
        converged=converged,
        workers=stats.workers,
        items=stats.items,
    )
