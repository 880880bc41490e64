"""Benchmark: McNemar power by summation against simulation of the same test.

Prints one JSON record with, measured in this run:
- exact conditional power at n = 390,965 (QQP) by summation, and a
  10,000-table simulation of the same test (ratio simulation / summation);
- the full Table 2 (GLUE MDEs, normal method, as the paper) and with the exact
  conditional method;
- the exact unconditional critical value at n = 1,821 and 390,965 (once per n, cached).
Run: python benchmarks/bench_accuracy.py
"""
from __future__ import annotations

import json
import time
from typing import Any, Callable

from humaneval_power.engine import run_cells
from humaneval_power.scenarios.accuracy import McNemarScenario, mde_table
from humaneval_power.significance.binomial import unconditional_critical_z


def timed(f: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    value = f()
    return value, time.perf_counter() - t0


def main() -> None:
    out: dict[str, float] = {}
    n, delta, agree = 390_965, 0.001, 0.95
    exact, out["exact_seconds_n390965"] = timed(lambda: McNemarScenario(n, delta, agree).exact())
    sim, out["simulation_seconds_10000"] = timed(
        lambda: run_cells([McNemarScenario(n, delta, agree, "simulate")], 10_000, seed=1, jobs=1)[0])
    out.update(exact_power=exact.power, simulated_power=sim.power,
               simulation_over_exact=out["simulation_seconds_10000"] / out["exact_seconds_n390965"])
    _, out["table2_normal_seconds"] = timed(lambda: mde_table("glue", ["normal"]))
    _, out["table2_exact_seconds"] = timed(lambda: mde_table("glue", ["exact"]))
    for k in (1821, 390_965):
        _, out[f"unconditional_critical_seconds_n{k}"] = timed(lambda: unconditional_critical_z(k, 0.05))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
