"""``hepower accuracy``: comparing classifiers on accuracy (McNemar; unpaired proportions)."""
from __future__ import annotations

import argparse
from typing import Any

from ..errors import InputError
from .common import ProgressBar, emit, emit_solve, flatten, search_note, stage_note


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
    with ProgressBar.of(args) as bar:
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
