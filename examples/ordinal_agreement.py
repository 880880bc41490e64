"""Planner power of the fast ordinal tier against ``ordinal::clmm`` refits of the same studies (issue #26).

Three designs of the benchmark process (thresholds (-2, -0.7, 0.5, 1.8), latent SDs worker 0.8, worker:system
0.3, item 1.0, item:system 0.5, logit), 2 systems, latent shift ``--effect``:

* crossed: 5 workers rate both systems' outputs of 40 items;
* sparse:  3 of a pool of 15 workers per item (balanced), 100 items;
* between: each of 60 items' two outputs rated by 3 of 15 workers, systems not crossed with items
  (``presentation="between"``).

Each chunk of studies is simulated once (``CrowdScenario.simulate`` with the chunk's seed) and decided by the
fast tier and by the clmm tier with the analysis' default test (the Bartlett factor of a chunk comes from the
same bootstrap draws, refitted by the fast path, in both tiers). Saved after every chunk to ``--out`` (npz; a
rerun resumes); ``--report`` prints power per tier with 95% Clopper-Pearson intervals, the share of studies
decided alike and the largest estimate difference.

Run: nice python examples/ordinal_agreement.py --design sparse --studies 200 --chunk 10 --out sparse_agree.npz
     python examples/ordinal_agreement.py --report crossed_agree.npz sparse_agree.npz between_agree.npz
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from humaneval_power.analyses import OrdinalCLMM
from humaneval_power.designs import CrowdDesign
from humaneval_power.engine import clopper_pearson
from humaneval_power.ordinal_process import OrdinalProcess
from humaneval_power.scenarios.crowd import CrowdScenario

PROCESS = OrdinalProcess(thresholds=(-2.0, -0.7, 0.5, 1.8), link="logit", sd_worker=0.8, sd_worker_system=0.3,
                         sd_item=1.0, sd_item_system=0.5)
DESIGNS = {
    "crossed": CrowdDesign(items=40, workers=5, ratings_per_item=5, assignment="crossed"),
    "sparse": CrowdDesign(items=100, workers=15, ratings_per_item=3, assignment="balanced"),
    "between": CrowdDesign(items=60, workers=15, ratings_per_item=3, presentation="between"),
}
TIERS = ("fast", "clmm")


def run(design: str, studies: int, chunk: int, effect: float, seed: int, out: Path) -> None:
    """Decide ``studies`` studies in chunks by both tiers, saving after each chunk (resuming a partial file)."""
    res = {f"{k}_{t}": np.full(studies, np.nan) for k in ("sig", "est", "failed") for t in TIERS}
    done = 0
    if out.exists():
        old = np.load(out)
        done = int(old["done"])
        for k in res:
            res[k][:done] = old[k][:done]
    cells = {t: CrowdScenario(DESIGNS[design], PROCESS, OrdinalCLMM.of(PROCESS, tier=t), effect) for t in TIERS}
    while done < studies:
        n = min(chunk, studies - done)
        for t, cell in cells.items():
            o = cell.simulate(n, np.random.default_rng([seed, done]))
            res[f"sig_{t}"][done:done + n], res[f"est_{t}"][done:done + n] = o.significant, o.estimate
            res[f"failed_{t}"][done:done + n] = o.failed
        done += n
        np.savez(out, done=done, design=design, effect=effect, test=cells["fast"].analysis.test, **res)
        print(f"{design}: {done}/{studies}", file=sys.stderr, flush=True)


def rate(k: int, n: int) -> str:
    lo, hi = clopper_pearson(k, n)
    return f"{k / n:.3f} [{lo:.3f}, {hi:.3f}]"


def report(paths: list[Path]) -> str:
    lines = [("| design (test, effect) | studies (failed) | power, fast tier | power, clmm refits | decisions agree "
             "| max abs diff estimate |"), "|---|---|---|---|---|---|"]
    for path in paths:
        r = np.load(path)
        n = int(r["done"])
        ok = (r["failed_fast"][:n] == 0) & (r["failed_clmm"][:n] == 0)
        sf, sc = r["sig_fast"][:n][ok] == 1, r["sig_clmm"][:n][ok] == 1
        lines.append(f"| {r['design']} ({r['test']}, {float(r['effect']):g}) | {n} ({n - ok.sum()}) | "
                     f"{rate(int(sf.sum()), sf.size)} | {rate(int(sc.sum()), sc.size)} | "
                     f"{int(np.sum(sf == sc))}/{sf.size} | "
                     f"{np.max(np.abs(r['est_fast'][:n][ok] - r['est_clmm'][:n][ok])):.1e} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--design", choices=sorted(DESIGNS))
    ap.add_argument("--studies", type=int, default=200)
    ap.add_argument("--chunk", type=int, default=10)
    ap.add_argument("--effect", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--report", type=Path, nargs="+")
    a = ap.parse_args()
    if a.report:
        print(report(a.report))
        return
    if a.design is None or a.out is None:
        ap.error("give --design and --out (or --report FILES)")
    run(a.design, a.studies, a.chunk, a.effect, a.seed, a.out)


if __name__ == "__main__":
    main()
