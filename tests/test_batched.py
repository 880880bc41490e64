"""The batched no-R tier (fitting/batched/) against the one-study solver, the closed form and lme4.

References: ``vc_reml.CrossedComponentsModel`` (same criterion, L-BFGS-B, per study),
the closed-form fit of the fully crossed two-system design (``fitting/balanced.py``), and
lme4 + lmerTest (``refit_lme4``: R's loop, default start, and started from our optimum so
that lmerTest's Satterthwaite df are evaluated where we say the optimum is).
"""
from __future__ import annotations

import dataclasses
import itertools
import zlib

import numpy as np
import pytest

from humaneval_power.contrasts import treatment_row
from humaneval_power.designs import CrowdDesign
from humaneval_power.errors import InputError
from humaneval_power.fitting import batched as B
from humaneval_power.fitting.balanced import fit_ml, fit_reml, stats_from_ratings
from humaneval_power.fitting.batched.structure import BlockStructure, build_structure
from humaneval_power.fitting.vc_reml import CrossedComponentsModel
from humaneval_power.params import LikertParams
from humaneval_power.processes import InvariantProcess, SlopeProcess, simulate_ratings

from .crowd import crowd_component_design, crowd_layout, layout_component_design

SDS = np.array([0.3, 0.1, 0.3, 0.12, 0.8])  # worker, worker:system, item, item:system, residual


def _process(model: str, systems: int) -> InvariantProcess | SlopeProcess:
    """The data-generating process of the analysis model, SDS as its SDs (worker, item: intercept then slope)."""
    if model == "invariant":
        return InvariantProcess(*SDS, systems=systems, intercept=3.0)
    return SlopeProcess(LikertParams(3.0, *SDS, scale=None))


def _simulated(systems: int, items: int, workers: int, k: int, presentation: str, assignment: str, n: int,
               rng: np.random.Generator, model: str = "invariant") -> tuple[B.ComponentDesign, np.ndarray, np.ndarray]:
    layout = crowd_layout(systems, items, workers, k, presentation, assignment,
                          n_studies=n if assignment == "random" else None, rng=rng)
    design = layout_component_design(layout, model)
    y = _process(model, systems).simulate(layout, np.r_[0.0, rng.normal(0, 0.3, systems - 1)], n, rng)
    contrast = treatment_row(systems, 0, 1) if model == "invariant" else np.array([0.0, 1.0])
    return design, y, contrast


def _one_study_model(design: B.ComponentDesign, y: np.ndarray, reml: bool) -> CrossedComponentsModel:
    """vc_reml's model of one study (each component its own factor column)."""
    factors = {c.name: np.asarray(c.levels) for c in design.components}
    terms = {c.name + "_v": c.values for c in design.components if c.values is not None}
    comps = [(c.name, "(Intercept)" if c.values is None else c.name + "_v") for c in design.components]
    return CrossedComponentsModel(design.x, y, factors, terms, comps, reml=reml)


CASES = [(2, 20, 6, 3, "within", "balanced", "invariant"), (2, 20, 6, 2, "between", "balanced", "invariant"),
         (2, 15, 5, 5, "within", "balanced", "slopes"), (2, 20, 8, 2, "between", "random", "slopes"),
         (4, 12, 8, 3, "within", "random", "invariant"), (3, 15, 10, 1, "between", "random", "invariant")]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
@pytest.mark.parametrize("reml", [True, False], ids=["reml", "ml"])
def test_same_optimum_as_the_one_study_solver(case: tuple, reml: bool) -> None:
    rng = np.random.default_rng(zlib.crc32(repr((case, reml)).encode()))  # str hashes change per process
    *shape, model = case
    design, y, contrast = _simulated(*shape, n=4, rng=rng, model=model)
    _assert_as_one_study(design, y, contrast, reml)


def _assert_as_one_study(design: B.ComponentDesign, y: np.ndarray, contrast: np.ndarray, reml: bool) -> None:
    """Batched fits of every study equal the one-study solver's (rows of weight 0 dropped)."""
    fit = B.fit_many(design, y, contrast, reml=reml)
    assert fit.converged.all() and not fit.failed.any()
    coef = int(np.flatnonzero(contrast)[0])
    for j in range(y.shape[1]):
        keep = slice(None) if design.weights is None else design.weights[j] > 0
        model = _one_study_model(design.study(j) if design.n_studies else design, y[keep, j], reml)
        ref = model.fit()
        assert fit.deviance[j] <= ref.deviance + 1e-9
        assert fit.deviance[j] == pytest.approx(ref.deviance, abs=1e-7)
        assert abs(fit.estimate[j, 0] - ref.beta[coef]) < 1e-6
        assert fit.se[j, 0] == pytest.approx(np.sqrt(ref.beta_cov[coef, coef]), rel=1e-4)
        # the df at the batched optimum, by the one-study solver's Satterthwaite: near a boundary the df
        # moves by 1e-3 over optima equal to 1e-5 in SD, so the two optima's df are not the check
        at_batched = model.at(fit.sds[j, :-1] ** 2 / fit.sds[j, -1] ** 2)
        assert fit.df[j, 0] == pytest.approx(model.satterthwaite(at_batched).df[coef], rel=1e-5)
        np.testing.assert_allclose(fit.sds[j], np.r_[ref.sds, np.sqrt(ref.sigma2)], atol=1e-5)


@pytest.mark.parametrize("reml", [True, False], ids=["reml", "ml"])
def test_missing_ratings_as_row_weights(reml: bool) -> None:
    """Per-study 0/1 row weights (the block-by-block evaluation): as if the absent rows were not there."""
    rng = np.random.default_rng(12)
    for shape in ((2, 20, 6, 3, "within", "balanced"), (3, 12, 8, 2, "between", "random")):
        design, y, contrast = _simulated(*shape, n=4, rng=rng)
        weights = (rng.random((4, design.n)) > 0.15).astype(float)
        _assert_as_one_study(dataclasses.replace(design, weights=weights), y, contrast, reml)


def test_irregular_layout_by_blocks() -> None:
    """One irregular layout (every item its own class, as a pilot's): blocked by the cheaper factor,
    evaluated block by block; the same fits as the one-study solver and as the class-by-class evaluation."""
    rng = np.random.default_rng(21)
    layout = crowd_layout(2, 25, 30, 2, "between", "random", rng=rng)
    design = dataclasses.replace(layout_component_design(layout), block=None)
    assert design.components[0].levels.ndim == 1
    assert isinstance(build_structure(design), BlockStructure)
    y = _process("invariant", 2).simulate(layout, np.array([0.0, 0.2]), 3, rng)
    _assert_as_one_study(design, y, np.array([0.0, 1.0]), True)
    by_class = B.fit_many(dataclasses.replace(design, block="item"), y, np.array([0.0, 1.0]))
    by_block = B.fit_many(design, y, np.array([0.0, 1.0]))
    np.testing.assert_allclose(by_block.estimate, by_class.estimate, atol=1e-8)
    np.testing.assert_allclose(by_block.df, by_class.df, rtol=1e-5)


def test_per_study_designs_fit_as_if_one_by_one() -> None:
    rng = np.random.default_rng(4)
    design, y, contrast = _simulated(4, 15, 6, 2, "between", "random", 6, rng)
    batch = B.fit_many(design, y, np.vstack([contrast, treatment_row(4, 1, 3)]))
    for j in range(y.shape[1]):
        one = B.fit_many(design.study(j), y[:, j], np.vstack([contrast, treatment_row(4, 1, 3)]))
        np.testing.assert_allclose(batch.estimate[j], one.estimate[0], atol=1e-8)
        np.testing.assert_allclose(batch.se[j], one.se[0], rtol=1e-6)
        np.testing.assert_allclose(batch.df[j], one.df[0], rtol=1e-5)


@pytest.mark.parametrize("reml", [True, False], ids=["reml", "ml"])
def test_fully_crossed_slope_model_equals_the_closed_form(reml: bool) -> None:
    workers, items, n = 4, 12, 8
    rng = np.random.default_rng(8)
    params = LikertParams(0.5, 0.1, 0.15, 0.12, 0.02, 0.3)  # a small item slope: singular fits among them
    ratings = simulate_ratings(params, workers, items, 0.2, n, rng)  # (n, W, I, 2)
    design = crowd_component_design(2, items, workers, workers, "within", "balanced", "slopes")
    y = ratings.transpose(0, 2, 1, 3).reshape(n, -1).T  # rows: item, its workers (0..W-1), system
    fit = B.fit_many(design, y, np.array([0.0, 1.0]), reml=reml)
    closed = (fit_reml if reml else fit_ml)(stats_from_ratings(ratings))
    assert fit.converged.all()
    np.testing.assert_allclose(fit.estimate[:, 0], closed.estimate, atol=1e-9)
    np.testing.assert_allclose(fit.se[:, 0], closed.se, rtol=1e-5)
    vc = closed.variance_components()
    order = ("sd_worker_intercept", "sd_worker_slope", "sd_item_intercept", "sd_item_slope", "sd_residual")
    np.testing.assert_allclose(fit.sds, np.column_stack([vc[k] for k in order]), atol=1e-5)
    np.testing.assert_array_equal(fit.singular, closed.singular)
    assert closed.singular.any() and not closed.singular.all()
    if reml:
        np.testing.assert_allclose(fit.df[:, 0], closed.df, rtol=1e-4)


def test_degenerate_studies_are_flagged_not_raised() -> None:
    rng = np.random.default_rng(1)
    design, y, contrast = _simulated(2, 20, 6, 2, "within", "balanced", 5, rng)
    y[:, 1] = 3.0     # no variance at all
    y[0, 3] = np.nan  # a missing rating (not supported: flagged)
    fit = B.fit_many(design, y, contrast)
    assert fit.failed.tolist() == [False, True, False, True, False]
    assert fit.converged.tolist() == [True, False, True, False, True]


def test_design_layouts() -> None:
    """The layouts the batched tests fit: rows item-major, then workers, then systems (within)."""
    lay = CrowdDesign(5, 4, 2).draw(np.random.default_rng(0), 1)
    assert lay.worker.tolist()[:8] == [0, 0, 1, 1, 2, 2, 3, 3]
    lay = CrowdDesign(5, 4, 2, assignment="random", presentation="between").draw(np.random.default_rng(0), 3)
    w = lay.worker.reshape(3, 5 * 2, 2)
    assert w.shape == (3, 10, 2) and (w[..., 0] != w[..., 1]).all()  # k distinct workers per output
    full = CrowdDesign(4, 5, 5, 3).draw(np.random.default_rng(0), 1)  # k = W: fully crossed
    assert len(set(zip(full.item, full.worker, full.system))) == 4 * 5 * 3
    for bad in ({"ratings_per_item": 6}, {"ratings_per_item": 0}, {"presentation": "mixed"},
                {"assignment": "skewed"}):
        with pytest.raises(InputError):
            CrowdDesign(**({"items": 3, "workers": 5, "ratings_per_item": 2} | bad))


# -- lme4 + lmerTest ---------------------------------------------------------------------------

#: relative SDs in (0, this) are near the boundary, where the REML criterion is flat to rounding along them
NEAR_ZERO_THETA = 0.01


#: lme4's criterion within this of ours: lme4 from its default start is at our optimum (its estimates within
#: 1e-6 of ours, SE and df within 1e-3: the checks below; at 1e-8 an estimate was 1e-6 off)
AT_OPTIMUM = 1e-9


def _against_lme4(cells: list[tuple], n: int, seed: int, reml: bool = True) -> dict[str, np.ndarray]:
    """Our fits, lme4's from its default start, and lme4's started from our optimum, cell by cell.

    lme4 is started from our optimum ("warm") only on the studies where from its default start it stopped more
    than ``AT_OPTIMUM`` short of it: where it reached it, its default-start fit is lme4 + lmerTest at our optimum
    already (the checks of the warm fits are made on it). Elsewhere the warm fields are NaN."""
    from scipy import stats

    def lme4_run(r: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"est": r["estimate"], "se": r["se"], "df": r["df"], "dev": r["criterion"],
                "sing": r["singular"].astype(bool), "conv": r["failed"] == 0,
                "p": 2 * stats.t.sf(np.abs(r["estimate"] / r["se"]), r["df"])}

    rng = np.random.default_rng(seed)
    keys = ("est", "se", "df", "dev", "sing", "conv", "p")
    out: dict[str, list] = {f"{who}_{k}": [] for who in ("fast", "lme4", "warm") for k in keys}
    out["fast_near"] = []
    for systems, presentation, assignment, k in cells:
        design, y, contrast = _simulated(systems, 16, 8, k, presentation, assignment, n, rng)
        fit = B.fit_many(design, y, contrast, reml=reml)
        runs = {"fast": {"est": fit.estimate[:, 0], "se": fit.se[:, 0], "df": fit.df[:, 0], "dev": fit.deviance,
                         "sing": fit.singular, "conv": fit.converged & ~fit.failed, "p": fit.p_value[:, 0]}}
        runs["lme4"] = lme4_run(B.refit_lme4(design, y, contrast, reml=reml))
        short = np.flatnonzero(~(runs["lme4"]["dev"] - fit.deviance < AT_OPTIMUM))
        runs["warm"] = {key: np.full(y.shape[1], np.nan) for key in keys}
        if short.size:
            warm = lme4_run(B.refit_lme4(design.subset(short) if design.n_studies else design, y[:, short],
                                         contrast, reml=reml, start=fit.theta[short]))
            for key in keys:
                runs["warm"][key][short] = warm[key]
        for who, res in runs.items():
            for key in keys:
                out[f"{who}_{key}"].append(res[key])
        out["fast_near"].append(((fit.theta > 0) & (fit.theta < NEAR_ZERO_THETA)).any(axis=1))
    return {key: np.concatenate(v) for key, v in out.items()}


def _check(res: dict[str, np.ndarray], min_singular: int) -> None:
    gap = res["lme4_dev"] - res["fast_dev"]
    reached = same = gap < AT_OPTIMUM
    # lme4 + lmerTest at our optimum: from its default start where it got there, else started there ("warm")
    at = {key: np.where(reached, res[f"lme4_{key}"], res[f"warm_{key}"]) for key in ("est", "se", "df", "dev", "p")}
    at["sing"], at["conv"] = np.where(reached, res["lme4_sing"], res["warm_sing"] > 0), np.where(
        reached, res["lme4_conv"], res["warm_conv"] > 0)
    assert res["fast_conv"].all() and res["lme4_conv"].all() and at["conv"].all()
    # never a worse optimum than lme4 (which sometimes stops short)
    assert gap.min() > -1e-8
    # lme4 + lmerTest at our optimum stay there and give the same numbers
    assert np.abs(at["dev"] - res["fast_dev"]).max() < 1e-8
    assert np.abs(at["est"] - res["fast_est"]).max() < 1e-6
    # a component just above zero leaves the profiled deviance flat to rounding along it, and lme4's optimiser,
    # started there, drifts along that flat direction, which moves lmerTest's df (measured: study 152 of the
    # 200-study test, theta 0.0032: exact optimum (vc_reml, polished) df 17.866, ours 17.863, lme4 17.892; the
    # analysis issue 23 measured lmerTest's own spread across optimizers at such a fit, 40.95-41.51). There the
    # check is that spread; elsewhere 1e-3 as before.
    near = res["fast_near"]
    for key in ("se", "df"):
        np.testing.assert_allclose(at[key][~near], res[f"fast_{key}"][~near], rtol=1e-3)
        np.testing.assert_allclose(at[key][near], res[f"fast_{key}"][near], rtol=1e-2)
    np.testing.assert_array_equal(at["sing"], res["fast_sing"])
    # lme4 from its own start stops 1e-10..1e-3 short of the optimum (its default tolerances; near a
    # boundary the df are very sensitive to that): where it got within 1e-9, estimates agree to 1e-6
    # and SE and df to 1e-3; the decisions agree always
    print(f"\n{gap.size} studies, {res['fast_sing'].sum()} singular (lme4: {res['lme4_sing'].sum()}); "
          f"at our optimum: max |d est| {np.abs(at['est'] - res['fast_est']).max():.1e}, "
          f"max rel d se {np.abs(at['se'] / res['fast_se'] - 1).max():.1e}, "
          f"max rel d df {np.abs(at['df'] / res['fast_df'] - 1).max():.1e}; default start: "
          f"gap quantiles {np.quantile(gap, [0, 0.5, 0.9, 1])}, {(~reached).sum()} started at ours, "
          f"{same.sum()} within 1e-9: max |d est| "
          f"{np.abs(res['lme4_est'][same] - res['fast_est'][same]).max():.1e}, max rel d se "
          f"{np.abs(res['lme4_se'][same] / res['fast_se'][same] - 1).max():.1e}, max rel d df "
          f"{np.abs(res['lme4_df'][same] / res['fast_df'][same] - 1).max():.1e}, "
          f"max rel d df overall {np.abs(res['lme4_df'] / res['fast_df'] - 1).max():.1e}")
    assert same.any()
    assert np.abs(res["lme4_est"][same] - res["fast_est"][same]).max() < 1e-6
    np.testing.assert_allclose(res["lme4_se"][same], res["fast_se"][same], rtol=1e-3)
    np.testing.assert_allclose(res["lme4_df"][same], res["fast_df"][same], rtol=1e-3)
    for p in (res["lme4_p"], at["p"]):
        np.testing.assert_array_equal(p <= 0.05, res["fast_p"] <= 0.05)
    assert res["fast_sing"].sum() >= min_singular


@pytest.mark.r
@pytest.mark.parametrize("reml", [True, False], ids=["reml", "ml"])
def test_same_fits_as_lme4_on_a_few_crowd_studies(lme4_backend, reml: bool) -> None:
    res = _against_lme4([(2, "within", "balanced", 3), (4, "between", "random", 2)], n=5, seed=3, reml=reml)
    _check(res, min_singular=1)


@pytest.mark.r
@pytest.mark.slow
def test_same_fits_as_lme4_on_200_crowd_studies(lme4_backend) -> None:
    """40 cells (2 and 4 systems, within/between, balanced/random, k = 1..5) x 5 studies."""
    cells = list(itertools.product((2, 4), ("within", "between"), ("balanced", "random"), (1, 2, 3, 4, 5)))
    res = _against_lme4(cells, n=5, seed=11)
    assert res["fast_est"].size == 200
    _check(res, min_singular=20)
