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
from pathlib import Path

import numpy as np
from _ordinal_common import DESIGNS, PROCESSES, chunks, rate

from humaneval_power.analyses import OrdinalCLMM
from humaneval_power.scenarios.crowd import CrowdScenario

PROCESS = PROCESSES["bench"]
TIERS = ("fast", "clmm")


def run(design: str, studies: int, chunk: int, effect: float, seed: int, out: Path) -> None:
    """Decide ``studies`` studies in chunks by both tiers, saving after each chunk (resuming a partial file)."""
    cells = {t: CrowdScenario(DESIGNS[design], PROCESS, OrdinalCLMM.of(PROCESS, tier=t), effect) for t in TIERS}
    fields = [f"{k}_{t}" for k in ("sig", "est", "failed") for t in TIERS]
    for cols, res in chunks(out, fields, studies, chunk, design, design=design, effect=effect,
                            test=cells["fast"].analysis.test):
        for t, cell in cells.items():
            o = cell.simulate(cols.stop - cols.start, np.random.default_rng([seed, cols.start]))
            res[f"sig_{t}"][cols], res[f"est_{t}"][cols], res[f"failed_{t}"][cols] = o.significant, o.estimate, o.failed


def report(paths: list[Path]) -> str:
    lines = [("| design (test, effect) | studies (failed) | power, fast tier | power, clmm refits | decisions agree "
             "| max abs diff estimate |"), "|---|---|---|---|---|---|"]
    for path in paths:
        r = np.load(path)
        n = int(r["done"])
        ok = (r["failed_fast"][:n] == 0) & (r["failed_clmm"][:n] == 0)
        sf, sc = r["sig_fast"][:n][ok] == 1, r["sig_clmm"][:n][ok] == 1
        lines.append(f"| {r['design']} ({r['test']}, {float(r['effect']):g}) | {n} ({n - ok.sum()}) | "
                     f"{rate(sf)} | {rate(sc)} | "
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
