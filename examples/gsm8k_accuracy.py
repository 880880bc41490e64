"""GSM8K: per-problem correctness of two models -> delta and agreement -> power, MDE, test-set size.

1. Estimate the accuracy difference and agreement of GPT-3 6B with a verifier
   against 175B finetuned (1,319 problems) and the exact McNemar p-value.
2. Power of a test set this size for differences like the observed one, with
   Type-S and Type-M (exact conditional and exact unconditional tests).
3. The smallest difference detectable with 80% power at the observed
   agreement, Lachenbruch's no-prior bounds for the same baseline, and the
   test-set size a 2-point difference would need.
4. A power / Type-M / Type-S figure (Card et al. Figs. 3, 7, 8) -> out/gsm8k_power.png.

Run: python examples/gsm8k_accuracy.py [DATA_DIR]   (default ../shared/data; ~5 s)
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from humaneval_power.planning import solve
from humaneval_power.plots import plot_accuracy_power, save_figure
from humaneval_power.scenarios.accuracy import (
    McNemarScenario,
    estimate_accuracy,
    lachenbruch_mde,
    mcnemar_power,
    mcnemar_sample_size,
)


def main() -> None:
    data_dir = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("HEPOWER_DATA", "../shared/data"))
    est = estimate_accuracy(data_dir / "gsm8k_solutions" / "correct.csv", "6b_verification", "175b_finetuning")
    n, delta, agree = est["n"], est["delta"], est["agreement"]
    print(f"175b_finetuning - 6b_verification on {n} problems: delta {delta:+.4f} "
          f"[{est['delta_ci_low']:+.4f}, {est['delta_ci_high']:+.4f}], agreement {agree:.4f}, "
          f"exact McNemar p = {est['p_value']:.4f}")
    for method in ("exact", "unconditional"):
        for d in (0.01, 0.02, abs(delta)):
            r = McNemarScenario(n, d, agree, method).exact()
            print(f"  {method:13s} |delta| {d:.4f}: power {r.power:.3f}, Type-S {r.type_s:.4f}, Type-M {r.type_m:.2f}")
    mde = solve(lambda d: McNemarScenario(n, d, agree, "exact"), "delta", 1e-4, 1 - agree, integer=False, n_sims=1)
    print(f"MDE at 80% power, agreement {agree:.3f}: {mde.value:.4f}")
    lach = lachenbruch_mde(n, est["accuracy_a"])
    print(f"no prior (Lachenbruch), baseline {est['accuracy_a']:.3f}: MDE {lach['mde']:.4f} "
          f"(bounds {lach['mde_low']:.4f} to {lach['mde_high']:.4f})")
    size = mcnemar_sample_size(0.02, agree, 0.8, "exact")
    print(f"a 0.02 difference at this agreement needs n = {size.value} problems (exact test)")
    table = mcnemar_power([500, n, 5000], [d / 100 for d in range(1, 9)], agree)
    fig = plot_accuracy_power(table, title=f"GSM8K, agreement {agree:.3f}")
    Path("out").mkdir(exist_ok=True)
    print(f"wrote {save_figure(fig, Path('out') / 'gsm8k_power.png')}")


if __name__ == "__main__":
    main()
