"""Benchmark: BLEU randomization power, the approximation, and paired tests against sacrebleu.

Prints one JSON record, all measured in this run:
- 1,000 simulated studies x 10,000 permutations at n = 2,000 (jobs = all cores);
- the saddlepoint approximation on the same studies (power difference) over a
  grid of (n, dB, P0, b0), and its speed-up;
- P0/b0 estimation for each WMT23 zh-en system pair (seconds);
- paired AR (10,000 trials) and paired bootstrap (1,000 resamples) on a
  1,976-sentence pair: ours vs sacrebleu's own implementation, both from the
  same precomputed sacrebleu statistics (ratio of test times, p-values; the
  bootstrap draws the same resamples as sacrebleu for the same seed).
Run: python benchmarks/bench_bleu.py [DATA_DIR]
"""
from __future__ import annotations

import itertools
import json
import os
import sys
import time
from pathlib import Path

from humaneval_power.engine import run_cells
from humaneval_power.fitting.swap_effects import estimate_swap_parameters
from humaneval_power.metrics import corpus_stats, read_lines
from humaneval_power.scenarios.bleu import BleuScenario
from humaneval_power.significance.paired import paired_bootstrap, paired_randomization


def main() -> None:
    out: dict[str, object] = {}
    t0 = time.perf_counter()
    mc = run_cells([BleuScenario(2000, 1.0, 0.13, 25.8, "randomization", 10_000)], 1000, seed=1)[0]
    out["montecarlo_1000x10000_seconds"] = time.perf_counter() - t0
    out["montecarlo_power"] = mc.power
    worst, mc_s, sp_s = 0.0, 0.0, 0.0
    for n, d, p0, b0 in itertools.product((50, 200, 1000, 3000), (0.5, 1, 2), (0.05, 0.2, 0.4), (15.0, 30.0)):
        t0 = time.perf_counter()
        a = run_cells([BleuScenario(n, d, p0, b0, "randomization", 10_000)], 1000, seed=2)[0].power
        t1 = time.perf_counter()
        b = run_cells([BleuScenario(n, d, p0, b0, "saddlepoint")], 1000, seed=2)[0].power
        mc_s, sp_s = mc_s + t1 - t0, sp_s + time.perf_counter() - t1
        worst = max(worst, abs(a - b))
    out.update(approx_grid_cells=72, approx_max_power_difference=worst, approx_speedup=mc_s / sp_s)
    data = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("HEPOWER_DATA", "../shared/data")) / "wmt23_zhen"
    if data.is_dir():
        ref = read_lines(data / "reference.txt", "reference")
        texts = {s: read_lines(data / f"system.{s}.txt", "system")
                 for s in ("HW-TSC", "ONLINE-A", "ONLINE-Y", "NLLB_MBR_BLEU")}
        slowest = 0.0
        for x, y in itertools.combinations(texts, 2):
            t0 = time.perf_counter()
            estimate_swap_parameters(corpus_stats(texts[x], ref), corpus_stats(texts[y], ref))
            slowest = max(slowest, time.perf_counter() - t0)
        out["estimate_slowest_pair_seconds"] = slowest
        import sacrebleu
        from sacrebleu.significance import _paired_ar_test, _paired_bs_test

        a_txt, b_txt = texts["ONLINE-Y"], texts["ONLINE-A"][:150] + texts["ONLINE-Y"][150:]
        a_st, b_st = corpus_stats(a_txt, ref), corpus_stats(b_txt, ref)
        metric = sacrebleu.BLEU()
        cached = {id(a_txt): metric._extract_corpus_statistics(a_txt, [ref]),
                  id(b_txt): metric._extract_corpus_statistics(b_txt, [ref])}
        # both sides start from the same sacrebleu statistics: only the tests are timed
        metric._extract_corpus_statistics = lambda hyps, refs: cached[id(hyps)]  # type: ignore[method-assign]
        info = {"BLEU": (cached[id(a_txt)], metric._aggregate_and_compute(cached[id(a_txt)]))}
        for name, ours_f, theirs_f, trials in (
                ("ar", paired_randomization, _paired_ar_test, 10_000), ("bs", paired_bootstrap, _paired_bs_test, 1000)):
            t0 = time.perf_counter()
            theirs = theirs_f(info, "b", b_txt, [ref], {"BLEU": metric}, trials, -1, 1)[1]["BLEU"].p_value
            t1 = time.perf_counter()
            ours = ours_f(a_st, b_st, trials, 1)["p_value"]
            t2 = time.perf_counter()
            out.update({f"paired_{name}_sacrebleu_seconds": t1 - t0, f"paired_{name}_ours_seconds": t2 - t1,
                        f"paired_{name}_speedup": (t1 - t0) / (t2 - t1), f"paired_{name}_p_sacrebleu": theirs,
                        f"paired_{name}_p_ours": ours})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
