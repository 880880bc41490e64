"""lme4's profiled (RE)ML deviance of every study of a batch and its exact gradient in the relative variances:
per-study sufficient statistics, then each evaluation as contractions with the design tensors (by block class, or
block by block on each block's support)."""
from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..criterion import profiled_deviance, profiled_gradient
from .structure import BlockStructure, Group, Structure, scatter_add

_einsumfunc: Any
try:  # numpy >= 2.3 contracts pairs of operands in np.einsum(optimize=...) with bmm_einsum
    from numpy._core import einsumfunc as _einsumfunc
except ImportError:  # pragma: no cover - numpy 1.x
    _einsumfunc = None
_bmm_einsum: Any = getattr(_einsumfunc, "bmm_einsum", None)
_c_einsum: Any = getattr(_einsumfunc, "c_einsum", None)
_einsum_path: Any = np.einsum_path


@functools.lru_cache(maxsize=4096)
def _contractions(eq: str, shapes: tuple[tuple[int, ...], ...]) -> tuple[tuple[tuple[int, ...], str], ...]:
    """numpy's greedy contraction list of ``einsum(eq, optimize=True)`` for operands of these shapes."""
    dummies = [np.broadcast_to(0.0, s) for s in shapes]
    return tuple((c[0], c[1]) for c in _einsum_path(eq, *dummies, optimize=True, einsum_call=True)[1])


#: the number of studies the contraction paths are found for (any batch of more than one study takes its path)
PATH_STUDIES = 64


def path_shapes(eq: str, shapes: tuple[tuple[int, ...], ...]) -> tuple[tuple[int, ...], ...]:
    """The operand shapes a contraction path is found for: the study axis (index ``s``, leading) of a batch of
    more than one study set to :data:`PATH_STUDIES`, so that every batch size shares one path."""
    terms = eq.split("->")[0].split(",")
    return tuple((PATH_STUDIES,) + sh[1:] if t.startswith("s") and sh[0] > 1 else sh for t, sh in zip(terms, shapes))


def einsum(eq: str, *operands: np.ndarray) -> np.ndarray:
    """``np.einsum(eq, *operands, optimize=path)`` with numpy's greedy path for :func:`path_shapes`, found once.

    The path search costs more than the contractions of an evaluation's small tensors, and each new number
    of studies would search again (in every new worker of the web app); the contractions run as numpy runs
    them (``bmm_einsum`` for a pair, ``c_einsum`` otherwise; numpy < 2.3: plain einsum)."""
    if _bmm_einsum is None:
        return np.einsum(eq, *operands, optimize=True)
    ops = list(operands)
    for inds, sub in _contractions(eq, path_shapes(eq, tuple(o.shape for o in ops))):
        tmp = [ops.pop(x) for x in inds]
        ops.append(_bmm_einsum(sub, *tmp) if len(tmp) == 2 else _c_einsum(sub, *tmp))
    return ops[0]


@dataclass
class Batch:
    """Sufficient statistics of a batch of studies (leading axis n) and the design tensors (leading axis B)."""

    st: Structure
    nu: np.ndarray          # (n,): observations (less p under REML)
    reml: bool
    ww: np.ndarray          # (n, p+1, p+1)
    u2: np.ndarray          # (n, q2, p+1)
    q: list[np.ndarray]     # per class (n, t, t, p+1, p+1)
    tt: list[np.ndarray]    # per class (n, t, t, q2, p+1)
    k: list[np.ndarray]     # per class (B, t, t, q2, q2)
    g_cc: np.ndarray        # (B, q2, q2)
    parts: int = 1          # equal runs of studies to take the matrix products by (see :func:`by_part`)

    def take(self, idx: np.ndarray) -> Batch:
        def sub(a: np.ndarray) -> np.ndarray:
            return a if a.shape[0] == 1 else a[idx]
        return Batch(self.st, self.nu[idx], self.reml, self.ww[idx], self.u2[idx], [a[idx] for a in self.q],
                      [a[idx] for a in self.tt], [sub(a) for a in self.k], sub(self.g_cc))


def batch_statistics(st: Structure, x: np.ndarray, y: np.ndarray, copies: slice | None, reml: bool) -> Batch:
    """Statistics of the studies in the columns of ``y`` (N x n); ``copies``: their per-study designs."""
    n_obs, n = y.shape
    p = st.p
    w = np.concatenate([np.broadcast_to(x[None], (n, n_obs, p)), y.T[:, :, None]], axis=2)  # (n, N, p+1)
    ww = einsum("sni,snj->sij", w, w)
    zax = st.za @ x                       # (nb*t, p)
    zay = st.za @ y                       # (nb*t, n)
    za_w = np.concatenate([np.broadcast_to(zax.reshape(1, st.nb, st.t, p), (n, st.nb, st.t, p)),
                           zay.T.reshape(n, st.nb, st.t, 1)], axis=3)  # (n, nb, t, p+1)
    if copies is None:
        u2 = np.asarray(st.zc[0] @ w.transpose(1, 0, 2).reshape(n_obs, -1)).reshape(st.q2, n, p + 1).transpose(1, 0, 2)
        k, g_cc, g_ac = st.k, st.g_cc, st.g_ac
    else:
        zcs = st.zc[copies]
        u2 = np.stack([np.asarray(z @ w[j]) for j, z in enumerate(zcs)])
        k = [a[copies] for a in st.k]
        g_cc = st.g_cc[copies]
        g_ac = [a[copies] for a in st.g_ac]
    q, tt = [], []
    for c, blocks in enumerate(st.classes):
        zb = za_w[:, blocks]                                    # (n, nb_c, t, p+1)
        q.append(einsum("sbei,sbfj->sefij", zb, zb))
        g = g_ac[c]                                             # (B, nb_c, t, q2)
        nbc, t, q2, p1 = zb.shape[1], st.t, st.q2, p + 1
        if g.shape[0] == 1:  # one GEMM: (t q2, nb) x (nb, n t (p+1))
            prod = g[0].reshape(nbc, t * q2).T @ zb.transpose(1, 0, 2, 3).reshape(nbc, n * t * p1)
            tt.append(prod.reshape(t, q2, n, t, p1).transpose(2, 0, 3, 1, 4).copy())
        else:
            prod = np.matmul(g.reshape(n, nbc, t * q2).transpose(0, 2, 1), zb.reshape(n, nbc, t * p1))
            tt.append(prod.reshape(n, t, q2, t, p1).transpose(0, 1, 3, 2, 4).copy())
    nu = np.full(n, float(n_obs - p if reml else n_obs))
    return Batch(st, nu, reml, ww, u2, q, tt, k, g_cc)


def per_study_rows(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Rows ``idx`` of a per-study array (a shared one, leading axis 1, unchanged)."""
    return a if a.shape[0] == 1 else a[idx]


@dataclass
class BlockBatch:
    """Statistics of a batch of studies for the block-by-block evaluation."""

    st: BlockStructure
    nu: np.ndarray
    reml: bool
    ww: np.ndarray           # (n, p+1, p+1)
    u2: np.ndarray           # (n, q2, p+1)
    zw: list[np.ndarray]     # per group (n, nbg, t, p+1): Z_b'[X y]
    groups: list[Group]
    g_cc: np.ndarray         # (B, q2, q2)
    parts: int = 1

    def take(self, idx: np.ndarray) -> BlockBatch:
        groups = [Group(g.blocks, g.slot_comp, g.onehot, per_study_rows(g.g, idx), per_study_rows(g.gc, idx), per_study_rows(g.sup, idx))
                  for g in self.groups]
        return BlockBatch(self.st, self.nu[idx], self.reml, self.ww[idx], self.u2[idx], [a[idx] for a in self.zw],
                           groups, per_study_rows(self.g_cc, idx))


def block_batch_statistics(st: BlockStructure, x: np.ndarray, y: np.ndarray, reml: bool) -> BlockBatch:
    n_obs, n = y.shape
    p1 = st.p + 1
    w = np.concatenate([np.broadcast_to(x[None], (n, n_obs, st.p)), y.T[:, :, None]], axis=2)  # (n, N, p+1)
    if st.mask is not None:
        w = np.where(st.mask[:, :, None] > 0, w, 0.0)
        nobs = st.mask.sum(1)
    else:
        nobs = np.full(n, float(n_obs))
    ww = einsum("sni,snj->sij", w, w)
    zw = np.asarray(st.za @ w.transpose(1, 0, 2).reshape(n_obs, -1)).reshape(st.nb, st.t, n, p1).transpose(2, 0, 1, 3)
    u2 = np.zeros(n * st.q2 * p1)
    studies = np.arange(n)[:, None, None]
    for o in range(st.oidx.shape[1]):
        idx = (studies * st.q2 + st.oidx[:, o, :, None]) * p1 + np.arange(p1)     # (n, N, p+1)
        u2 += scatter_add(idx, w * st.ovals[o][:, None], u2.size)
    nu = nobs - st.p if reml else nobs
    return BlockBatch(st, nu, reml, ww, u2.reshape(n, st.q2, p1), [zw[:, g.blocks] for g in st.groups],
                       st.groups, st.g_cc)


#: the statistics of a batch for either evaluation (by block class, or block by block)
AnyBatch = Batch | BlockBatch


def stacked(bt: AnyBatch, copies: int) -> AnyBatch:
    """``copies`` copies of a batch one after the other, evaluated copy by copy where it matters (:func:`by_part`)."""
    return replace(bt.take(np.tile(np.arange(bt.nu.shape[0]), copies)), parts=copies)


def by_part(parts: int, f: Callable[..., np.ndarray], a: np.ndarray, *shared: np.ndarray) -> np.ndarray:
    """``f(a, *shared)`` on ``parts`` equal runs of ``a``'s leading axis (the studies), concatenated.

    BLAS picks a matrix product's kernel by its size, and so the last bits of a study's results by the number
    of studies evaluated with it; taken by part, the products of a stacked batch give every study the results
    of its own batch alone."""
    if parts == 1:
        return f(a, *shared)
    m = a.shape[0] // parts
    return np.concatenate([f(a[i * m:(i + 1) * m], *shared) for i in range(parts)])


def _phi_k(phi: np.ndarray, k: np.ndarray, parts: int) -> np.ndarray:
    """sum_ef phi[s,e,f] K[s|0,e,f,...] for a shared (B=1) or per-study K."""
    n, t = phi.shape[0], phi.shape[1]
    tail = k.shape[3:]
    if k.shape[0] == 1:
        k2 = k[0].reshape(t * t, -1)
        return by_part(parts, lambda a, b: a.reshape(-1, t * t) @ b, phi, k2).reshape((n,) + tail)
    return np.matmul(phi.reshape(n, 1, t * t), k.reshape(n, t * t, -1)).reshape((n,) + tail)


@dataclass
class Point:
    dev: np.ndarray
    logdet: np.ndarray
    beta: np.ndarray
    sxx: np.ndarray
    r2: np.ndarray
    trace: np.ndarray | None = None   # (n, K)
    omega: np.ndarray | None = None   # (n, K, p+1, p+1): sum over levels of (Z_j'H^-1 w)(Z_j'H^-1 w)'
    score: np.ndarray | None = None   # (n, K)


def scatter_point(full: Point, rows: np.ndarray, pt: Point, sel: np.ndarray | None = None) -> None:
    """Copy the (gradient) evaluation ``pt`` (its rows ``sel``) into rows ``rows`` of ``full``."""
    for name in ("dev", "logdet", "beta", "sxx", "r2", "trace", "omega", "score"):
        src = getattr(pt, name)
        getattr(full, name)[rows] = src if sel is None else src[sel]


def evaluate(bt: AnyBatch, gamma: np.ndarray, gradient: bool) -> Point:
    st, p = bt.st, bt.st.p
    n = gamma.shape[0]
    lam = np.sqrt(np.maximum(gamma, 0.0))
    lam_pad = np.concatenate([lam, np.zeros((n, 1))], axis=1)   # index -1: padding slots
    r_mat = bt.g_cc.astype(float, copy=True) if bt.g_cc.shape[0] == n else np.repeat(bt.g_cc, n, axis=0)
    m = bt.u2.copy()
    waw = bt.ww.copy()
    if isinstance(bt, BlockBatch):
        logdet, saved = _inner_blocks(bt, lam_pad, r_mat, m, waw)
    else:
        logdet, saved = _inner_classes(bt, lam_pad, r_mat, m, waw)
    lc = lam[:, st.outer_comp]                                     # (n, q2)
    if st.q2:
        s_mat = lc[:, :, None] * r_mat * lc[:, None, :]
        s_mat[:, np.arange(st.q2), np.arange(st.q2)] += 1.0
        d = lc[:, :, None] * m
        ld, sd, s_inv = _cholesky_solve(s_mat, d, gradient)
        logdet += ld
        whw = waw - np.swapaxes(d, 1, 2) @ sd
    else:
        whw = waw
    sxx = whw[:, :p, :p]
    beta = np.linalg.solve(sxx, whw[:, :p, p:])[..., 0]
    r2 = whw[:, p, p] - np.einsum("si,si->s", whw[:, :p, p], beta)
    if bt.reml:
        logdet = logdet + np.linalg.slogdet(sxx)[1]
    dev = profiled_deviance(logdet, r2, bt.nu)
    if not gradient:
        return Point(dev, logdet, beta, sxx, r2)
    kk = st.n_comp
    trace = np.zeros((n, kk))
    omega = np.zeros((n, kk, p + 1, p + 1))
    v = y_mat = None
    if st.q2:
        assert s_inv is not None  # asked for with gradient
        y_mat = lc[:, :, None] * s_inv * lc[:, None, :]
        v = lc[:, :, None] * sd                                      # Y m
        zchw = m - r_mat @ v                                         # Z_C' H^-1 w
        diag = _outer_trace(r_mat, y_mat, s_inv, lc)
        onehot = (st.outer_comp[:, None] == np.arange(kk)[None, :]).astype(float)
        trace += by_part(bt.parts, np.matmul, diag, onehot)
        omega += by_part(bt.parts, lambda a, b: einsum("sli,slj,lk->skij", a, a, b), zchw, onehot)
    if isinstance(bt, BlockBatch):
        _inner_blocks_gradient(bt, saved, v, y_mat, trace, omega)
    else:
        _inner_classes_gradient(bt, saved, v, y_mat, trace, omega)
    cx = np.linalg.inv(sxx)
    if bt.reml:
        trace -= np.einsum("sij,skji->sk", cx, omega[:, :, :p, :p])
    cvec = np.concatenate([-beta, np.ones((n, 1))], axis=1)
    score = np.einsum("si,skij,sj->sk", cvec, omega, cvec)
    return Point(dev, logdet, beta, sxx, r2, trace, omega, score)


def _cholesky_solve(s_mat: np.ndarray, d: np.ndarray, inverse: bool
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """log det S, S^-1 d and (``inverse``) S^-1 for each study's S (positive definite), by Cholesky."""
    from scipy.linalg import lapack

    n, q = s_mat.shape[:2]
    if q < 64:  # small: numpy's batched routines
        ls = np.linalg.cholesky(s_mat)
        s_inv = np.linalg.inv(s_mat) if inverse else None
        sd = s_inv @ d if inverse else np.linalg.solve(s_mat, d)
        return 2 * np.log(np.diagonal(ls, axis1=1, axis2=2)).sum(1), sd, s_inv
    logdet, sd = np.empty(n), np.empty_like(d)
    s_inv = np.empty_like(s_mat) if inverse else None
    for j in range(n):
        c, info = lapack.dpotrf(s_mat[j], lower=1, clean=0)
        if info:
            raise np.linalg.LinAlgError("the Schur complement is not positive definite")
        logdet[j] = 2 * np.log(np.diagonal(c)).sum()
        sd[j] = lapack.dpotrs(c, d[j], lower=1)[0]
        if s_inv is not None:
            inv = lapack.dpotri(c, lower=1)[0]
            s_inv[j] = np.tril(inv) + np.tril(inv, -1).T
    return logdet, sd, s_inv


def _outer_trace(r_mat: np.ndarray, y_mat: np.ndarray, s_inv: np.ndarray, lc: np.ndarray) -> np.ndarray:
    """diag(R - R Y R) (the outer effects' diag(Z_C'H^-1 Z_C)), Y = L S^-1 L, S = I + L R L.

    Where ``l_i^2 R_ii`` is not small, ``(1 - S^-1_ii) / l_i^2`` (as L R Y R L = S - 2I + S^-1);
    the other rows directly."""
    l2 = lc**2
    rii = np.diagonal(r_mat, axis1=1, axis2=2)
    far = l2 * rii > 1e-3
    out = np.where(far, (1 - np.diagonal(s_inv, axis1=1, axis2=2)) / np.where(far, l2, 1.0), 0.0)
    near = np.flatnonzero((~far).any(0))
    if near.size:
        rows = r_mat[:, near, :]                                      # (n, J, q2)
        out[:, near] = np.where(far[:, near], out[:, near], rii[:, near] - ((rows @ y_mat) * rows).sum(2))
    return out


def _inner_classes(bt: Batch, lam_pad: np.ndarray, r_mat: np.ndarray, m: np.ndarray, waw: np.ndarray
                   ) -> tuple[np.ndarray, list]:
    """The blocks' part of the criterion, class by class: log det, and (in place) R, Z_C'H_A^-1 w, w'H_A^-1 w."""
    st = bt.st
    eye_t = np.eye(st.t)
    logdet = np.zeros(lam_pad.shape[0])
    saved = []
    for c, blocks in enumerate(st.classes):
        la = lam_pad[:, st.slot_comp[c]]                          # (n, t)
        a = eye_t + la[:, :, None] * st.g_blocks[c] * la[:, None, :]
        chol = np.linalg.cholesky(a)
        logdet += 2 * len(blocks) * np.log(np.diagonal(chol, axis1=1, axis2=2)).sum(1)
        phi = la[:, :, None] * np.linalg.inv(a) * la[:, None, :]
        saved.append((phi, eye_t - st.g_blocks[c] @ phi))
        if st.q2:
            r_mat -= _phi_k(phi, bt.k[c], bt.parts)
            m -= np.einsum("sef,seflj->slj", phi, bt.tt[c])
        waw -= np.einsum("sef,sefij->sij", phi, bt.q[c])
    return logdet, saved


def _inner_classes_gradient(bt: Batch, saved: list, v: np.ndarray | None, y_mat: np.ndarray | None,
                            trace: np.ndarray, omega: np.ndarray) -> None:
    """The blocks' terms of the gradient (in place), class by class."""
    st = bt.st
    n, kk = trace.shape
    for c, blocks in enumerate(st.classes):
        _, nmat = saved[c]
        xi = bt.q[c].copy()
        if st.q2:
            assert v is not None and y_mat is not None  # there are outer effects
            vt = einsum("sli,seflj->sefij", v, bt.tt[c])
            xi -= vt + np.swapaxes(np.swapaxes(vt, 1, 2), 3, 4)
            kv = _phi_k_v(bt.k[c], v, bt.parts)                          # (n, t, t, q2, p+1)
            xi += einsum("sli,seflj->sefij", v, kv)
            if bt.k[c].shape[0] == 1:
                kt = bt.k[c][0].reshape(st.t * st.t, -1).T
                u = by_part(bt.parts, lambda a, b: a.reshape(a.shape[0], -1) @ b, y_mat, kt).reshape(n, st.t, st.t)
            else:
                u = np.matmul(bt.k[c].reshape(n, st.t * st.t, -1), y_mat.reshape(n, -1, 1)).reshape(n, st.t, st.t)
            inner_cov = len(blocks) * (nmat @ st.g_blocks[c]) - nmat @ u @ np.swapaxes(nmat, 1, 2)
        else:
            inner_cov = len(blocks) * (nmat @ st.g_blocks[c])
        om = einsum("sae,saf,sefij->saij", nmat, nmat, xi)   # (n, t, p+1, p+1)
        diag = np.diagonal(inner_cov, axis1=1, axis2=2)
        onehot = (st.slot_comp[c][:, None] == np.arange(kk)[None, :]).astype(float)  # padding: all zero
        trace += by_part(bt.parts, np.matmul, diag, onehot)
        omega += by_part(bt.parts, lambda a, b: einsum("saij,ak->skij", a, b), om, onehot)


def _flat_support(sup: np.ndarray, n: int, width: int, tail: int) -> np.ndarray:
    """Flat indices into (n, width, tail) of the support rows: (n, nbg, s, tail)."""
    studies = np.arange(n)[:, None, None, None]
    return (studies * width + sup[..., None]) * tail + np.arange(tail)


def _inner_blocks(bt: BlockBatch, lam_pad: np.ndarray, r_mat: np.ndarray, m: np.ndarray, waw: np.ndarray
                  ) -> tuple[np.ndarray, list]:
    """The blocks' part of the criterion, block by block (each on its support among the outer effects)."""
    st = bt.st
    n, q2, p1 = lam_pad.shape[0], st.q2, st.p + 1
    eye_t = np.eye(st.t)
    logdet = np.zeros(n)
    saved, r_parts, m_parts = [], [], []
    for grp, zw in zip(bt.groups, bt.zw):
        la = lam_pad[:, grp.slot_comp]                            # (n, nbg, t)
        a = eye_t + la[..., :, None] * grp.g * la[..., None, :]
        chol = np.linalg.cholesky(a)
        logdet += 2 * np.log(np.diagonal(chol, axis1=2, axis2=3)).sum((1, 2))
        phi = la[..., :, None] * np.linalg.inv(a) * la[..., None, :]
        saved.append((phi, eye_t - grp.g @ phi))
        waw -= (np.swapaxes(zw, 2, 3) @ (phi @ zw)).sum(1)
        if q2:
            pg = phi @ grp.gc                                     # (n, nbg, t, s)
            gct = np.swapaxes(grp.gc, 2, 3)
            studies = np.arange(n)[:, None, None, None]
            r_parts.append((gct @ pg, (studies * (q2 + 1) + grp.sup[..., :, None]) * (q2 + 1) + grp.sup[..., None, :]))
            m_parts.append((np.swapaxes(pg, 2, 3) @ zw, _flat_support(grp.sup, n, q2 + 1, p1)))
    if q2:
        r_mat -= scatter_add(np.concatenate([np.broadcast_to(i, v.shape).ravel() for v, i in r_parts]),
                         np.concatenate([v.ravel() for v, _ in r_parts]),
                         n * (q2 + 1) ** 2).reshape(n, q2 + 1, q2 + 1)[:, :q2, :q2]
        m -= scatter_add(np.concatenate([np.broadcast_to(i, v.shape).ravel() for v, i in m_parts]),
                     np.concatenate([v.ravel() for v, _ in m_parts]), n * (q2 + 1) * p1).reshape(n, q2 + 1, p1)[:, :q2]
    return logdet, saved


def _inner_blocks_gradient(bt: BlockBatch, saved: list, v: np.ndarray | None, y_mat: np.ndarray | None,
                           trace: np.ndarray, omega: np.ndarray) -> None:
    """The blocks' terms of the gradient (in place), block by block."""
    n = trace.shape[0]
    q2 = bt.st.q2
    if q2:
        assert v is not None and y_mat is not None  # there are outer effects
        vpad = np.concatenate([v, np.zeros((n, 1, v.shape[2]))], axis=1)
        ypad = np.zeros((n, q2 + 1, q2 + 1))
        ypad[:, :q2, :q2] = y_mat
    for grp, zw, (_phi, nmat) in zip(bt.groups, bt.zw, saved):
        if q2:
            studies = np.arange(n)[:, None, None]
            sup = np.broadcast_to(grp.sup, (n,) + grp.sup.shape[1:])
            a_b = zw - grp.gc @ vpad[studies, sup]                          # (n, nbg, t, p+1)
            yg = ypad[studies[..., None], sup[..., :, None], sup[..., None, :]]   # (n, nbg, s, s)
            u = grp.gc @ yg @ np.swapaxes(grp.gc, 2, 3)
            cov = np.diagonal(nmat @ grp.g, axis1=2, axis2=3) - ((nmat @ u) * nmat).sum(3)
        else:
            a_b = zw
            cov = np.diagonal(nmat @ grp.g, axis1=2, axis2=3)
        r_b = nmat @ a_b
        hot = grp.onehot.reshape(-1, trace.shape[1]).T                      # (K, nbg t)
        p1 = r_b.shape[3]
        omega += (hot @ (r_b[..., :, None] * r_b[..., None, :]).reshape(n, -1, p1 * p1)).reshape(n, -1, p1, p1)
        trace += by_part(bt.parts, lambda a, b: a.reshape(a.shape[0], -1) @ b, cov, hot.T)


def _phi_k_v(k: np.ndarray, v: np.ndarray, parts: int) -> np.ndarray:
    """K[e,f] @ v for every slot pair: (n, t, t, q2, p+1)."""
    n, t, q2 = v.shape[0], k.shape[1], k.shape[3]
    if k.shape[0] == 1:
        return by_part(parts, lambda a, b: einsum("eflm,smj->seflj", b, a), v, k[0])
    return np.matmul(k.reshape(n, t * t * q2, q2), v).reshape(n, t, t, q2, v.shape[2])


def gradient(bt: AnyBatch, pt: Point) -> np.ndarray:
    """Gradient of the profiled deviance in the relative variances gamma."""
    assert pt.trace is not None and pt.score is not None  # a gradient evaluation
    return profiled_gradient(pt.trace, pt.score, pt.r2[:, None], bt.nu[:, None])
