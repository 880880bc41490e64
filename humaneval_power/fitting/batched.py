"""Batched (RE)ML fits of many simulated studies of one design: lme4's criterion, lmerTest's Satterthwaite df.

Model: ``y = X b + sum_k Z_k u_k + e``, ``u_k ~ N(0, g_k s^2 I)``, ``e ~ N(0, s^2 I)``,
each ``Z_k`` with one nonzero per row (a random intercept, or a slope on a
covariate). The criterion is lme4's profiled deviance, as in
:mod:`humaneval_power.fitting.vc_reml`, whose mathematics this module shares.
What differs is the bookkeeping, chosen so that the cost of one evaluation
does not grow with the number of items:

* the random effects split into *blocks* (one per level of a blocking factor,
  usually the item: its intercept and its item:system effects) and *outer*
  effects (workers, worker:system: a few dozen). ``H_A = I + Z_A G_A Z_A'``
  is block diagonal; the outer effects enter through the Schur complement
  ``S = I + L_C R L_C``, ``R = Z_C' H_A^-1 Z_C``.
* blocks with the same cross-product ``G_b = Z_b'Z_b`` form a *class* (in
  the crowd designs all items form one class). With ``Phi_c = L_b (I + L_b G_b L_b)^-1 L_b``
  every quantity of the deviance and its gradient is a contraction of a few
  small design tensors (``K_c[e,f] = sum_b Z_C'z_be z_bf'Z_C``) and per-study
  tensors (``Q_c``, ``T_c``: sums over blocks of products with ``Z_b'[X y]``)
  with ``Phi_c``: after one pass over the data per study, an evaluation costs
  ``O(t^2 q2^2 + q2^3)``, ``t`` the block size and ``q2`` the outer effects.

All studies are iterated at once: a projected Newton method on the relative
variances ``g >= 0`` (the Hessian by forward differences of the exact
gradient, Armijo backtracking on the projected arc). Satterthwaite df follow
lmerTest: ``A = 2 H^-1`` (positive eigenvalues of the Hessian of the
deviance in ``varpar = (theta, sigma)``, here by central differences of the
exact gradient), ``df = 2 v^2 / (grad v' A grad v)``; components at zero drop
out because ``v`` depends on ``theta_k`` through ``theta_k^2``.

Designs whose outer levels differ between studies (a random worker
assignment drawn anew per study) are fitted the same way with per-study
design tensors; the blocking factor must then be the same for all studies.

When the classes are many (a pilot's own layout: every item its own class;
missing ratings, given as per-study 0/1 row ``weights`` so that all studies
share one shape) the blocks are evaluated one by one instead, each on its
*support* (the few outer effects its rows touch): ``R`` and ``Z_C'H_A^-1 w``
are scatter-adds of ``t x s`` products, the gradient gathers ``Y`` on the
supports; the evaluation is chosen by an operation count, the blocking
factor (item or worker) by the smaller Schur complement, outer levels that
never occur are dropped, and a large ``S`` is factored by LAPACK's Cholesky.

Limits: the cost grows with
``q2^3`` (worker effects ``W (1 + S)``: fine up to a few hundred); per-study
designs carry ``t^2 q2^2`` numbers per study and cost ~3x a shared design.
Components are independent (no correlated random effects); ``x`` must have
full column rank.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy import stats

#: lme4's isSingular tolerance on theta
SINGULAR_TOL = 1e-4
#: lmerTest's tolerance on the Hessian's eigenvalues
EIGEN_TOL = 1e-8
#: largest Newton step in u = log(1 + n gamma) (a factor of ~e^3 in a stratum's variance)
MAX_STEP = 3.0


@dataclass(frozen=True)
class Component:
    """One variance component: level index per row ((N,) or (n_studies, N)) and its covariate (None: 1)."""

    name: str
    levels: np.ndarray
    values: np.ndarray | None = None

    @property
    def per_study(self) -> bool:
        return np.ndim(self.levels) == 2


@dataclass(frozen=True)
class ComponentDesign:
    """What every simulated study of a cell shares: fixed effects ``x`` (N x p) and the variance components.

    The components are independent (no correlations), each ``Z_k`` with one
    nonzero per row. Outer components may have per-study levels (shape
    ``(n_studies, N)``), e.g. a random worker assignment.
    """

    x: np.ndarray
    components: tuple[Component, ...]
    x_names: tuple[str, ...] = ()
    #: the factor the rows are blocked by (default: chosen to make an evaluation cheapest)
    block: str | None = None
    #: per-study row presence ``(n_studies, N)`` of 0/1 (None: every row in every study): studies with
    #: different missing ratings share one shape, a row of weight 0 being absent from that study
    weights: np.ndarray | None = None

    @property
    def n(self) -> int:
        return int(self.x.shape[0])

    @property
    def n_studies(self) -> int | None:
        """Number of studies a per-study design covers (None: one design for all)."""
        sizes = {c.levels.shape[0] for c in self.components if c.per_study}
        if self.weights is not None:
            sizes.add(np.shape(self.weights)[0])
        return sizes.pop() if sizes else None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.components)

    def study(self, j: int) -> ComponentDesign:
        """The design of study ``j`` alone (its rows of weight 0 dropped)."""
        keep = slice(None) if self.weights is None else np.asarray(self.weights)[j] > 0
        comps = tuple(Component(c.name, (c.levels[j] if c.per_study else c.levels)[keep],
                                None if c.values is None else np.asarray(c.values)[keep]) for c in self.components)
        return ComponentDesign(self.x[keep], comps, self.x_names, self.block)

    def subset(self, index: np.ndarray | slice) -> ComponentDesign:
        """The per-study design of a subset of studies (unchanged when shared)."""
        comps = tuple(Component(c.name, c.levels[index], c.values) if c.per_study else c for c in self.components)
        return ComponentDesign(self.x, comps, self.x_names, self.block,
                               None if self.weights is None else np.asarray(self.weights)[index])


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


# -- design structure -----------------------------------------------------------------------------


def _nested(inner: np.ndarray, outer: np.ndarray) -> bool:
    """Whether each level of ``inner`` occurs within a single level of ``outer``."""
    first = np.full(int(inner.max()) + 1, -1)
    first[inner] = outer
    return bool(np.all(first[inner] == outer))


@dataclass
class _Structure:
    """Design-only quantities; arrays with a leading axis of 1 (shared) or n_studies (per study)."""

    p: int
    n_comp: int
    nb: int                    # blocks
    t: int                     # padded block size
    za: sp.csr_matrix          # (nb*t, N): Z_A'
    classes: list[np.ndarray]  # block indices per class
    slot_comp: np.ndarray      # (n_classes, t): component of each slot, -1 padding
    g_blocks: np.ndarray       # (n_classes, t, t)
    outer_comp: np.ndarray     # (q2,)
    q2: int
    zc: list[sp.csr_matrix]    # per design copy: Z_C' (q2, N)
    k: list[np.ndarray]        # per class: (B, t, t, q2, q2)
    g_cc: np.ndarray           # (B, q2, q2)
    g_ac: list[np.ndarray]     # per class: (B, nb_c, t, q2)
    per_level: np.ndarray      # (K,): mean sum of squared covariates per level (observations per level)


def _present(levels: np.ndarray) -> int:
    """Number of distinct levels that occur."""
    return int(np.unique(np.asarray(levels)).size)


def _choose_block(design: ComponentDesign) -> tuple[int, list[int]]:
    """The blocking factor (shared, most inner effects nested in it: the smallest Schur complement) and the
    components nested in it."""
    shared = [k for k, c in enumerate(design.components) if not c.per_study]
    if not shared:
        raise ValueError("at least one component must have the same levels in every study")
    sizes = {k: _present(design.components[k].levels) for k in shared}
    best, best_inner, best_q1 = -1, [], -1
    for c in shared:
        if design.block is not None and design.components[c].name != design.block:
            continue
        lc = np.asarray(design.components[c].levels)
        inner = [k for k in shared if _nested(np.asarray(design.components[k].levels), lc)]
        q1 = sum(sizes[k] for k in inner)
        if q1 > best_q1:
            best, best_inner, best_q1 = c, inner, q1
    if best < 0:
        raise ValueError(f"no shared component named {design.block!r} to block by")
    return best, best_inner


def _gram(g: np.ndarray) -> np.ndarray:
    """K[s, e, f] = sum_b g[s, b, e] g[s, b, f]' for g of shape (B, nb, t, q2): (B, t, t, q2, q2), one GEMM per copy."""
    b, nb, t, q2 = g.shape
    flat = g.reshape(b, nb, t * q2)
    return np.matmul(flat.transpose(0, 2, 1), flat).reshape(b, t, q2, t, q2).transpose(0, 1, 3, 2, 4).copy()


@dataclass
class _Group:
    """Blocks of one padded support size: design tensors with a leading axis of 1 (shared) or per study."""

    blocks: np.ndarray         # (nbg,)
    slot_comp: np.ndarray      # (nbg, t): component of each slot, -1 padding
    onehot: np.ndarray         # (nbg, t, K)
    g: np.ndarray              # (B, nbg, t, t): Z_b'Z_b
    gc: np.ndarray             # (B, nbg, t, s): Z_b'Z_C on the block's support
    sup: np.ndarray            # (B, nbg, s): the support's outer effects (q2: padding)


@dataclass
class _BlockStructure:
    """Design quantities of the block-by-block evaluation (many block classes: a pilot's own layout,
    missing ratings): every block carries its own cross-products, restricted to the few outer effects it
    touches."""

    p: int
    n_comp: int
    nb: int
    t: int
    za: sp.csr_matrix          # (nb*t, N): Z_A' (unweighted)
    outer_comp: np.ndarray     # (q2,)
    q2: int
    oidx: np.ndarray           # (B, n_outer, N): outer effect of each row
    ovals: np.ndarray          # (n_outer, N): its covariate
    g_cc: np.ndarray           # (B, q2, q2)
    groups: list[_Group]
    per_level: np.ndarray
    mask: np.ndarray | None    # (n, N) row weights, None: all rows


def _counts(index: np.ndarray, weights: np.ndarray, size: int) -> np.ndarray:
    return np.bincount(index.ravel(), weights=weights.ravel(), minlength=size)


def _structure(design: ComponentDesign) -> _Structure | _BlockStructure:
    n, p = design.x.shape
    comps = design.components
    values = [np.ones(n) if c.values is None else np.asarray(c.values, float) for c in comps]
    bk, inner = _choose_block(design)
    block = np.asarray(comps[bk].levels, int)
    nb = int(block.max()) + 1
    # slots: within each block, the inner components' levels in order (component, level)
    slot_of_row = []
    slot_comp_per_block: list[list[int]] = [[] for _ in range(nb)]
    for k in inner:
        lev = np.asarray(comps[k].levels, int)
        uniq = np.unique(lev)
        blk_of_level = np.empty(int(lev.max()) + 1, int)
        blk_of_level[lev] = block
        rank = np.zeros(int(lev.max()) + 1, int)
        for lv in uniq:  # level order within its block
            b = blk_of_level[lv]
            rank[lv] = len(slot_comp_per_block[b])
            slot_comp_per_block[b].append(k)
        slot_of_row.append((rank[lev], values[k]))
    t = max(len(s) for s in slot_comp_per_block)
    rows = np.arange(n)
    za = sp.csr_matrix((np.concatenate([v for _, v in slot_of_row]),
                        (np.concatenate([block * t + r for r, _ in slot_of_row]), np.tile(rows, len(inner)))),
                       shape=(nb * t, n))
    slot_comp = np.full((nb, t), -1)
    for b, s in enumerate(slot_comp_per_block):
        slot_comp[b, :len(s)] = s
    # outer effects: levels that occur (in any study), component after component
    outer = [k for k in range(len(comps)) if k not in inner]
    n_copies = max([np.shape(comps[k].levels)[0] for k in outer if comps[k].per_study] or [1])
    oidx, sizes = [], []
    for k in outer:
        uniq, inv = np.unique(np.asarray(comps[k].levels, int), return_inverse=True)
        oidx.append(np.broadcast_to(inv.reshape(-1, n) + sum(sizes), (n_copies, n)))
        sizes.append(uniq.size)
    q2 = int(sum(sizes))
    oidx_arr = np.stack(oidx, axis=1) if outer else np.zeros((n_copies, 0, n), int)
    outer_comp = np.repeat(outer, sizes).astype(int) if outer else np.zeros(0, int)
    per_level = np.array([float((v**2).sum()) / _present(c.levels) for c, v in zip(comps, values)])
    ovals = np.array([values[k] for k in outer]).reshape(len(outer), n)
    if design.weights is None:
        g_all = np.asarray((za @ za.T).todense()).reshape(nb, t, nb, t)[np.arange(nb), :, np.arange(nb), :]
        key = np.concatenate([g_all.reshape(nb, -1), slot_comp.astype(float)], axis=1)
        _, cls = np.unique(key, axis=0, return_inverse=True)
        cls = cls.ravel()
        classes = [np.flatnonzero(cls == c) for c in range(int(cls.max()) + 1)]
        zc = [sp.csr_matrix((ovals.ravel(), (oidx_arr[j].ravel(), np.tile(rows, len(outer)))), shape=(q2, n))
              for j in range(n_copies)]
        g_ac_full = np.stack([np.asarray((za @ z.T).todense()).reshape(nb, t, q2) for z in zc])  # (B, nb, t, q2)
        support = (g_ac_full != 0).sum(3).max(2).max(0)                                     # (nb,)
        class_cost = len(classes) * t * t * q2 * q2
        block_cost = float((t * support**2 + t * t * support + 50 * t * t).sum())
        if class_cost <= block_cost:
            g_cc = np.stack([np.asarray((z @ z.T).todense()) for z in zc])
            g_ac = [g_ac_full[:, c] for c in classes]
            k_mats = [_gram(g) for g in g_ac]
            return _Structure(p, len(comps), nb, t, za, classes, slot_comp[[c[0] for c in classes]],
                              g_all[[c[0] for c in classes]], outer_comp, q2, zc, k_mats, g_cc, g_ac, per_level)
    return _block_structure(design, za, slot_comp, slot_of_row, block, outer_comp, q2, oidx_arr, ovals, per_level,
                            values, inner)


def _block_structure(design: ComponentDesign, za: sp.csr_matrix, slot_comp: np.ndarray, slot_of_row: list,
                     block: np.ndarray, outer_comp: np.ndarray, q2: int, oidx: np.ndarray, ovals: np.ndarray,
                     per_level: np.ndarray, values: list, inner: list[int]) -> _BlockStructure:
    n, p = design.x.shape
    nb, t = slot_comp.shape
    kk = len(design.components)
    mask = None if design.weights is None else np.asarray(design.weights, float)
    w = np.ones((1, n)) if mask is None else mask                             # (Bw, N)
    bw, bs = w.shape[0], oidx.shape[0]
    nbt = max(bw, bs)
    n_out = oidx.shape[1]
    # each block's support: the outer effects on its rows (any study of the design copy)
    keys = np.unique((np.arange(bs)[:, None, None] * nb + block) * (q2 + 1) + oidx)   # sorted by (copy, block)
    owner = keys // (q2 + 1)
    first = np.searchsorted(owner, owner, side="left")
    pos_of_key = np.arange(keys.size) - first
    size = np.bincount(owner, minlength=bs * nb).reshape(bs, nb).max(0) if keys.size else np.zeros(nb, int)
    smax = int(max(size.max(), 1))
    sup_all = np.full((bs, nb, smax), q2)
    sup_all.reshape(-1)[owner * smax + pos_of_key] = keys % (q2 + 1)
    pos = pos_of_key[np.searchsorted(keys, (np.arange(bs)[:, None, None] * nb + block) * (q2 + 1) + oidx)]
    # cross-products per (weight copy x design copy): G_b, Z_b'Z_C on the support, Z_C'Z_C
    cp = np.arange(nbt)[:, None]
    wts = np.broadcast_to(w, (nbt, n))
    g = np.zeros(nbt * nb * t * t)
    gc = np.zeros(nbt * nb * t * smax)
    for r1, v1 in slot_of_row:
        for r2, v2 in slot_of_row:
            g += _counts(((cp * nb + block) * t + r1) * t + r2, wts * v1 * v2, g.size)
        for o in range(n_out):
            po = np.broadcast_to(pos[:, o], (nbt, n))
            gc += _counts(((cp * nb + block) * t + r1) * smax + po, wts * v1 * ovals[o], gc.size)
    g_cc = np.zeros(nbt * q2 * q2)
    oi = np.broadcast_to(oidx, (nbt, n_out, n))
    for o1 in range(n_out):
        for o2 in range(n_out):
            g_cc += _counts((cp * q2 + oi[:, o1]) * q2 + oi[:, o2], wts * ovals[o1] * ovals[o2], g_cc.size)
    g = g.reshape(nbt, nb, t, t)
    gc = gc.reshape(nbt, nb, t, smax)
    # blocks grouped by support size (padding within a factor of 2)
    bucket = np.ceil(np.log2(np.maximum(size, 1))).astype(int)
    groups = []
    onehot = (slot_comp[:, :, None] == np.arange(kk)[None, None, :]).astype(float)
    for bkt in np.unique(bucket):
        blocks = np.flatnonzero(bucket == bkt)
        s = int(max(size[blocks].max(), 1))
        groups.append(_Group(blocks, slot_comp[blocks], onehot[blocks], g[:, blocks], gc[:, blocks, :, :s],
                             sup_all[:, blocks, :s]))
    return _BlockStructure(p, kk, nb, t, za, outer_comp, q2, oidx, ovals, g_cc.reshape(nbt, q2, q2), groups,
                           per_level, mask)


# -- per-study statistics and the criterion ---------------------------------------------------------


@dataclass
class _Batch:
    """Sufficient statistics of a batch of studies (leading axis n) and the design tensors (leading axis B)."""

    st: _Structure
    nu: np.ndarray          # (n,): observations (less p under REML)
    reml: bool
    ww: np.ndarray          # (n, p+1, p+1)
    u2: np.ndarray          # (n, q2, p+1)
    q: list[np.ndarray]     # per class (n, t, t, p+1, p+1)
    tt: list[np.ndarray]    # per class (n, t, t, q2, p+1)
    k: list[np.ndarray]     # per class (B, t, t, q2, q2)
    g_cc: np.ndarray        # (B, q2, q2)

    def take(self, idx: np.ndarray) -> _Batch:
        def sub(a: np.ndarray) -> np.ndarray:
            return a if a.shape[0] == 1 else a[idx]
        return _Batch(self.st, self.nu[idx], self.reml, self.ww[idx], self.u2[idx], [a[idx] for a in self.q],
                      [a[idx] for a in self.tt], [sub(a) for a in self.k], sub(self.g_cc))


def _batch(st: _Structure, x: np.ndarray, y: np.ndarray, copies: slice | None, reml: bool) -> _Batch:
    """Statistics of the studies in the columns of ``y`` (N x n); ``copies``: their per-study designs."""
    n_obs, n = y.shape
    p = st.p
    w = np.concatenate([np.broadcast_to(x[None], (n, n_obs, p)), y.T[:, :, None]], axis=2)  # (n, N, p+1)
    ww = np.einsum("sni,snj->sij", w, w, optimize=True)
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
        q.append(np.einsum("sbei,sbfj->sefij", zb, zb, optimize=True))
        g = g_ac[c]                                             # (B, nb_c, t, q2)
        nbc, t, q2, p1 = zb.shape[1], st.t, st.q2, p + 1
        if g.shape[0] == 1:  # one GEMM: (t q2, nb) x (nb, n t (p+1))
            prod = g[0].reshape(nbc, t * q2).T @ zb.transpose(1, 0, 2, 3).reshape(nbc, n * t * p1)
            tt.append(prod.reshape(t, q2, n, t, p1).transpose(2, 0, 3, 1, 4).copy())
        else:
            prod = np.matmul(g.reshape(n, nbc, t * q2).transpose(0, 2, 1), zb.reshape(n, nbc, t * p1))
            tt.append(prod.reshape(n, t, q2, t, p1).transpose(0, 1, 3, 2, 4).copy())
    nu = np.full(n, float(n_obs - p if reml else n_obs))
    return _Batch(st, nu, reml, ww, u2, q, tt, k, g_cc)


def _sub(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Rows ``idx`` of a per-study array (a shared one, leading axis 1, unchanged)."""
    return a if a.shape[0] == 1 else a[idx]


@dataclass
class _BlockBatch:
    """Statistics of a batch of studies for the block-by-block evaluation."""

    st: _BlockStructure
    nu: np.ndarray
    reml: bool
    ww: np.ndarray           # (n, p+1, p+1)
    u2: np.ndarray           # (n, q2, p+1)
    zw: list[np.ndarray]     # per group (n, nbg, t, p+1): Z_b'[X y]
    groups: list[_Group]
    g_cc: np.ndarray         # (B, q2, q2)

    def take(self, idx: np.ndarray) -> _BlockBatch:
        groups = [_Group(g.blocks, g.slot_comp, g.onehot, _sub(g.g, idx), _sub(g.gc, idx), _sub(g.sup, idx))
                  for g in self.groups]
        return _BlockBatch(self.st, self.nu[idx], self.reml, self.ww[idx], self.u2[idx], [a[idx] for a in self.zw],
                           groups, _sub(self.g_cc, idx))


def _block_batch(st: _BlockStructure, x: np.ndarray, y: np.ndarray, reml: bool) -> _BlockBatch:
    n_obs, n = y.shape
    p1 = st.p + 1
    w = np.concatenate([np.broadcast_to(x[None], (n, n_obs, st.p)), y.T[:, :, None]], axis=2)  # (n, N, p+1)
    if st.mask is not None:
        w = np.where(st.mask[:, :, None] > 0, w, 0.0)
        nobs = st.mask.sum(1)
    else:
        nobs = np.full(n, float(n_obs))
    ww = np.einsum("sni,snj->sij", w, w, optimize=True)
    zw = np.asarray(st.za @ w.transpose(1, 0, 2).reshape(n_obs, -1)).reshape(st.nb, st.t, n, p1).transpose(2, 0, 1, 3)
    u2 = np.zeros(n * st.q2 * p1)
    studies = np.arange(n)[:, None, None]
    for o in range(st.oidx.shape[1]):
        idx = (studies * st.q2 + st.oidx[:, o, :, None]) * p1 + np.arange(p1)     # (n, N, p+1)
        u2 += _counts(idx, w * st.ovals[o][:, None], u2.size)
    nu = nobs - st.p if reml else nobs
    return _BlockBatch(st, nu, reml, ww, u2.reshape(n, st.q2, p1), [zw[:, g.blocks] for g in st.groups],
                       st.groups, st.g_cc)


def _phi_k(phi: np.ndarray, k: np.ndarray) -> np.ndarray:
    """sum_ef phi[s,e,f] K[s|0,e,f,...] for a shared (B=1) or per-study K."""
    n, t = phi.shape[0], phi.shape[1]
    tail = k.shape[3:]
    if k.shape[0] == 1:
        return (phi.reshape(n, t * t) @ k[0].reshape(t * t, -1)).reshape((n,) + tail)
    return np.matmul(phi.reshape(n, 1, t * t), k.reshape(n, t * t, -1)).reshape((n,) + tail)


@dataclass
class _Point:
    dev: np.ndarray
    logdet: np.ndarray
    beta: np.ndarray
    sxx: np.ndarray
    r2: np.ndarray
    trace: np.ndarray | None = None   # (n, K)
    omega: np.ndarray | None = None   # (n, K, p+1, p+1): sum over levels of (Z_j'H^-1 w)(Z_j'H^-1 w)'
    score: np.ndarray | None = None   # (n, K)


def _scatter(full: _Point, rows: np.ndarray, pt: _Point, sel: np.ndarray | None = None) -> None:
    """Copy the (gradient) evaluation ``pt`` (its rows ``sel``) into rows ``rows`` of ``full``."""
    for name in ("dev", "logdet", "beta", "sxx", "r2", "trace", "omega", "score"):
        src = getattr(pt, name)
        getattr(full, name)[rows] = src if sel is None else src[sel]


def _evaluate(bt: _Batch | _BlockBatch, gamma: np.ndarray, gradient: bool) -> _Point:
    st, p = bt.st, bt.st.p
    n = gamma.shape[0]
    lam = np.sqrt(np.maximum(gamma, 0.0))
    lam_pad = np.concatenate([lam, np.zeros((n, 1))], axis=1)   # index -1: padding slots
    r_mat = bt.g_cc.astype(float, copy=True) if bt.g_cc.shape[0] == n else np.repeat(bt.g_cc, n, axis=0)
    m = bt.u2.copy()
    waw = bt.ww.copy()
    inner = _inner_blocks if isinstance(bt, _BlockBatch) else _inner_classes
    logdet, saved = inner(bt, lam_pad, r_mat, m, waw)
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
    dev = logdet + bt.nu * (1 + np.log(2 * math.pi * r2 / bt.nu))
    if not gradient:
        return _Point(dev, logdet, beta, sxx, r2)
    kk = st.n_comp
    trace = np.zeros((n, kk))
    omega = np.zeros((n, kk, p + 1, p + 1))
    v = y_mat = None
    if st.q2:
        y_mat = lc[:, :, None] * s_inv * lc[:, None, :]
        v = lc[:, :, None] * sd                                      # Y m
        zchw = m - r_mat @ v                                         # Z_C' H^-1 w
        diag = _outer_trace(r_mat, y_mat, s_inv, lc)
        onehot = (st.outer_comp[:, None] == np.arange(kk)[None, :]).astype(float)
        trace += diag @ onehot
        omega += np.einsum("sli,slj,lk->skij", zchw, zchw, onehot, optimize=True)
    (_inner_blocks_gradient if isinstance(bt, _BlockBatch) else _inner_classes_gradient)(
        bt, saved, v, y_mat, trace, omega)
    cx = np.linalg.inv(sxx)
    if bt.reml:
        trace -= np.einsum("sij,skji->sk", cx, omega[:, :, :p, :p])
    cvec = np.concatenate([-beta, np.ones((n, 1))], axis=1)
    score = np.einsum("si,skij,sj->sk", cvec, omega, cvec)
    return _Point(dev, logdet, beta, sxx, r2, trace, omega, score)


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
        if inverse:
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


def _inner_classes(bt: _Batch, lam_pad: np.ndarray, r_mat: np.ndarray, m: np.ndarray, waw: np.ndarray
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
            r_mat -= _phi_k(phi, bt.k[c])
            m -= np.einsum("sef,seflj->slj", phi, bt.tt[c])
        waw -= np.einsum("sef,sefij->sij", phi, bt.q[c])
    return logdet, saved


def _inner_classes_gradient(bt: _Batch, saved: list, v: np.ndarray | None, y_mat: np.ndarray | None,
                            trace: np.ndarray, omega: np.ndarray) -> None:
    """The blocks' terms of the gradient (in place), class by class."""
    st = bt.st
    n, kk = trace.shape
    for c, blocks in enumerate(st.classes):
        phi, nmat = saved[c]
        xi = bt.q[c].copy()
        if st.q2:
            vt = np.einsum("sli,seflj->sefij", v, bt.tt[c], optimize=True)
            xi -= vt + np.swapaxes(np.swapaxes(vt, 1, 2), 3, 4)
            kv = _phi_k_v(bt.k[c], v)                                    # (n, t, t, q2, p+1)
            xi += np.einsum("sli,seflj->sefij", v, kv, optimize=True)
            if bt.k[c].shape[0] == 1:
                u = (y_mat.reshape(n, -1) @ bt.k[c][0].reshape(st.t * st.t, -1).T).reshape(n, st.t, st.t)
            else:
                u = np.matmul(bt.k[c].reshape(n, st.t * st.t, -1), y_mat.reshape(n, -1, 1)).reshape(n, st.t, st.t)
            inner_cov = len(blocks) * (nmat @ st.g_blocks[c]) - nmat @ u @ np.swapaxes(nmat, 1, 2)
        else:
            inner_cov = len(blocks) * (nmat @ st.g_blocks[c])
        om = np.einsum("sae,saf,sefij->saij", nmat, nmat, xi, optimize=True)   # (n, t, p+1, p+1)
        diag = np.diagonal(inner_cov, axis1=1, axis2=2)
        onehot = (st.slot_comp[c][:, None] == np.arange(kk)[None, :]).astype(float)  # padding: all zero
        trace += diag @ onehot
        omega += np.einsum("saij,ak->skij", om, onehot, optimize=True)


def _flat_support(sup: np.ndarray, n: int, width: int, tail: int) -> np.ndarray:
    """Flat indices into (n, width, tail) of the support rows: (n, nbg, s, tail)."""
    studies = np.arange(n)[:, None, None, None]
    return (studies * width + sup[..., None]) * tail + np.arange(tail)


def _inner_blocks(bt: _BlockBatch, lam_pad: np.ndarray, r_mat: np.ndarray, m: np.ndarray, waw: np.ndarray
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
        r_mat -= _counts(np.concatenate([np.broadcast_to(i, v.shape).ravel() for v, i in r_parts]),
                         np.concatenate([v.ravel() for v, _ in r_parts]),
                         n * (q2 + 1) ** 2).reshape(n, q2 + 1, q2 + 1)[:, :q2, :q2]
        m -= _counts(np.concatenate([np.broadcast_to(i, v.shape).ravel() for v, i in m_parts]),
                     np.concatenate([v.ravel() for v, _ in m_parts]), n * (q2 + 1) * p1).reshape(n, q2 + 1, p1)[:, :q2]
    return logdet, saved


def _inner_blocks_gradient(bt: _BlockBatch, saved: list, v: np.ndarray | None, y_mat: np.ndarray | None,
                           trace: np.ndarray, omega: np.ndarray) -> None:
    """The blocks' terms of the gradient (in place), block by block."""
    n = trace.shape[0]
    q2 = bt.st.q2
    if q2:
        vpad = np.concatenate([v, np.zeros((n, 1, v.shape[2]))], axis=1)
        ypad = np.zeros((n, q2 + 1, q2 + 1))
        ypad[:, :q2, :q2] = y_mat
    for grp, zw, (phi, nmat) in zip(bt.groups, bt.zw, saved):
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
        trace += cov.reshape(n, -1) @ hot.T


def _phi_k_v(k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """K[e,f] @ v for every slot pair: (n, t, t, q2, p+1)."""
    n, t, q2 = v.shape[0], k.shape[1], k.shape[3]
    if k.shape[0] == 1:
        return np.einsum("eflm,smj->seflj", k[0], v, optimize=True)
    return np.matmul(k.reshape(n, t * t * q2, q2), v).reshape(n, t, t, q2, v.shape[2])


# -- the optimiser --------------------------------------------------------------------------------


def _gradient(bt: _Batch, pt: _Point) -> np.ndarray:
    """Gradient of the profiled deviance in the relative variances gamma."""
    return pt.trace - bt.nu[:, None] * pt.score / pt.r2[:, None]


def _newton(bt: _Batch, gamma: np.ndarray, max_iter: int, tol: float, hess0: np.ndarray | None = None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, _Point]:
    """Projected (quasi-)Newton on ``gamma >= 0`` for every study.

    The iteration runs in ``u_k = log(1 + n_k gamma_k)`` (``n_k`` observations
    per level: the log of a stratum's expected mean square, in which the
    deviance is nearly quadratic), with the same bound ``u >= 0``. Free
    variables are those inside, or at zero with a negative gradient; the
    Hessian is made positive definite by taking absolute eigenvalues; Armijo
    backtracking along the projected arc. With ``hess0`` (a Hessian in u, e.g.
    from pilot studies) the steps use BFGS updates of it until they become
    small, then the exact Hessian (forward differences of the exact gradient)
    takes over; converged when the Newton decrement with the exact Hessian is
    below ``tol``. Returns gamma, converged, iterations, the Hessian of the
    profiled deviance in gamma at the returned point (for the Satterthwaite
    df), the Hessian in u (to start other studies with) and the evaluation
    (with gradient parts) at the returned point.
    """
    n, kk = gamma.shape
    scale = bt.st.per_level[None, :]
    eye = np.eye(kk)

    def to_gamma(u: np.ndarray) -> np.ndarray:
        return np.expm1(u) / scale

    def grad_u(b: _Batch, pt: _Point, u: np.ndarray) -> np.ndarray:
        return _gradient(b, pt) * np.exp(u) / scale

    def fd_hessian(sub: _Batch, x: np.ndarray, g: np.ndarray) -> np.ndarray:
        hess = np.empty((x.shape[0], kk, kk))
        for k in range(kk):
            h = 1e-6 * np.maximum(x[:, k], 1e-2)
            xp = x.copy()
            xp[:, k] += h
            hess[:, :, k] = (grad_u(sub, _evaluate(sub, to_gamma(xp), True), xp) - g) / h[:, None]
        return (hess + np.swapaxes(hess, 1, 2)) / 2

    u = np.log1p(np.maximum(gamma, 0.0) * scale)
    last = _evaluate(bt, to_gamma(u), True)
    dev, grad = last.dev.copy(), grad_u(bt, last, u)
    done = np.zeros(n, bool)
    converged = np.zeros(n, bool)
    iterations = np.zeros(n, int)
    exact = np.full(n, hess0 is None)
    hess_u = np.full((n, kk, kk), np.nan) if hess0 is None else np.repeat(np.asarray(hess0)[None], n, axis=0)
    for it in range(2 * max_iter + 2):
        idx = np.flatnonzero(~done)
        if not idx.size:
            break
        sub = bt.take(idx) if idx.size < n else bt
        x, g, d0 = u[idx], grad[idx], dev[idx]
        fresh = exact[idx]
        if fresh.any():
            f = np.flatnonzero(fresh)
            hess_u[idx[f]] = fd_hessian(sub.take(f) if f.size < idx.size else sub, x[f], g[f])
        hess = hess_u[idx]
        free = (x > 0) | (g < 0)
        mask = free[:, :, None] & free[:, None, :]
        hm = np.where(mask, hess, 0.0) + np.where(~free, 1.0, 0.0)[:, :, None] * eye
        gf = np.where(free, g, 0.0)
        w, v = np.linalg.eigh(hm)
        w = np.maximum(np.abs(w), 1e-10 * np.maximum(np.abs(w).max(1, keepdims=True), 1.0))
        step = -np.einsum("sij,sj->si", v, np.einsum("sji,sj->si", v, gf) / w)
        step *= np.minimum(1.0, MAX_STEP / np.maximum(np.abs(step).max(1), 1e-300))[:, None]
        small = -(gf * step).sum(1) < tol
        conv = small & fresh
        converged[idx[conv]] = True
        done[idx[conv]] = True
        exact[idx[small & ~fresh]] = True  # check with the exact Hessian before calling it converged
        todo = np.flatnonzero(~small)
        if not todo.size:
            continue
        if iterations[idx[todo]].max() >= max_iter:
            over = iterations[idx[todo]] >= max_iter
            done[idx[todo[over]]] = True
            todo = todo[~over]
            if not todo.size:
                continue
        iterations[idx[todo]] += 1
        sub2 = sub.take(todo) if todo.size < idx.size else sub
        x, g, d0, step = x[todo], g[todo], d0[todo], step[todo]
        new_x, new_dev, new_grad, accepted, pieces = _line_search(sub2, x, g, d0, step, to_gamma, grad_u)
        for local, piece, sel in pieces:
            _scatter(last, idx[todo[local]], piece, sel)
        done[idx[todo[~accepted]]] = True  # no progress possible: judged below by the first-order conditions
        moved = idx[todo[accepted]]
        if moved.size:
            s_vec, y_vec = new_x[accepted] - x[accepted], new_grad[accepted] - g[accepted]
            u[moved], dev[moved], grad[moved] = new_x[accepted], new_dev[accepted], new_grad[accepted]
            quasi = ~exact[moved]
            if quasi.any():  # BFGS update where the curvature condition holds
                hb, sv, yv = hess_u[moved[quasi]], s_vec[quasi], y_vec[quasi]
                sy = (sv * yv).sum(1)
                bs = np.einsum("sij,sj->si", hb, sv)
                sbs = (sv * bs).sum(1)
                ok = (sy > 1e-12 * np.linalg.norm(sv, axis=1) * np.linalg.norm(yv, axis=1)) & (sbs > 0)
                upd = (yv[:, :, None] * yv[:, None, :] / np.where(ok, sy, 1.0)[:, None, None]
                       - bs[:, :, None] * bs[:, None, :] / np.where(ok, sbs, 1.0)[:, None, None])
                hess_u[moved[quasi]] = hb + np.where(ok[:, None, None], upd, 0.0)
    stale = ~converged  # the exact Hessian at the final point (for the df), where not already at hand
    if stale.any():
        idx = np.flatnonzero(stale)
        hess_u[idx] = fd_hessian(bt.take(idx), u[idx], grad[idx])
    gamma = to_gamma(u)
    # a study that stalled is still converged if it satisfies the first-order conditions closely
    c = np.exp(u) / scale                                  # d gamma / d u
    g_gamma = grad / c
    pg = np.where(gamma > 0, np.abs(g_gamma) * np.minimum(1.0, 2 * np.sqrt(gamma)), np.maximum(-g_gamma, 0.0)).max(1)
    converged |= pg <= 1e-6
    diag = np.where(eye.astype(bool), (g_gamma * c)[:, :, None], 0.0)
    hess_gamma = (hess_u - diag) / (c[:, :, None] * c[:, None, :])
    return gamma, converged, iterations, hess_gamma, hess_u, last


def _line_search(bt: _Batch, x: np.ndarray, g: np.ndarray, d0: np.ndarray, step: np.ndarray, to_gamma, grad_u
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list]:
    """Armijo backtracking along the projected arc; the full step is tried with the gradient at once.

    Returns the new points, their deviance and gradient, whether a step was
    accepted, and the gradient evaluations at the new points as
    (rows, evaluation, rows of the evaluation) pieces.
    """
    m = x.shape[0]
    new_x, new_dev, new_grad = x.copy(), d0.copy(), g.copy()

    def armijo(dv: np.ndarray, rows: np.ndarray, trial: np.ndarray) -> np.ndarray:
        return np.isfinite(dv) & (dv <= d0[rows] + 1e-4 * (g[rows] * (trial - x[rows])).sum(1)
                                  + 1e-11 * np.maximum(np.abs(d0[rows]), 1.0))

    trial = np.maximum(x + step, 0.0)
    pt = _evaluate(bt, to_gamma(trial), True)
    accepted = armijo(pt.dev, np.arange(m), trial)
    new_x[accepted], new_dev[accepted] = trial[accepted], pt.dev[accepted]
    new_grad[accepted] = grad_u(bt, pt, trial)[accepted]
    first = np.flatnonzero(accepted)
    pieces: list = [(first, pt, first)]
    alpha = np.full(m, 0.5)
    late = np.zeros(m, bool)
    for _ in range(40):
        rows = np.flatnonzero(~accepted)
        if not rows.size:
            break
        trial = np.maximum(x[rows] + alpha[rows, None] * step[rows], 0.0)
        dv = _evaluate(bt.take(rows), to_gamma(trial), False).dev
        ok = armijo(dv, rows, trial)
        accepted[rows[ok]] = late[rows[ok]] = True
        new_x[rows[ok]], new_dev[rows[ok]] = trial[ok], dv[ok]
        alpha[rows[~ok]] /= 2
    rows = np.flatnonzero(late)
    if rows.size:
        sub = bt.take(rows)
        pt = _evaluate(sub, to_gamma(new_x[rows]), True)
        new_grad[rows] = grad_u(sub, pt, new_x[rows])
        pieces.append((rows, pt, None))
    return new_x, new_dev, new_grad, accepted, pieces


# -- lmerTest's Satterthwaite df ------------------------------------------------------------------


def _vcov_varpar(bt: _Batch, pt: _Point, theta: np.ndarray, sigma: np.ndarray, hess_gamma: np.ndarray) -> np.ndarray:
    """lmerTest's ``2 H^-1`` over H's eigenvalues above its tolerance.

    H is the Hessian of the deviance in (theta, sigma) with sigma not profiled
    out (lmerTest's ``devfun_vp``), obtained from the Hessian of the profiled
    deviance in gamma: in theta by the chain rule, then the sigma terms
    (analytic) added back through the Schur complement.
    """
    kk = theta.shape[1]
    s3 = sigma[:, None] ** 3
    g_gamma = pt.trace - pt.score / sigma[:, None] ** 2     # = the profiled gradient at sigma_hat
    h_theta = 4 * theta[:, :, None] * theta[:, None, :] * hess_gamma
    h_theta[:, np.arange(kk), np.arange(kk)] += 2 * g_gamma
    d_ts = 4 * theta * pt.score / s3
    d_ss = -2 * bt.nu / sigma**2 + 6 * pt.r2 / sigma**4
    hess = np.empty((theta.shape[0], kk + 1, kk + 1))
    hess[:, :kk, :kk] = h_theta + d_ts[:, :, None] * d_ts[:, None, :] / d_ss[:, None, None]
    hess[:, :kk, kk] = hess[:, kk, :kk] = d_ts
    hess[:, kk, kk] = d_ss
    w, v = np.linalg.eigh(hess)
    inv = np.where(w > EIGEN_TOL, 1.0 / np.where(w > EIGEN_TOL, w, 1.0), 0.0)
    return 2 * np.einsum("sik,sk,sjk->sij", v, inv, v)


def _contrast_stats(bt: _Batch, pt: _Point, theta: np.ndarray, sigma: np.ndarray, contrasts: np.ndarray,
                    hess_gamma: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Estimate, SE and Satterthwaite df of each contrast row, (n, m) each."""
    p = bt.st.p
    cx = np.linalg.inv(pt.sxx)
    cl = np.einsum("sij,mj->smi", cx, contrasts)                 # C l
    lcl = np.einsum("mi,smi->sm", contrasts, cl)
    s2 = sigma[:, None] ** 2
    var = s2 * lcl
    est = pt.beta @ contrasts.T
    if hess_gamma is None:
        return est, np.sqrt(var), np.full(var.shape, np.inf)
    d_gamma = s2[:, :, None] * np.einsum("smi,skij,smj->smk", cl, pt.omega[:, :, :p, :p], cl)
    grads = np.concatenate([2 * theta[:, None, :] * d_gamma, (2 * sigma[:, None] * lcl)[:, :, None]], axis=2)
    a = _vcov_varpar(bt, pt, theta, sigma, hess_gamma)
    denom = np.einsum("smi,sij,smj->sm", grads, a, grads)
    df = np.divide(2 * var**2, denom, out=np.full(var.shape, np.inf), where=denom > 0)
    return est, np.sqrt(var), df


# -- the public entry point -----------------------------------------------------------------------


def _chunk_size(st: _Structure | _BlockStructure, n_obs: int, per_study_design: bool, budget: float = 1.5e8) -> int:
    """Studies per chunk so that the per-study arrays stay within ``budget`` bytes."""
    t, q2, p1 = st.t, st.q2, st.p + 1
    if isinstance(st, _BlockStructure):
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
    from threadpoolctl import threadpool_limits

    with np.errstate(all="ignore"):  # a degenerate study ends up flagged, not in a warning
        if blas_threads is None:
            return _fit_many(design, y, contrasts, reml, satterthwaite, max_iter, tol, chunk, start)
        with threadpool_limits(blas_threads):
            return _fit_many(design, y, contrasts, reml, satterthwaite, max_iter, tol, chunk, start)


PILOT = 8


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
    st = _structure(design.subset(slice(0, 1)) if per_study else design)
    hess0 = None
    size = chunk or _chunk_size(st, n_obs, per_study)
    pending = [np.arange(i, min(i + size, n)) for i in range(0, n, size)]
    while pending:
        idx = pending.pop()
        try:
            if per_study:
                st = _structure(design.subset(idx))
            if isinstance(st, _BlockStructure):
                bt = _block_batch(st, x, y[:, idx], reml)
            else:
                bt = _batch(st, x, y[:, idx], slice(None) if per_study else None, reml)
            if start is None or hess0 is None:
                pilot = min(PILOT, idx.size)
                g0, c0, _, _, h0, _ = _newton(bt.take(np.arange(pilot)),
                                           np.ones((pilot, kk)) if start is None else
                                           np.broadcast_to(np.asarray(start, float), (pilot, kk)), max_iter, tol)
                start = np.median(g0[c0], axis=0) if c0.any() else np.ones(kk)
                hess0 = np.median(h0[c0], axis=0) if c0.any() else None
            gamma, conv, iters, hess, _, pt = _newton(bt, np.broadcast_to(np.asarray(start, float), (idx.size, kk)),
                                                  max_iter, tol, hess0)
            theta, sigma = np.sqrt(gamma), np.sqrt(pt.r2 / bt.nu)
            est, se, df = _contrast_stats(bt, pt, theta, sigma, contrasts,
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


def simulate(design: ComponentDesign, beta: np.ndarray, sds: np.ndarray, n: int,
             rng: np.random.Generator) -> np.ndarray:
    """Responses (N x n) drawn from the model: ``sds`` per component, then the residual SD."""
    y = np.repeat((np.asarray(design.x, float) @ np.asarray(beta, float))[:, None], n, axis=1)
    for c, sd in zip(design.components, sds[:-1]):
        lev = np.asarray(c.levels)
        vals = np.ones(design.n) if c.values is None else np.asarray(c.values, float)
        effects = rng.normal(0.0, sd, (n, int(lev.max()) + 1))
        picked = np.take_along_axis(effects, lev, axis=1) if lev.ndim == 2 else effects[:, lev]
        y += (picked * vals).T
    return y + rng.normal(0.0, sds[-1], y.shape)


# -- the same fits by lme4 + lmerTest (the reference) ---------------------------------------------


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
    """lmer + lmerTest's ``contest1D`` (Satterthwaite) on every column of ``y``, looping inside R.

    ``start``: relative SDs (n_studies x K, our component order) to start lme4's
    optimiser from instead of its default theta = 1 (e.g. another solver's optimum).
    Returns arrays estimate, se, df, singular, criterion (REML criterion or
    deviance), sigma, failed, warned (one entry per study). Needs the lme4 backend.
    """
    from . import lme4

    ro = lme4._r()
    if not ro.r("exists('hepower_refit_contrast')")[0]:
        ro.r["source"](str(lme4.r_bridge_dir() / "contrasts.R"))
    y = np.asarray(y, float).reshape(design.n, -1)
    cols: dict[str, np.ndarray] = {f"X{j + 1}": design.x[:, j] for j in range(design.x.shape[1])}
    varying = {}
    for k, c in enumerate(design.components):
        lev = np.asarray(c.levels, int) + 1
        cols[f"g{k}"] = lev[0] if c.per_study else lev
        if c.per_study:
            varying[f"g{k}"] = lme4._r_matrix(lev.T)
        if c.values is not None:
            cols[f"v{k}"] = np.asarray(c.values, float)
    r_varying = ro.r["list"](**varying) if varying else ro.NULL
    with lme4.r_interruptible():
        res = ro.r["hepower_refit_contrast"](lme4._data_frame(cols), lme4._r_matrix(y), lme4_formula(design),
                                             ro.FloatVector(np.asarray(contrast, float).ravel().tolist()), reml,
                                             r_varying, ro.NULL if start is None else
                                             lme4._r_matrix(np.asarray(start, float).reshape(y.shape[1], -1).T))
    names = ["estimate", "se", "df", "singular", "criterion", "sigma", "failed", "warned"]
    arr = np.asarray(list(res), float).reshape((-1, len(names)), order="F")
    return {name: arr[:, j] for j, name in enumerate(names)}
