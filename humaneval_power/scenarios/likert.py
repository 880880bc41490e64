"""Planning Likert human evaluations: power, sample size, MDE and the cheapest crowd design.

Every function takes the parameters (a :class:`~humaneval_power.params.LikertParams`,
a preset name, an :class:`~humaneval_power.processes.InvariantProcess` for
S >= 2 systems, or an :class:`~humaneval_power.ordinal_process.OrdinalProcess` of ordinal
ratings, analysed by the ``ordinal`` CLMM with the effect a latent shift), a design and an analysis, and goes through the planning core
(:func:`~humaneval_power.planning.power_grid`, :func:`~humaneval_power.planning.solve`).
Without design options the design is fully crossed (every worker rates every
item under both systems) and the closed-form tiers of :mod:`.crossed` apply;
``ratings_per_item``, ``assignment``, ``presentation``, ``systems``,
``items_per_hit``, ``missing``, ``workload`` or ``design_from`` describe crowd
designs (:mod:`humaneval_power.designs`), fitted per study by the batched fast
tier or lme4. Design options (``**design``) are those of
:func:`.crowd.cell_factory`; among them ``model``, the analysis of each
simulated study: a registered name (``slopes``, ``invariant``, ``ordinal``:
:mod:`humaneval_power.analyses`) or an analysis instance.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, cast

import numpy as np
import pandas as pd

from ..analyses.lmm import GaussianLMM
from ..assurance import DEFAULT_DRAWS, ParamDraws, apply_draws, assured
from ..designs import BUDGET_ITEMS, BUDGET_RATINGS_PER_ITEM, BUDGET_WORKERS, Costs, CrowdDesign, check_budget
from ..engine import PowerResult, run_cells
from ..errors import InputError
from ..executors import Jobs, one_executor
from ..ordinal_process import OrdinalProcess
from ..params import LikertParams, as_params, beyond_scale_note
from ..planning import (
    ABOVE,
    BELOW,
    FULL,
    SolveResult,
    SolveResults,
    as_list,
    in_turn,
    mc_margin,
    power_grid,
    sequential_cells,
    solve,
)
from ..processes import InvariantProcess, SlopeProcess
from ..progress import Progress
from ..validation import check_choice, check_number, check_target_power
from .crossed import CrossedLikertScenario
from .crowd import ANALYSIS_LABELS, CrowdScenario, analyses_of, cell_factory

Params = LikertParams | InvariantProcess | OrdinalProcess | str

__all__ = ["likert_budget", "likert_mde", "likert_power", "likert_sample_size"]


def _params(params: Params) -> LikertParams | InvariantProcess | OrdinalProcess:
    return params if isinstance(params, (InvariantProcess, OrdinalProcess)) else as_params(params)


#: the refusal of ``model="both"`` with parameter draws
ONE_ANALYSIS = "--assurance plans one analysis: give --model ordinal or invariant, not both"


def _each_analysis(params: Any, model: Any, assurance: ParamDraws | None, progress: Progress | None,
                   run: Callable[[str, Progress | None], Any], **options: Any) -> dict[str, Any] | None:
    """None for one analysis; for ``model="both"`` ``run(model, progress)`` of each analysis in turn (ordinal
    first, :data:`~.crowd.BOTH`; progress labels name it), after checking every analysis's ``options`` (the
    arguments of :func:`~.crowd.cell_factory`), so that bad input is refused before any work. Each run is the
    single-analysis call: its cells draw the studies of the same design from the same streams (common random
    numbers), so each answer equals that analysis's run alone on the same seed."""
    models = analyses_of(model)
    if len(models) == 1:
        return None
    if assurance is not None:
        raise InputError(ONE_ANALYSIS)
    for m in models:
        cell_factory(params, model=m, **options)
    return in_turn(models, run, ANALYSIS_LABELS, progress)


def linear_type_m_scale(model: Any, effect: Any, mean_difference: Any) -> np.ndarray:
    """What turns the engine's Type-M (over the latent shift simulated) into the linear analysis's of ordinal
    ratings, whose estimates are differences in mean rating: |effect / mean_difference|; 1 for the ordinal
    analysis, at effect 0, or without a finite nonzero ``mean_difference`` (elementwise)."""
    effect = np.asarray(effect, float)
    md = np.asarray(np.nan if mean_difference is None else mean_difference, float)  # None (no column): NaN
    ok = (np.asarray(model) != "ordinal") & (effect != 0) & np.isfinite(md) & (md != 0)
    return np.where(ok, np.abs(effect / np.where(ok, md, 1.0)), 1.0)


def rating_type_m(r: PowerResult) -> PowerResult:
    """A linear analysis of ordinal ratings estimates differences in mean rating: its Type-M is over the cell's
    true ``mean_difference`` (:func:`linear_type_m_scale`); other results as they are."""
    c = r.cell
    scale = float(linear_type_m_scale(c.get("model"), c.get("effect", 0.0), c.get("mean_difference")))
    return r if scale == 1.0 else replace(r, type_m=r.type_m * scale)


def _rated(result: SolveResult) -> SolveResult:
    """A solve's answer with :func:`rating_type_m` at its design."""
    return result if result.at is None else replace(result, at=rating_type_m(result.at))


def _factory(params: LikertParams | InvariantProcess | OrdinalProcess, assurance: ParamDraws | None, draws: int | None, n_sims: int,
             seed: int, jobs: Jobs, target_power: float, progress: Progress | None,
             **kw: Any) -> Callable[..., Any]:
    """The cell factory: plain, or with ``assurance`` (parameter draws) the assurance cells over
    ``draws`` of them (:mod:`humaneval_power.assurance`)."""
    if assurance is None:
        return cell_factory(params, **kw)
    sample = assurance.thin(draws, seed)
    return assured(lambda p: cell_factory(p, **kw), params, apply_draws(params, sample), n_sims, seed,
                   target_power, sample.source, jobs, progress)


@one_executor
def likert_power(
    params: Params,
    workers: Sequence[int] | int,
    items: Sequence[int] | int,
    effect: Sequence[float] | float,
    method: str = "fast",
    test: str = "satterthwaite",
    alpha: float = 0.05,
    n_sims: int = 1000,
    seed: int = 0,
    jobs: Jobs = None,
    progress: Progress | None = None,
    store: str | None = None,
    ratings_per_item: Sequence[int | None] | int | None = None,
    items_per_hit: Sequence[int] | int = 1,
    assurance: ParamDraws | None = None,
    draws: int | None = DEFAULT_DRAWS,
    target_power: float = 0.8,
    effect_scale: str | None = None,
    **design: Any,
) -> pd.DataFrame:
    """Power over workers x items x ratings per item x items per HIT x effect: one row per cell.

    Columns: the design (items, workers, ratings_per_item, systems, assignment,
    presentation), effect, model, method, test, alpha, power, ci_low, ci_high,
    power_excluding_failures, type_s, type_m, mean_estimate, n_sims, n_failed,
    n_singular, n_warnings, df; ``cost`` with ``costs``; ``power_all`` (every
    true difference detected) when several contrasts are compared. With ``assurance`` (parameter
    draws, :mod:`humaneval_power.assurance`; ``draws`` of them are used) ``power`` is the
    assurance and the columns ``conditional_power``, ``assurance``, ``assurance_se``,
    ``p_power_reaches_target`` (of ``target_power``), ``power_q05/q50/q95`` and ``draws`` are added.
    Ordinal parameters (an :class:`~humaneval_power.ordinal_process.OrdinalProcess`): ``effect`` is the latent
    shift (``effect_scale="mean-rating"`` converts differences in mean rating), ``model`` may be ``"both"``
    (the ordinal and linear analyses on the same studies, a row each), and the columns ``mean_difference``,
    ``effect_scale`` and ``type1_error``, ``type1_ci_low``, ``type1_ci_high`` (the cell at effect 0, same
    seed; not with assurance or fixed ``means``) are added (:func:`ordinal_columns`).

    >>> t = likert_power("card2020-high", 3, 100, 0.4, test="card2020", n_sims=2000, seed=1)
    >>> t[["workers", "items", "effect", "power", "ci_low", "ci_high"]].round(3).to_dict("records")
    [{'workers': 3, 'items': 100, 'effect': 0.4, 'power': 0.896, 'ci_low': 0.882, 'ci_high': 0.91}]
    >>> t = likert_power("card2020-high", 15, 100, 0.3, ratings_per_item=3, n_sims=200, seed=1)
    >>> t[["ratings_per_item", "assignment", "power"]].to_dict("records")
    [{'ratings_per_item': 3, 'assignment': 'balanced', 'power': 0.985}]
    """
    if assurance is not None and store:
        raise InputError("a result store does not cover assurance runs (each design cell runs its draws at once)")
    params = _params(params)
    models = analyses_of(design.pop("model", None))
    if len(models) > 1 and assurance is not None:
        raise InputError(ONE_ANALYSIS)
    effects = latent_effects(params, as_list(effect), effect_scale)
    ordinal = isinstance(params, OrdinalProcess)
    # ordinal data: each design cell is also run at effect 0 on the same seed (the same studies) for the Type-I
    # error (not with assurance, whose power at effect 0 is no rejection rate)
    type1 = ordinal and assurance is None and design.get("means") is None  # fixed means: no null cell
    grid = effects + [0.0] if type1 and 0.0 not in effects else effects
    makes = {m: _factory(params, assurance, draws, n_sims, seed, jobs, target_power, progress, method=method,
                         test=test, alpha=alpha, model=m, **design) for m in models}
    axes = {"model": list(models), "items": as_list(items), "workers": as_list(workers),
            "ratings_per_item": as_list(ratings_per_item), "items_per_hit": as_list(items_per_hit), "effect": grid}
    table = power_grid(lambda model, **cell: makes[model](**cell), axes, n_sims, seed=seed, jobs=jobs,
                       progress=progress, store=store)
    if not ordinal:
        return table
    return ordinal_columns(table, len(grid), grid.index(0.0) if type1 else None, 0.0 in effects, effect_scale)


#: the scales an effect is given on (``effect_scale``): the latent shift of ordinal parameters, or a difference
#: in expected mean rating (the only scale of Gaussian parameters; converted for ordinal ones)
EFFECT_SCALES = ("latent", "mean-rating")


def latent_effects(params: Any, effects: list[Any], effect_scale: str | None) -> list[Any]:
    """``effects`` on the parameters' own scale: for an ordinal process given as differences in mean rating
    (``effect_scale="mean-rating"``) the latent shifts of system B with system A at latent 0
    (:meth:`~humaneval_power.ordinal_process.OrdinalProcess.latent_shift`); otherwise as given (refusing a
    latent effect of Gaussian parameters, which have no latent scale)."""
    if effect_scale is None:
        return effects
    check_choice("effect scale", effect_scale, EFFECT_SCALES)
    if not isinstance(params, OrdinalProcess):
        if effect_scale == "latent":
            raise InputError("--effect-scale latent needs ordinal parameters; Gaussian effects are differences in "
                             "mean rating")
        return effects
    return [params.latent_shift(float(e)) if effect_scale == "mean-rating" else e for e in effects]


def effect_note(params: Any, given: float, latent: float, effect_scale: str | None) -> str | None:
    """What the effect of ordinal parameters means (None for Gaussian ones)."""
    if not isinstance(params, OrdinalProcess):
        return None
    if effect_scale == "mean-rating":
        return (f"the effect {given:g} is a difference in expected mean rating (B - A), planned as the latent shift "
                f"{latent:.4g} ({params.link} scale, OrdinalProcess.latent_shift with system A at latent 0)")
    return (f"the effect {latent:g} is a latent shift ({params.link} scale); it moves the expected mean rating of "
            f"system A by {params.mean_difference(latent):.4g}")


def ordinal_columns(table: pd.DataFrame, n_effects: int, zero: int | None, keep_zero: bool,
                    effect_scale: str | None) -> pd.DataFrame:
    """The power table of ordinal parameters, its rows in product order with the effect innermost
    (``n_effects`` of them, the ``zero``-th 0): each row gains the Type-I error of its design cell and analysis
    (``type1_error`` with its 95% interval: the rate at effect 0 on the same studies) and ``effect_scale``;
    the linear analysis's Type-M is its estimates' (mean-rating differences) over the true ``mean_difference``
    (not over the latent shift); the effect-0 rows are dropped unless asked for (``keep_zero``). Without a
    ``zero`` (assurance) only the last two."""
    t = table.reset_index(drop=True)
    t["effect_scale"] = effect_scale or "latent"
    t["type_m"] *= linear_type_m_scale(t["model"], t["effect"], t["mean_difference"])
    if zero is None:
        return t
    at_zero = t.iloc[[b * n_effects + zero for b in range(len(t) // n_effects) for _ in range(n_effects)]]
    for col, src in (("type1_error", "power"), ("type1_ci_low", "ci_low"), ("type1_ci_high", "ci_high")):
        t[col] = at_zero[src].to_numpy()
    if not keep_zero:
        t = t.drop(index=[b * n_effects + zero for b in range(len(t) // n_effects)])
    return t.reset_index(drop=True)


@one_executor
def likert_sample_size(
    params: Params,
    effect: float,
    target_power: float = 0.8,
    workers: int | None = None,
    items: int | None = None,
    vary: str = "items",
    method: str = "fast",
    test: str = "satterthwaite",
    alpha: float = 0.05,
    n_sims: int = 2000,
    seed: int = 0,
    jobs: Jobs = 1,
    progress: Progress | None = None,
    ratings_per_item: int | None = None,
    items_per_hit: int = 1,
    assurance: ParamDraws | None = None,
    draws: int | None = DEFAULT_DRAWS,
    target_assurance: float | None = None,
    effect_scale: str | None = None,
    **design: Any,
) -> SolveResult | SolveResults:
    """Smallest number of items (or workers, or ratings per item) reaching ``target_power``, the
    rest of the design fixed.

    When the slope variance of the fixed factor caps the power below the
    target (few workers with a worker-slope SD > 0), the result says so.
    With ``assurance`` (parameter draws) it is the smallest value whose assurance reaches
    ``target_assurance`` (default: ``target_power``); ``detail`` then holds the plain answer at the
    point estimate (``conditional_value``, ``conditional_low``, ``conditional_high``).

    >>> r = likert_sample_size("card2020-low", 0.1, workers=10, method="analytic")
    >>> r.value, round(r.at.power, 3)
    (135, 0.801)

    With ordinal parameters and ``model="both"``: a :class:`~humaneval_power.planning.SolveResults`, the answer of
    the ordinal and of the linear analysis (each the search that analysis alone makes, on the same studies).
    """
    params = _params(params)
    both = _each_analysis(params, design.get("model"), assurance, progress, lambda m, p: likert_sample_size(
        params, effect, target_power, workers, items, vary, method, test, alpha, n_sims, seed, jobs, p,
        ratings_per_item, items_per_hit, effect_scale=effect_scale, **{**design, "model": m}),
        method=method, test=test, alpha=alpha, **_without_model(design))
    if both is not None:
        return SolveResults("model", both, ANALYSIS_LABELS)
    check_choice("vary", vary, ("items", "workers", "ratings_per_item"))
    check_target_power(target_power, alpha)
    if check_number("effect", effect) == 0:
        raise InputError("the sample size for a zero effect is undefined; give a non-zero effect")
    given, effect = effect, latent_effects(params, [effect], effect_scale)[0]
    sizes = {"items": items, "workers": workers, "ratings_per_item": ratings_per_item}
    needed = [k for k in ("items", "workers") if k != vary and sizes[k] is None]
    if needed:
        raise InputError(f"give the number of {needed[0]} to hold fixed while varying {vary}")
    if sizes[vary] is not None:
        raise InputError(f"the number of {vary.replace('_', ' ')} is what the search varies (--vary {vary}); "
                         "drop it, or vary another size")
    if assurance is not None:
        plain = cast(SolveResult, likert_sample_size(params, effect, target_power, workers, items, vary, method, test, alpha, n_sims,
                                   seed, jobs, progress, ratings_per_item, items_per_hit, **design))
    note = effect_note(params, given, effect, effect_scale)
    make = _factory(params, assurance, draws, n_sims, seed, jobs, target_power, progress, method=method, test=test,
                    alpha=alpha, **design)

    def cell(n: int) -> CrowdScenario:
        s = {**sizes, vary: n}
        if vary == "workers" and ratings_per_item is None:
            s["ratings_per_item"] = None
        return make(s["items"], s["workers"], s["ratings_per_item"], items_per_hit, effect)

    base = cell(2 if vary != "ratings_per_item" else 1)
    lo, hi = (1, workers) if vary == "ratings_per_item" else (2, 10**6 if base.closed_form is not None else 5000)
    limit: tuple[float, str] | None = None
    why = ""
    if base.closed_form is not None and vary != "ratings_per_item":
        limit = _crossed_limit(base.closed_form, vary, n_sims, seed, jobs)
    elif vary != "workers":
        why = "the worker variance components cap the power with this pool: add workers or ratings per item"
    if vary == "ratings_per_item" and workers is None:
        raise InputError("give the pool of workers when varying the ratings per item")
    assert hi is not None  # the pool of workers, checked above
    if assurance is None:
        found = _rated(solve(cell, vary, lo, hi, target_power, n_sims=n_sims, seed=seed, jobs=jobs,
                             progress=progress, limit=limit, why=why))
        return found.noted(note) if note else found
    why = "; ".join(x for x in (why, ("the assurance is capped by the draws whose power stays low however large the "
                                      "design (e.g. large slope SDs of the fixed factor)")) if x)
    result = solve(cell, vary, lo, hi, target_power if target_assurance is None else target_assurance,
                   n_sims=n_sims, seed=seed, jobs=jobs, progress=progress, why=why)
    result = replace(result, detail={**result.detail, "conditional_value": plain.value, "conditional_low": plain.low,
                                     "conditional_high": plain.high})
    return result.noted(note) if note else result


def _crossed_limit(cell: CrossedLikertScenario, vary: str, n_sims: int, seed: int, jobs: Jobs) -> tuple[float, str]:
    """The power of a crossed design as ``vary`` grows without bound, and why it stays there."""
    method = "analytic" if cell.method == "analytic" else "fast"
    grown: dict[str, Any] = {vary: 10**8 if method == "analytic" else 10**6}
    limit = replace(cell, method=method, **grown)
    max_power = run_cells([limit], n_sims, seed=seed, jobs=jobs)[0].power
    fixed_name = "workers" if vary == "items" else "items"
    sd_name = "sd_worker_slope" if vary == "items" else "sd_item_slope"
    return max_power, (
        f"as {vary} grow, power tends to {max_power:.3f}: with {getattr(cell, fixed_name)} {fixed_name} the "
        f"{sd_name} ({getattr(cell.params, sd_name):.3g}) keeps the variance of the effect estimate above "
        f"{sd_name}^2/{fixed_name}; add {fixed_name} instead")


def _without_model(design: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in design.items() if k != "model"}


@one_executor
def likert_mde(
    params: Params,
    workers: int,
    items: int,
    target_power: float = 0.8,
    method: str = "fast",
    test: str = "satterthwaite",
    alpha: float = 0.05,
    n_sims: int = 2000,
    seed: int = 0,
    jobs: int | None = 1,
    progress: Progress | None = None,
    ratings_per_item: int | None = None,
    items_per_hit: int = 1,
    **design: Any,
) -> SolveResult | SolveResults:
    """Minimum detectable effect (difference in mean rating, B - A) of a design: the *sensitivity*
    of a planned study, or of a finished one given ``design_from`` and its fitted parameters. Every
    effect tried reuses the same simulated studies (common random numbers). With ordinal parameters and
    ``model="both"``: the latent MDE of the ordinal and of the linear analysis (:class:`SolveResults`).

    >>> round(likert_mde("card2020-low", 10, 135, method="analytic").value, 5)
    0.09991
    """
    params = _params(params)
    both = _each_analysis(params, design.get("model"), None, progress, lambda m, p: likert_mde(
        params, workers, items, target_power, method, test, alpha, n_sims, seed, jobs, p, ratings_per_item,
        items_per_hit, **{**design, "model": m}), method=method, test=test, alpha=alpha, **_without_model(design))
    if both is not None:
        return SolveResults("model", both, ANALYSIS_LABELS)
    check_target_power(target_power, alpha)
    make = cell_factory(params, method=method, test=test, alpha=alpha, **design)
    sds = params.sds.values()
    sd = math.sqrt(sum(v * v for v in sds))
    result = _rated(solve(lambda e: make(items, workers, ratings_per_item, items_per_hit, e), "effect", 1e-6 * sd,
                          sd / 4, target_power, integer=False, n_sims=n_sims, seed=seed, jobs=jobs, progress=progress,
                          grow=True))
    if isinstance(params, OrdinalProcess):
        note = None if result.value is None else effect_note(params, result.value, result.value, None)
    else:
        note = beyond_scale_note(getattr(params, "scale", None), result.value)
    return result.noted(note) if note else result


@one_executor
def likert_budget(
    params: Params,
    effect: float,
    items: Sequence[int] | None = None,
    workers: Sequence[int] | None = None,
    ratings_per_item: Sequence[int] | None = None,
    items_per_hit: Sequence[int] = (1,),
    costs: Costs | None = None,
    budget: float | None = None,
    target_power: float = 0.8,
    method: str = "fast",
    test: str = "satterthwaite",
    alpha: float = 0.05,
    n_sims: int = 1000,
    seed: int = 0,
    jobs: int | None = None,
    progress: Progress | None = None,
    assurance: ParamDraws | None = None,
    draws: int | None = DEFAULT_DRAWS,
    target_assurance: float | None = None,
    effect_scale: str | None = None,
    **design: Any,
) -> tuple[pd.DataFrame, SolveResult | SolveResults]:
    """The cheapest design reaching the target power among items x workers x k x h within ``budget``
    (by default items ``BUDGET_ITEMS``, pools ``BUDGET_WORKERS``, k ``BUDGET_RATINGS_PER_ITEM``).

    Designs are settled in order of cost, cheapest first (docs/crowd.md, "Costs and budgets"):
    by the analytic screen (:func:`optimistic_power` below the target; two-system within-item
    designs with even workloads), else by two-sided sequential Monte Carlo in rounds of up to four
    designs (:func:`~humaneval_power.planning.sequential_cells`: stopped once an upper bound falls
    short or a lower bound reaches the target, each at most a 5% chance of stopping a design on the
    wrong side of the target), to the first round holding a design settled as reaching the target;
    designs of no lower cost than one settled as reaching it are not run (not needed), every cheaper
    one is settled. Each record's ``settled`` says how. Returns the evaluated
    designs (the cost-power frontier, one row each, with ``cost``) and the answer
    as a :class:`SolveResult` over ``cost``: ``value`` the cheapest cost reaching
    the target, ``high`` the cheapest whose lower 95% bound reaches it (the
    Monte-Carlo margin; None if none in the search), ``low`` the cheapest whose
    upper bound does. With ``assurance`` (parameter draws) designs must reach
    ``target_assurance`` (default: ``target_power``) in assurance. ``costs`` must price something
    (a rating, a HIT or a worker): the search minimises them. With ordinal parameters and ``model="both"``: each
    analysis's search in turn (the designs each settles, a ``model`` column; each design's studies are the same
    for both, simulated once per analysis from the same streams) and the cheapest design of each
    (:class:`SolveResults`).
    """
    params = _params(params)
    both = _each_analysis(params, design.get("model"), assurance, progress, lambda m, p: likert_budget(
        params, effect, items, workers, ratings_per_item, items_per_hit, costs, budget, target_power, method, test,
        alpha, n_sims, seed, jobs, p, effect_scale=effect_scale, **{**design, "model": m}),
        method=method, test=test, alpha=alpha, costs=costs, **_without_model(design))
    if both is not None:
        return (pd.concat([t for t, _ in both.values()], ignore_index=True),
                SolveResults("model", {m: r for m, (_, r) in both.items()}, ANALYSIS_LABELS))
    check_target_power(target_power, alpha)
    if costs is None or not costs.any:
        raise InputError("give the costs to minimise: --cost-per-rating, --cost-per-hit and/or --cost-per-worker")
    cap = check_budget(budget, costs)
    if check_number("effect", effect) == 0:
        raise InputError("the effect must be non-zero to plan for it")
    given, effect = effect, latent_effects(params, [effect], effect_scale)[0]
    make = _factory(params, assurance, draws, n_sims, seed, jobs, target_power, progress, method=method, test=test,
                    alpha=alpha, costs=costs, **design)
    if assurance is not None and target_assurance is not None:
        target_power = target_assurance
    cells = []
    for i, w, k, h in itertools.product(as_list(items or BUDGET_ITEMS), as_list(workers or BUDGET_WORKERS),
                                        as_list(ratings_per_item or BUDGET_RATINGS_PER_ITEM), as_list(items_per_hit)):
        units = i * (design.get("systems", 2) if design.get("presentation") == "between" else 1)
        if (k is not None and k > w) or h > units:
            continue
        cell = make(i, w, k, h, effect)
        cost = costs.of(cell.design)
        if cost <= cap:
            cells.append((cost, cell))
    if not cells:
        what = f"the budget of {budget:g}" if budget is not None else "the search range"
        raise InputError(f"no design in the search range fits {what} (or every ratings per item exceeds the workers, "
                         "or every items per HIT the items)")
    cells = _largest_pools(cells)
    results = [rating_type_m(r) for r in _search(cells, target_power, n_sims, seed, jobs, progress,
                                                 screen=assurance is None)]
    table = pd.DataFrame([r.record() for r in results])
    if isinstance(params, OrdinalProcess):
        table["effect_scale"] = effect_scale or "latent"
    answer = _cheapest(results, target_power, budget, params)
    note = effect_note(params, given, effect, effect_scale)
    return table, answer.noted(note) if note else answer


#: the analytic screen's variance deflation: a design is settled without simulation when even the power of a
#: z test with this fraction of its approximate variance falls short (:func:`optimistic_power`)
SCREEN_DEFLATION = 0.7


def approximate_variance(cell: Any) -> float | None:
    """The approximate variance of the B - A estimate of a two-system within-item crowd design with even
    workloads (crossed or balanced assignment, nothing missing), None for any other cell. A rating pair
    differs by the effect plus the worker's and the item's system deviations and two residuals; averaged
    over I items, k workers per item and the W workers used, ``V = s_w^2 / W + s_i^2 / I + 2 s_e^2 / (I k)``
    with the slope SDs (``s_w^2 = 2 sd_worker_system^2`` etc. in the coding-invariant model). For the
    fully crossed slope design it is the analytic tier's exact variance."""
    if (not isinstance(cell, CrowdScenario) or not isinstance(cell.design, CrowdDesign) or cell.means is not None
            or isinstance(cell.process, OrdinalProcess)):  # ratings 1..K: no Gaussian residual (linear analysis)
        return None
    d, a = cell.design, cell.analysis
    if (d.systems != 2 or d.presentation != "within" or d.missing or d.workload is not None
            or d.assignment == "random" or not isinstance(a, GaussianLMM) or a.test == "card2020"):
        return None
    p = cell.process
    if isinstance(p, SlopeProcess):
        s_w, s_i, s_e = p.params.sd_worker_slope ** 2, p.params.sd_item_slope ** 2, p.params.sd_residual ** 2
    else:
        ip = cast(InvariantProcess, p)  # make_process's other kind
        s_w, s_i, s_e = 2 * ip.sd_worker_system ** 2, 2 * ip.sd_item_system ** 2, ip.sd_residual ** 2
    used = d.counts()["workers_used"]
    return s_w / used + s_i / d.items + 2 * s_e / (d.items * d.k)


def optimistic_power(cell: Any, deflation: float = SCREEN_DEFLATION) -> float | None:
    """An upper bound for the power of ``cell`` (None where :func:`approximate_variance` has none): a
    two-sided z test at the cell's alpha with ``deflation`` times the approximate variance (no df penalty).
    With ``deflation=1`` it is the approximation itself, used only to end a round of the search early."""
    v = approximate_variance(cell)
    if v is None:
        return None
    from scipy import stats

    z = abs(cell.effect) / math.sqrt(deflation * v)
    return float(stats.norm.sf(stats.norm.isf(cell.analysis.alpha / 2) - z))


#: the ``settled`` of a budget record, by how :func:`~humaneval_power.planning.sequential_cells` settled it
SETTLED = {FULL: "full", BELOW: "stopped early (upper bound below target)",
           ABOVE: "stopped early (lower bound within Monte-Carlo error of target)"}


def _search(cells: list[tuple[float, Any]], target: float, n_sims: int, seed: int, executor: Any,
            progress: Progress | None, screen: bool) -> list[PowerResult]:
    """The budget search over ``cells`` (in order of cost): analytic screen, then two-sided sequential Monte
    Carlo in rounds of up to four designs, cheapest first, to the first round holding a design settled as
    reaching ``target``, on the caller's open ``executor``. Within a round, once a design is settled as
    reaching the target the designs of no lower cost are dropped (not needed for the answer); the cheaper
    ones run on until settled: every design cheaper than the answer is settled, which confirms the frontier.
    Each result says how it was settled (``settled``)."""
    results: dict[int, PowerResult] = {}
    doubt = []
    for j, (_, c) in enumerate(cells):
        bound = optimistic_power(c) if screen else None
        if bound is not None and bound < target:
            rough = optimistic_power(c, 1.0)
            assert rough is not None
            results[j] = replace(PowerResult.closed_form(c.cell(), rough, math.nan, math.nan), ci_low=0.0,
                                 ci_high=bound, extra={"settled": "analytic screen"})
        else:
            doubt.append(j)

    def likely(j: int) -> float | None:  # the approximation itself (no deflation)
        return optimistic_power(cells[j][1], 1.0) if screen else None

    # designs of equal cost: the likeliest to reach the target first (it may settle the round alone)
    doubt.sort(key=lambda j: (cells[j][0], -(likely(j) or 0.0), j))
    rounds: list[list[int]] = [[]]
    for j in doubt:  # rounds of four, a round ending early at a design likely to reach the target
        rounds[-1].append(j)
        guess = likely(j)
        if len(rounds[-1]) == 4 or (guess is not None and guess >= target):
            rounds.append([])
    for batch in filter(None, rounds):
        if progress is not None:
            progress(len(results), len(cells), f"budget search over {len(cells)} designs, cheapest first: "
                                               f"simulating {len(batch)} at cost {cells[batch[0]][0]:g}")
        runs = sequential_cells([cells[j][1] for j in batch], n_sims, target, seed, executor,
                                above=target - mc_margin(target, n_sims), rank=[cells[j][0] for j in batch])
        for j, run in zip(batch, runs):
            if run is not None:
                r, how = run
                results[j] = replace(r, extra={**r.extra, "settled": "exact" if r.n_sims == 0 else SETTLED[how]})
        if any(_reaches(results[j], target) for j in batch if j in results):
            break
    return [results[j] for j in sorted(results)]


def _largest_pools(cells: list[tuple[float, Any]]) -> list[tuple[float, Any]]:
    """The candidate designs in order of cost, keeping of the designs that differ only in the pool of
    workers and cost the same (no cost per worker, or the extra workers unused) the largest pool: with
    the same items, k and HITs, spreading the work over more workers averages their slopes (and,
    between outputs, their intercepts) over more workers, so a smaller pool is never more powerful."""
    best: dict[tuple[Any, ...], tuple[float, Any]] = {}
    for cost, cell in cells:
        d = cell.design
        key = (cost, d.items, d.k, d.items_per_hit, d.assignment == "crossed")
        if key not in best or d.workers > best[key][1].design.workers:
            best[key] = (cost, cell)
    return sorted(best.values(), key=lambda c: (c[0], c[1].design.items, -c[1].design.workers))


def _reaches(r: PowerResult, target: float) -> bool:
    """A design settled as reaching the target: its power estimate reaches it, or sequential Monte Carlo
    stopped it with a lower bound within the Monte-Carlo error of a full run below it."""
    return r.power >= target or r.extra.get("settled") == SETTLED[ABOVE]


def _cheapest(results: list[PowerResult], target: float, budget: float | None, params: Any) -> SolveResult:
    """The budget search's answer as a solve result over cost."""
    def first(ok: Any) -> PowerResult | None:
        return next((r for r in results if ok(r)), None)

    best, sure, maybe = first(lambda r: _reaches(r, target)), first(lambda r: r.ci_low >= target), \
        first(lambda r: r.ci_high >= target)
    top = max(results, key=lambda r: (r.extra.get("settled") != "analytic screen", r.power))  # simulated first
    detail = {"designs_evaluated": len(results), "budget": budget}
    if best is None:
        d = top.cell
        where = f"the budget of {budget:g}" if budget is not None else "the search range"
        reason = (f"no design within {where} reaches power {target:g} (highest {top.power:.3f} at {d['items']} "
                  f"items, {d['workers']} workers, {d['ratings_per_item']} ratings per item)")
        slope = getattr(params, "sd_worker_slope", 0.0) if isinstance(params, LikertParams) else 0.0
        if slope:
            reason += (f"; the worker-slope SD ({slope:.3g}) caps power by the number of workers: the variance of "
                       f"the effect estimate stays above sd_worker_slope^2 / workers")
        return SolveResult("cost", target, None, None, None, False, reason, top, top.power, detail=detail)
    return SolveResult("cost", target, best.cell["cost"], maybe.cell["cost"] if maybe else None,
                       sure.cell["cost"] if sure else None, True, "", best, top.power, detail=detail)
