"""The latent working model's Satterthwaite df (``ordinal_process.LatentDesign``), whose fast path absorbs
factors in closed form, against the definition computed by brute force in observation space:
V = s2 I + sum_k d_k^2 Z_k Z_k', P the REML projection, var = L'(X'V^-1 X)^-1 L, g_k = d var / d d_k^2,
I_kl = tr(P Z_k Z_k' P Z_l Z_l') / 2, df = 2 var^2 / (g' I^+ g)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from humaneval_power.ordinal_process import RANK_TOLERANCE, LatentDesign, contrast_satterthwaite_df

FACTORS = ("worker", "item", "worker:system", "item:system")


def brute_force_df(groups: dict[str, np.ndarray], X: np.ndarray, contrast: np.ndarray, sds: np.ndarray,
                   link: str) -> float:
    N = len(X)
    s2 = math.pi**2 / 3 if link == "logit" else 1.0
    Xw = np.column_stack([np.ones(N), X])
    Zs = [np.eye(int(c.max()) + 1)[c] for c in (np.unique(g.astype(str), return_inverse=True)[1]
                                                 for g in groups.values())]
    V = s2 * np.eye(N) + sum(d * d * Z @ Z.T for d, Z in zip(sds, Zs))
    Vi = np.linalg.inv(V)
    C = np.linalg.inv(Xw.T @ Vi @ Xw)
    P = Vi - Vi @ Xw @ C @ Xw.T @ Vi
    L = np.concatenate([[0.0], contrast])
    var = L @ C @ L
    h = Vi @ Xw @ C @ L
    g = np.array([-(h @ Z) @ (Z.T @ h) for Z in Zs])
    info = np.array([[0.5 * np.sum((Zk.T @ P @ Zl) ** 2) for Zl in Zs] for Zk in Zs])
    size = np.array([[0.5 * np.sum((Zk.T @ Vi @ Zl) ** 2) for Zl in Zs] for Zk in Zs])
    info[info <= 1e-20 * size] = 0.0  # P Z_k = 0 up to rounding (confounded with X): exactly 0 in exact arithmetic
    scale = np.sqrt(np.diag(info))  # the numerical rank on the unit-diagonal scale
    scale[scale == 0] = 1.0
    denom = (g / scale) @ np.linalg.pinv(info / np.outer(scale, scale), rcond=RANK_TOLERANCE) @ (g / scale)
    return 2 * var * var / denom if denom > 0 else math.inf


@st.composite
def layouts(draw: st.DrawFn) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Random crowd layouts: 2-3 systems, workers and items drawn per rating (sparse, unbalanced, nested
    or crossed), any non-empty subset of the four factors; SDs with zeros and large ones (up to 30, where
    expanded squares would cancel); a random contrast."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    S, W, n_items = draw(st.integers(2, 3)), draw(st.integers(1, 6)), draw(st.integers(2, 9))
    n = draw(st.integers(2 * S + 2, 40))
    system = np.concatenate([np.arange(S), rng.integers(0, S, n - S)])
    worker, item = rng.integers(0, W, n), rng.integers(0, n_items, n)
    names = draw(st.lists(st.sampled_from(FACTORS), min_size=1, max_size=4, unique=True))
    codes = {"worker": worker, "item": item, "worker:system": worker * S + system, "item:system": item * S + system}
    groups = {k: codes[k] for k in FACTORS if k in names}
    X = np.column_stack([(system == k).astype(float) for k in range(1, S)])
    sds = np.array([draw(st.sampled_from([0.0, 0.3, 0.8, 1.7, 8.0, 30.0])) for _ in groups])
    contrast = rng.normal(size=S - 1)
    return groups, X, np.concatenate([sds, contrast])


@settings(max_examples=60, deadline=None)
@given(case=layouts(), link=st.sampled_from(["logit", "probit"]))
def test_df_equal_the_definition_on_random_layouts(case, link: str) -> None:
    """Property: on random layouts (any factor subset, nested or crossed, zero SDs) the df equal the brute-force
    definition to rounding (df beyond 1e8 being rounding noise on a zero gradient), whichever factors the fast
    path absorbs and however many are left dense."""
    groups, X, rest = case
    sds, contrast = rest[:len(groups)], rest[len(groups):]
    want = brute_force_df(groups, X, contrast, sds, link)
    got = contrast_satterthwaite_df(groups, X, contrast, sds, link)
    if want > 1e8:  # g is rounding noise (e.g. a factor confounded with the intercept): both are "infinite"
        assert got > 1e6
    else:
        assert got == pytest.approx(want, rel=1e-7)


def test_nested_factors_are_all_absorbed_and_crossed_ones_are_not() -> None:
    """The elimination order: item:system, then item (each item:system group lies in one item) are absorbed;
    the crossed workers then share items, so they stay dense."""
    rng = np.random.default_rng(7)
    n, S = 60, 2
    worker, item, system = rng.integers(0, 5, n), rng.integers(0, 8, n), np.tile([0, 1], n // 2)
    groups = {"worker": worker, "item": item, "item:system": item * S + system}
    design = LatentDesign.of(groups, system[:, None].astype(float))
    assert [s.factor for s in design.steps] == [2, 1]
    assert len(design.rest) == len(np.unique(worker))
    nested = LatentDesign.of({"item": item, "item:system": item * S + system}, system[:, None].astype(float))
    assert len(nested.rest) == 0
    sds = np.array([0.5, 0.9])
    assert nested.df(np.array([1.0]), sds) == pytest.approx(
        brute_force_df({"item": item, "item:system": item * S + system}, system[:, None].astype(float),
                       np.array([1.0]), sds, "logit"), rel=1e-9)


def test_one_fit_serves_every_contrast() -> None:
    """``LatentDesign.at`` once per fit: each contrast's df equal the one-call df."""
    rng = np.random.default_rng(3)
    n, S = 90, 3
    system = rng.integers(0, S, n)
    groups = {"worker": rng.integers(0, 6, n), "item": rng.integers(0, 10, n)}
    X = np.column_stack([(system == k).astype(float) for k in range(1, S)])
    design, sds = LatentDesign.of(groups, X), np.array([0.7, 1.2])
    fit = design.at(sds, "probit")
    for L in (np.array([1.0, 0.0]), np.array([0.0, 1.0]), np.array([-1.0, 1.0])):
        assert fit.df(L) == design.df(L, sds, "probit")


def test_a_factor_with_many_raters_per_group_stays_dense() -> None:
    """Absorbing a factor whose groups have many neighbours (every worker rates every item: the items and
    item x system groups) would take more memory than its dense rows (ELIMINATION_BUDGET): it is kept dense
    (worker x system, with few neighbours, is still absorbed), and the df are still the definition's."""
    W, n_items, S = 12, 3, 2
    w, i, s = (a.ravel() for a in np.meshgrid(np.arange(W), np.arange(n_items), np.arange(S), indexing="ij"))
    groups = {"worker": w, "item": i, "worker:system": w * S + s, "item:system": i * S + s}
    X = (s == 1).astype(float)[:, None]
    design = LatentDesign.of(groups, X)
    absorbed = [st.factor for st in design.steps]
    assert 3 not in absorbed and 1 not in absorbed  # item:system and item: 12 workers each, kept dense
    assert set(np.arange(W, W + n_items)) <= set(design.rest)
    sds = np.array([0.8, 1.0, 0.3, 0.5])
    assert design.df(np.array([1.0]), sds) == pytest.approx(brute_force_df(groups, X, np.array([1.0]), sds, "logit"),
                                                            rel=1e-9)
