"""The design structure of a batched fit: the variance components, the blocking factor, the blocks and their
classes, and the design tensors the deviance contracts with (shared by every study, or per study)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


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


def _nested(inner: np.ndarray, outer: np.ndarray) -> bool:
    """Whether each level of ``inner`` occurs within a single level of ``outer``."""
    first = np.full(int(inner.max()) + 1, -1)
    first[inner] = outer
    return bool(np.all(first[inner] == outer))


@dataclass
class Structure:
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
class Group:
    """Blocks of one padded support size: design tensors with a leading axis of 1 (shared) or per study."""

    blocks: np.ndarray         # (nbg,)
    slot_comp: np.ndarray      # (nbg, t): component of each slot, -1 padding
    onehot: np.ndarray         # (nbg, t, K)
    g: np.ndarray              # (B, nbg, t, t): Z_b'Z_b
    gc: np.ndarray             # (B, nbg, t, s): Z_b'Z_C on the block's support
    sup: np.ndarray            # (B, nbg, s): the support's outer effects (q2: padding)


@dataclass
class BlockStructure:
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
    groups: list[Group]
    per_level: np.ndarray
    mask: np.ndarray | None    # (n, N) row weights, None: all rows


def scatter_add(index: np.ndarray, weights: np.ndarray, size: int) -> np.ndarray:
    return np.bincount(index.ravel(), weights=weights.ravel(), minlength=size)


def build_structure(design: ComponentDesign) -> Structure | BlockStructure:
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
    oidx: list[np.ndarray] = []
    sizes: list[int] = []
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
            return Structure(p, len(comps), nb, t, za, classes, slot_comp[[c[0] for c in classes]],
                              g_all[[c[0] for c in classes]], outer_comp, q2, zc, k_mats, g_cc, g_ac, per_level)
    return _block_structure(design, za, slot_comp, slot_of_row, block, outer_comp, q2, oidx_arr, ovals, per_level,
                            values, inner)


def _block_structure(design: ComponentDesign, za: sp.csr_matrix, slot_comp: np.ndarray, slot_of_row: list,
                     block: np.ndarray, outer_comp: np.ndarray, q2: int, oidx: np.ndarray, ovals: np.ndarray,
                     per_level: np.ndarray, values: list, inner: list[int]) -> BlockStructure:
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
            g += scatter_add(((cp * nb + block) * t + r1) * t + r2, wts * v1 * v2, g.size)
        for o in range(n_out):
            po = np.broadcast_to(pos[:, o], (nbt, n))
            gc += scatter_add(((cp * nb + block) * t + r1) * smax + po, wts * v1 * ovals[o], gc.size)
    g_cc = np.zeros(nbt * q2 * q2)
    oi = np.broadcast_to(oidx, (nbt, n_out, n))
    for o1 in range(n_out):
        for o2 in range(n_out):
            g_cc += scatter_add((cp * q2 + oi[:, o1]) * q2 + oi[:, o2], wts * ovals[o1] * ovals[o2], g_cc.size)
    g = g.reshape(nbt, nb, t, t)
    gc = gc.reshape(nbt, nb, t, smax)
    # blocks grouped by support size (padding within a factor of 2)
    bucket = np.ceil(np.log2(np.maximum(size, 1))).astype(int)
    groups = []
    onehot = (slot_comp[:, :, None] == np.arange(kk)[None, None, :]).astype(float)
    for bkt in np.unique(bucket):
        blocks = np.flatnonzero(bucket == bkt)
        s = int(max(size[blocks].max(), 1))
        groups.append(Group(blocks, slot_comp[blocks], onehot[blocks], g[:, blocks], gc[:, blocks, :, :s],
                             sup_all[:, blocks, :s]))
    return BlockStructure(p, kk, nb, t, za, outer_comp, q2, oidx, ovals, g_cc.reshape(nbt, q2, q2), groups,
                           per_level, mask)
