"""``hepower analyze``: a completed study's ratings -> one mixed model, F test, marginal means, adjusted contrasts."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import (StageNotes, add_json_option, add_ratings_input, add_seed, finite_float, positive,
                     where_filters)

TABLE = ["system", "versus", "estimate", "se", "df", "t", "p_value", "p_adjusted", "ci_low", "ci_high", "effect_size"]


def add_parser(sub: Any, name: str, text: str) -> None:
    """The ``analyze`` command."""
    from ..completed_study import BACKENDS, CONTRASTS, DF_METHODS, RANDOM
    from ..multiplicity import ADJUSTMENTS

    p = sub.add_parser(name, help=text, description=text)
    add_ratings_input(p)
    p.add_argument("--baseline", metavar="SYSTEM", help="system listed first and compared with (default: first, sorted)")
    p.add_argument("--random", choices=RANDOM, default="invariant",
                   help="random effects: invariant (1|worker) + (1|worker:system) + (1|item) + (1|item:system); "
                        "maximal (system|worker) + (system|item) with correlations, stepping down to no "
                        "correlations, then invariant, on a failed, non-converged or singular fit (logged; lme4 "
                        "only); slopes: Card et al.'s (1 + contrasts || worker) + (1 + contrasts || item)")
    p.add_argument("--keep-singular", action="store_true",
                   help="with --random maximal: keep the maximal fit when it is singular (lme4's own behaviour, "
                        "R's (system | worker) numbers; a variance at zero or a correlation at +-1 is then treated "
                        "as absent by the tests) instead of stepping down; a fit that did not converge still steps "
                        "down")
    p.add_argument("--df", choices=DF_METHODS, default="satterthwaite",
                   help="denominator df of the F test and the contrasts (kenward-roger: pbkrtest's method, dense in the ratings: refused above 3,000 ratings with lme4, 4,000 without R, with the estimated memory and time)")
    p.add_argument("--by", metavar="COLUMN",
                   help="analyse each value of COLUMN (e.g. dimension) separately; each adjustment covers the "
                        "contrasts within one group")
    p.add_argument("--contrasts", choices=CONTRASTS, default="pairs",
                   help="all pairs of systems, or each system against the baseline")
    p.add_argument("--adjust", choices=ADJUSTMENTS, default=None,
                   help="multiplicity adjustment over the family of contrasts (default holm; fdr: "
                        "Benjamini-Hochberg; tukey: pairs only; dunnett: multivariate t, emmeans' mvt; "
                        "not with --backend bambi)")
    p.add_argument("--backend", choices=BACKENDS, default="lme4",
                   help="lme4 (R, lmerTest), statsmodels (no R, the same REML fit and Satterthwaite df) or "
                        "bambi (Bayesian: posterior mean, SD, HDI and P(system > versus) of each contrast)")
    p.add_argument("--draws", type=positive, default=1000, metavar="N", help="bambi: posterior draws per chain")
    p.add_argument("--chains", type=positive, default=2, metavar="N", help="bambi: chains")
    p.add_argument("--level", type=finite_float, default=0.95, help="confidence level of the intervals")
    add_seed(p, " (Monte Carlo of --adjust dunnett; bambi's sampler)", default=0)
    p.add_argument("--out", metavar="FILE", help="also write the contrasts to FILE (.csv, .json or .parquet)")
    p.add_argument("--report", metavar="FILE",
                   help="also write a report for the paper: Markdown (.md) or self-contained HTML (.html)")
    add_report_options(p)
    add_json_option(p)


def add_report_options(p: Any) -> None:
    """--plot, --sims and the head-to-head options (``--family binomial``, humaneval_power.completed_study.judgments)."""
    from ..validation import TIE_POLICIES
    from .common import non_negative

    p.add_argument("--plot", metavar="FILE", help="write the means + forest plot figure (.png, .pdf or .svg)")
    p.add_argument("--sims", type=non_negative, default=100, metavar="N",
                   help="--report: studies simulated on this design for its Type-I error and sensitivity (0: skip)")
    p.add_argument("--family", choices=("gaussian", "binomial"), default="gaussian",
                   help="gaussian (ratings) or binomial (head-to-head judgments: a logistic GLMM per pair and a "
                        "Bradley-Terry ranking)")
    p.add_argument("--system-a", default="system_a", metavar="COL", help="binomial: first system's column")
    p.add_argument("--system-b", default="system_b", metavar="COL", help="binomial: second system's column")
    p.add_argument("--outcome", default="outcome", metavar="COL", help="binomial: a, b or tie (or the winner)")
    p.add_argument("--ties", choices=TIE_POLICIES, default="drop",
                   help="binomial: drop ties, or split each as half a win for each side")
    p.add_argument("--tie-values", nargs="+", default=[], metavar="ANSWER",
                   help="binomial: further outcome answers that mean a tie (always: tie, draw, equal, 0)")


def run(args: argparse.Namespace) -> int:
    """Run ``hepower analyze``."""
    from ..completed_study import analyze
    from ..io import check_output_paths

    out, report, plot = check_output_paths(*output_options(args))
    if args.family == "binomial":
        return run_judgments(args)
    if args.ties != "drop" or args.tie_values:
        from ..errors import InputError

        raise InputError("--ties and --tie-values apply to --family binomial")
    with StageNotes("hepower analyze") as progress:
        result = analyze(args.data, args.worker, args.item, args.system, args.score, where_filters(args.where),
                         args.baseline, tuple(args.scale) if args.scale else None, args.random, args.contrasts,
                         args.adjust, args.backend, args.level, args.seed, args.systems, args.duplicates,
                         progress=progress, df=args.df, by=args.by, draws=args.draws, chains=args.chains,
                         keep_singular=args.keep_singular)
        return finish(args, result, progress)


def output_options(args: argparse.Namespace) -> list[tuple[Any, tuple[str, ...], str]]:
    """(path, formats, option) of --out, --report and --plot; --sims 0 or at least 20."""
    from ..completed_study import MIN_SIMS, REPORT_FORMATS
    from ..errors import InputError
    from ..io import PLOT_FORMATS

    if args.plot and args.by:
        raise InputError("--plot draws one analysis; with --by, --report holds one figure per group")
    if 0 < args.sims < MIN_SIMS:
        raise InputError(f"--sims must be 0 (no design check) or at least {MIN_SIMS}, got {args.sims}")
    return [(args.out, (".csv", ".json", ".parquet"), "--out"), (args.report, REPORT_FORMATS, "--report"),
            (args.plot, PLOT_FORMATS, "--plot")]


def finish(args: argparse.Namespace, result: Any, progress: Any) -> int:
    """The design check (Gaussian --report), then --out, --report and --plot all or none, then stdout."""
    import json

    import pandas as pd

    from ..completed_study import check_skipped, design_check, figure_of, report_text
    from ..io import check_output_paths, json_records, table_writer, write_outputs
    from ..plots import figure_writer

    out, report, plot = check_output_paths(*output_options(args))
    check, skipped = None, ""
    if report is not None and args.family == "gaussian" and args.sims:
        skipped = check_skipped(result)
        if skipped:
            progress(skipped)
        else:
            check = design_check(result, args.sims, args.seed, progress)
    records = pd.DataFrame(result.records())
    writes = []
    if out is not None:
        writes.append((out, table_writer(records, out)))
    if report is not None:
        text = report_text(result, report, check, skipped)
        writes.append((report, lambda tmp: tmp.write_text(text, encoding="utf-8")))
    if plot is not None:
        writes.append((plot, figure_writer(figure_of(result), plot)))
    write_outputs(writes)
    for path, _ in writes:
        print(f"wrote {path}", file=sys.stderr)
    print(json.dumps(json_records(records)) if args.json else result)
    return 0


def run_judgments(args: argparse.Namespace) -> int:
    """``--family binomial``: refuse the ratings-only options, then analyse the judgments."""
    from ..completed_study import analyze_judgments
    from ..errors import InputError

    gaussian_only = {"--score": args.score, "--system": args.system, "--scale": args.scale,
                     "--contrasts baseline": args.contrasts == "baseline", "--random": args.random != "invariant",
                     "--keep-singular": args.keep_singular,
                     f"--backend {args.backend}": args.backend != "lme4", "--duplicates": args.duplicates != "error",
                     f"--df {args.df}": args.df != "satterthwaite", "--by": args.by}
    given = [k for k, v in gaussian_only.items() if v]
    if given:
        raise InputError(f"{', '.join(given)} apply to ratings (--family gaussian); judgments are analysed with "
                         "glmer (lme4), all pairs, with --system-a/-b and --outcome")
    with StageNotes("hepower analyze") as progress:
        result = analyze_judgments(args.data, args.worker, args.item, args.system_a, args.system_b, args.outcome,
                                   where_filters(args.where), args.baseline, args.systems, args.ties,
                                   args.tie_values, args.adjust or "holm", args.level, progress=progress)
        return finish(args, result, progress)
