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
    from ..analyze import ADJUSTMENTS, BACKENDS, CONTRASTS, DF_METHODS, RANDOM

    p = sub.add_parser(name, help=text, description=text)
    add_ratings_input(p)
    p.add_argument("--baseline", metavar="SYSTEM", help="system listed first and compared with (default: first, sorted)")
    p.add_argument("--random", choices=RANDOM, default="invariant",
                   help="random effects: invariant (1|worker) + (1|worker:system) + (1|item) + (1|item:system); "
                        "maximal (system|worker) + (system|item) with correlations, stepping down to no "
                        "correlations, then invariant, on a failed, non-converged or singular fit (logged; lme4 "
                        "only); slopes: Card et al.'s (1 + contrasts || worker) + (1 + contrasts || item)")
    p.add_argument("--df", choices=DF_METHODS, default="satterthwaite",
                   help="denominator df of the F test and the contrasts (kenward-roger: pbkrtest's method; without R up to 4,000 ratings)")
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
    p.add_argument("--report", metavar="FILE", help="also write a Markdown report for the paper (.md)")
    add_json_option(p)


def run(args: argparse.Namespace) -> int:
    """Run ``hepower analyze``."""
    import json

    import pandas as pd

    from ..analyze import analyze
    from ..io import check_output_paths, json_records, table_writer, write_outputs

    out, report = check_output_paths((args.out, (".csv", ".json", ".parquet"), "--out"),
                                     (args.report, (".md",), "--report"))
    with StageNotes("hepower analyze") as progress:
        result = analyze(args.data, args.worker, args.item, args.system, args.score, where_filters(args.where),
                         args.baseline, tuple(args.scale) if args.scale else None, args.random, args.contrasts,
                         args.adjust, args.backend, args.level, args.seed, args.systems, args.duplicates,
                         progress=progress, df=args.df, by=args.by, draws=args.draws, chains=args.chains)
    records = pd.DataFrame(result.records())
    writes = []
    if out is not None:
        writes.append((out, table_writer(records, out)))
    if report is not None:
        text = result.markdown()
        writes.append((report, lambda tmp: tmp.write_text(text, encoding="utf-8")))
    write_outputs(writes)
    for path, _ in writes:
        print(f"wrote {path}", file=sys.stderr)
    print(json.dumps(json_records(records)) if args.json else result)
    return 0
