"""WMT23 zh-en: BLEU of four systems -> swap effects -> P0, b0 -> a power plan and paired tests.

1. Corpus BLEU of each system from sacrebleu's per-sentence statistics (equal
   to the official scores).
2. For several system pairs: every sentence's swap effect, the additivity
   check of App. G (Fig. 15), and P0 / b0 with bootstrap intervals, beside
   Card et al. Table 3 (P0 0.09-0.19, b0 22.5-29.4).
3. Plan: power of the randomization test for 0.5-2 BLEU differences on test
   sets of 500-4,000 sentences with the median fitted P0 and b0; the MDE of a
   test set this size; the size needed for 1 BLEU.
4. Paired tests (randomization and bootstrap) of three systems against ONLINE-Y.

Run: python examples/wmt23_bleu.py [DATA_DIR]   (default ../shared/data; ~15 s)
"""
from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

from humaneval_power.fitting.swap_effects import estimate_swap_parameters
from humaneval_power.metrics import corpus_stats, read_lines
from humaneval_power.scenarios.bleu import bleu_mde, bleu_power, bleu_sample_size
from humaneval_power.significance.paired import paired_bootstrap, paired_randomization

SYSTEMS = ("HW-TSC", "ONLINE-A", "ONLINE-Y", "NLLB_MBR_BLEU")


def main() -> None:
    data = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("HEPOWER_DATA", "../shared/data")) / "wmt23_zhen"
    ref = read_lines(data / "reference.txt", "reference")
    stats = {s: corpus_stats(read_lines(data / f"system.{s}.txt", "system"), ref) for s in SYSTEMS}
    for s, st in stats.items():
        print(f"{s:14s} BLEU {st.corpus_score():.4f}")
    fits = []
    print("\npair (A -> B)                    dBLEU    P0 [95% CI]           b0 [95% CI]          additivity r")
    for a, b in (("ONLINE-A", "HW-TSC"), ("ONLINE-Y", "ONLINE-A"), ("NLLB_MBR_BLEU", "ONLINE-Y"),
                 ("ONLINE-Y", "HW-TSC")):
        r = estimate_swap_parameters(stats[a], stats[b])
        fits.append(r)
        print(f"{a:>13s} -> {b:13s} {r['delta']:+7.3f}  {r['p0']:.3f} [{r['p0_ci_low']:.3f}, {r['p0_ci_high']:.3f}]"
              f"   {r['b0']:.1f} [{r['b0_ci_low']:.1f}, {r['b0_ci_high']:.1f}]   {r['additivity_correlation']:.4f}")
    p0 = statistics.median(f["p0"] for f in fits)
    b0 = statistics.median(f["b0"] for f in fits)
    print(f"\nplan with the median fit: P0 = {p0:.3f}, b0 = {b0:.1f}")
    table = bleu_power([500, 1000, 2000, 4000], [0.5, 1.0, 2.0], [p0], [b0], method="randomization",
                       permutations=5000, n_sims=1000, seed=1)
    print(table.pivot(index="n", columns="delta", values="power").round(3).to_string())
    n = stats["HW-TSC"].n
    m = bleu_mde(n, p0, b0, n_sims=2000, seed=1)
    print(f"MDE of a {n}-sentence test set at 80% power: {m.value:.2f} BLEU")
    size = bleu_sample_size(1.0, p0, b0, n_sims=2000, seed=1)
    print(f"1 BLEU point needs about {size.value:,} sentences for 80% power")
    print("\npaired tests against ONLINE-Y:")
    for s in ("HW-TSC", "ONLINE-A", "NLLB_MBR_BLEU"):
        ar = paired_randomization(stats["ONLINE-Y"], stats[s], 10_000, seed=1)
        bs = paired_bootstrap(stats["ONLINE-Y"], stats[s], 1000, seed=1)
        print(f"  {s:14s} dBLEU {ar['delta']:+.2f}  AR p = {ar['p_value']:.4f}  bootstrap p = {bs['p_value']:.4f}"
              f"  95% CI [{bs['delta_ci_low']:+.2f}, {bs['delta_ci_high']:+.2f}]")


if __name__ == "__main__":
    main()
