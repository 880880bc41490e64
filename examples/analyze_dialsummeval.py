"""Analyse DialSummEval's finished studies with `hepower analyze`: which of the 14 systems really differ?

1. the expert ratings (relevance): 3 experts x 100 dialogues x 14 systems, fully crossed (4,200 ratings);
2. the Mechanical Turk ratings (relevance): the same 100 dialogues x 14 systems, each summary rated by 5 of
   283 crowd workers (7,000 ratings, a sparse crowd design).

Each: the F test of "all systems equal", all 91 pairs Holm-adjusted, and a report with the design check
(the Type-I error of one pair's test on this very layout and the study's sensitivity, simulated by the
crowd-design planner from the fitted components; on the AMT layout, 2,526 worker and worker x system effects,
it is skipped as too costly, and the report says so): out/analyze_expert.html, out/analyze_amt.md and their
figures. The backend is lme4 when R is there, else the no-R solver (the same numbers to ~1e-5).

Run: python examples/analyze_dialsummeval.py [DATA_DIR] [--sims N]   (default ../shared/data, 100 sims)
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from humaneval_power.completed_study import (
    analysis_figure,
    analyze,
    check_skipped,
    design_check,
    report_text,
)
from humaneval_power.io import write_outputs
from humaneval_power.plots import figure_writer

DIMENSION = "relevance"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data_dir", nargs="?", default=os.environ.get("HEPOWER_DATA", "../shared/data"))
    ap.add_argument("--sims", type=int, default=100)
    args = ap.parse_args()
    from humaneval_power.fitting import lme4

    backend = "lme4" if lme4.available()[0] else "statsmodels"
    Path("out").mkdir(exist_ok=True)
    for name, folder, report in (("expert", "dialsummeval_expert", "analyze_expert.html"),
                                 ("amt", "dialsummeval_amt", "analyze_amt.md")):
        start = time.perf_counter()
        result = analyze(Path(args.data_dir) / folder / "ratings.csv", where={"dimension": DIMENSION},
                         scale=(1, 5), backend=backend)
        fitted = time.perf_counter() - start
        skipped = check_skipped(result)
        check = None if skipped else design_check(result, n_sims=args.sims, seed=1)
        o = result.omnibus.iloc[0]
        sig = result.contrasts[result.contrasts.p_adjusted <= 0.05]
        print(f"== DialSummEval {name}, {DIMENSION} ({backend}; fit and tables {fitted:.1f} s, design check "
              f"{time.perf_counter() - start - fitted:.1f} s) ==")
        print(result.design.to_string(index=False, header=False))
        print(f"all systems equal: F({o.num_df:.0f}, {o.den_df:.1f}) = {o.F:.2f}, p = {o.p_value:.3g}")
        print(f"{len(sig)} of {len(result.contrasts)} pairs differ after Holm adjustment")
        print(result.components.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
        print(check.sentences() if check else skipped)
        fig_path = Path("out") / report.replace(".html", ".png").replace(".md", ".png")
        text = report_text(result, Path("out") / report, check, skipped)
        write_outputs([(Path("out") / report, lambda tmp, text=text: tmp.write_text(text, encoding="utf-8")),
                       (fig_path, figure_writer(analysis_figure(result), fig_path))])
        print(f"wrote out/{report} and {fig_path}\n")


if __name__ == "__main__":
    main()
