"""``hepower fit``: pilot data (ratings or head-to-head judgments) -> mixed model -> parameter file (its parser:
``interface.commands.FIT``)."""
from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ..errors import InputError
from ..fitting import registry
from .common import StageNotes, print_json, where_filters

if TYPE_CHECKING:
    from ..fitting.ratings import PilotData


def _stage(counts: dict[str, int], args: argparse.Namespace) -> str:
    """What the fit is about to do, for stderr (R's start-up alone takes seconds)."""
    what = {"lme4": "lme4 (starting R first)", "bambi": f"bambi ({args.chains} chains x {args.draws or 1000} draws)"}
    boot = f", then {args.n_boot} bootstrap refits" if args.intervals == "boot" else ""
    return (f"fitting {counts['n_ratings']:,} {'ratings' if args.family == 'gaussian' else 'judgments'} of "
            f"{counts['n_systems']} systems with {what.get(args.backend, args.backend)}{boot} ...")


def _read_ratings(args: argparse.Namespace) -> PilotData:
    """The ratings of ``fit --family gaussian|ordinal``."""
    from ..fitting.ratings import read_ratings

    return read_ratings(args.data, args.worker, args.item, args.system, args.score, args.baseline, args.systems,
                        where_filters(args.where), tuple(args.scale) if args.scale else None, args.duplicates,
                        args.family)


def run(args: argparse.Namespace) -> int:
    """Run ``hepower fit``."""
    import pandas as pd

    from ..fitting.model import fit_pilot
    from ..fitting.ratings import read_judgments
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
        data = _read_ratings(args)
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
    """``hepower fit --family ordinal``: ordinal ratings + fit_ordinal, the ordinal parameter file."""
    import pandas as pd

    from ..fitting.ordinal_fit import fit_ordinal
    from ..params import params_json
    given = [o for o, v in (("--correlated", args.correlated), ("--simplify", args.simplify),
                            ("--ties", args.ties != "drop"), ("--tie-values", args.tie_values)) if v]
    if given:
        raise InputError(f"{given[0]} does not apply to --family ordinal")
    data = _read_ratings(args)
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
