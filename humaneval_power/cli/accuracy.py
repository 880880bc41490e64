"""``hepower accuracy``: comparing classifiers on accuracy (McNemar; unpaired proportions)."""
from __future__ import annotations

import argparse
from typing import Any

from ..errors import InputError
from ..scenarios.accuracy import METHODS
from .common import (ProgressBar, RANGE_HELP, add_alpha, add_json_option, add_out, add_plot_options, add_seed,
                     add_target_power, emit, emit_solve, finite_float, flatten, number_list, positive, search_note,
                     stage_note)

DELTA_HELP = "accuracy difference B - A, as a proportion (0.02, not 2)"
EXACT_METHODS = [m for m in METHODS if m != "simulate"]
METHOD_HELP = "McNemar test: exact (conditional), midp, unconditional (Suissa-Shuster), normal"


def add_parser(sub: Any, name: str, text: str) -> None:
    """The ``accuracy`` group and its commands."""
    acc = sub.add_parser(name, help=text, description=text)
    asub = acc.add_subparsers(dest="action", metavar="COMMAND", parser_class=type(acc))
    apow = asub.add_parser("power", help="McNemar power over n x delta x agreement",
                           description=f"Power, Type-S and Type-M. Grid options take {RANGE_HELP}.")
    apow.add_argument("--n", type=number_list(positive, "--n"), nargs="+", required=True, help="test-set size")
    apow.add_argument("--delta", type=number_list(finite_float, "--delta"), nargs="+", help=DELTA_HELP)
    apow.add_argument("--agreement", type=number_list(finite_float, "--agreement"), nargs="+",
                      help="share of items where both models are right or both wrong")
    apow.add_argument("--table", type=finite_float, nargs=4, metavar=("BOTH_RIGHT", "A_ONLY", "B_ONLY", "BOTH_WRONG"),
                      help="2x2 table of probabilities instead of --delta/--agreement")
    apow.add_argument("--method", choices=METHODS, default="exact", help=METHOD_HELP + ", or simulate")
    apow.add_argument("--sims", type=positive, default=10_000, metavar="N",
                      help="simulated test sets per cell (--method simulate)")
    add_seed(apow, " (--method simulate)")
    add_out(apow)
    add_plot_options(apow, "power, Type-M and Type-S against delta (Card et al. Figs. 3, 7, 8)", type_m=False)

    asize = asub.add_parser("size", help="test-set size for a target power")
    asize.add_argument("--delta", type=finite_float, required=True, help=DELTA_HELP)
    asize.add_argument("--agreement", type=finite_float, required=True,
                       help="share of items where both models are right or both wrong")
    add_target_power(asize)
    asize.add_argument("--method", choices=EXACT_METHODS, default="normal", help=METHOD_HELP)

    amde = asub.add_parser("mde", help="minimum detectable accuracy gain under a historical prior (or none)")
    amde.add_argument("--n", type=positive, required=True, help="test-set size")
    amde.add_argument("--baseline", type=finite_float, required=True, help="state-of-the-art accuracy (proportion)")
    amde.add_argument("--prior", choices=("glue", "squad2", "lachenbruch"), default="glue",
                      help="overlap regression (Card et al. Tables 5-6) or Lachenbruch's no-prior bounds")
    add_target_power(amde)
    amde.add_argument("--method", choices=EXACT_METHODS, default="normal", help=METHOD_HELP)

    aest = asub.add_parser("estimate", help="delta and agreement of two models from per-item correctness")
    aest.add_argument("predictions", metavar="PREDICTIONS", help="CSV/Parquet: item, model, correct (0/1)")
    aest.add_argument("--model-a", required=True, help="name of model A in the model column")
    aest.add_argument("--model-b", required=True, help="name of model B in the model column")
    for col in ("item", "model", "correct"):
        aest.add_argument(f"--{col}-column", dest=f"{col}_column", default=col, metavar="COL",
                          help=f"column holding the {col}")

    atab = asub.add_parser("table", help="Card et al. Table 2 / Table 9: MDE per benchmark task")
    atab.add_argument("--prior", choices=("glue", "squad2"), default="glue", help="overlap regression of the prior")
    atab.add_argument("--method", choices=EXACT_METHODS, nargs="+", default=["normal"],
                      help="one or more methods, one MDE column each: " + METHOD_HELP)
    add_target_power(atab)

    aunp = asub.add_parser("unpaired", help="two independent proportions (power.prop.test): solve for the missing one")
    solve = "; leave out the one of --n, --p2, --power to solve for"
    aunp.add_argument("--n", type=finite_float, help="items per model (a count)" + solve)
    aunp.add_argument("--p1", type=finite_float, required=True, help="baseline accuracy (a proportion)")
    aunp.add_argument("--p2", type=finite_float, help="new model's accuracy (a proportion)" + solve)
    aunp.add_argument("--power", type=finite_float, help="power to reach (0-1)" + solve)
    for q in (apow, asize, amde, atab, aunp):
        add_alpha(q)
    for q in (apow, asize, amde, aest, atab, aunp):
        add_json_option(q)


def run(args: argparse.Namespace) -> int:
    """Run an ``accuracy`` command."""
    import pandas as pd

    from ..scenarios import accuracy as a

    if args.action == "power":
        return _power(args)
    if args.action == "estimate":
        rec = a.estimate_accuracy(args.predictions, args.model_a, args.model_b, args.item_column,
                                  args.model_column, args.correct_column)
        table = pd.DataFrame([rec])
    elif args.action == "size":
        with stage_note(search_note("test-set size", args.target_power)):
            result = a.mcnemar_sample_size(args.delta, args.agreement, args.target_power, args.method, args.alpha)
        emit_solve(result, args)
        return 0
    elif args.action == "mde":
        with stage_note(search_note("gain", args.target_power)):
            result = a.accuracy_mde(args.n, args.baseline, args.prior, args.target_power, args.method, args.alpha)
        emit_solve(result, args)
        return 0
    elif args.action == "unpaired":
        table = pd.DataFrame([a.solve_prop_test(args.n, args.p1, args.p2, args.power, args.alpha)])
    else:
        methods = list(dict.fromkeys(args.method))
        with stage_note(f"searching the MDE of every {args.prior} task with {', '.join(methods)} (the unconditional "
                        "test's critical values take seconds) ..."):
            table = pd.DataFrame(a.mde_table(args.prior, methods, args.target_power, args.alpha))
        if not args.json:
            _print_mde_table(table, args.prior)
            return 0
    emit(table, args, list(table.columns))
    return 0


def _power(args: argparse.Namespace) -> int:
    from ..scenarios import accuracy as a

    if (args.table is None) == (args.delta is None or args.agreement is None) or (
            args.table is not None and (args.delta or args.agreement)):
        raise InputError("give --delta and --agreement, or --table (four probabilities)")
    delta, agreement = (a.from_table(*args.table) if args.table else (flatten(args.delta), flatten(args.agreement)))
    with ProgressBar() as bar:
        table = a.mcnemar_power(flatten(args.n), delta, agreement, args.method, args.alpha, args.sims, args.seed,
                                progress=bar)

    def plot(tmp: Any) -> None:
        from ..plots import plot_accuracy_power

        title = f"McNemar, {args.method} method, alpha {args.alpha:g}"
        plot_accuracy_power(table, title=title).savefig(tmp, dpi=args.dpi)

    emit(table, args, ["n", "delta", "agreement", "method", "power", "ci_low", "ci_high", "type_s", "type_m"],
         plot=plot)
    return 0


def _print_mde_table(table: Any, prior: str) -> None:
    """Table 9 layout: one row per task, MDEs in percentage points."""
    import pandas as pd

    wide = table.pivot_table(index="task", columns="method", values="mde", sort=False, dropna=False)
    first = table.drop_duplicates("task").set_index("task")

    def pct(v: Any) -> str:
        return "n.a." if v is None or v != v else f"+{100 * v:.2f}"

    rows = []
    for task in first.index:
        r = first.loc[task]
        row = {"task": task, "n": int(r["n"]), "SOTA %": f"{100 * r['sota']:.3g}"}
        row.update({f"MDE {m}": pct(wide.loc[task, m]) for m in wide.columns})
        row["MDE unpaired"] = pct(r["mde_unpaired"])
        row["Lachenbruch mid (low, high)"] = (f"{pct(r['mde_lachenbruch'])} ({pct(r['mde_lachenbruch_low'])}, "
                                             f"{pct(r['mde_lachenbruch_high'])})")
        row["expected gain"] = f"{100 * r['expected_gain']:+.2f}"
        rows.append(row)
    print(f"Minimum detectable effects at 80% power, {prior} prior (percentage points):")
    print(pd.DataFrame(rows).to_string(index=False))
    print("n.a.: no gain reaches the target power under this prior (its agreement shrinks as the gain grows).")
