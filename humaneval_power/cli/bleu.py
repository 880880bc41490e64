"""``hepower bleu``: BLEU/chrF randomization-test power, swap-effect estimates and paired tests."""
from __future__ import annotations

import argparse
from typing import Any

from .common import ProgressBar, emit, emit_solve, flatten, stage_note


def run(args: argparse.Namespace) -> int:
    """Run a ``bleu`` command."""
    import pandas as pd

    from ..scenarios import bleu as b

    if args.action == "power":
        with ProgressBar.of(args) as bar:
            table = b.bleu_power(flatten(args.n), flatten(args.delta), flatten(args.p0), flatten(args.b0),
                                 args.method, args.permutations, args.alpha, args.sims, args.seed,
                                 args.jobs, bar, store=args.store)

        def plot(tmp: Any) -> None:
            from ..plots import plot_bleu_power

            title = f"BLEU randomization test ({args.method}), alpha {args.alpha:g}"
            plot_bleu_power(table, type_m=args.type_m, title=title).savefig(tmp, dpi=args.dpi)

        emit(table, args, ["n", "delta", "p0", "b0", "method", "power", "ci_low", "ci_high", "type_s", "type_m"],
             plot=plot)
        return 0
    if args.action in ("mde", "size"):
        common = {"target_power": args.target_power, "method": args.method, "permutations": args.permutations,
                  "alpha": args.alpha, "n_sims": args.sims, "seed": args.seed, "jobs": args.jobs}
        with ProgressBar.of(args) as bar:
            result = (b.bleu_mde(args.n, args.p0, args.b0, **common, progress=bar) if args.action == "mde"
                      else b.bleu_sample_size(args.delta, args.p0, args.b0, **common, progress=bar))
        emit_solve(result, args)
        return 0
    if args.action == "estimate":
        note = f"sentence statistics and swap effects ({args.metric}), {args.n_boot:,} bootstrap resamples ..."
        with stage_note(note):
            table = pd.DataFrame([b.bleu_estimate(args.ref, args.sys_a, args.sys_b, args.n_boot, args.metric,
                                                  args.seed)])
        emit(table, args, list(table.columns))
        return 0
    with ProgressBar.of(args) as bar:
        table = b.bleu_test(args.ref, args.baseline, args.systems, args.paired_bs, args.trials, args.adjust,
                            args.bs_rule, args.metric, args.seed, bar)
    emit(table, args, ["system", "baseline", "metric", "score", "baseline_score", "delta", "delta_ci_low",
                       "delta_ci_high", "p_value", "p_adjusted", "adjust", "method"])
    return 0
