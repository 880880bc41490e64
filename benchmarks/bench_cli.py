"""Benchmark: CLI start-up. `hepower --help` against the imports the old single-module CLI made at start-up.

Before the CLI became a lazy package, `hepower --help` imported scipy.stats,
pandas, statsmodels' tables and sacrebleu (≈2.5 s on a loaded 2-core machine)
for a help text. Now the parser of a group is built only when that group runs.
Prints one JSON record: median wall and CPU seconds (the child's user + system
time, what a shared machine's load does not inflate) over 5 runs of a bare
`python -c pass`, of `hepower --help`, of `hepower likert power --help`, and of
importing what the old CLI imported (the "before" reference), with ratios; the
0.5 s target is judged on CPU and on wall. Run: python benchmarks/bench_cli.py
"""
from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time

OLD_IMPORTS = ("import humaneval_power.scenarios.likert, humaneval_power.scenarios.accuracy, "
               "humaneval_power.scenarios.bleu, humaneval_power.fitting.model, humaneval_power.metrics, "
               "humaneval_power.significance.paired")


def _seconds(argv: list[str], repeat: int = 5) -> tuple[float, float]:
    """Median wall and CPU seconds of running ``argv``."""
    wall, cpu = [], []
    for _ in range(repeat):
        r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall.append(time.perf_counter() - t0)
        cpu.append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
    return statistics.median(wall), statistics.median(cpu)


def main() -> None:
    py, cli = sys.executable, [sys.executable, "-m", "humaneval_power.cli"]
    runs = {"python": [py, "-c", "pass"], "help": cli + ["--help"],
            "likert_power_help": cli + ["likert", "power", "--help"], "before_old_cli_imports": [py, "-c", OLD_IMPORTS]}
    out: dict[str, object] = {"load_average": os.getloadavg()[0]}
    for name, argv in runs.items():
        out[f"{name}_seconds"], out[f"{name}_cpu_seconds"] = _seconds(argv)
    for kind in ("seconds", "cpu_seconds"):
        help_time, before = out[f"help_{kind}"], out[f"before_old_cli_imports_{kind}"]
        out[f"before_over_help_{kind}"] = before / help_time  # type: ignore[operator]
        out[f"target_help_below_0.5s_{kind}"] = help_time < 0.5  # type: ignore[operator]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
