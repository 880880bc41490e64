"""``hepower fit``: pilot data (ratings or head-to-head judgments) -> mixed model -> parameter file (its parser:
``interface.commands.FIT``; the computation: :func:`humaneval_power.fitting.pilot.fit_pilot_file`)."""
from __future__ import annotations

import argparse

from .common import StageNotes, print_json, where_filters

#: what the parameter file of each family holds, said after writing it
WROTE = {"binomial": "head-to-head parameters: log-odds intercept, sd_worker, sd_item",
         "ordinal": "ordinal parameters: link, thresholds, latent SDs, effects"}


def run(args: argparse.Namespace) -> int:
    """Run ``hepower fit``."""
    import pandas as pd

    from ..fitting.pilot import fit_pilot_file

    out = args.outputs.paths.get("out")
    with StageNotes("hepower fit") as progress:
        result = fit_pilot_file(
            args.data, args.family, args.worker, args.item, args.system, args.score, args.system_a, args.system_b,
            args.outcome, args.baseline, args.systems, where_filters(args.where),
            tuple(args.scale) if args.scale else None, args.duplicates, args.ties, args.tie_values, args.backend,
            args.link, args.correlated, args.simplify, args.intervals, args.n_boot, args.draws, args.chains,
            args.seed, progress=progress)
    params_file = result.params_json()
    args.outputs.write(out=lambda tmp: tmp.write_text(params_file, encoding="utf-8"))
    if args.json:
        print_json(pd.DataFrame(result.records()))
        return 0
    print(result.summary())
    if out and result.family == "gaussian":
        print(f"\nwrote {out}: plan with `hepower likert power --params {out}"
              + (" --comparison SYSTEM" if len(result.records()) > 1 else "") + " ...`")
    elif out:
        print(f"\nwrote {out} ({WROTE[result.family]})")
    return 0
