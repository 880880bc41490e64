"""Benchmark: one lme4-tier sweep on local processes and on a Dask LocalCluster.

The sweep is a head-to-head GLMM grid (glmer refits in R, 10 studies per chunk).
For 1 and ``--workers`` workers, it is run on local processes and on a Dask
LocalCluster (started beforehand, its start-up timed apart); each run starts
R in its workers once. Prints one JSON record:

* ``seconds``: wall time of each run, ``start_seconds`` of each LocalCluster;
* ``studies_per_second`` and the speed-up of ``--workers`` workers over one
  (throughput scaling on this machine);
* ``dask_overhead_per_cell``: (Dask seconds - local seconds) / cells, per worker count;
* ``power_identical`` across runs; ``max_relative_difference`` of Type-M, mean estimate and df
  (lme4's documented run-to-run tolerance is 1e-5: its Cholesky ordering follows the address-space
  layout, see tests/test_reliability_r.py); ``singular_counts`` per run (a boundary fit's flag can flip).

Run: python benchmarks/bench_scaleout.py [--workers 2] [--sims 40] [--cells 4]
"""
from __future__ import annotations

import argparse
import json
import time

import pandas as pd

from humaneval_power.executors import DaskExecutor
from humaneval_power.parallel import LocalProcesses
from humaneval_power.params import H2HParams
from humaneval_power.scenarios.headtohead import h2h_mixed_power


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--sims", type=int, default=40, help="studies per cell")
    ap.add_argument("--cells", type=int, default=4, help="cells (items values) in the grid")
    args = ap.parse_args()
    params = H2HParams(sd_worker=0.5, sd_item=0.5)
    items = [20 + 10 * k for k in range(args.cells)]

    def sweep(executor: object) -> tuple[pd.DataFrame, float]:
        t0 = time.perf_counter()
        table = h2h_mixed_power(params, 10, items, 0.8, n_sims=args.sims, seed=1, jobs=executor, method="lme4")
        return table, time.perf_counter() - t0

    out: dict[str, object] = {"cells": args.cells, "studies_per_cell": args.sims, "refits": args.cells * args.sims}
    tables: dict[str, pd.DataFrame] = {}
    for n in sorted({1, args.workers}):
        with LocalProcesses(n) as local:
            table, seconds = sweep(local)
        tables[f"local_{n}"] = table
        out[f"local_{n}_seconds"] = seconds
        t0 = time.perf_counter()
        with DaskExecutor(n_workers=n) as dask:
            out[f"dask_{n}_start_seconds"] = time.perf_counter() - t0
            table, seconds = sweep(dask)
        tables[f"dask_{n}"] = table
        out[f"dask_{n}_seconds"] = seconds
        out[f"dask_{n}_overhead_per_cell"] = (seconds - out[f"local_{n}_seconds"]) / args.cells  # type: ignore[operator]
        for kind in ("local", "dask"):
            out[f"{kind}_{n}_studies_per_second"] = args.cells * args.sims / out[f"{kind}_{n}_seconds"]  # type: ignore[operator]
    if args.workers > 1:
        for kind in ("local", "dask"):
            out[f"{kind}_speedup_{args.workers}_over_1"] = (out[f"{kind}_1_seconds"]  # type: ignore[operator]
                                                           / out[f"{kind}_{args.workers}_seconds"])
    first = next(iter(tables.values()))
    figures = ["type_m", "mean_estimate", "df"]
    out["power_identical"] = all(t["power"].equals(first["power"]) for t in tables.values())
    out["max_relative_difference"] = max(float(((t[figures] - first[figures]).abs() / first[figures].abs()).max().max())
                                         for t in tables.values())
    out["singular_counts"] = {k: t["n_singular"].tolist() for k, t in tables.items()}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
