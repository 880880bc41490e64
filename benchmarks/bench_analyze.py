"""`hepower analyze` end to end on a sparse crowd study vs lme4 + lmerTest + emmeans' own time in R.

A 20-system crowd study: each of the 20 x 150 outputs rated by 5 of a pool of 300 workers drawn at random
(between-output presentation, 15,000 ratings; half the size, 7,500 ratings, to see memory grow), simulated
from the coding-invariant process. Timed, each in its own process (peak RSS of that process by wait4):

* hepower, lme4 backend: analyze() = lmerTest's fit in R + the F test, 20 marginal means and 190 Holm-adjusted
  pairs with Satterthwaite df in Python;
* hepower, no-R backend (statsmodels): the same analysis without R;
* R alone: lmerTest::lmer + anova(ddf = "Satterthwaite") + emmeans + pairs(adjust = "holm") with Satterthwaite df
  (emm_options(lmer.df = "satterthwaite", lmerTest.limit = Inf)), timed inside R (excluding R's start-up and
  reading the CSV), on the same CSV.

``--large``: also the 100,000-rating study of issue 27 (10,000 items x 5 systems, each output rated by 2 of
300 workers), beyond the dense Schur complement (11,800 effects outside the largest factor): the no-R
backend factors it sparse (its own supernodal factor on CHOLMOD's order). ``--what`` picks the runs (``nor``,
``lme4``, ``r``). The no-R backend's compiled kernels (numba) are cached after the first run: run it once
before timing.

Run: python benchmarks/bench_analyze.py [--ratings 15000 7500] [--large] [--what nor r]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

SYSTEMS, PER_OUTPUT, POOL = 20, 5, 300

R_SCRIPT = r"""
suppressPackageStartupMessages({library(lmerTest); library(emmeans)})
d <- read.csv(commandArgs(TRUE)[1])
d$system <- factor(d$system); d$worker <- factor(d$worker); d$item <- factor(d$item)
t <- system.time({
  m <- lmerTest::lmer(score ~ system + (1 | worker) + (1 | worker:system) + (1 | item) + (1 | item:system),
                      data = d, REML = TRUE)
  a <- anova(m, ddf = "Satterthwaite")
  emm_options(lmer.df = "satterthwaite", lmerTest.limit = Inf, pbkrtest.limit = 0)
  e <- emmeans(m, "system")
  p <- summary(pairs(e, reverse = TRUE, adjust = "holm"), infer = c(TRUE, TRUE))
})
cat(sprintf("{\"seconds\": %.3f, \"F\": %.10g, \"den_df\": %.10g, \"pairs\": %d}\n", t[["elapsed"]],
            a[["F value"]], a$DenDF, nrow(p)))
"""

HEPOWER = r"""
import json, sys, time
t0 = time.perf_counter()
from humaneval_power.completed_study import analyze
if sys.argv[2] == "lme4":
    from humaneval_power.fitting.lme4 import r_session
    r_session()  # R's start-up is not the analysis
t = time.perf_counter()
r = analyze(sys.argv[1], backend=sys.argv[2])
o = r.omnibus.iloc[0]
print(json.dumps({"seconds": time.perf_counter() - t, "F": float(o.F), "den_df": float(o.den_df),
                  "pairs": len(r.contrasts)}))
"""


def simulate(ratings: int, path: Path, seed: int = 1, systems: int = SYSTEMS, per_output: int = PER_OUTPUT) -> None:
    from humaneval_power.designs import CrowdDesign
    from humaneval_power.processes import InvariantProcess

    items = ratings // (systems * per_output)
    design = CrowdDesign(items=items, workers=POOL, ratings_per_item=per_output, systems=systems,
                         assignment="random", presentation="between")
    proc = InvariantProcess(0.6, 0.15, 0.2, 0.15, 0.6, systems=systems, intercept=3.5)
    rng = np.random.default_rng(seed)
    lay = design.draw(rng, 1)
    y = proc.simulate(lay, np.linspace(0, 0.4, systems), 1, rng)[:, 0]
    pd.DataFrame({"worker": [f"w{w:03d}" for w in np.asarray(lay.worker).ravel()],
                  "item": [f"i{i:05d}" for i in lay.item], "system": [f"S{s:02d}" for s in lay.system],
                  "score": y.round(6)}).to_csv(path, index=False)


def measured(cmd: list[str]) -> dict[str, float]:
    """Run ``cmd``; its JSON line plus its own peak RSS (MB, from wait4)."""
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, env=os.environ)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read()
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[:2]} failed ({proc.returncode}): {text[-500:]}")
    rec = json.loads(text.strip().splitlines()[-1])
    rec["peak_mb"] = usage.ru_maxrss / 1024
    rec["cpu_s"] = usage.ru_utime + usage.ru_stime  # the whole process: robust to the load, includes start-up
    return rec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ratings", type=int, nargs="*", default=[15000, 7500])
    ap.add_argument("--large", action="store_true", help="also the 100,000-rating, 5-system study (2 per output)")
    ap.add_argument("--what", nargs="+", choices=["lme4", "nor", "r"], default=["lme4", "nor", "r"])
    args = ap.parse_args()
    rows = []
    studies = [(n, SYSTEMS, PER_OUTPUT) for n in args.ratings] + ([(100_000, 5, 2)] if args.large else [])
    with tempfile.TemporaryDirectory() as tmp:
        r_file = Path(tmp) / "bench.R"
        r_file.write_text(R_SCRIPT)
        for n, systems, per_output in studies:
            data = Path(tmp) / f"study_{n}.csv"
            simulate(n, data, systems=systems, per_output=per_output)
            for key, label, cmd in (
                    ("lme4", "hepower analyze, lme4", [sys.executable, "-c", HEPOWER, str(data), "lme4"]),
                    ("nor", "hepower analyze, no R", [sys.executable, "-c", HEPOWER, str(data), "statsmodels"]),
                    ("r", "lmerTest + emmeans in R", ["Rscript", str(r_file), str(data)])):
                if key not in args.what:
                    continue
                print(f"{n} ratings: {label} ...", file=sys.stderr, flush=True)
                rec = measured(cmd)
                rows.append({"ratings": n, "systems": systems, "what": label, "seconds": round(rec["seconds"], 2),
                             "cpu_s": round(rec["cpu_s"], 1), "peak_mb": round(rec["peak_mb"]), "F": round(rec["F"], 6),
                             "den_df": round(rec["den_df"], 4), "pairs": rec["pairs"]})
                print(f"  {rows[-1]}", file=sys.stderr, flush=True)
    table = pd.DataFrame(rows)
    print(f"{PER_OUTPUT} (100,000: 2) ratings per output from a pool of {POOL} workers (sparse, between); "
          "seconds: the analysis alone (not the start-up of R or Python); cpu_s, peak_mb: the whole process")
    print(table.to_string(index=False))


if __name__ == "__main__":
    main()
