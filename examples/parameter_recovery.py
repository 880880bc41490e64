"""Parameter recovery of `hepower fit`: the study lives with the tests (tests/recovery.py).

Run from the repository's root: python examples/parameter_recovery.py [--reps 100] [--intervals wald|profile]
[--backend lme4|statsmodels] (the same as `python -m tests.recovery ...`).
"""
import runpy
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    runpy.run_module("tests.recovery", run_name="__main__")
