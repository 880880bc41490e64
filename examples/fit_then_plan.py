"""Real pilots -> fitted variance components -> a power plan.

1. DialSummEval expert ratings (3 experts x 100 dialogues, fully crossed), one
   dimension, system F (BART) against the reference A: fit with lme4 and
   statsmodels (they agree), export the parameters.
2. The same on the Mechanical Turk ratings (sparse crowd: 199 workers for this
   pair), where the item components sit at zero.
3. WMT13 fr-en pairwise judgments: the logistic GLMM for one system pair, and
   a head-to-head plan from it (lme4 refits; ~1 minute).
4. Plan: how many items, with 3 or 10 workers, does a 0.05 difference (on the
   0-1 scale; 0.2 Likert points on 1-5) need, given the expert fit?

Run: python examples/fit_then_plan.py [DATA_DIR]   (default ../shared/data; ~40 s)
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from humaneval_power import likert_power, likert_sample_size
from humaneval_power.fitting.model import fit_pilot
from humaneval_power.fitting.ratings import read_judgments, read_ratings


def main() -> None:
    data_dir = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("HEPOWER_DATA", "../shared/data"))
    expert = read_ratings(data_dir / "dialsummeval_expert" / "ratings.csv", where={"dimension": "relevance"},
                          systems=["A", "F"], baseline="A", scale=(1, 5))
    fit = fit_pilot(expert, "lme4", intervals="profile")
    print("== DialSummEval experts, relevance, F vs A ==")
    print(fit.summary())
    sm = fit_pilot(expert, "statsmodels").records[0]
    print("statsmodels SDs:", {k: round(v, 4) for k, v in sm.items() if k.startswith("sd_")})

    crowd = read_ratings(data_dir / "dialsummeval_amt" / "ratings.csv", where={"dimension": "relevance"},
                         systems=["A", "F"], baseline="A", scale=(1, 5))
    print("\n== DialSummEval Mechanical Turk, relevance, F vs A ==")
    print(fit_pilot(crowd, "lme4").summary())

    base, other = "uedin-wmt13.2838", "uedin-heafield-unconstrained.2755"
    pairs = read_judgments(data_dir / "wmt13_fren_rankings" / "pairs.csv", worker="judge", item="segment",
                           where={"split": "train"}, baseline=base, systems=[base, other])
    h2h = fit_pilot(pairs, "lme4").records[0]
    print(f"\n== WMT13 fr-en: {other} vs {base} ==")
    print(f"log-odds {h2h['effect']:.3f} (SE {h2h['effect_se']:.3f}, p {h2h['p_value']:.3g}); "
          f"P(win) for a typical judge and segment {h2h['p_win']:.3f}; sd_worker {h2h['sd_worker']:.3f}, "
          f"sd_item {h2h['sd_item']:.3f}")

    print("\n== Head-to-head plan from the WMT13 fit: P(B preferred) = 0.6 for a typical judge ==")
    from humaneval_power.params import H2HParams
    from humaneval_power.scenarios.headtohead import h2h_mixed_power, h2h_power

    fitted = H2HParams(h2h["sd_worker"], h2h["sd_item"], intercept=h2h["effect"])
    print(h2h_mixed_power(fitted, [10], [50, 150], [0.4055], per_item=[3], n_sims=100, seed=1)[
        ["workers", "items", "judgments_per_item", "p_win", "power", "ci_low", "ci_high", "n_singular"]
    ].to_string(index=False))
    print("the same numbers of judgments, treated as independent (exact sign test):")
    print(h2h_power([150, 450], [0.6])[["n", "p_win", "power", "type_m"]].to_string(index=False))

    print("\n== Plan from the expert fit: effect 0.05 (0.2 points on 1-5) ==")
    params = fit.to_params_doc()
    from humaneval_power.params import LikertParams

    planned = LikertParams.from_json(params)
    print(likert_power(planned, [3, 10], [100, 400], [0.05], n_sims=4000, seed=1)[
        ["workers", "items", "effect", "power", "ci_low", "ci_high", "type_m"]].to_string(index=False))
    for workers in (3, 10):
        print(f"{workers} workers:", likert_sample_size(planned, 0.05, workers=workers, n_sims=4000))


if __name__ == "__main__":
    main()
