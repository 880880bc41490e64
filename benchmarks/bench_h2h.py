"""Benchmark: exact head-to-head power by summation against simulation of the same test.

Prints one JSON record: seconds for exact power at n = 1,000,000 judgments
(ties dropped and split), and the ratio to a 10,000-study simulation at the
same n, measured in this run.  Run: python benchmarks/bench_h2h.py
"""
from __future__ import annotations

import json
import time

from humaneval_power.engine import run_cells
from humaneval_power.scenarios.headtohead import IndependentJudgments
from humaneval_power.significance.binomial import exact_power


def main() -> None:
    out: dict[str, float] = {}
    n, p_win, p_tie = 1_000_000, 0.401, 0.2
    for ties in ("drop", "split"):
        t0 = time.perf_counter()
        power = exact_power(n, p_win, p_tie, ties)[0]
        exact_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        sim = run_cells([IndependentJudgments(n, p_win, p_tie, ties, "simulate")], 10_000, seed=1, jobs=1)[0]
        sim_s = time.perf_counter() - t0
        out.update({f"exact_seconds_{ties}": exact_s, f"exact_power_{ties}": power,
                    f"simulated_power_{ties}": sim.power, f"simulation_seconds_{ties}": sim_s,
                    f"simulation_over_exact_{ties}": sim_s / exact_s})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
