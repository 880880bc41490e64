"""A 20-design budget search over crowd designs: the fast search (analytic screen, two-sided sequential Monte
Carlo, only the designs the answer needs) against a reference search in the same run: by default the search
when issue 27 was filed (``--reference plain``: every design of a round of four run in full), or the previous
release's (``--reference screened``: a tenth of the studies screening each round, the survivors in full).

    python benchmarks/bench_budget.py [--sims N] [--target P] [--reference plain|screened]

Prints one JSON record: wall and CPU seconds and studies of each search, their ratios, both answers and
whether the fast answer is the reference's or one no more expensive whose power is within Monte-Carlo error
of the target (the reference's full-precision 95% interval of that design reaches the target; the fast
search's own interval where the reference did not run it).
"""
from __future__ import annotations

import argparse
import json
import os
import time

import pandas as pd

GRID = {"items": [50, 100, 200, 400, 800], "workers": [40], "ratings_per_item": [1, 2, 3, 5]}  # 20 candidates


def reference(params, effect, costs, target, n_sims, seed, screened=True):  # type: ignore[no-untyped-def]
    """The previous release's search (likert_budget before issue 27): a tenth of the studies screens
    each round of four designs, the designs whose upper 95% bound reaches the target run in full
    (``screened=False``: every design of a round in full, the search when issue 27 was filed)."""
    import itertools

    from humaneval_power.engine import run_cells
    from humaneval_power.executors import using
    from humaneval_power.scenarios.crowd import cell_factory
    from humaneval_power.scenarios.likert import _cheapest, _largest_pools

    make = cell_factory(params, costs=costs)
    cells = [(costs.of(c.design), c) for c in (make(i, w, k, 1, effect) for i, w, k in
                                                 itertools.product(*GRID.values()) if k <= w)]
    cells, results, screen = _largest_pools(cells), [], n_sims // 10 if screened else n_sims
    with using(1) as ex:
        for start in range(0, len(cells), 4):
            batch = [c for _, c in cells[start:start + 4]]
            if screened:
                runs = run_cells(batch, screen, seed=seed, jobs=ex)
                results += [r for r in runs if r.ci_high < target]
                batch = [c for c, r in zip(batch, runs) if r.ci_high >= target]
            if batch:
                results += run_cells(batch, n_sims, seed=seed, jobs=ex)
            if any(r.power >= target for r in results):
                break
    results.sort(key=lambda r: (r.cell["cost"], r.cell["items"], -r.cell["workers"]))
    return pd.DataFrame([r.record() for r in results]), _cheapest(results, target, None, params)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=1000)
    ap.add_argument("--target", type=float, default=0.8)
    ap.add_argument("--reference", choices=("screened", "plain"), default="plain",
                    help="the search when issue 27 was filed (plain, default: every design in full) or the "
                         "previous release's (screened)")
    args = ap.parse_args()
    from humaneval_power.designs import Costs
    from humaneval_power.processes import InvariantProcess
    from humaneval_power.scenarios.likert import likert_budget

    params, effect, costs = InvariantProcess(0.3, 0.15, 0.3, 0.15, 0.8), 0.15, Costs(per_rating=0.1, fee=0.2)
    t, cpu = time.perf_counter(), time.process_time()
    table, best = likert_budget(params, effect, **GRID, costs=costs, target_power=args.target, n_sims=args.sims,
                                seed=1, jobs=1)
    fast_s, fast_cpu = time.perf_counter() - t, time.process_time() - cpu
    from humaneval_power.scenarios import crowd

    crowd._FITS.clear()  # jobs=1 runs in this process: no fits cached by the first search for the second
    t, cpu = time.perf_counter(), time.process_time()
    ref_table, ref = reference(params, effect, costs, args.target, args.sims, 1, args.reference == "screened")
    ref_s, ref_cpu = time.perf_counter() - t, time.process_time() - cpu
    same = best.value == ref.value
    at = best.at.cell if best.at is not None else {}
    full = ref_table[(ref_table.n_sims == args.sims) & (ref_table["items"] == at.get("items"))
                     & (ref_table.ratings_per_item == at.get("ratings_per_item"))]
    ci_high = float(full.ci_high.iloc[0]) if len(full) else best.at.ci_high if best.at is not None else 0.0
    close = (best.value is not None and (ref.value is None or best.value <= ref.value) and ci_high >= args.target)
    out = {"candidates": 20, "sims": args.sims, "target": args.target, "reference": args.reference,
           "fast_seconds": round(fast_s, 2), "fast_cpu_seconds": round(fast_cpu, 2),
           "fast_studies": int(table.n_sims.sum()), "fast_settled": table.settled.value_counts().to_dict(),
           "reference_seconds": round(ref_s, 2), "reference_cpu_seconds": round(ref_cpu, 2),
           "reference_studies": int(ref_table.n_sims.sum()),
           "ratio": round(ref_s / fast_s, 1), "cpu_ratio": round(ref_cpu / fast_cpu, 1),
           "fast_answer": str(best), "reference_answer": str(ref),
           "answer_full_precision_ci_high": ci_high if len(full) else None,
           "same_cheapest_design": same, "no_dearer_and_within_mc_error": same or close,
           "load_average": os.getloadavg()[0]}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
