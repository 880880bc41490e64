"""Benchmark: McNemar power by summation against simulation of the same test.

Prints one JSON record with, measured in this run:
- exact conditional power at n = 390,965 (QQP) by summation, and a
  10,000-table simulation of the same test (ratio simulation / summation);
- the full Table 2 (GLUE MDEs, normal method, as the paper) and with the exact
  conditional method;
- the exact unconditional critical value z* at n = 1,821 and 390,965, and
  Table 2 with the unconditional test (z* for eight GLUE sizes), now and
  "before" (the size computation as of commit 6b70514, kept below as the
  reference: scipy's binomial CDF of every m at each bisection step), with the
  wall and CPU seconds of each, their ratio, and whether both give the same
  z* / MDEs.
  Measured 2026-11-23 on the 2-core development machine shared with other
  jobs (load average ~12, so wall ~5x CPU): z* at n = 390,965 before 9.1 s
  CPU / 41.5 s wall, now 0.68 s CPU / 3.3 s wall (13x), the same z* bit for
  bit; Table 2 unconditional before 12.5 s CPU, now 1.6 s, the same MDEs.
Run: python benchmarks/bench_accuracy.py [--no-before]
"""
from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import stats

from humaneval_power.engine import run_cells
from humaneval_power.scenarios.accuracy import McNemarScenario, mde_table
from humaneval_power.significance import binomial
from humaneval_power.significance.binomial import _support, _UnconditionalSize, bisect_critical_z, refined_max


def timed(f: Callable[[], Any]) -> tuple[Any, float, float]:
    """Value, wall seconds and CPU seconds of this process."""
    t0, c0 = time.perf_counter(), time.process_time()
    value = f()
    return value, time.perf_counter() - t0, time.process_time() - c0


class SizeBefore:
    """``_UnconditionalSize`` as of commit 6b70514: scipy's binomial CDF at every m on every call."""

    def __init__(self, n: int, grid: int = 1000) -> None:
        self.n = n
        self.pis = np.linspace(1.0 / grid, 1.0, grid)
        supports = [_support(n, p) for p in self.pis]
        width = max(len(s) for s in supports)
        self.index = np.array([np.minimum(s[0] + np.arange(width), n) for s in supports])
        self.weight = np.array([np.pad(stats.binom.pmf(s, n, p), (0, width - len(s)))
                                for s, p in zip(supports, self.pis)])
        self.m = np.arange(n + 1, dtype=float)

    def tail(self, z: float) -> np.ndarray:
        """P(|2W - m| >= z sqrt(m)) for W ~ Bin(m, 1/2), m = 0..n; 0 for m = 0."""
        k = np.floor((self.m - z * np.sqrt(self.m)) / 2 + 1e-9)
        return np.where(self.m > 0, np.minimum(1.0, 2 * stats.binom.cdf(k, self.m, 0.5)), 0.0)

    def __call__(self, z: float) -> float:
        tail = self.tail(z)
        values = (self.weight * tail[self.index]).sum(axis=1)

        def size(pi: float) -> float:
            ms = _support(self.n, pi)
            return float(stats.binom.pmf(ms, self.n, pi) @ tail[ms])

        return refined_max(self.pis, values, size)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--no-before", action="store_true", help="skip the slow 'before' reference (~10-30 s)")
    args = ap.parse_args()
    out: dict[str, Any] = {}
    n, delta, agree = 390_965, 0.001, 0.95
    exact, out["exact_seconds_n390965"], _ = timed(lambda: McNemarScenario(n, delta, agree).exact())
    sim, out["simulation_seconds_10000"], _ = timed(
        lambda: run_cells([McNemarScenario(n, delta, agree, "simulate")], 10_000, seed=1, jobs=1)[0])
    out.update(exact_power=exact.power, simulated_power=sim.power,
               simulation_over_exact=out["simulation_seconds_10000"] / out["exact_seconds_n390965"])
    out["table2_normal_seconds"] = timed(lambda: mde_table("glue", ["normal"]))[1]
    out["table2_exact_seconds"] = timed(lambda: mde_table("glue", ["exact"]))[1]
    for k in (1821, 390_965):
        z, wall, cpu = timed(lambda k=k: bisect_critical_z(_UnconditionalSize(k), k, 0.05))
        out[f"unconditional_z_n{k}"] = {"z": z, "seconds": round(wall, 3), "cpu_seconds": round(cpu, 3)}
        if not args.no_before:
            z0, wall0, cpu0 = timed(lambda k=k: bisect_critical_z(SizeBefore(k), k, 0.05))
            out[f"unconditional_z_n{k}"].update(
                z_before=z0, seconds_before=round(wall0, 3), cpu_seconds_before=round(cpu0, 3),
                speedup=round(wall0 / wall, 1), cpu_speedup=round(cpu0 / cpu, 1), same_z=abs(z - z0) < 1e-8)
    binomial.unconditional_critical_z.cache_clear()
    table, wall, cpu = timed(lambda: mde_table("glue", ["unconditional"]))
    out["table2_unconditional"] = {"seconds": round(wall, 3), "cpu_seconds": round(cpu, 3)}
    if not args.no_before:
        binomial.unconditional_critical_z.cache_clear()
        binomial._UnconditionalSize = SizeBefore  # type: ignore[misc]  # the whole table as before
        before, wall0, cpu0 = timed(lambda: mde_table("glue", ["unconditional"]))
        out["table2_unconditional"].update(seconds_before=round(wall0, 3), cpu_seconds_before=round(cpu0, 3),
                                           same_mdes=[r["mde"] for r in table] == [r["mde"] for r in before])
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
