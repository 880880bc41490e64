"""Benchmark the batched no-R tier against lme4 refits of the same studies, in one run, per design.

Designs (the coding-invariant model ``y ~ system + (1|worker) + (1|worker:system) + (1|item) +
(1|item:system)``, REML, Satterthwaite df for system 1 - system 0):

* ``balanced``: 3 of 15 workers per item (cyclic), 300 items, 2 systems, ``within`` (1,800 ratings);
* ``pilot``: the DialSummEval Mechanical Turk layout (coherence, systems A and F: 1,000 ratings,
  100 items, 199 workers, each output rated by its own 5 workers), SDs 0.2, 0.05, 0.05, 0.05, 0.15;
* ``missing``: 3 of 30 workers per item, 200 items, 2 systems, each rating lost with probability 0.1
  (every study its own rows: fitted together on one padded layout with row weights);
* ``random4``: 4 systems, ``between``, 3 of 20 workers drawn anew per output and study, 150 items.

Times ``fit_many`` on N simulated studies and lme4 + lmerTest (looping inside R; ``missing``: one
refit call per study) on the first M of the same studies; prints per-study milliseconds, the ratio
and the agreement on the common studies, one JSON record per design.
Run: python benchmarks/bench_crowd.py [N=10000] [M=30] [design ...]
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from humaneval_power.analyses import InvariantLMM
from humaneval_power.analyses.lmm import pad_layouts
from humaneval_power.designs import CrowdDesign, Layout, PilotDesign
from humaneval_power.fitting import batched, lme4
from humaneval_power.processes import InvariantProcess

PILOT = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "dialsummeval_amt" / "ratings.csv"


def _pilot(n: int, rng: np.random.Generator) -> tuple[Layout, batched.ComponentDesign]:
    import pandas as pd

    frame = pd.read_csv(PILOT)
    layout = PilotDesign.from_ratings(frame[frame.dimension == "coherence"], systems=["A", "F"]).draw(rng, 1)
    return layout, InvariantLMM().component_design(layout)


def _crowd(design: CrowdDesign, n: int, rng: np.random.Generator) -> tuple[Layout, batched.ComponentDesign]:
    layout = design.draw(rng, n)
    return layout, InvariantLMM().component_design(layout)


def _missing(n: int, rng: np.random.Generator) -> tuple[Layout, batched.ComponentDesign]:
    layouts = CrowdDesign(200, 30, 3, missing=0.1).draw(rng, n)
    layout, weights, _ = pad_layouts(layouts, [np.zeros(lay.size) for lay in layouts])
    return layout, InvariantLMM().component_design(layout, weights)


DESIGNS = {
    "balanced": ("within, balanced, 3 of 15 workers, 300 items, 2 systems",
                 lambda n, rng: _crowd(CrowdDesign(300, 15, 3), n, rng),
                 [0.4, 0.1, 0.5, 0.15, 0.9]),
    "pilot": ("DialSummEval AMT layout (coherence, A vs F): 100 items, 199 workers, 5 per output",
              _pilot, [0.2, 0.05, 0.05, 0.05, 0.15]),
    "missing": ("within, balanced, 3 of 30 workers, 200 items, 2 systems, 10% of ratings missing",
                _missing, [0.3, 0.15, 0.3, 0.15, 0.8]),
    "random4": ("between, random, 3 of 20 workers, 150 items, 4 systems",
                lambda n, rng: _crowd(CrowdDesign(150, 20, 3, 4, "random", "between"), n, rng),
                [0.3, 0.15, 0.3, 0.15, 0.8]),
}


def _lme4(design: batched.ComponentDesign, y: np.ndarray, contrast: np.ndarray) -> dict[str, np.ndarray]:
    if design.weights is None:
        return batched.refit_lme4(design, y, contrast)
    parts = [batched.refit_lme4(design.study(j), y[design.weights[j] > 0, j:j + 1], contrast)
             for j in range(y.shape[1])]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def bench(name: str, n: int, m: int) -> dict[str, object]:
    label, build, sds = DESIGNS[name]
    rng = np.random.default_rng(2024)
    layout, design = build(n, rng)
    p = design.x.shape[1]
    process = InvariantProcess(*sds, systems=layout.n_systems, intercept=3.0)  # rows of weight 0: drawn, not fitted
    y = process.simulate(layout, np.r_[0.0, np.full(p - 1, 0.1)], n, rng)
    contrast = np.r_[0.0, 1.0, np.zeros(p - 2)]
    t0 = time.perf_counter()
    fit = batched.fit_many(design, y, contrast)
    fast = time.perf_counter() - t0
    out: dict[str, object] = {
        "design": label, "ratings": design.n, "fast_studies": n, "fast_ms_per_study": 1e3 * fast / n,
        "fast_converged": int(fit.converged.sum()), "fast_singular": int(fit.singular.sum()),
        "fast_failed": int(fit.failed.sum()), "fast_mean_iterations": float(fit.iterations.mean()),
    }
    ok, why = lme4.available()
    if not ok:
        out["lme4"] = f"unavailable: {why}"
        return out
    sub = slice(0, m)
    _lme4(design.subset(slice(0, 1)) if design.n_studies else design, y[:, :1], contrast)  # load the R side
    part = design.subset(sub) if design.n_studies else design
    t0 = time.perf_counter()
    ref = _lme4(part, y[:, sub], contrast)
    slow = time.perf_counter() - t0
    out.update({
        "lme4_studies": m, "lme4_ms_per_study": 1e3 * slow / m,
        "ratio_lme4_over_fast": (slow / m) / (fast / n),
        "max_abs_estimate_diff": float(np.abs(ref["estimate"] - fit.estimate[sub, 0]).max()),
        "max_rel_se_diff": float(np.abs(ref["se"] / fit.se[sub, 0] - 1).max()),
        "max_rel_df_diff": float(np.abs(ref["df"] / fit.df[sub, 0] - 1).max()),
        "max_criterion_lme4_minus_fast": float((ref["criterion"] - fit.deviance[sub]).max()),
        "min_criterion_lme4_minus_fast": float((ref["criterion"] - fit.deviance[sub]).min()),
        "same_singular": int((ref["singular"].astype(bool) == fit.singular[sub]).sum()),
    })
    return out


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    m = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    for name in sys.argv[3:] or ["balanced"]:
        print(json.dumps({"name": name} | bench(name, n, m), indent=1), flush=True)


if __name__ == "__main__":
    main()
