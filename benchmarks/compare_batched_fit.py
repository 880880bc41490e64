"""Old vs new batched crowd fit on the same simulated studies: runs the fast tier of a grid of crowd designs
(workers, ratings per item, items, systems, presentation, random assignment, missing ratings, a non-identifiable
design, a boundary case with no system-by-worker or system-by-item variance) under this tree and under git revision REV (its package
exported by ``git archive``), and prints per design the max |SD| difference, the max relative df difference,
the share of studies with the same decision and both powers (with the Monte-Carlo SE).
Run: python benchmarks/compare_batched_fit.py REV [n_sims]   (the simulation code must be the same in both).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
#: (label, cell_factory keywords, make keywords)
GRID = [
    ("page cell: 10 workers, 100 items, k=3", {}, {"items": 100, "workers": 10, "ratings_per_item": 3}),
    ("20 workers, 60 items, k=5", {}, {"items": 60, "workers": 20, "ratings_per_item": 5}),
    ("8 workers, 40 items, k=4", {}, {"items": 40, "workers": 8, "ratings_per_item": 4}),
    ("3 systems (invariant model), 12 workers, 50 items, k=3",
     {"systems": 3, "invariant": True}, {"items": 50, "workers": 12, "ratings_per_item": 3}),
    ("between presentation, 12 workers, 60 items, k=3", {"presentation": "between"},
     {"items": 60, "workers": 12, "ratings_per_item": 3}),
    ("random assignment, 15 workers, 60 items, k=3", {"assignment": "random"},
     {"items": 60, "workers": 15, "ratings_per_item": 3}),
    ("10% missing, 10 workers, 60 items, k=3", {"missing": 0.1}, {"items": 60, "workers": 10, "ratings_per_item": 3}),
    ("non-identifiable: k=1 (item-by-system confounded with the residual), 20 workers, 50 items", {},
     {"items": 50, "workers": 20, "ratings_per_item": 1}),
    ("boundary: no system-by-worker or -item SD, 10 workers, 30 items, k=3", {"boundary": True},
     {"items": 30, "workers": 10, "ratings_per_item": 3}),
]


def dump(path: str, n_sims: int) -> None:
    """Fit every design of the grid (this process's package) and save SDs, df, decisions."""
    import humaneval_power.fitting.batched as fb
    from humaneval_power.plan_inputs import likert_params
    from humaneval_power.processes import InvariantProcess
    from humaneval_power.scenarios.crowd import cell_factory

    kept: list = []
    orig = fb.fit_many

    def spy(*a, **k):
        fit = orig(*a, **k)
        kept.append(fit)
        return fit

    fb.fit_many = spy
    out = {}
    for i, (_, opts, size) in enumerate(GRID):
        opts = dict(opts)
        params: object = "card2020-high"
        if opts.pop("boundary", False):
            params = likert_params("card2020-high", sd_worker_slope=0.0, sd_item_slope=0.0)
        if opts.pop("invariant", False):
            params = InvariantProcess(0.4, 0.1, 0.5, 0.15, 0.9, systems=opts["systems"], intercept=3.0)
        scen = cell_factory(params, **opts)(effect=0.25, **size)
        kept.clear()
        fits = scen._fit(n_sims, np.random.default_rng(20261126 + i), scen._means)
        sig = np.concatenate([scen.analysis.decide(f, scen._means, scen._means).significant for f in fits])
        out[f"{i}_sds"] = np.concatenate([f.sds for f in kept])
        out[f"{i}_df"] = np.concatenate([f.df[:, 0] for f in kept])
        out[f"{i}_sig"] = sig
        out[f"{i}_iter"] = np.concatenate([f.iterations for f in kept])
        out[f"{i}_conv"] = np.concatenate([f.converged for f in kept])
        out[f"{i}_dev"] = np.concatenate([f.deviance for f in kept])
    np.savez(path, **out)


def main() -> None:
    rev = sys.argv[1]
    n_sims = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_serve import export_revision

    with tempfile.TemporaryDirectory() as tmp:
        ref = os.path.join(tmp, "ref")
        export_revision(rev, ref)
        res = {}
        for which, path in (("ref", ref), ("new", str(ROOT))):
            subprocess.run([sys.executable, __file__, "--dump", os.path.join(tmp, which + ".npz"), str(n_sims)],
                           check=True, env={**os.environ, "PYTHONPATH": path})
            res[which] = np.load(os.path.join(tmp, which + ".npz"))
    rows = []
    for i, (label, _, _) in enumerate(GRID):
        a, b = (res[w] for w in ("ref", "new"))
        sa, sb = a[f"{i}_sig"], b[f"{i}_sig"]
        dfa, dfb = a[f"{i}_df"], b[f"{i}_df"]
        ok = np.isfinite(dfa) & np.isfinite(dfb)
        rows.append({"design": label, "studies": int(sa.size),
                     "max_abs_sd_difference": float(np.nanmax(np.abs(a[f"{i}_sds"] - b[f"{i}_sds"]))),
                     "max_rel_df_difference": float(np.max(np.abs(dfa[ok] - dfb[ok]) / dfa[ok])),
                     "same_decision": float(np.mean(sa == sb)),
                     "power_ref": float(sa.mean()), "power_new": float(sb.mean()),
                     "mc_se": float(np.sqrt(sa.mean() * (1 - sa.mean()) / sa.size)),
                     "converged_ref": int(a[f"{i}_conv"].sum()), "converged_new": int(b[f"{i}_conv"].sum()),
                     "max_abs_deviance_difference": float(np.nanmax(np.abs(a[f"{i}_dev"] - b[f"{i}_dev"]))),
                     "mean_iterations_ref": float(a[f"{i}_iter"].mean()),
                     "mean_iterations_new": float(b[f"{i}_iter"].mean())})
    print(json.dumps({"ref": rev, "n_sims": n_sims, "designs": rows}, indent=1))


if __name__ == "__main__":
    if sys.argv[1] == "--dump":
        dump(sys.argv[2], int(sys.argv[3]))
    else:
        main()
