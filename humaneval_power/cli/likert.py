"""``hepower likert``: power and sample size of Likert evaluations (crossed worker x item LMM)."""
from __future__ import annotations

import argparse
from typing import Any

from ..errors import InputError
from ..params import PRESETS, SD_NAMES, LikertParams, get_preset, load_params
from ..scenarios.likert import METHODS, likert_power, likert_sample_size
from ..significance.coef_test import COEFFICIENT_TESTS
from .common import (RANGE_HELP, ProgressBar, add_alpha, add_checkpoint, add_plot_options, add_run_options,
                     add_target_power, finite_float, flatten, number_list, print_json, print_table, positive,
                     search_note, simulated, stage_note)

EFFECT_HELP = ("difference in mean rating, system B - system A, on the parameters' scale "
               "(0-1 for the presets; the rescaled scale of a fitted parameter file)")


def add_parser(sub: Any, name: str, text: str) -> None:
    """The ``likert`` group and its commands."""
    likert = sub.add_parser(name, help=text, description=text)
    lsub = likert.add_subparsers(dest="action", metavar="COMMAND", parser_class=type(likert))

    power = lsub.add_parser("power", help="power over workers x items x effect",
                            description="Power, Type-S and Type-M over the grid workers x items x effect. "
                                        f"Grid options take {RANGE_HELP}.")
    power.add_argument("--workers", type=number_list(positive, "--workers"), nargs="+", default=[[3]],
                       help="workers, each rating every item under both systems")
    power.add_argument("--items", type=number_list(positive, "--items"), nargs="+", default=[[100]],
                       help="items rated by every worker")
    power.add_argument("--effect", type=number_list(finite_float, "--effect"), nargs="+", required=True,
                       help=EFFECT_HELP)
    _add_params_options(power)
    _add_method_options(power)
    add_run_options(power, sims=1000)
    add_target_power(power, " (for the summary of smallest designs)")
    power.add_argument("--out", metavar="FILE", help="also write the table to FILE (.csv, .json or .parquet)")
    add_plot_options(power, "power curves like Card et al. Fig. 6 (a panel per workers)")
    add_checkpoint(power)

    size = lsub.add_parser("size", help="smallest number of items (or workers) reaching a target power")
    size.add_argument("--workers", type=positive, help="workers (held fixed when varying items)")
    size.add_argument("--items", type=positive, help="items (held fixed when varying workers)")
    size.add_argument("--effect", type=finite_float, required=True, help=EFFECT_HELP)
    add_target_power(size)
    size.add_argument("--vary", choices=("items", "workers"), default="items", help="which design size to solve for")
    _add_params_options(size)
    _add_method_options(size)
    add_run_options(size, sims=2000)


def _add_params_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("parameters (default: --preset card2020-high)")
    g.add_argument("--preset", choices=sorted(PRESETS), help="built-in parameter set (Card et al. 2020, Table 16)")
    g.add_argument("--params", metavar="FILE", help="parameter file (JSON, from `hepower fit` or hand-written)")
    g.add_argument("--comparison", metavar="SYSTEM", help="which comparison of a parameter file with several")
    g.add_argument("--intercept", type=finite_float, help="beta0, the mean rating (default 0.5 with typed SDs)")
    for name in SD_NAMES:
        what = name.removeprefix("sd_").replace("_", " ")
        extra = " (SD of the B - A difference: the mean-difference convention)" if "slope" in name else ""
        g.add_argument("--" + name.replace("_", "-"), dest=name, type=finite_float, metavar="SD",
                       help=f"SD of the {what} on the rating scale{extra}")


def _add_method_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--method", choices=METHODS, default="fast",
                   help="analytic (instant), fast (exact simulation), lme4 or statsmodels (full refits)")
    p.add_argument("--test", choices=COEFFICIENT_TESTS, default="satterthwaite",
                   help="test of the system contrast: satterthwaite (REML t), card2020 (ML, t > 1.96), z")
    add_alpha(p)


def params_from_args(args: argparse.Namespace) -> LikertParams:
    """The parameters named by --preset / --params / typed SDs (typed SDs override)."""
    if args.preset and args.params:
        raise InputError("give --preset or --params, not both")
    overrides = {k: getattr(args, k) for k in SD_NAMES + ("intercept",) if getattr(args, k) is not None}
    if args.params:
        base = load_params(args.params, args.comparison)
    elif args.preset:
        base = get_preset(args.preset)
    elif all(k in overrides for k in SD_NAMES):
        return LikertParams(intercept=overrides.pop("intercept", 0.5), **overrides, name="command-line")
    elif overrides:
        missing = [k for k in SD_NAMES if k not in overrides]
        raise InputError(f"give all five SDs or a --preset/--params to start from (missing {', '.join(missing)})")
    else:
        base = get_preset("card2020-high")
    return base.with_sds(**overrides)


def run(args: argparse.Namespace) -> int:
    """Run ``likert power`` or ``likert size``."""
    return _power(args) if args.action == "power" else _size(args)


def _power(args: argparse.Namespace) -> int:
    from ..io import table_writer

    params = params_from_args(args)
    if not 0 < args.target_power < 1:
        raise InputError(f"--target-power must be in (0, 1), got {args.target_power}")
    with ProgressBar() as bar:
        table = likert_power(
            params, flatten(args.workers), flatten(args.items), flatten(args.effect),
            method=args.method, test=args.test, alpha=args.alpha, n_sims=args.sims,
            seed=args.seed, jobs=args.jobs, progress=bar, checkpoint=args.checkpoint,
        )

    def plot(tmp: Any) -> None:
        from ..plots import plot_likert_power

        plot_likert_power(table, scale=params.scale, target=args.target_power, type_m=args.type_m,
                          title=f"{params.name}: {args.method}, {args.test} test").savefig(tmp, dpi=args.dpi)

    args.outputs.write(out=args.out and table_writer(table, args.out), plot=plot)
    if args.json:
        print_json(table)
        return 0
    runs = "exact (no simulation)" if args.method == "analytic" else f"{args.sims} simulations per cell, seed {args.seed}"
    print(f"Power for {params.name} ({args.method}, {args.test} test, alpha {args.alpha:g}, {runs}):")
    print_table(table, ["workers", "items", "effect", "power", "ci_low", "ci_high", "type_s", "type_m",
                        "df", "n_failed", "n_singular", "n_warnings"])
    print(f"\nSmallest designs in this sweep reaching {args.target_power:g} power:")
    for r in _smallest_designs(table, args.target_power):
        what = f"{r['items']} items (power {r['power']:.3f})" if r["items"] is not None else f"none (best {r['power']:.3f})"
        print(f"  {r['workers']} workers, effect {r['effect']:g}: {what}")
    return 0


def _smallest_designs(table: Any, target: float) -> list[dict[str, Any]]:
    """Per (workers, effect): the fewest items in the sweep whose power reaches the target."""
    rows = []
    for (w, e), g in table.groupby(["workers", "effect"], sort=True):
        ok = g[g.power >= target].sort_values("items")
        first = ok.iloc[0] if len(ok) else None
        rows.append({"workers": w, "effect": e, "items": int(first["items"]) if first is not None else None,
                     "power": float(first["power"]) if first is not None else float(g.power.max())})
    return rows


def _size(args: argparse.Namespace) -> int:
    import pandas as pd

    with stage_note(search_note(f"number of {args.vary}", args.target_power,
                                 simulated(args.sims, args.method, args.method != "analytic"))):
        result = likert_sample_size(
            params_from_args(args), args.effect, target_power=args.target_power, workers=args.workers,
            items=args.items, vary=args.vary, method=args.method, test=args.test, alpha=args.alpha,
            n_sims=args.sims, seed=args.seed, jobs=args.jobs,
        )
    if args.json:
        print_json(pd.DataFrame([result.record()]))
    else:
        print(result)
    return 0
