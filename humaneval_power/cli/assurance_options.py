"""The ``--assurance`` options of ``likert power/size/budget`` and ``h2h power/size`` -> the API's keywords
(the options themselves are described in :mod:`humaneval_power.interface.commands`)."""
from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any


def draws_from_args(args: argparse.Namespace, names: Sequence[str], aliases: Mapping[str, str] | None = None) -> Any:
    """The parameter draws the command line asks for (``names`` from a --params file), or None."""
    from ..plan_inputs import parameter_draws

    return parameter_draws(args.assurance, args.prior, args.draws, args.seed, getattr(args, "params", None), names,
                           getattr(args, "comparison", None), aliases, getattr(args, "target_assurance", None))


def assurance_kwargs(args: argparse.Namespace, draws: Any, solve: bool = False) -> dict[str, Any]:
    """The API's assurance keywords from the command line (empty without --assurance)."""
    from ..assurance import DEFAULT_DRAWS

    if draws is None:
        return {}
    kw: dict[str, Any] = {"assurance": draws, "draws": args.draws or DEFAULT_DRAWS}
    if solve:
        kw["target_assurance"] = args.target_assurance
    return kw
