"""``hepower bleu``: BLEU/chrF randomization-test power, swap-effect estimates and paired tests."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import InputError
from .common import ProgressBar, emit, emit_solve, flatten, stage_note


def _system_name(path: str) -> str:
    """``system.HW-TSC.txt`` -> ``HW-TSC``."""
    return Path(path).name.removeprefix("system.").removesuffix(".txt")


def run(args: argparse.Namespace) -> int:
    """Run a ``bleu`` command."""
    import pandas as pd

    from ..scenarios import bleu as b

    if args.action == "power":
        with ProgressBar(sink=args.progress) as bar:
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
        with ProgressBar(sink=args.progress) as bar:
            result = (b.bleu_mde(args.n, args.p0, args.b0, **common, progress=bar) if args.action == "mde"
                      else b.bleu_sample_size(args.delta, args.p0, args.b0, **common, progress=bar))
        emit_solve(result, args)
        return 0
    from ..fitting.swap_effects import estimate_swap_parameters
    from ..metrics import corpus_stats, read_lines
    from ..significance.paired import compare_with_baseline

    refs = [read_lines(path, "reference") for path in args.ref]

    def stats_of(path: str) -> Any:
        return corpus_stats(read_lines(path, "system output"), refs, args.metric)

    if args.action == "estimate":
        note = f"sentence statistics and swap effects ({args.metric}), {args.n_boot:,} bootstrap resamples ..."
        with stage_note(note):
            swap = estimate_swap_parameters(stats_of(args.sys_a), stats_of(args.sys_b), args.n_boot, seed=args.seed)
        rec = {"system_a": _system_name(args.sys_a), "system_b": _system_name(args.sys_b), "references": len(refs),
               **swap}
        table = pd.DataFrame([rec])
        emit(table, args, list(table.columns))
        return 0
    names = [_system_name(path) for path in args.systems]
    if len(set(names)) < len(names):
        raise InputError(f"--systems names a system twice: {', '.join(sorted(n for n in set(names) if names.count(n) > 1))}")
    systems = {name: stats_of(path) for name, path in zip(names, args.systems)}
    with ProgressBar(unit="trial", sink=args.progress) as bar:
        rows = compare_with_baseline(stats_of(args.baseline), systems,
                                     "bootstrap" if args.paired_bs else "randomization", args.trials, args.seed,
                                     args.bs_rule, bar, args.adjust)
    rows = [{**r, "baseline": _system_name(args.baseline), "metric": args.metric, "references": len(refs)}
            for r in rows]
    table = pd.DataFrame(rows)
    emit(table, args, ["system", "baseline", "metric", "score", "baseline_score", "delta", "delta_ci_low",
                       "delta_ci_high", "p_value", "p_adjusted", "adjust", "method"])
    return 0
