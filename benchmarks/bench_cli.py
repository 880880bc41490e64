"""Benchmark: CLI start-up. `hepower --help` against the imports the old single-module CLI made at start-up.

Before the CLI became a lazy package, `hepower --help` imported scipy.stats,
pandas, statsmodels' tables and sacrebleu (≈2.5 s on a loaded 2-core machine)
for a help text. Now the parser of a group is built only when that group runs.
Prints one JSON record: median seconds over 5 runs of a bare `python -c pass`,
of `hepower --help`, of `hepower likert power --help`, and of importing what the
old CLI imported (the "before" reference), with ratios. Run: python benchmarks/bench_cli.py
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time

OLD_IMPORTS = ("import humaneval_power.scenarios.likert, humaneval_power.scenarios.accuracy, "
               "humaneval_power.scenarios.bleu, humaneval_power.fitting.model, humaneval_power.metrics, "
               "humaneval_power.significance.paired")


def _seconds(argv: list[str], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    py = sys.executable
    out = {
        "python_seconds": _seconds([py, "-c", "pass"]),
        "help_seconds": _seconds([py, "-m", "humaneval_power.cli", "--help"]),
        "likert_power_help_seconds": _seconds([py, "-m", "humaneval_power.cli", "likert", "power", "--help"]),
        "before_old_cli_imports_seconds": _seconds([py, "-c", OLD_IMPORTS]),
    }
    out["before_over_help"] = out["before_old_cli_imports_seconds"] / out["help_seconds"]
    out["target_help_below_0.5s"] = out["help_seconds"] < 0.5
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
