"""``hepower likert``: power, sample size, MDE and budgets of Likert evaluations (fully crossed or crowd designs).

The commands mirror :mod:`humaneval_power.scenarios.likert` one to one:
``power`` ↔ ``likert_power``, ``size`` ↔ ``likert_sample_size``, ``mde`` ↔
``likert_mde``, ``budget`` ↔ ``likert_budget``; the design options are the
keyword arguments of :func:`humaneval_power.scenarios.crowd.cell_factory`.
"""
from __future__ import annotations

import argparse
import math
from typing import Any

from ..errors import InputError
from ..ordinal_process import OrdinalProcess
from ..params import SD_NAMES, LikertParams, beyond_scale_note
from ..plan_inputs import (
    GRID_SIZES,
    crowd_design,
    likert_params,
    likert_systems,
    merge_design_file,
    plan_subject,
    worker_pool,
)
from .assurance_options import assurance_kwargs, draws_from_args
from .common import (
    ProgressBar,
    emit_solve,
    flatten,
    print_json,
    print_table,
    where_filters,
)


def params_from_args(args: argparse.Namespace) -> Any:
    """The parameters named by --preset / --params / typed SDs (:func:`~humaneval_power.plan_inputs.likert_params`)."""
    from ..processes import INVARIANT_SDS

    sds = {k: getattr(args, k) for k in dict.fromkeys(SD_NAMES + INVARIANT_SDS)}
    return likert_params(args.preset, args.params, args.comparison, args.intercept, family=args.family,
                         thresholds=args.thresholds, link=args.link, **sds)


def design_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The design and analysis keyword arguments of the API from the command line."""
    from ..designs import Costs

    costs = Costs(args.cost_per_rating, args.cost_per_hit, args.platform_fee, args.cost_per_worker)
    return crowd_design(args.systems, args.assignment, args.presentation, args.missing, args.model, args.compare,
                        args.adjust, args.means, costs, (args.pair[0] - 1, args.pair[1] - 1) if args.pair else None,
                        args.design_from, args.workload_from, where_filters(args.where), args.pilot_systems,
                        args.duplicates, getattr(args, "design_workload", None))


def apply_design_file(args: argparse.Namespace) -> None:
    """Fill the design options the command line left at their defaults from --design FILE."""
    if not getattr(args, "design", None):
        return
    grid = args.action in ("power", "budget")
    given = {k: flatten(v) if grid and k in GRID_SIZES and v is not None else v for k, v in vars(args).items()}
    for key, value in merge_design_file(args.design, given).items():
        if key == "workload":
            if args.workload_from:
                raise InputError("give the workload in --design or --workload-from, not both")
            args.design_workload = value
        else:
            setattr(args, key, [[value]] if grid and key in GRID_SIZES else value)


def run(args: argparse.Namespace) -> int:
    """Run a ``likert`` command."""
    apply_design_file(args)
    if args.systems is None:
        args.systems = likert_systems(getattr(args, "params", None), args.comparison)
    return {"power": _power, "size": _size, "mde": _mde, "budget": _budget}[args.action](args)


def _power(args: argparse.Namespace) -> int:
    from ..io import table_writer
    from ..planning import smallest_in_grid
    from ..scenarios.likert import likert_power

    params = params_from_args(args)
    subject = plan_subject(params.name, args.systems, getattr(args, "params", None), args.comparison)
    assure = assurance_kwargs(args, _likert_draws(args))
    design = design_from_args(args)
    if not 0 < args.target_power < 1:
        raise InputError(f"--target-power must be in (0, 1), got {args.target_power}")
    items = flatten(args.items) or [design["design_from"].items if design.get("design_from") else 100]
    workers = worker_pool(design, flatten(args.workers)) or [3]
    from ..validation import check_magnitude

    effects = flatten(args.effect)
    for e in effects or []:
        check_magnitude("--effect", e)
    notes = sorted({n for e in effects or [] if (n := beyond_scale_note(getattr(params, "scale", None), e))})
    with ProgressBar.of(args) as bar:
        table = likert_power(
            params, workers, items, effects,
            method=args.method, test=args.test, alpha=args.alpha, n_sims=args.sims, seed=args.seed, jobs=args.jobs,
            progress=bar, store=args.store, ratings_per_item=flatten(args.ratings_per_item),
            items_per_hit=flatten(args.items_per_hit), target_power=args.target_power,
            effect_scale=args.effect_scale, **assure, **design,
        )
    if "n_failed" in table and "n_sims" in table and len(table) and ((table["n_failed"] >= table["n_sims"]) & (table["n_sims"] > 0)).all():
        raise InputError("every simulated study failed to fit, in every cell: these SDs and design cannot be "
                         "fitted (power would read 0); check the SDs' scale and the design")

    def plot(tmp: Any) -> None:
        from ..plots import plot_likert_power

        plot_likert_power(table, scale=getattr(params, "scale", None), target=args.target_power,
                          type_m=args.type_m, title=f"{subject}: {args.method}, {args.test} test, "
                          f"{', '.join(table.model.unique())} model").savefig(
            tmp, dpi=args.dpi)

    args.outputs.write(out=args.out and table_writer(table, args.out), plot=plot)
    if args.json:
        print_json(table)
        return 0
    runs = "exact (no simulation)" if args.method == "analytic" else f"{args.sims} simulations per cell, seed {args.seed}"
    if assure:
        return _print_assurance(table, subject, args, runs)
    analyses = ", ".join(dict.fromkeys(f"{r.model}: {r.method}, {r.test} test" for r in table.itertuples())) \
        if "type1_error" in table else f"{args.method}, {args.test} test"
    print(f"Power for {subject} ({analyses}, alpha {args.alpha:g}, {runs}):")
    columns = ["workers", "items", "ratings_per_item", "effect", "mean_difference", "cost", "model", "power", "ci_low",
               "ci_high", "power_all", "type_s", "type_m", "type1_error", "type1_ci_high", "df", "n_failed",
               "n_singular", "n_warnings"]
    print_table(table, [c for c in columns if c in table and not (c == "ratings_per_item" and
                                                                   (table.ratings_per_item == table.workers).all())])
    print(f"\nSmallest designs in this sweep reaching {args.target_power:g} power:")
    by = ["workers", "ratings_per_item", "effect"] + (["model"] if "model" in table and table.model.nunique() > 1 else [])
    for r in smallest_in_grid(table, args.target_power, "items", by).to_dict("records"):
        what = f"{int(r['items'])} items (power {r['power']:.3f})" if r["reached"] else f"none (best {r['power']:.3f})"
        k = "" if r["ratings_per_item"] == r["workers"] else f", {r['ratings_per_item']} per item"
        model = f" ({r['model']})" if "model" in by else ""
        print(f"  {r['workers']} workers{k}, effect {r['effect']:g}{model}: {what}")
    for note in notes:
        print(f"note: {note}")
    if "type1_error" in table:
        given = "differences in expected mean rating (--effect-scale mean-rating), converted to latent shifts" if (
            args.effect_scale == "mean-rating") else "latent shifts (--effect-scale mean-rating takes mean ratings)"
        print(f"note: ordinal ratings: the effects were given as {given}; mean_difference is the difference in "
              "expected mean rating of the pair. type1_error: each analysis's rejection rate at effect 0 on the same "
              "simulated studies (upper 95% bound type1_ci_high); the linear (invariant) model's Type-M compares "
              "its mean-rating estimates with mean_difference")
    return 0


def _likert_draws(args: argparse.Namespace) -> Any:
    """Draws of the slope-model SDs (from --params or --prior), or None without --assurance."""
    return draws_from_args(args, SD_NAMES)


def _print_assurance(table: Any, name: str, args: argparse.Namespace, runs: str) -> int:
    from ..assurance import COLUMNS

    t = table.iloc[0]
    print(f"Assurance for {name} ({args.method}, {args.test} test, alpha {args.alpha:g}, {runs} and per draw; "
          f"{int(t['draws'])} draws: {t['draw_source']}):")
    print_table(table.rename(columns={"p_power_reaches_target": f"P(power>={args.target_power:g})"}),
                [c for c in ["workers", "items", "ratings_per_item", "effect", "cost"] if c in table
                 and not (c == "ratings_per_item" and (table.ratings_per_item == table.workers).all())]
                + [f"P(power>={args.target_power:g})" if c == "p_power_reaches_target" else c for c in COLUMNS])
    print("\nconditional_power: at the point estimate; assurance: power averaged over the draws (probability of a "
          "significant result in the planned direction), with its Monte-Carlo SE; power_q05/q50/q95: quantiles of "
          "the power over the draws")
    return 0


def _size(args: argparse.Namespace) -> int:
    from ..scenarios.likert import likert_sample_size

    assure = assurance_kwargs(args, _likert_draws(args), solve=True)
    design = design_from_args(args)
    with ProgressBar.of(args) as bar:
        result = likert_sample_size(
            params_from_args(args), args.effect, target_power=args.target_power,
            workers=worker_pool(design, args.workers), items=args.items, vary=args.vary, method=args.method,
            test=args.test, alpha=args.alpha, n_sims=args.sims, seed=args.seed, jobs=args.jobs, progress=bar,
            ratings_per_item=args.ratings_per_item, items_per_hit=args.items_per_hit, effect_scale=args.effect_scale,
            **assure, **design,
        )
    emit_solve(result, args)
    return 0


def _mde(args: argparse.Namespace) -> int:
    from ..scenarios.likert import likert_mde

    design = design_from_args(args)
    items = args.items or (design["design_from"].items if design.get("design_from") is not None else None)
    workers = worker_pool(design, args.workers)
    if items is None or workers is None:
        raise InputError("give --workers and --items (or --design-from)")
    with ProgressBar.of(args) as bar:
        params = params_from_args(args)
        result = likert_mde(params, workers, items, target_power=args.target_power,
                            method=args.method, test=args.test, alpha=args.alpha, n_sims=args.sims, seed=args.seed,
                            jobs=args.jobs, progress=bar, ratings_per_item=args.ratings_per_item,
                            items_per_hit=args.items_per_hit, **design)
    if not args.json:
        print(_mde_header(params, design, args, result))
    emit_solve(result, args)
    return 0


def _mde_header(params: Any, design: dict[str, Any], args: argparse.Namespace, result: Any) -> str:
    """What a minimum detectable effect is of: the pair, its scale, the tests and adjustment, the design."""
    first = next(iter(result.results.values())) if hasattr(result, "results") else result  # model both: alike
    cell = first.at.cell if first.at is not None else {}
    systems = int(cell.get("systems", design["systems"]))
    a, b = design.get("pair", (0, systems - 1))
    scale = getattr(params, "scale", None)
    unit = f"the [{scale[0]:g}, {scale[1]:g}] scale (ratings rescaled)" if isinstance(params, LikertParams) and \
        scale else "the parameters' rating scale"
    what = f"latent shift ({params.link} scale; the note gives its difference in mean rating)" if isinstance(
        params, OrdinalProcess) else f"difference in mean rating on {unit}"
    family = {"pair": "the pair alone", "baseline": "every system against system 1",
              "pairs": "all pairs"}[design["compare"]]
    adjust = "" if design["compare"] == "pair" else f", {design['adjust']}-adjusted"
    k = cell.get("ratings_per_item")
    lay = (f"{cell.get('items')} items, {cell.get('workers')} workers, {k} per "
           f"{'output' if cell.get('presentation') == 'between' else 'item'}, {cell.get('presentation')}, "
           f"{cell.get('assignment')} assignment" if cell else "")
    subject = plan_subject(params.name, systems, getattr(args, "params", None), args.comparison)
    return (f"Minimum detectable effect of {subject}: system {b + 1} - system {a + 1} of {systems}, {what}; "
            f"{args.test} test at alpha {args.alpha:g} ({family}{adjust}); "
            + ("exact (no simulation)" if args.method == "analytic" else
               f"{args.method} method, {args.sims} simulations, seed {args.seed}") + f"\ndesign: {lay}")


def _budget(args: argparse.Namespace) -> int:
    import pandas as pd

    from ..io import table_writer
    from ..planning import solve_records
    from ..scenarios.crowd import ANALYSIS_LABELS
    from ..scenarios.likert import likert_budget

    assure = assurance_kwargs(args, _likert_draws(args), solve=True)
    design = design_from_args(args)
    costs = design.pop("costs")
    if design.get("design_from") is not None:
        raise InputError("budget searches crowd designs; use `likert mde --design-from` for a pilot's own design")
    with ProgressBar.of(args) as bar:
        table, result = likert_budget(
            params_from_args(args), args.effect, flatten(args.items), worker_pool(design, flatten(args.workers)),
            flatten(args.ratings_per_item), flatten(args.items_per_hit), costs=costs, budget=args.budget,
            target_power=args.target_power, method=args.method, test=args.test, alpha=args.alpha, n_sims=args.sims,
            seed=args.seed, jobs=args.jobs, progress=bar, effect_scale=args.effect_scale, **assure, **design)

    def plot(tmp: Any) -> None:
        from ..plots import plot_cost_frontier

        plot_cost_frontier(table, target=args.target_power).savefig(tmp, dpi=args.dpi)

    args.outputs.write(out=args.out and table_writer(table, args.out), plot=plot)
    if args.json:  # the answer(s); --out keeps the evaluated designs
        print_json(pd.DataFrame(solve_records(result)))
        return 0
    what = "assurance" if assure else "power"
    answers = result.results if hasattr(result, "results") else {"": result}  # model both: one per analysis
    print_table(table, (["model"] if len(answers) > 1 else []) + (
        ["items", "workers", "ratings_per_item", "cost", "power", "ci_low", "ci_high", "type_m", "n_singular",
         "n_sims", "settled"] if not assure else ["items", "workers", "ratings_per_item", "cost", "conditional_power",
                                                  "assurance", "assurance_se", "p_power_reaches_target"]))
    for model, answer in answers.items():
        head = f"{ANALYSIS_LABELS[model]}: " if model else ""
        if not answer.attainable:
            print(f"\n{head}{answer}")
            continue
        at = answer.at
        assert at is not None  # an attainable result carries its design's power
        d = at.cell
        target = args.target_assurance or args.target_power if assure else args.target_power
        print(f"\n{head}cheapest design reaching {what} {target:g}: {d['items']} items, {d['workers']} workers, "
              f"{d['ratings_per_item']} ratings per item, cost {answer.value:g}; {what} {at.power:.3f} "
              f"[{at.ci_low:.3f}, {at.ci_high:.3f}]"
              + (f", Type-M {at.type_m:.3g}" if math.isfinite(at.type_m) else ""))
        sure = "none in the search" if answer.high is None else f"{answer.high:g}"
        print(f"{head}cheapest whose lower 95% bound reaches it (Monte-Carlo margin): cost {sure}")
    return 0
