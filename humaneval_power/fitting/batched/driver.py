"""The public entry point of the batched fits: :func:`fit_many` runs chunks of studies through the structure,
the deviance, the optimiser and the inference, and returns a :class:`BatchFit`."""
from __future__ import annotations

import warnings
import weakref
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from ..blas import blas_controller
from .deviance import AnyBatch, batch_statistics, block_batch_statistics
from .inference import contrast_stats
from .optimizer import newton
from .structure import BlockStructure, ComponentDesign, Structure, build_structure

#: lme4's isSingular tolerance on theta
SINGULAR_TOL = 1e-4


@dataclass(frozen=True)
class BatchFit:
    """Fits of ``n`` studies: per contrast row estimate, SE, Satterthwaite df, t and two-sided p (``(n, m)``).

    ``theta`` (n, K) relative SDs (lme4's theta), ``sigma`` (n,), ``sds`` (n, K+1)
    SDs of the components then the residual; ``deviance`` lme4's REML/ML criterion.
    """

    component_names: tuple[str, ...]
    estimate: np.ndarray
    se: np.ndarray
    df: np.ndarray
    beta: np.ndarray
    theta: np.ndarray
    sigma: np.ndarray
    deviance: np.ndarray
    singular: np.ndarray
    converged: np.ndarray
    failed: np.ndarray
    iterations: np.ndarray
    reml: bool
    notes: tuple[str, ...] = field(default=())

    @property
    def sds(self) -> np.ndarray:
        return np.column_stack([self.theta * self.sigma[:, None], self.sigma])

    @property
    def t(self) -> np.ndarray:
        return self.estimate / self.se

    @property
    def p_value(self) -> np.ndarray:
        """Two-sided p from the t distribution with Satterthwaite df (normal where df is infinite)."""
        return 2 * stats.t.sf(np.abs(self.t), self.df)

    def significant(self, alpha: float = 0.05) -> np.ndarray:
        return self.p_value <= alpha


def _chunk_size(st: Structure | BlockStructure, n_obs: int, per_study_design: bool, budget: float = 1.5e8) -> int:
    """Studies per chunk so that the per-study arrays stay within ``budget`` bytes."""
    t, q2, p1 = st.t, st.q2, st.p + 1
    if isinstance(st, BlockStructure):
        blocks = sum(g.blocks.size * (g.sup.shape[2] + t) * (g.sup.shape[2] + p1) for g in st.groups)
        per = 8 * (3 * n_obs * p1 + 6 * q2 * q2 + 4 * blocks)
        return max(1, int(budget // per))
    per = 8 * (n_obs * p1 + st.nb * t * p1 + len(st.classes) * t * t * (3 * q2 * p1 + 2 * p1 * p1)
               + 4 * q2 * q2 + (len(st.classes) * t * t * q2 * q2 if per_study_design else 0))
    return max(1, int(budget // (4 * per)))


def fit_many(design: ComponentDesign, y: np.ndarray, contrasts: np.ndarray, reml: bool = True,
             satterthwaite: bool = True, max_iter: int = 100, tol: float = 1e-12,
             chunk: int | None = None, start: np.ndarray | None = None, blas_threads: int | None = 1) -> BatchFit:
    """(RE)ML fits of every column of ``y`` (N x n_studies) with lme4's criterion, all studies at once.

    ``contrasts`` (m x p, or a length-p vector): rows L; for each, the estimate
    ``L b``, its SE and lmerTest's Satterthwaite df (``satterthwaite=False``:
    df infinite, for a z-test). A per-study design must cover exactly the
    columns of ``y``. Studies whose fit breaks down numerically are flagged
    ``failed`` (NaN results), never dropped. The algebra is on small matrices:
    ``blas_threads`` (default 1; None leaves BLAS alone) is much faster on a busy machine.
    ``start``: relative variances (K,) to start every study from; by default a
    few pilot studies are fitted from lme4's start (theta = 1) and the others
    start at the pilot's median (the optimum does not depend on the start;
    the number of iterations does).
    """
    with np.errstate(all="ignore"):  # a degenerate study ends up flagged, not in a warning
        if blas_threads is None:
            return _fit_many(design, y, contrasts, reml, satterthwaite, max_iter, tol, chunk, start)
        with blas_controller().limit(limits=blas_threads):
            return _fit_many(design, y, contrasts, reml, satterthwaite, max_iter, tol, chunk, start)


#: the structure of recent shared designs, by the design object (the chunks of a cell share it)
_STRUCTURES: dict[int, tuple[weakref.ref, Structure | BlockStructure]] = {}


def _structure(design: ComponentDesign) -> Structure | BlockStructure:
    """:func:`build_structure` of a design, built once per design object."""
    hit = _STRUCTURES.get(id(design))
    if hit is not None and hit[0]() is design:
        return hit[1]
    st = build_structure(design)
    _STRUCTURES[id(design)] = (weakref.ref(design), st)
    while len(_STRUCTURES) > 8:
        del _STRUCTURES[next(iter(_STRUCTURES))]
    return st


PILOT = 8


def _median_hessian(h: np.ndarray) -> np.ndarray:
    """The pilots' median Hessian in u, entry by entry over the pilots where it is known (NaN: a variable held
    at zero); unknown on every pilot: 0 off the diagonal and the median known diagonal entry on it."""
    with warnings.catch_warnings():  # an entry unknown on every pilot: NaN, filled below
        warnings.simplefilter("ignore", RuntimeWarning)
        med = np.nanmedian(h, axis=0)
    diag = np.diagonal(med)
    fill = np.nanmedian(diag) if np.isfinite(diag).any() else 1.0
    return np.where(np.isfinite(med), med, np.where(np.eye(h.shape[1], dtype=bool), fill, 0.0))


def _fit_many(design: ComponentDesign, y: np.ndarray, contrasts: np.ndarray, reml: bool, satterthwaite: bool,
              max_iter: int, tol: float, chunk: int | None, start: np.ndarray | None) -> BatchFit:
    y = np.asarray(y, float)
    if y.ndim == 1:
        y = y[:, None]
    x = np.asarray(design.x, float)
    contrasts = np.atleast_2d(np.asarray(contrasts, float))
    n_obs, n = y.shape
    if n_obs != design.n or contrasts.shape[1] != x.shape[1]:
        raise ValueError(f"y has {n_obs} rows and contrasts {contrasts.shape[1]} columns; the design has "
                         f"{design.n} rows and {x.shape[1]} fixed effects")
    per_study = design.n_studies is not None
    if per_study and design.n_studies != n:
        raise ValueError(f"the per-study design covers {design.n_studies} studies, y has {n}")
    kk, m = len(design.components), contrasts.shape[0]
    out = {"est": np.full((n, m), np.nan), "se": np.full((n, m), np.nan), "df": np.full((n, m), np.nan),
           "beta": np.full((n, x.shape[1]), np.nan), "theta": np.full((n, kk), np.nan),
           "sigma": np.full(n, np.nan), "dev": np.full(n, np.nan), "conv": np.zeros(n, bool),
           "failed": np.zeros(n, bool), "iter": np.zeros(n, int)}
    st = build_structure(design.subset(slice(0, 1))) if per_study else _structure(design)
    hess0 = None
    size = chunk or _chunk_size(st, n_obs, per_study)
    pending = [np.arange(i, min(i + size, n)) for i in range(0, n, size)]
    while pending:
        idx = pending.pop()
        try:
            if per_study:
                st = build_structure(design.subset(idx))
            bt: AnyBatch
            if isinstance(st, BlockStructure):
                bt = block_batch_statistics(st, x, y[:, idx], reml)
            else:
                bt = batch_statistics(st, x, y[:, idx], slice(None) if per_study else None, reml)
            if start is None or hess0 is None:
                pilot = min(PILOT, idx.size)
                g0, c0, _, _, h0, _ = newton(bt.take(np.arange(pilot)),
                                           np.ones((pilot, kk)) if start is None else
                                           np.broadcast_to(np.asarray(start, float), (pilot, kk)), max_iter, tol)
                start = np.median(g0[c0], axis=0) if c0.any() else np.ones(kk)
                hess0 = _median_hessian(h0[c0]) if c0.any() else None
            gamma, conv, iters, hess, _, pt = newton(bt, np.broadcast_to(np.asarray(start, float), (idx.size, kk)),
                                                  max_iter, tol, hess0)
            theta, sigma = np.sqrt(gamma), np.sqrt(pt.r2 / bt.nu)
            est, se, df = contrast_stats(bt, pt, theta, sigma, contrasts,
                                          hess if satterthwaite else None)
        except np.linalg.LinAlgError:
            if idx.size == 1:
                out["failed"][idx] = True
            else:
                pending += [idx[: idx.size // 2], idx[idx.size // 2:]]
            continue
        for key, val in (("est", est), ("se", se), ("df", df), ("beta", pt.beta), ("theta", theta),
                         ("sigma", sigma), ("dev", pt.dev), ("conv", conv), ("iter", iters)):
            out[key][idx] = val
    bad = ~(np.isfinite(out["est"]).all(1) & np.isfinite(out["se"]).all(1) & np.isfinite(out["dev"]))
    scale = np.maximum(1e-8 * np.nanstd(y, axis=0), 1e-6 * np.sqrt(np.nanmean(y**2, axis=0)))
    bad |= ~(out["sigma"] > scale)  # an exact fit: no residual variance to estimate
    out["failed"] |= bad
    out["conv"] &= ~out["failed"]
    return BatchFit(design.names, out["est"], out["se"], out["df"], out["beta"], out["theta"], out["sigma"],
                    out["dev"], (out["theta"] < SINGULAR_TOL).any(1) & ~out["failed"], out["conv"],
                    out["failed"], out["iter"], reml)
