"""``hepower bleu``: BLEU/chrF randomization-test power, swap-effect estimates and paired tests."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..multiplicity import SEPARATE
from ..errors import InputError
from ..metrics import METRICS
from ..scenarios.bleu import METHODS
from ..significance.paired import BOOTSTRAP_RULES
from .common import (ProgressBar, RANGE_HELP, add_alpha, add_checkpoint, add_old_spelling, add_out, add_plot_options,
                     add_run_options, add_seed, add_target_power, emit, emit_solve, finite_float, flatten,
                     number_list, positive, stage_note)

METHOD_HELP = "p-values by randomization (Monte Carlo permutations) or the saddlepoint / normal approximation"
P0_HELP = "share of sentences whose swap changes nothing (Card et al. P0)"
B0_HELP = "Laplace scale of the swap effects times n (Card et al. b0, BLEU points)"
DELTA_HELP = "expected difference B - A in BLEU points"


REF_HELP = ("reference, one segment per line; give several (--ref A B, or --ref repeated) for "
            "multi-reference BLEU/chrF (sacrebleu's statistics)")


def add_parser(sub: Any, name: str, text: str) -> None:
    """The ``bleu`` group and its commands."""
    bleu = sub.add_parser(name, help=text, description=text)
    bsub = bleu.add_subparsers(dest="action", metavar="COMMAND", parser_class=type(bleu))
    bpow = bsub.add_parser("power", help="power, Type-S, Type-M over n x delta x p0 x b0",
                           description=f"Randomization-test power. Grid options take {RANGE_HELP}.")
    bpow.add_argument("--n", type=number_list(positive, "--n"), nargs="+", required=True, help="test-set sentences")
    bpow.add_argument("--delta", type=number_list(finite_float, "--delta"), nargs="+", required=True, help=DELTA_HELP)
    bpow.add_argument("--p0", type=number_list(finite_float, "--p0"), nargs="+", required=True, help=P0_HELP)
    bpow.add_argument("--b0", type=number_list(finite_float, "--b0"), nargs="+", required=True, help=B0_HELP)
    bpow.add_argument("--method", choices=METHODS, default="randomization", help=METHOD_HELP)
    bpow.add_argument("--approx", dest="method", nargs="?", const="saddlepoint", choices=METHODS[1:],
                      help=argparse.SUPPRESS)  # the old spelling of --method saddlepoint|normal
    add_checkpoint(bpow)
    add_out(bpow)
    add_plot_options(bpow, "power curves against n or delta, whichever has more values (the other: a line each)")
    bmde = bsub.add_parser("mde", help="smallest BLEU difference reaching the target power")
    bmde.add_argument("--n", type=positive, required=True, help="test-set sentences")
    bsize = bsub.add_parser("size", help="test-set size reaching the target power")
    bsize.add_argument("--delta", type=finite_float, required=True, help=DELTA_HELP)
    for q in (bmde, bsize):
        q.add_argument("--p0", type=finite_float, required=True, help=P0_HELP)
        q.add_argument("--b0", type=finite_float, required=True, help=B0_HELP)
        add_target_power(q)
        q.add_argument("--method", choices=METHODS, default="saddlepoint", help=METHOD_HELP)
    for q in (bpow, bmde, bsize):
        q.add_argument("--permutations", type=positive, default=10_000, metavar="N",
                       help="randomization trials per simulated study (--method randomization)")
        add_alpha(q)
        add_run_options(q, sims=1000 if q is bpow else 2000)

    best = bsub.add_parser("estimate", help="swap effects of two systems' outputs -> P0, b0 (with intervals)")
    best.add_argument("--ref", required=True, action="extend", nargs="+", metavar="FILE", help=REF_HELP)
    best.add_argument("--sys-a", required=True, metavar="FILE", help="system A's output, one segment per line")
    best.add_argument("--sys-b", required=True, metavar="FILE", help="system B's output, one segment per line")
    best.add_argument("--n-boot", type=positive, default=1000, metavar="N",
                      help="bootstrap resamples for the intervals")
    add_old_spelling(best, "--nboot", "n_boot", positive)
    btest = bsub.add_parser("test", help="paired tests of systems against a baseline")
    btest.add_argument("--ref", required=True, action="extend", nargs="+", metavar="FILE", help=REF_HELP)
    btest.add_argument("--baseline", required=True, metavar="FILE", help="the baseline system's output")
    btest.add_argument("--systems", required=True, nargs="+", metavar="FILE", help="outputs compared with the baseline")
    kind = btest.add_mutually_exclusive_group()
    kind.add_argument("--paired-ar", action="store_true", help="approximate randomization (the default test)")
    kind.add_argument("--paired-bs", action="store_true", help="paired bootstrap")
    btest.add_argument("--trials", type=positive, metavar="N",
                       help="AR trials (default 10,000) or bootstrap resamples (default 1,000)")
    btest.add_argument("--adjust", choices=SEPARATE, default="holm",
                       help="p_adjusted over the systems compared (fdr: Benjamini-Hochberg)")
    btest.add_argument("--bs-rule", choices=BOOTSTRAP_RULES, default="sacrebleu",
                       help="bootstrap p-value: sacrebleu's or Berg-Kirkpatrick et al.'s (delta > 2x observed)")
    for q in (best, btest):
        q.add_argument("--metric", choices=METRICS, default="bleu", help="corpus metric")
        add_seed(q, "")
        q.add_argument("--json", action="store_true", help="print one JSON array of records, nothing else")


def _system_name(path: str) -> str:
    """``system.HW-TSC.txt`` -> ``HW-TSC``."""
    return Path(path).name.removeprefix("system.").removesuffix(".txt")


def run(args: argparse.Namespace) -> int:
    """Run a ``bleu`` command."""
    import pandas as pd

    from ..scenarios import bleu as b

    if args.action == "power":
        with ProgressBar() as bar:
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
        common = dict(target_power=args.target_power, method=args.method, permutations=args.permutations,
                      alpha=args.alpha, n_sims=args.sims, seed=args.seed, jobs=args.jobs)
        with ProgressBar() as bar:
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
    with ProgressBar(unit="trial") as bar:
        rows = compare_with_baseline(stats_of(args.baseline), systems,
                                     "bootstrap" if args.paired_bs else "randomization", args.trials, args.seed,
                                     args.bs_rule, bar, args.adjust)
    rows = [{**r, "baseline": _system_name(args.baseline), "metric": args.metric, "references": len(refs)}
            for r in rows]
    table = pd.DataFrame(rows)
    emit(table, args, ["system", "baseline", "metric", "score", "baseline_score", "delta", "delta_ci_low",
                       "delta_ci_high", "p_value", "p_adjusted", "adjust", "method"])
    return 0
