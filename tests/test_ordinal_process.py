"""The ordinal data-generating process, the latent shift <-> mean-rating conversion and the ordinal tests."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, special, stats

from humaneval_power.designs import CrowdDesign
from humaneval_power.errors import InputError
from humaneval_power.fitting.clmm import bartlett_p, crossed_groups, treatment_design
from humaneval_power.ordinal_process import (
    OrdinalProcess,
    latent_satterthwaite_df,
    ordinal_decision,
)

CUTS = (-2.0, -0.7, 0.5, 1.8)
SDS = {"sd_worker": 0.8, "sd_worker_system": 0.3, "sd_item": 1.0, "sd_item_system": 0.5}


def process(link: str = "logit", **kw: float) -> OrdinalProcess:
    return OrdinalProcess(CUTS, link, **{**SDS, **kw})


def quad_cumulative(p: OrdinalProcess, location: float) -> np.ndarray:
    """P(Y <= k) by adaptive quadrature over the summed random effect (independent of the module's code)."""
    F = special.expit if p.link == "logit" else special.ndtr
    return np.array([integrate.quad(lambda b, t=t: F(t - location - b) * stats.norm.pdf(b, scale=p.tau),
                                    -12 * p.tau, 12 * p.tau, epsabs=1e-13, epsrel=1e-12)[0]
                     for t in p.thresholds])


@pytest.mark.parametrize("link", ["logit", "probit"])
@pytest.mark.parametrize("location", [-1.3, 0.0, 0.7])
def test_marginal_probabilities_equal_quadrature(link: str, location: float) -> None:
    p = process(link)
    np.testing.assert_allclose(p.cumulative(location), quad_cumulative(p, location), atol=1e-10)
    probs = p.probabilities(location)
    assert probs.shape == (5,) and math.isclose(probs.sum(), 1.0) and np.all(probs > 0)
    np.testing.assert_allclose(p.mean_rating(location), 1 + np.sum(1 - quad_cumulative(p, location)), atol=1e-9)


def test_probit_closed_form_and_no_random_effects() -> None:
    """Probit: Phi((eta - theta) / sqrt(1 + tau^2)); without random effects, the link's cdf itself."""
    p = process("probit")
    np.testing.assert_allclose(p.cumulative(0.4), stats.norm.cdf((np.array(CUTS) - 0.4) / math.sqrt(1 + p.tau**2)),
                               rtol=1e-12)
    bare = OrdinalProcess(CUTS, "logit")
    np.testing.assert_allclose(bare.mean_rating(0.4), 1 + np.sum(special.expit(0.4 - np.array(CUTS))), rtol=1e-12)


@pytest.fixture(scope="module")
def null_studies() -> tuple[OrdinalProcess, np.ndarray, np.ndarray, np.ndarray]:
    """400 studies, 3 of 15 workers x 30 items x 2 systems, latent effects (0, 0.6)."""
    p = process()
    lay = CrowdDesign(items=30, workers=15, ratings_per_item=3).draw(np.random.default_rng(3), 1)
    effects = np.array([0.0, 0.6])
    return p, lay.system, effects, p.simulate(lay, effects, 400, np.random.default_rng(4))


def test_category_frequencies_and_means_match_the_model(null_studies) -> None:
    """Per system, the mean over studies of each category's share and of the mean rating equal the model's
    marginal values (tolerance: 4 SEs of the across-study mean; studies are independent, ratings are not)."""
    p, system, effects, Y = null_studies
    assert Y.dtype.kind == "i" and Y.min() >= 1 and Y.max() <= 5
    for s in (0, 1):
        ys = Y[system == s]
        shares = np.stack([(ys == k).mean(axis=0) for k in range(1, 6)])  # (K, studies)
        se = shares.std(axis=1, ddof=1) / math.sqrt(ys.shape[1])
        assert np.all(np.abs(shares.mean(axis=1) - p.probabilities(effects[s])) < 4 * se)
        means = ys.mean(axis=0)
        assert abs(means.mean() - p.mean_rating(effects[s])) < 4 * means.std(ddof=1) / math.sqrt(means.size)
    diff = Y[system == 1].mean(axis=0) - Y[system == 0].mean(axis=0)
    assert abs(diff.mean() - p.mean_difference(0.6)) < 4 * diff.std(ddof=1) / math.sqrt(diff.size)


def test_reproducible_and_common_random_numbers() -> None:
    p = process()
    d = CrowdDesign(items=6, workers=4, ratings_per_item=2, assignment="random")
    lay = d.draw(np.random.default_rng(0), 3)
    assert lay.worker.shape == (3, lay.size)  # study-specific assignments are supported
    a = p.simulate(lay, np.array([0.0, 0.0]), 3, np.random.default_rng(5))
    np.testing.assert_array_equal(a, p.simulate(lay, np.array([0.0, 0.0]), 3, np.random.default_rng(5)))
    assert not np.array_equal(a, p.simulate(lay, np.array([0.0, 0.0]), 3, np.random.default_rng(6)))
    z0 = p.latent(lay, np.array([0.0, 0.0]), 3, np.random.default_rng(5))
    z1 = p.latent(lay, np.array([0.0, 0.9]), 3, np.random.default_rng(5))
    np.testing.assert_allclose(z1 - z0, np.broadcast_to(0.9 * lay.system, z0.shape))


@settings(max_examples=15, deadline=None)
@given(delta=st.one_of(st.just(0.0), st.floats(0.01, 3), st.floats(-3, -0.01)), base=st.floats(-1.5, 1.5),
       link=st.sampled_from(["logit", "probit"]), sd=st.floats(0, 2))
def test_latent_shift_inverts_mean_difference(delta: float, base: float, link: str, sd: float) -> None:
    p = process(link, sd_item=sd)
    diff = p.mean_difference(delta, base)
    assert np.sign(diff) == np.sign(delta)
    assert p.latent_shift(diff, base) == pytest.approx(delta, abs=1e-8)


@pytest.mark.parametrize("kwargs", [{"thresholds": (0.0, 0.0)}, {"thresholds": (1.0,)}, {"link": "cauchit"},
                                    {"sd_item": -0.1}, {"thresholds": (0.0, float("nan"))}])
def test_bad_parameters_are_refused(kwargs: dict) -> None:
    with pytest.raises(InputError):
        OrdinalProcess(**{"thresholds": CUTS, **kwargs})


def test_unreachable_difference_and_bad_effects_are_refused() -> None:
    p = process()
    with pytest.raises(InputError, match="not reachable"):
        p.latent_shift(4.5)
    lay = CrowdDesign(items=4, workers=2).draw(np.random.default_rng(0), 1)
    with pytest.raises(InputError, match="latent system effects"):
        p.simulate(lay, np.array([0.0, 1.0, 2.0]), 2, np.random.default_rng(0))


@settings(max_examples=15, deadline=None)
@given(workers=st.integers(3, 7), items=st.integers(4, 12), sd_ws=st.floats(0, 1.5), sd_is=st.floats(0, 1.5),
       probit=st.booleans())
def test_satterthwaite_df_equals_anova_df_in_balanced_crossed_designs(workers, items, sd_ws, sd_is, probit) -> None:
    """Balanced crossed design, latent residual known: Var(contrast) is proportional to
    E MS(worker:system) + E MS(item:system) - s_e^2, so the df are (a + b - c)^2 / (a^2/(W-1) + b^2/(I-1))."""
    lay = CrowdDesign(items=items, workers=workers, ratings_per_item=workers, assignment="crossed").draw(
        np.random.default_rng(0), 1)
    X, _ = treatment_design(lay.system)
    g = crossed_groups(lay.worker, lay.item, lay.system)
    e = 1.0 if probit else math.pi**2 / 3
    a, b = e + items * sd_ws**2, e + workers * sd_is**2
    expected = (a + b - e) ** 2 / (a * a / (workers - 1) + b * b / (items - 1))
    got = latent_satterthwaite_df(g, X, 0, np.array([0.9, 1.1, sd_ws, sd_is]), "probit" if probit else "logit")
    assert got == pytest.approx(expected, rel=1e-8)


def test_ordinal_decision() -> None:
    z = np.array([0.5, -2.1, 2.5, np.nan])
    batch = SimpleNamespace(z=z, p_wald=2 * stats.norm.sf(np.abs(z)), p_lr=np.array([0.5, 0.06, 0.01, np.nan]))
    assert ordinal_decision(batch, "z").tolist() == [False, True, True, False]
    assert ordinal_decision(batch, "lrt").tolist() == [False, False, True, False]
    assert ordinal_decision(batch, "t", df=np.inf).tolist() == [False, True, True, False]
    assert ordinal_decision(batch, "t", df=4).tolist() == [False, False, False, False]
    batch.lr, batch.lr_boot = stats.chi2.isf(batch.p_lr, 1), np.array([[0.5, 1.5], [np.nan, 1.0]])  # factor 1.0
    batch.p_bartlett = bartlett_p(batch.lr, batch.lr_boot)
    assert ordinal_decision(batch, "bartlett").tolist() == [False, False, True, False]
    with pytest.raises(InputError, match="unknown ordinal test"):
        ordinal_decision(batch, "wald")
    with pytest.raises(InputError, match="degrees of freedom"):
        ordinal_decision(batch, "t")
    with pytest.raises(InputError, match="lrt=True"):
        ordinal_decision(SimpleNamespace(p_lr=np.full(3, np.nan)), "lrt")


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**16), link=st.sampled_from(["logit", "probit"]), zero=st.integers(0, 3))
def test_study_dfs_equal_the_one_contrast_df_of_each_study(seed: int, link: str, zero: int) -> None:
    """Property: the batched df (the layout's part computed once) equal the one-study df bit for bit, NaN rows
    (failed studies) NaN, a zero SD included."""
    from humaneval_power.designs import CrowdDesign
    from humaneval_power.fitting.clmm import crossed_groups
    from humaneval_power.ordinal_process import contrast_satterthwaite_df, study_dfs

    rng = np.random.default_rng(seed)
    lay = CrowdDesign(items=12, workers=6, ratings_per_item=2, assignment="balanced").draw(rng, 1)
    groups = crossed_groups(lay.worker, lay.item, lay.system)
    X = lay.system[:, None].astype(float)
    sds = np.abs(rng.normal(0.6, 0.5, (4, 4)))
    sds[0, zero] = 0.0
    sds[2] = np.nan
    got = study_dfs(sds, groups, X, link=link)
    want = [contrast_satterthwaite_df(groups, X, np.array([1.0]), s, link) if np.all(np.isfinite(s)) else np.nan
            for s in sds]
    np.testing.assert_array_equal(got, want)
