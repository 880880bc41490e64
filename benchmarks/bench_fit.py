"""Benchmark `hepower fit` on a 4,000-row fully crossed file (20 workers x 100 items x 2 systems).

Times, in one run: starting R, the lme4 backend (Wald intervals, the default),
the same with profile intervals, and statsmodels on the same data (Wald and
profile), and reports the ratios statsmodels / lme4. pymer4 is timed too where it imports.
Then, where the shared data are present, the largest real model: DialSummEval
expert consistency ratings, all 14 systems against A (28 variance
components), lme4 against statsmodels, with both REML criteria.
Last (issue 17.4), a simulated sparse crowd study with 20 systems (250 items x 3 of 100 workers per output,
15,000 ratings) under the default coding-invariant model: wall and CPU seconds per backend; and the peak
memory (tracemalloc) of one REML gradient with the item x system SD at zero, at 30,000 ratings with the
solver before the fix (read from git, commit 442181a~1) and now, as a ratio, and now at 100,020 ratings.
Run: python benchmarks/bench_fit.py [DATA_DIR] (from a git checkout)
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from humaneval_power.fitting import lme4
from humaneval_power.fitting.model import fit_pilot
from humaneval_power.fitting.ratings import read_ratings
from humaneval_power.params import LikertParams
from humaneval_power.processes import simulate_long

#: the commit before the sparse cross blocks of fitting/vc_reml.py (issue 17.4)
BEFORE = "442181a~1"

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
    out.update(many_systems(ok))
    print(json.dumps(out, indent=1))


def _solver_before() -> Any:
    """vc_reml as it was before the sparse cross blocks (from git), imported under another name."""
    import importlib.util
    import subprocess
    import tempfile

    src = subprocess.run(["git", "show", f"{BEFORE}:humaneval_power/fitting/vc_reml.py"], capture_output=True,
                         text=True, check=True, cwd=Path(__file__).resolve().parents[1]).stdout
    path = Path(tempfile.mkdtemp()) / "vc_reml_before.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("vc_reml_before", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["vc_reml_before"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _gradient_peak_bytes(solver: Any, items: int) -> int:
    """Peak traced memory of one deviance gradient of the invariant model, item x system SD at zero."""
    import tracemalloc

    from humaneval_power.fitting.types import Design, group_codes

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.crowd import crowd_ratings

    data = read_ratings(crowd_ratings(items=items))
    design = Design.for_data(data)
    frame, comps = design.model_frame(data), design.components()
    x = np.column_stack([np.ones(len(frame))] + [frame[c].to_numpy(float) for c in design.columns])
    tracemalloc.start()
    model = solver.CrossedComponentsModel(x, frame["score"].to_numpy(float),
                                          {g: group_codes(frame, g) for g, _ in comps}, {}, comps)
    model.deviance(np.array([0.15, 0.04, 0.15, 0.0]))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def many_systems(r_ok: bool) -> dict[str, object]:
    """20 systems, 15,000 sparse crowd ratings, default model: time per backend; memory before/after."""
    from humaneval_power.fitting import vc_reml

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.crowd import crowd_ratings

    out: dict[str, object] = {}
    data = read_ratings(crowd_ratings())
    out["crowd20_rows"] = len(data.frame)
    for backend in ("lme4", "statsmodels") if r_ok else ("statsmodels",):
        wall, cpu = time.perf_counter(), time.process_time()
        fit = fit_pilot(data, backend)
        out[f"crowd20_{backend}_seconds"] = time.perf_counter() - wall
        out[f"crowd20_{backend}_cpu_seconds"] = time.process_time() - cpu
        out[f"crowd20_{backend}_reml_criterion"] = fit.raw.criterion
    before, after = _gradient_peak_bytes(_solver_before(), 500), _gradient_peak_bytes(vc_reml, 500)
    out["gradient_peak_mb_30000_rows_before"] = before / 1e6
    out["gradient_peak_mb_30000_rows_now"] = after / 1e6
    out["gradient_peak_before_over_now"] = before / after
    out["gradient_peak_mb_100020_rows_now"] = _gradient_peak_bytes(vc_reml, 1667) / 1e6
    return out


if __name__ == "__main__":
    main()
