"""Plan from the DialSummEval expert pilot with assurance (docs/assurance.md).

The pilot: 3 experts x 100 dialogues, relevance, system F (BART) against the
reference summaries A, rated 1-5 (rescaled to 0-1). Three experts pin the
worker components down poorly, so a plan at the point estimates ("80% power")
may be optimistic. This example

1. fits the pilot (statsmodels backend, no R) and draws the parameters by a
   parametric bootstrap (`hepower fit --draws 300`), and with `--bambi` also
   from the Bayesian posterior (`hepower fit --backend bambi`; slow);
2. for 5 and 10 workers and differences of 0.1 and 0.15 (0.4 and 0.6 Likert
   points), finds the items a plan at the point estimate needs (conditional
   power 0.8), the assurance of that plan and P(power >= 0.8) under the draws,
   and the items needed for an assurance of 0.8.

Run: python examples/plan_with_assurance.py [DATA_DIR] [--bambi]   (default ../shared/data; 7 min on a loaded
2-core machine, 1.5 min of it the bootstrap; bambi adds ~10 min)
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from humaneval_power.assurance import draws_from_doc
from humaneval_power.errors import BackendUnavailableError
from humaneval_power.fitting.model import fit_pilot
from humaneval_power.fitting.ratings import read_ratings
from humaneval_power.params import SD_NAMES, LikertParams
from humaneval_power.scenarios.likert import likert_power, likert_sample_size

DESIGNS = [(5, 0.10), (5, 0.15), (10, 0.10), (10, 0.15), (20, 0.10)]  # (workers, effect on the 0-1 scale)
SIMS, DRAWS, SEED = 1000, 200, 1


def plan(params: LikertParams, draws: object) -> pd.DataFrame:
    """Conditional plan vs assurance plan for every design, one row each."""
    rows = []
    for workers, effect in DESIGNS:
        r = likert_sample_size(params, effect, workers=workers, assurance=draws, draws=DRAWS, n_sims=SIMS, seed=SEED)
        n_cond = r.detail["conditional_value"]
        row = {"workers": workers, "effect": effect, "items (power 0.8 at the estimate)": n_cond}
        if n_cond is not None:  # None: the worker-slope SD caps the power below 0.8 however many items
            at = likert_power(params, workers, int(n_cond), effect, assurance=draws, draws=DRAWS, n_sims=SIMS,
                              seed=SEED).iloc[0]
            row.update({"conditional power": at.conditional_power, "assurance there": at.assurance,
                        "SE": at.assurance_se, "P(power >= 0.8) there": at.p_power_reaches_target})
        row.update({"items (assurance 0.8)": r.value if r.attainable else f"none (max {r.highest_power:.2f})",
                    "MC range": f"{r.low}-{r.high if r.high is not None else 'beyond'}" if r.attainable else "",
                    "extra items": (r.value - n_cond) if r.value is not None and n_cond is not None else None})
        rows.append(row)
    order = ["workers", "effect", "items (power 0.8 at the estimate)", "conditional power", "assurance there", "SE",
             "P(power >= 0.8) there", "items (assurance 0.8)", "MC range", "extra items"]
    return pd.DataFrame(rows).reindex(columns=order)


def show_draws(title: str, doc: dict, key: str) -> None:
    print(f"\n{title}: point estimate and 5% / 50% / 95% quantiles of the draws")
    for name in SD_NAMES:
        q = np.quantile(doc[key][name], [0.05, 0.5, 0.95])
        print(f"  {name:20s} {doc[name]:.4f}   {q[0]:.4f} / {q[1]:.4f} / {q[2]:.4f}")


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--bambi"]
    data_dir = Path(args[0] if args else os.environ.get("HEPOWER_DATA", "../shared/data"))
    expert = read_ratings(data_dir / "dialsummeval_expert" / "ratings.csv", where={"dimension": "relevance"},
                          systems=["A", "F"], baseline="A", scale=(1, 5))
    pd.set_option("display.width", 200)
    fits = {"parametric bootstrap (statsmodels fit, 300 refits)": ("statsmodels", "bootstrap_draws", 300)}
    if "--bambi" in sys.argv:
        fits["bambi posterior (2 chains x 1000 draws)"] = ("bambi", "posterior_draws", 1000)
    for title, (backend, key, n) in fits.items():
        try:
            doc = fit_pilot(expert, backend, draws=n, seed=SEED).to_params_doc()
        except BackendUnavailableError as exc:  # bambi is an optional extra: say so, keep the bootstrap's plan
            print(f"note: {exc}")
            continue
        show_draws(f"{title}, relevance F vs A", doc, key)
        table = plan(LikertParams.from_json(doc), draws_from_doc(doc, SD_NAMES, f"{title}"))
        print(f"\nplans for a difference in mean relevance, target 0.8 ({SIMS} studies per cell and per draw, "
              f"{DRAWS} draws, seed {SEED}):")
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))


if __name__ == "__main__":
    main()
