"""Benchmark `hepower fit` on a 4,000-row fully crossed file (20 workers x 100 items x 2 systems).

Times, in one run: starting R, the lme4 backend (Wald intervals, the default),
the same with profile intervals, and statsmodels on the same data (Wald and
profile), and reports the ratios statsmodels / lme4. pymer4 is timed too where it imports.
Then, where the shared data are present, the largest real model: DialSummEval
expert consistency ratings, all 14 systems against A (28 variance
components), lme4 against statsmodels, with both REML criteria.
Run: python benchmarks/bench_fit.py [DATA_DIR]
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

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
    for label, intervals in (("statsmodels", "wald"), ("statsmodels_profile", "profile")):
        t0 = time.perf_counter()
        fit_pilot(data, "statsmodels", intervals=intervals)
        out[f"{label}_seconds"] = time.perf_counter() - t0
    if ok:
        out["statsmodels_over_lme4"] = out["statsmodels_seconds"] / out["lme4_wald_seconds"]  # type: ignore[operator]
        out["statsmodels_profile_over_lme4_profile"] = (out["statsmodels_profile_seconds"]  # type: ignore[operator]
                                                        / out["lme4_profile_seconds"])
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
    expert = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("HEPOWER_DATA", "../shared/data")) \
        / "dialsummeval_expert" / "ratings.csv"
    if expert.is_file():
        real = read_ratings(expert, where={"dimension": "consistency"}, baseline="A", scale=(1, 5))
        out["expert_14_systems_rows"] = len(real.frame)
        for backend in ("lme4", "statsmodels") if ok else ("statsmodels",):
            t0 = time.perf_counter()
            fit = fit_pilot(real, backend)
            out[f"expert_14_{backend}_seconds"] = time.perf_counter() - t0
            out[f"expert_14_{backend}_reml_criterion"] = fit.raw.criterion
        if ok:
            out["expert_14_statsmodels_over_lme4"] = (out["expert_14_statsmodels_seconds"]  # type: ignore[operator]
                                                      / out["expert_14_lme4_seconds"])
    else:
        out["expert_14_systems"] = f"data not found at {expert} (pass DATA_DIR or set HEPOWER_DATA)"
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
