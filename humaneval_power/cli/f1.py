"""``hepower f1``: comparing classifiers on F1 (paired randomization test, Card et al. App. F)."""
from __future__ import annotations

import argparse
from typing import Any

from .common import ProgressBar, emit, flatten


def run(args: argparse.Namespace) -> int:
    """Run ``f1 power`` (``f1 size`` and ``f1 mde`` are run by ``cli.common.run_command``)."""
    from ..scenarios import f1

    tables = {"table_positive": args.table_positive, "table_negative": args.table_negative}
    common = {"permutations": args.permutations, "alpha": args.alpha, "n_sims": args.sims, "seed": args.seed,
              "jobs": args.jobs}
    with ProgressBar.of(args) as bar:
        table = f1.f1_power(flatten(args.n), flatten(args.p_positive), **tables, **common, progress=bar,
                            store=args.store)

    def plot(tmp: Any) -> None:
        from ..plots import plot_power

        fig = plot_power(table, "n", "p_positive", x_label="test-set size n (items)",
                         line_label="share of\npositive items", metrics=("power", "type_m")[:1 + args.type_m],
                         title=f"F1 randomization test, alpha {args.alpha:g}")
        fig.savefig(tmp, dpi=args.dpi)

    emit(table, args, ["n", "p_positive", "effect", "power", "ci_low", "ci_high", "type_s", "type_m"], plot=plot)
    return 0
