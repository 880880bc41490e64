"""Type-I error of each test, per tier: rejection rates with a zero effect.

Prints a table (and writes it with --out): for 3, 5 and 10 workers, the share
of null studies each test declares significant under `analytic`, `fast` and
(when R is available) `lme4`. `fast` and `lme4` fit the same model the same
way, so they agree within Monte-Carlo error; `analytic` is alpha by
construction. Run: python examples/null_calibration.py [--lme4-sims 250]
"""
from __future__ import annotations

import argparse

import pandas as pd

from humaneval_power.errors import InputError
from humaneval_power.fitting import lme4
from humaneval_power.params import get_preset
from humaneval_power.scenarios.likert import likert_power


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="card2020-high")
    ap.add_argument("--items", type=int, default=20)
    ap.add_argument("--fast-sims", type=int, default=20_000)
    ap.add_argument("--lme4-sims", type=int, default=250, help="0 to skip lme4")
    ap.add_argument("--out", help="CSV file for the table")
    args = ap.parse_args()
    params = get_preset(args.preset)
    rows = []
    for test in ("satterthwaite", "z", "card2020"):
        tiers = [("analytic", 1), ("fast", args.fast_sims)]
        if args.lme4_sims and lme4.available()[0]:
            tiers.append(("lme4", args.lme4_sims))
        for method, sims in tiers:
            try:
                t = likert_power(params, [3, 5, 10], [args.items], [0.0], method=method, test=test, n_sims=sims, seed=5)
            except InputError as exc:  # e.g. no analytic form for card2020
                print(f"# {method}/{test}: {exc}")
                continue
            rows.append(t[["workers", "items", "method", "test", "power", "ci_low", "ci_high", "n_sims", "n_singular"]])
    table = pd.concat(rows).rename(columns={"power": "rejection_rate"})
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    if args.out:
        table.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
