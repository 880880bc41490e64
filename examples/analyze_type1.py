"""Type-I error of `hepower analyze`'s default analysis, by simulation under the null (all systems equal).

Null studies are drawn from the coding-invariant process (processes.InvariantProcess, SDs close to the
DialSummEval AMT coherence fit on the 1-5 scale) on two designs (designs.CrowdDesign), 4 systems:

* crossed: 6 workers rate all 4 systems' outputs of 25 items (600 ratings);
* sparse:  each of the 4 x 40 outputs rated by 3 of a pool of 30 workers drawn at random, between-output
           (480 ratings, workers rate a few outputs each, as on Mechanical Turk).

Each study is analysed by analyze() itself with its defaults (invariant model, REML, Satterthwaite df, all
pairs, Holm) on the no-R backend (the lme4 backend gives the same numbers to 1e-5, tests/test_analyze.py).
Reported: the rejection rate at alpha 0.05 of the omnibus F test, of the Holm-adjusted pairwise family (any
pair rejected: the family-wise error) and of a single unadjusted contrast (the mean over the 6 pairs), each
with its 95% Clopper-Pearson interval.

Run: python examples/analyze_type1.py [--sims N] [--seed S]   (default 400 studies per design; ~1 s each)
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import pandas as pd

from humaneval_power.completed_study import analyze
from humaneval_power.designs import CrowdDesign
from humaneval_power.engine import clopper_pearson
from humaneval_power.processes import InvariantProcess

PROCESS = InvariantProcess(sd_worker=0.6, sd_worker_system=0.15, sd_item=0.2, sd_item_system=0.15, sd_residual=0.6,
                           systems=4, intercept=3.5, name="AMT-like null")
DESIGNS = {
    "crossed": CrowdDesign(items=25, workers=6, ratings_per_item=6, systems=4, assignment="crossed"),
    "sparse": CrowdDesign(items=40, workers=30, ratings_per_item=3, systems=4, assignment="random",
                          presentation="between"),
}
ALPHA = 0.05


def null_study(design: CrowdDesign, rng: np.random.Generator) -> pd.DataFrame:
    """One study's ratings under the null (every system mean equal)."""
    lay = design.draw(rng, 1)
    worker = np.asarray(lay.worker).reshape(-1)
    y = PROCESS.simulate(lay, np.zeros(design.systems), 1, rng)[:, 0]
    return pd.DataFrame({"worker": [f"w{w}" for w in worker], "item": [f"i{i}" for i in lay.item],
                         "system": [chr(65 + s) for s in lay.system], "score": y})


def run(name: str, design: CrowdDesign, sims: int, seed: int) -> dict[str, object]:
    rng = np.random.default_rng([seed, len(name)])
    f_rej = fwe = single = failed = singular = 0
    n_contrasts = 0
    start = time.perf_counter()
    for s in range(sims):
        frame = null_study(design, rng)
        try:
            res = analyze(frame, backend="statsmodels")
        except Exception as exc:  # noqa: BLE001  (counted and reported, never hidden)
            failed += 1
            print(f"{name} study {s}: {exc}", file=sys.stderr)
            continue
        f_rej += res.omnibus.p_value.iloc[0] <= ALPHA
        fwe += (res.contrasts.p_adjusted <= ALPHA).any()
        single += (res.contrasts.p_value <= ALPHA).sum()
        n_contrasts += len(res.contrasts)
        singular += res.singular
        if (s + 1) % 20 == 0:
            print(f"{name}: {s + 1}/{sims} studies, {time.perf_counter() - start:.0f} s", file=sys.stderr)
    n = sims - failed
    out: dict[str, object] = {"design": name, "ratings": len(frame), "studies": n, "failed": failed,
                              "singular fits": singular}
    for label, k, total in (("F test", f_rej, n), ("Holm family (FWER)", fwe, n),
                            ("one contrast, unadjusted", single, n_contrasts)):
        lo, hi = clopper_pearson(int(k), int(total))
        out[label] = f"{k / total:.3f} [{lo:.3f}, {hi:.3f}]"
    out["seconds per study"] = round((time.perf_counter() - start) / sims, 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rows = [run(name, design, args.sims, args.seed) for name, design in DESIGNS.items()]
    table = pd.DataFrame(rows)
    print(f"Type-I error at alpha {ALPHA} (95% Clopper-Pearson intervals), {PROCESS}")
    print(table.to_markdown(index=False) if hasattr(table, "to_markdown") else table.to_string(index=False))


if __name__ == "__main__":
    main()
