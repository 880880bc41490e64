"""``hepower fit``: pilot data (ratings or head-to-head judgments) -> mixed model -> parameter file."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import InputError
from ..fitting import registry
from ..fitting.clmm import LINKS
from ..interface.values import positive
from ..validation import TIE_POLICIES
from .common import StageNotes, add_ratings_input, add_seed, print_json, where_filters


def add_parser(sub: Any, name: str, text: str) -> None:
    """The ``fit`` command."""
    fit = sub.add_parser(name, help=text, description=text)
    add_ratings_input(fit, "rating or judgment")
    fit.add_argument("--system-a", default="system_a", metavar="COL", help="binomial: first system's column")
    fit.add_argument("--system-b", default="system_b", metavar="COL", help="binomial: second system's column")
    fit.add_argument("--outcome", default="outcome", metavar="COL", help="binomial: a, b or tie (or the winner)")
    fit.add_argument("--baseline", metavar="SYSTEM", help="system the others are compared with (default: first)")
    fit.add_argument("--family", choices=registry.FAMILIES, default="gaussian",
                     help="gaussian (ratings, LMM), binomial (judgments, logistic GLMM) or ordinal (integer "
                          "ratings, cumulative-link mixed model; --scale LOWEST HIGHEST names the categories)")
    fit.add_argument("--link", choices=LINKS, help="ordinal: the cumulative link (default logit)")
    fit.add_argument("--backend", choices=tuple(registry.REGISTRY),
                     help="lme4 (R, Satterthwaite t; the default), statsmodels (no R, same tests and Wald intervals, "
                          "Gaussian only), bambi (Bayesian, posterior intervals); ordinal: clmm (R ordinal::clmm, "
                          "the default), laplace (no R, the same Laplace likelihood) or bambi (cumulative family)")
    fit.add_argument("--ties", choices=TIE_POLICIES, default="drop",
                     help="binomial: drop ties, or split each as half a win for each side")
    fit.add_argument("--tie-values", nargs="+", default=[], metavar="ANSWER",
                     help="binomial: further outcome answers that mean a tie, e.g. both neither "
                          "(always ties: tie, draw, equal, 0)")
    fit.add_argument("--correlated", action="store_true", help="correlated random intercepts and slopes")
    fit.add_argument("--simplify", action="store_true", help="drop zero variance components step by step")
    fit.add_argument("--intervals", choices=registry.interval_methods(),
                     help="intervals for the SDs (default: wald for lme4 and statsmodels, posterior for bambi)")
    fit.add_argument("--n-boot", type=positive, default=500, metavar="N", help="bootstrap refits for --intervals boot")
    fit.add_argument("--draws", type=positive, metavar="N",
                     help="parameter draws stored in the file for planning with --assurance: bambi's posterior "
                          "draws per chain (default 1000); lme4/statsmodels: N parametric-bootstrap refits "
                          "(default none)")
    fit.add_argument("--chains", type=positive, default=2, metavar="N", help="bambi: chains")
    add_seed(fit, " (bootstrap, bambi)", default=1)  # fit_pilot's default
    fit.add_argument("-o", "--out", metavar="FILE", help="parameter file to write (.json)")
    fit.set_defaults(out_formats=(".json",))
    fit.add_argument("--json", action="store_true", help="print one JSON array of records, nothing else")


def _stage(counts: dict[str, int], args: argparse.Namespace) -> str:
    """What the fit is about to do, for stderr (R's start-up alone takes seconds)."""
    what = {"lme4": "lme4 (starting R first)", "bambi": f"bambi ({args.chains} chains x {args.draws or 1000} draws)"}
    boot = f", then {args.n_boot} bootstrap refits" if args.intervals == "boot" else ""
    return (f"fitting {counts['n_ratings']:,} {'ratings' if args.family == 'gaussian' else 'judgments'} of "
            f"{counts['n_systems']} systems with {what.get(args.backend, args.backend)}{boot} ...")


def run(args: argparse.Namespace) -> int:
    """Run ``hepower fit``."""
    import pandas as pd

    from ..fitting.model import fit_pilot
    from ..fitting.ratings import read_judgments, read_ratings
    from ..params import params_json
    out = args.outputs.paths.get("out")
    args.backend = args.backend or registry.default_backend(args.family)
    if args.family == "ordinal":
        return _run_ordinal(args, out)
    if args.link:
        raise InputError("--link applies to --family ordinal")
    if args.family == "gaussian":
        if args.ties != "drop" or args.tie_values:
            raise InputError("--ties and --tie-values apply to --family binomial")
        data = read_ratings(args.data, args.worker, args.item, args.system, args.score, args.baseline, args.systems,
                            where_filters(args.where), tuple(args.scale) if args.scale else None, args.duplicates)
    else:
        if args.scale or args.score or args.system:
            raise InputError("--scale, --score and --system apply to ratings; judgments use --system-a/-b and --outcome")
        data = read_judgments(args.data, args.worker, args.item, args.system_a, args.system_b, args.outcome,
                              args.baseline, args.systems, where_filters(args.where), args.ties, args.tie_values)
    with StageNotes("hepower fit") as progress:
        progress(_stage(data.counts(), args))
        result = fit_pilot(data, args.backend, args.correlated, args.simplify, args.intervals, args.n_boot,
                           args.seed, args.draws, args.chains, progress=progress)
    for rec in result.records:
        if rec.get("separation"):
            print(f"hepower: warning: {rec['system']} vs {rec['baseline']}: {rec['separation_reason']}; the parameter "
                  "file is marked and `hepower h2h` refuses it unless --force", file=sys.stderr)
    params_file = params_json(result.to_params_file())
    args.outputs.write(out=lambda tmp: tmp.write_text(params_file, encoding="utf-8"))
    if args.json:
        print_json(pd.DataFrame(result.flat_records()))
    else:
        print(result.summary())
        if out and data.family == "gaussian":
            print(f"\nwrote {out}: plan with `hepower likert power --params {out}"
                  + (" --comparison SYSTEM" if len(result.records) > 1 else "") + " ...`")
        elif out:
            print(f"\nwrote {out} (head-to-head parameters: log-odds intercept, sd_worker, sd_item)")
    return 0


def _run_ordinal(args: argparse.Namespace, out: str | None) -> int:
    """``hepower fit --family ordinal``: read_ordinal_ratings + fit_ordinal, the ordinal parameter file."""
    import pandas as pd

    from ..fitting.ordinal_fit import fit_ordinal
    from ..fitting.ratings import read_ordinal_ratings
    from ..params import params_json
    given = [o for o, v in (("--correlated", args.correlated), ("--simplify", args.simplify),
                            ("--ties", args.ties != "drop"), ("--tie-values", args.tie_values)) if v]
    if given:
        raise InputError(f"{given[0]} does not apply to --family ordinal")
    data = read_ordinal_ratings(args.data, args.worker, args.item, args.system, args.score, args.baseline, args.systems,
                                where_filters(args.where), tuple(args.scale) if args.scale else None, args.duplicates)
    with StageNotes("hepower fit") as progress:
        result = fit_ordinal(data, args.backend, args.link or "logit", intervals=args.intervals, progress=progress,
                             draws=args.draws, chains=args.chains, seed=args.seed)
    params_file = params_json(result.to_params_file())
    args.outputs.write(out=lambda tmp: tmp.write_text(params_file, encoding="utf-8"))
    if args.json:
        print_json(pd.DataFrame(result.records()))
    else:
        print(result.summary())
        if out:
            print(f"\nwrote {out} (ordinal parameters: link, thresholds, latent SDs, effects)")
    return 0
