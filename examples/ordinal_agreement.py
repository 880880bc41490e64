"""Planner power of the fast ordinal tier against ``ordinal::clmm`` refits of the same studies (issue #26).

Three designs of the benchmark process (thresholds (-2, -0.7, 0.5, 1.8), latent SDs worker 0.8, worker:system
0.3, item 1.0, item:system 0.5, logit), 2 systems, latent shift ``--effect``:

* crossed: 5 workers rate both systems' outputs of 40 items;
* sparse:  3 of a pool of 15 workers per item (balanced), 100 items;
* between: each of 60 items' two outputs rated by 3 of 15 workers, systems not crossed with items
  (``presentation="between"``).

Each chunk of studies is simulated once (``CrowdScenario.simulate`` with the chunk's seed) and fitted by the
fast tier and by the clmm tier, each with the LRT and the Bartlett draws (a chunk's factor from the same
bootstrap draws, refitted by the fast path, in both tiers) and the latent Satterthwaite df, so that every
ordinal test (``t``, the default; ``bartlett``, ``z``, ``lrt``) is decided from one set of fits per tier.
Saved after every chunk to ``--out`` (npz; a rerun resumes); ``--report`` prints, per test, power per tier
with 95% Clopper-Pearson intervals and the studies decided alike, and the largest estimate and df differences.

Run: nice python examples/ordinal_agreement.py --design sparse --studies 200 --chunk 20 --out sparse_agree.npz
     python examples/ordinal_agreement.py --report crossed_agree.npz sparse_agree.npz between_agree.npz
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
from _ordinal_common import DESIGNS, PROCESSES, chunks, rate
from scipy import stats

from humaneval_power.analyses import OrdinalCLMM
from humaneval_power.ordinal_process import ORDINAL_TESTS, study_dfs
from humaneval_power.scenarios.crowd import CrowdScenario

PROCESS = PROCESSES["bench"]
TIERS = ("fast", "clmm")
FIELDS = ("est", "se", "z", "p_wald", "p_lr", "p_bartlett", "df", "failed")  #: per study and tier


class Recording(OrdinalCLMM):
    """The Bartlett-test analysis (it fits the LRT and the bootstrap draws) that also keeps, per study, every
    quantity a test decides from (the df of the t test included)."""

    def _design(self, worker: Any, layout: Any) -> Any:
        prep = super()._design(worker, layout)
        object.__setattr__(self, "prepared", prep)
        return prep

    def _decide(self, batch: Any, df: np.ndarray | None = None) -> Any:
        prep = self.prepared
        df = study_dfs(batch.sds, prep.groups, prep.X, prep.coef, self.link) if df is None else df
        self.kept.append({"est": batch.estimate, "se": batch.se, "z": batch.z, "p_wald": batch.p_wald,
                          "p_lr": batch.p_lr, "p_bartlett": batch.p_bartlett, "df": df,
                          "failed": np.asarray(batch.failed, float)})
        return super()._decide(batch, df)


def run(design: str, studies: int, chunk: int, effect: float, seed: int, out: Path) -> None:
    """Fit ``studies`` studies in chunks by both tiers, saving after each chunk (resuming a partial file)."""
    for cols, res in chunks(out, [f"{k}_{t}" for k in FIELDS for t in TIERS], studies, chunk, design,
                            design=design, effect=effect):
        for t in TIERS:
            analysis = Recording(link=PROCESS.link, scale=PROCESS.scale, tier=t, test="bartlett")
            object.__setattr__(analysis, "kept", [])
            CrowdScenario(DESIGNS[design], PROCESS, analysis, effect).simulate(
                cols.stop - cols.start, np.random.default_rng([seed, cols.start]))
            (kept,) = analysis.kept  # one layout per chunk: one batch
            for k in FIELDS:
                res[f"{k}_{t}"][cols] = kept[k]


def decisions(r: Any, tier: str, test: str, n: int, alpha: float = 0.05) -> np.ndarray:
    """Whether each of the first ``n`` studies rejects by ``test`` in ``tier``."""
    if test == "t":
        p = 2 * stats.t.sf(np.abs(r[f"z_{tier}"][:n]), r[f"df_{tier}"][:n])
    else:
        p = r[{"z": "p_wald", "lrt": "p_lr", "bartlett": "p_bartlett"}[test] + f"_{tier}"][:n]
    return np.nan_to_num(p, nan=1.0) < alpha


def report(paths: list[Path]) -> str:
    lines = [("| design (effect) | test | studies (failed) | power, fast tier | power, clmm refits | decisions agree "
              "| max abs diff estimate / df |"), "|---|---|---|---|---|---|---|"]
    for path in paths:
        r = np.load(path)
        n = int(r["done"])
        ok = (r["failed_fast"][:n] == 0) & (r["failed_clmm"][:n] == 0)
        diff = (f"{np.max(np.abs(r['est_fast'][:n][ok] - r['est_clmm'][:n][ok])):.1e} / "
                f"{np.nanmax(np.abs(r['df_fast'][:n][ok] - r['df_clmm'][:n][ok])):.1e}")
        for test in ORDINAL_TESTS:
            sf, sc = decisions(r, "fast", test, n)[ok], decisions(r, "clmm", test, n)[ok]
            lines.append(f"| {r['design']} ({float(r['effect']):g}) | {test} | {n} ({n - ok.sum()}) | {rate(sf)} | "
                         f"{rate(sc)} | {int(np.sum(sf == sc))}/{sf.size} | {diff} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--design", choices=sorted(DESIGNS))
    ap.add_argument("--studies", type=int, default=200)
    ap.add_argument("--chunk", type=int, default=20)
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
