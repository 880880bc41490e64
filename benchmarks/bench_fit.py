"""Benchmark `hepower fit` on a 4,000-row fully crossed file (20 workers x 100 items x 2 systems).

Times, in one run: starting R, the lme4 backend (Wald intervals, the default),
the same with profile intervals, and statsmodels on the same data, and
reports the ratio statsmodels / lme4. pymer4 is timed too where it imports.
Run: python benchmarks/bench_fit.py
"""
from __future__ import annotations

import json
import time

import numpy as np

from humaneval_power.fitting import lme4
from humaneval_power.fitting.model import fit_pilot
from humaneval_power.fitting.ratings import read_ratings
from humaneval_power.params import LikertParams
from humaneval_power.scenarios.likert import simulate_long

import pandas as pd


def main() -> None:
    rng = np.random.default_rng(1)
    w, i = np.meshgrid(np.arange(20), np.arange(100), indexing="ij")
    pairs = pd.DataFrame({"worker": w.ravel(), "item": i.ravel()})
    truth = LikertParams(0.5, 0.1, 0.1, 0.1, 0.1, 0.2)
    data = read_ratings(simulate_long(truth, pairs, 0.1, rng), baseline="A")
    out: dict[str, object] = {"rows": len(data.frame)}
    t0 = time.perf_counter()
    ok, why = lme4.available()
    out["r_start_seconds"] = time.perf_counter() - t0
    if not ok:
        out["lme4"] = f"unavailable: {why}"
    else:
        for label, intervals in (("lme4_wald", "wald"), ("lme4_profile", "profile")):
            t0 = time.perf_counter()
            fit_pilot(data, "lme4", intervals=intervals)
            out[f"{label}_seconds"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    fit_pilot(data, "statsmodels")
    out["statsmodels_seconds"] = time.perf_counter() - t0
    if ok:
        out["statsmodels_over_lme4"] = out["statsmodels_seconds"] / out["lme4_wald_seconds"]  # type: ignore[operator]
    try:
        t0 = time.perf_counter()
        from pymer4.models import Lmer  # type: ignore[import-not-found]

        from humaneval_power.fitting.pymer4_interop import pymer4_formula, pymer4_frame

        out["pymer4_import_seconds"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        Lmer(pymer4_formula(data), data=pymer4_frame(data)).fit(summarize=False)
        out["pymer4_fit_seconds"] = time.perf_counter() - t0
    except Exception as exc:  # noqa: BLE001
        out["pymer4"] = f"not importable here: {exc.__class__.__name__}: {exc}"
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
