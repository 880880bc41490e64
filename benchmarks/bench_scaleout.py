"""Benchmark: one lme4-tier sweep on local processes and on a Dask LocalCluster.

The sweep is a head-to-head GLMM grid (glmer refits in R, 10 studies per chunk) of
``--cells`` small designs (6 workers, 10, 12, ... items). For 1 and ``--workers``
workers, it is run on local processes and on a Dask LocalCluster (started
beforehand, its start-up timed apart); each run starts R in its workers once.
Prints one JSON record:

* ``seconds``: wall time of each run, ``start_seconds`` and ``start_cpu_seconds`` of each LocalCluster
  (its workers import the modules loaded here as they start: a forked local worker inherits them);
* ``studies_per_second`` and the speed-up of ``--workers`` workers over one
  (throughput scaling on this machine);
* ``dask_overhead_per_cell``: (Dask seconds - local seconds) / cells, per worker count;
* CPU time, which a loaded machine does not inflate the way it does wall time:
  ``cpu_seconds`` of each run (this process, its scheduler thread included, and every
  process it started), ``worker_cpu_seconds`` of each worker process (R start-up
  included) and ``r_start_cpu_seconds`` (one R start-up in a fresh process, measured apart);
  ``cpu_speedup_{w}_over_1`` = the busiest worker's CPU seconds with one worker over
  those with ``--workers``: the speed-up when every worker has a core of its own;
* ``load_average`` (1 minute) before and after each run, and the machine's cores;
* ``power_identical`` across runs; ``max_relative_difference`` of Type-M, mean estimate and df
  (lme4's documented run-to-run tolerance is 1e-5: its Cholesky ordering follows the address-space
  layout, see tests/test_reliability_r.py); ``singular_counts`` per run (a boundary fit's flag can flip).

Run: python benchmarks/bench_scaleout.py [--workers 2] [--sims 20] [--cells 20]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

import pandas as pd
import psutil

from humaneval_power.executors import DaskExecutor, LocalProcesses
from humaneval_power.params import H2HParams
from humaneval_power.scenarios.headtohead import h2h_mixed_power


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--sims", type=int, default=20, help="studies per cell")
    ap.add_argument("--cells", type=int, default=20, help="cells (items values) in the grid")
    ap.add_argument("--on", choices=("both", "local", "dask"), default="both", help="which executors to run")
    args = ap.parse_args()
    params = H2HParams(sd_worker=0.5, sd_item=0.5)
    items = [10 + 2 * k for k in range(args.cells)]
    me = psutil.Process()
    out: dict[str, Any] = {"cells": args.cells, "studies_per_cell": args.sims, "refits": args.cells * args.sims,
                           "cores": os.cpu_count(), "r_start_cpu_seconds": _r_start_cpu()}

    def sweep(executor: object, name: str) -> pd.DataFrame:
        before = _cpu(me)
        out[f"{name}_load_average"] = [os.getloadavg()[0]]
        t0 = time.perf_counter()
        table = h2h_mixed_power(params, 6, items, 0.8, n_sims=args.sims, seed=1, jobs=executor,
                                method="lme4")
        out[f"{name}_seconds"] = time.perf_counter() - t0
        out[f"{name}_load_average"].append(os.getloadavg()[0])
        after = _cpu(me)  # before the executor stops its workers
        out[f"{name}_cpu_seconds"] = sum(after.values()) - sum(before.values())
        used = {pid: v - before.get(pid, 0.0) for pid, v in after.items()}
        workers = [v for pid, v in used.items() if pid != me.pid and v > 1]  # not the Dask nannies
        out[f"{name}_worker_cpu_seconds"] = sorted(workers, reverse=True) or [used[me.pid]]  # 1 local: here
        print(json.dumps({k: v for k, v in out.items() if k.startswith(name)}), file=sys.stderr, flush=True)
        return table

    tables: dict[str, pd.DataFrame] = {}
    kinds = ("local", "dask") if args.on == "both" else (args.on,)
    for n in sorted({1, args.workers}, reverse=True):  # one local worker runs here and starts R here: last,
        if n > 1 and args.on != "dask":  # so that local pools are forked from a process without R, as from
            with LocalProcesses(n) as local:  # the command line
                tables[f"local_{n}"] = sweep(local, f"local_{n}")
        if args.on != "local":
            t0, before = time.perf_counter(), _cpu(me)
            with DaskExecutor(n_workers=n) as dask:
                out[f"dask_{n}_start_seconds"] = time.perf_counter() - t0
                out[f"dask_{n}_start_cpu_seconds"] = sum(_cpu(me).values()) - sum(before.values())
                tables[f"dask_{n}"] = sweep(dask, f"dask_{n}")
        if n == 1 and args.on != "dask":
            with LocalProcesses(n) as local:
                tables[f"local_{n}"] = sweep(local, f"local_{n}")
        for kind in kinds:
            out[f"{kind}_{n}_studies_per_second"] = args.cells * args.sims / out[f"{kind}_{n}_seconds"]
        if args.on == "both":
            out[f"dask_{n}_overhead_per_cell"] = (out[f"dask_{n}_seconds"] - out[f"local_{n}_seconds"]) / args.cells
            out[f"dask_over_local_cpu_seconds_{n}"] = out[f"dask_{n}_cpu_seconds"] / out[f"local_{n}_cpu_seconds"]
    if args.workers > 1:
        for kind in kinds:
            out[f"{kind}_speedup_{args.workers}_over_1"] = (out[f"{kind}_1_seconds"]
                                                           / out[f"{kind}_{args.workers}_seconds"])
            out[f"{kind}_cpu_speedup_{args.workers}_over_1"] = (max(out[f"{kind}_1_worker_cpu_seconds"])
                                                               / max(out[f"{kind}_{args.workers}_worker_cpu_seconds"]))
    first = next(iter(tables.values()))
    figures = ["type_m", "mean_estimate", "df"]
    out["power_identical"] = all(t["power"].equals(first["power"]) for t in tables.values())
    out["max_relative_difference"] = max(float(((t[figures] - first[figures]).abs() / first[figures].abs()).max().max())
                                         for t in tables.values())
    out["singular_counts"] = {k: t["n_singular"].tolist() for k, t in tables.items()}
    print(json.dumps(out, indent=1))


def _cpu(me: psutil.Process) -> dict[int, float]:
    """CPU seconds (user + system) of this process and of every process it started, by pid."""
    seen = {}
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.NoSuchProcess:
            continue
        seen[p.pid] = t.user + t.system
    return seen


def _r_start_cpu() -> float:
    """CPU seconds a fresh process spends on its first refit beyond what a second one costs: starting R
    and loading lme4 (what each worker pays once)."""
    code = ("import time; from humaneval_power.params import H2HParams; "
            "from humaneval_power.scenarios.headtohead import h2h_mixed_power as f; p = H2HParams(0.5, 0.5)\n"
            "for s in (1, 2):\n c = time.process_time(); f(p, 6, 10, 0.8, n_sims=1, seed=s, jobs=1, method=\"lme4\"); "
            "print(time.process_time() - c)")
    first, second = map(float, subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                              check=True).stdout.split())
    return first - second


if __name__ == "__main__":
    main()
