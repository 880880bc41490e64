"""The ``--assurance`` options shared by ``likert power/size/budget`` and ``h2h power/size``."""
from __future__ import annotations

import argparse
from typing import Any, Mapping, Sequence

from ..errors import InputError
from ..interface.values import positive, target_power


def add_assurance_options(p: argparse.ArgumentParser, solve: bool) -> None:
    """--assurance, --prior, --draws (and --target-assurance for a search)."""
    from ..assurance import DEFAULT_DRAWS, PRIOR_HELP

    g = p.add_argument_group("assurance (power averaged over the uncertainty of the parameters; docs/assurance.md)")
    g.add_argument("--assurance", action="store_true", default=None,
                   help="average power over parameter draws: those stored in --params (`hepower fit --draws N`: "
                        "parametric bootstrap, or bambi's posterior) or --prior; reports conditional power, "
                        "assurance and P(power >= target)")
    g.add_argument("--prior", nargs="+", metavar="NAME=DIST:ARGS",
                   help=f"with --assurance: draw these parameters from a prior instead ({PRIOR_HELP}); the others "
                        "stay at their point values")
    g.add_argument("--draws", type=positive, metavar="N",
                   help=f"with --assurance: parameter draws used (default {DEFAULT_DRAWS}; a file's draws are "
                        "thinned to N, a prior sampled N times)")
    if solve:
        g.add_argument("--target-assurance", type=target_power, metavar="A",
                       help="with --assurance: the assurance to reach (default: --target-power)")


def draws_from_args(args: argparse.Namespace, names: Sequence[str], aliases: Mapping[str, str] | None = None) -> Any:
    """The parameter draws the command line asks for (``names`` from a --params file), or None."""
    from ..assurance import DEFAULT_DRAWS, Prior, load_draws

    if not args.assurance:
        used = [o for o, d in (("--prior", "prior"), ("--draws", "draws"), ("--target-assurance", "target_assurance"))
                if getattr(args, d, None) is not None]
        if used:
            raise InputError(f"{' and '.join(used)} go{'es' if len(used) == 1 else ''} with --assurance")
        return None
    if args.prior:
        return Prior(tuple(args.prior)).sample(args.draws or DEFAULT_DRAWS, args.seed)
    if not getattr(args, "params", None):
        raise InputError("--assurance needs parameter draws: a --params file with draws (`hepower fit --draws N`) "
                         "or --prior NAME=DIST:ARGS")
    return load_draws(args.params, names, getattr(args, "comparison", None), aliases)


def assurance_kwargs(args: argparse.Namespace, draws: Any, solve: bool = False) -> dict[str, Any]:
    """The API's assurance keywords from the command line (empty without --assurance)."""
    from ..assurance import DEFAULT_DRAWS

    if draws is None:
        return {}
    kw: dict[str, Any] = {"assurance": draws, "draws": args.draws or DEFAULT_DRAWS}
    if solve:
        kw["target_assurance"] = args.target_assurance
    return kw
