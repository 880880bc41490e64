"""``hepower analyze``: a completed study's ratings -> one mixed model, F test, marginal means, adjusted contrasts
(``--family ordinal``: a cumulative-link mixed model; ``--family binomial``: head-to-head judgments)."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import StageNotes, where_filters


def run(args: argparse.Namespace) -> int:
    """Run ``hepower analyze``."""
    from ..completed_study import analyze
    from ..io import check_output_paths

    check_output_paths(*output_options(args))  # refused before any fit
    if args.family == "binomial":
        return run_judgments(args)
    judgment_only = [flag for flag, value in judgment_options(args).items() if value]
    if judgment_only:
        from ..errors import InputError

        raise InputError(f"{', '.join(judgment_only)}: only for --family binomial (head-to-head judgments); ratings "
                         "name their columns with --worker, --item, --system and --score, the baseline with --baseline")
    with StageNotes("hepower analyze") as progress:
        result = analyze(args.data, args.worker, args.item, args.system, args.score, where_filters(args.where),
                         args.baseline, tuple(args.scale) if args.scale else None, args.random, args.contrasts,
                         args.adjust, args.backend, args.level, args.seed, args.systems, args.duplicates,
                         progress=progress, df=args.df, by=args.by, draws=args.draws, chains=args.chains,
                         keep_singular=args.keep_singular, agreement_metric=args.agreement_metric,
                         reliability_target=args.reliability_target, family=args.family, link=args.link,
                         bootstrap=args.bootstrap)
        return finish(args, result, progress)


def judgment_options(args: argparse.Namespace) -> dict[str, bool]:
    """Whether each option of head-to-head judgments was given (``--family binomial`` only)."""
    from ..interface import api_defaults

    columns = api_defaults("analyze_judgments")
    given = {f"--{name.replace('_', '-')}": getattr(args, name) != columns[name]
             for name in ("system_a", "system_b", "outcome")}
    return {**given, "--ties": args.ties != "drop", "--tie-values": bool(args.tie_values)}


def output_options(args: argparse.Namespace) -> list[tuple[Any, tuple[str, ...], str]]:
    """(path, formats, option) of --out, --report, --plot and --latex; --sims 0 or at least 20; the paper outputs
    only where they exist (refused before any fit)."""
    from ..completed_study import MIN_SIMS, REPORT_FORMATS
    from ..errors import InputError
    from ..io import PLOT_FORMATS

    if args.plot and args.by:
        raise InputError("--plot draws one analysis; with --by, --report holds one figure per group")
    if args.sims is not None:
        if 0 < args.sims < MIN_SIMS:
            raise InputError(f"--sims must be 0 (no design check) or at least {MIN_SIMS}, got {args.sims}")
        if args.family != "gaussian" or not args.report:
            raise InputError("--sims sets the design check of the --report of --family gaussian (the simulated Type-I "
                             "error and sensitivity of the linear mixed model's test)")
    if args.latex_digits is not None and not args.latex:
        raise InputError("--latex-digits sets the decimals of the --latex tables: give --latex FILE")
    if args.family != "gaussian" and (args.latex or args.paper_records):
        raise InputError("--latex and --paper-records apply to ratings (--family gaussian)")
    if args.latex and args.backend == "bambi":
        raise InputError("--latex writes the frequentist tables; it does not apply to --backend bambi")
    if args.latex_digits is not None and not 0 <= args.latex_digits <= 10:
        raise InputError(f"--latex-digits must be from 0 to 10, got {args.latex_digits}")
    return [(args.out, (".csv", ".json", ".parquet"), "--out"), (args.report, REPORT_FORMATS, "--report"),
            (args.plot, PLOT_FORMATS, "--plot"), (args.latex, (".tex",), "--latex")]


def finish(args: argparse.Namespace, result: Any, progress: Any) -> int:
    """The design check (Gaussian --report), then --out, --report, --plot and --latex all or none, then stdout."""
    import json

    import pandas as pd

    from ..completed_study import (
        check_skipped,
        design_check,
        figure_of,
        latex_text,
        report_text,
    )
    from ..io import check_output_paths, json_records, table_writer, write_outputs
    from ..plots import figure_writer

    out, report, plot, latex = check_output_paths(*output_options(args))
    check, skipped = None, ""
    if report is not None and args.family == "gaussian" and args.sims != 0:
        skipped = check_skipped(result)
        if skipped:
            progress(skipped)
        else:  # --sims not given: the check's own number of studies
            check = design_check(result, seed=args.seed, progress=progress,
                                 **({} if args.sims is None else {"n_sims": args.sims}))
    records = pd.DataFrame(result.records(paper=True) if getattr(args, "paper_records", False) else result.records())
    writes = []
    if out is not None:
        writes.append((out, table_writer(records, out)))
    if report is not None:
        text = report_text(result, report, check, skipped)
        writes.append((report, lambda tmp: tmp.write_text(text, encoding="utf-8")))
    if plot is not None:
        writes.append((plot, figure_writer(figure_of(result), plot)))
    if latex is not None:
        tex = latex_text(result, **({} if args.latex_digits is None else {"digits": args.latex_digits}))
        writes.append((latex, lambda tmp: tmp.write_text(tex, encoding="utf-8")))
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
                     f"--backend {args.backend}": args.backend not in (None, "lme4"), "--link": args.link,
                     "--bootstrap": args.bootstrap is not None, "--duplicates": args.duplicates != "error",
                     "--draws": args.draws is not None, "--chains": args.chains is not None,
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
