"""``hepower``: the command line, a thin layer over the Python API.

Exit codes: 0 success, 2 bad input or usage (one line on stderr), 1 an
internal error. Tables go to stdout (``--json``: exactly one JSON array);
progress and warnings go to stderr; files are written atomically.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from .errors import BackendUnavailableError, HepowerError, InputError, NotAttainableError
from .io import PLOT_FORMATS, check_output_path, json_records, write_table
from .params import PRESETS, SD_NAMES, LikertParams, get_preset, load_params
from .fitting.model import BACKENDS as FIT_BACKENDS, INTERVALS
from .scenarios.likert import METHODS, likert_power, likert_sample_size
from .metrics import METRICS as CORPUS_METRICS
from .scenarios.accuracy import METHODS as ACCURACY_METHODS
from .scenarios.bleu import METHODS as BLEU_METHODS
from .significance.paired import BOOTSTRAP_RULES
from .significance.randomization import APPROXIMATIONS
from .significance.coef_test import COEFFICIENT_TESTS


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise InputError(f"{self.prog}: {message}")


def _number_list(kind: Callable[[str], Any], name: str) -> Callable[[str], list[Any]]:
    """Parse '3', '0.1' or a range 'START:STOP:STEP' (STOP included)."""

    def parse(text: str) -> list[Any]:
        try:
            if ":" not in text:
                return [kind(text)]
            parts = [kind(p) for p in text.split(":")]
            if len(parts) != 3 or parts[2] <= 0 or parts[1] < parts[0]:
                raise ValueError
            start, stop, step = parts
            n = int(np.floor((stop - start) / step + 1e-9)) + 1
            return [kind(round(start + k * step, 12)) for k in range(n)]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{name} takes numbers or ranges START:STOP:STEP, got {text!r}"
            ) from None

    return parse


def _flatten(groups: Sequence[Sequence[Any]] | None) -> list[Any] | None:
    return None if groups is None else [v for g in groups for v in g]


def _float(text: str) -> float:
    value = float(text)
    if not np.isfinite(value):
        raise ValueError(text)
    return value


def _add_params_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("parameters (default: --preset card2020-high)")
    g.add_argument("--preset", choices=sorted(PRESETS), help="built-in parameter set")
    g.add_argument("--params", metavar="FILE", help="parameter file (JSON, from `hepower fit` or hand-written)")
    g.add_argument("--comparison", metavar="SYSTEM", help="which comparison of a parameter file with several")
    g.add_argument("--intercept", type=_float, help="beta0, the mean rating")
    for name in SD_NAMES:
        g.add_argument("--" + name.replace("_", "-"), dest=name, type=_float, metavar="SD",
                       help="slope SDs in the mean-difference convention" if "slope" in name else None)


def _params_from_args(args: argparse.Namespace) -> LikertParams:
    if args.preset and args.params:
        raise InputError("give --preset or --params, not both")
    overrides = {k: getattr(args, k) for k in SD_NAMES + ("intercept",) if getattr(args, k) is not None}
    if args.params:
        base = load_params(args.params, args.comparison)
    elif args.preset:
        base = get_preset(args.preset)
    elif all(k in overrides for k in SD_NAMES):
        return LikertParams(intercept=overrides.pop("intercept", 0.5), **overrides, name="command-line")
    elif overrides:
        missing = [k for k in SD_NAMES if k not in overrides]
        raise InputError(f"give all five SDs or a --preset/--params to start from (missing {', '.join(missing)})")
    else:
        base = get_preset("card2020-high")
    return base.with_sds(**overrides)


def _add_common(p: argparse.ArgumentParser, sims_default: int) -> None:
    p.add_argument("--method", choices=METHODS, default="fast", help="how power is computed (default fast)")
    p.add_argument("--test", choices=COEFFICIENT_TESTS, default="satterthwaite",
                   help="test of the system contrast (default satterthwaite)")
    p.add_argument("--alpha", type=_float, default=0.05)
    p.add_argument("--sims", type=int, default=sims_default, help=f"simulated studies per cell (default {sims_default})")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--jobs", type=int, default=None, help="processes (default: all cores); results do not depend on it")
    p.add_argument("--json", action="store_true", help="print one JSON array of records, nothing else")


def build_parser() -> argparse.ArgumentParser:
    """The ``hepower`` argument parser."""
    parser = _Parser(prog="hepower", description="Power analysis for NLP evaluations.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    likert = sub.add_parser("likert", help="Likert human evaluations (crossed worker x item LMM)")
    lsub = likert.add_subparsers(dest="action", required=True, parser_class=_Parser)

    power = lsub.add_parser("power", help="power over workers x items x effect")
    power.add_argument("--workers", type=_number_list(int, "--workers"), nargs="+", default=[[3]])
    power.add_argument("--items", type=_number_list(int, "--items"), nargs="+", default=[[100]])
    power.add_argument("--effect", type=_number_list(_float, "--effect"), nargs="+", required=True,
                       help="mean rating difference B - A on the parameters' scale")
    _add_params_options(power)
    _add_common(power, 1000)
    power.add_argument("--target-power", type=_float, default=0.8, help="for the summary of smallest designs")
    power.add_argument("--out", metavar="FILE", help="write the table (.csv, .json, .parquet)")
    power.add_argument("--plot", metavar="FILE", help="power curves like Card et al. Fig. 6 (.png, .pdf, .svg)")
    power.add_argument("--checkpoint", metavar="FILE",
                       help="save finished chunks here; rerun the same command to resume")

    size = lsub.add_parser("size", help="smallest number of items (or workers) reaching a target power")
    size.add_argument("--workers", type=int, help="number of workers (fixed when varying items)")
    size.add_argument("--items", type=int, help="number of items (fixed when varying workers)")
    size.add_argument("--effect", type=_float, required=True)
    size.add_argument("--target-power", type=_float, default=0.8)
    size.add_argument("--vary", choices=("items", "workers"), default="items")
    _add_params_options(size)
    _add_common(size, 2000)

    h2h = sub.add_parser("h2h", help="head-to-head (pairwise preference) studies")
    hsub = h2h.add_subparsers(dest="action", required=True, parser_class=_Parser)
    hpow = hsub.add_parser("power", help="power of independent judgments (--n) or of a GLMM design (--params)")
    hpow.add_argument("--n", type=_number_list(int, "--n"), nargs="+", help="independent judgments")
    hpow.add_argument("--p-win", type=_number_list(_float, "--p-win"), nargs="+", help="P(B preferred)")
    hpow.add_argument("--p-tie", type=_number_list(_float, "--p-tie"), nargs="+", default=[[0.0]])
    hpow.add_argument("--ties", choices=("drop", "split"), default="drop")
    hpow.add_argument("--method", choices=("exact", "simulate", "lme4"), default=None,
                      help="exact or simulate (independent; default exact), lme4 (GLMM)")
    _add_h2h_mixed(hpow, many=True)
    hpow.add_argument("--out", metavar="FILE", help="write the table (.csv, .json, .parquet)")
    hsize = hsub.add_parser("size", help="smallest n (independent) or number of items (GLMM) for a target power")
    hsize.add_argument("--p-win", type=_float, help="P(B preferred)")
    hsize.add_argument("--p-tie", type=_float, default=0.0)
    hsize.add_argument("--ties", choices=("drop", "split"), default="drop")
    hsize.add_argument("--target-power", type=_float, default=0.8)
    _add_h2h_mixed(hsize, many=False)
    hmde = hsub.add_parser("mde", help="smallest p_win detectable with n independent judgments")
    hmde.add_argument("--n", type=int, required=True)
    hmde.add_argument("--p-tie", type=_float, default=0.0)
    hmde.add_argument("--ties", choices=("drop", "split"), default="drop")
    hmde.add_argument("--target-power", type=_float, default=0.8)
    hmde.add_argument("--alpha", type=_float, default=0.05)
    hmde.add_argument("--json", action="store_true")

    acc = sub.add_parser("accuracy", help="comparing classifiers on accuracy (McNemar; unpaired proportions)")
    asub = acc.add_subparsers(dest="action", required=True, parser_class=_Parser)
    apow = asub.add_parser("power", help="McNemar power over n x delta x agreement")
    apow.add_argument("--n", type=_number_list(int, "--n"), nargs="+", required=True)
    apow.add_argument("--delta", type=_number_list(_float, "--delta"), nargs="+",
                      help="accuracy difference B - A, as a proportion (0.02, not 2)")
    apow.add_argument("--agreement", type=_number_list(_float, "--agreement"), nargs="+")
    apow.add_argument("--table", type=_float, nargs=4, metavar=("BOTH_RIGHT", "A_ONLY", "B_ONLY", "BOTH_WRONG"),
                      help="2x2 table of probabilities instead of --delta/--agreement")
    apow.add_argument("--method", choices=ACCURACY_METHODS, default="exact")
    apow.add_argument("--sims", type=int, default=10_000)
    apow.add_argument("--seed", type=int, default=1)
    apow.add_argument("--out", metavar="FILE")
    apow.add_argument("--plot", metavar="FILE", help="power, Type-M and Type-S against delta (Card et al. Figs. 3, 7, 8)")
    asize = asub.add_parser("size", help="test-set size for a target power")
    asize.add_argument("--delta", type=_float, required=True)
    asize.add_argument("--agreement", type=_float, required=True)
    asize.add_argument("--target-power", type=_float, default=0.8)
    asize.add_argument("--method", choices=[m for m in ACCURACY_METHODS if m != "simulate"], default="normal")
    amde = asub.add_parser("mde", help="minimum detectable accuracy gain under a historical prior (or none)")
    amde.add_argument("--n", type=int, required=True)
    amde.add_argument("--baseline", type=_float, required=True, help="state-of-the-art accuracy (proportion)")
    amde.add_argument("--prior", choices=("glue", "squad2", "lachenbruch"), default="glue",
                      help="overlap regression (Card et al. Tables 5-6) or Lachenbruch's no-prior bounds")
    amde.add_argument("--target-power", type=_float, default=0.8)
    amde.add_argument("--method", choices=[m for m in ACCURACY_METHODS if m != "simulate"], default="normal")
    aest = asub.add_parser("estimate", help="delta and agreement of two models from per-item correctness")
    aest.add_argument("predictions", metavar="PREDICTIONS", help="CSV/Parquet: item, model, correct (0/1)")
    aest.add_argument("--model-a", required=True)
    aest.add_argument("--model-b", required=True)
    for col in ("item", "model", "correct"):
        aest.add_argument(f"--{col}-column", dest=f"{col}_column", default=col, metavar="COL")
    atab = asub.add_parser("table", help="Card et al. Table 2 / Table 9: MDE per benchmark task")
    atab.add_argument("--prior", choices=("glue", "squad2"), default="glue")
    atab.add_argument("--method", choices=[m for m in ACCURACY_METHODS if m != "simulate"], nargs="+",
                      default=["normal"], help="one or more methods, one MDE column each")
    atab.add_argument("--target-power", type=_float, default=0.8)
    aunp = asub.add_parser("unpaired", help="two independent proportions (power.prop.test): solve for the missing one")
    aunp.add_argument("--n", type=_float, help="items per model")
    aunp.add_argument("--p1", type=_float, required=True, help="baseline accuracy")
    aunp.add_argument("--p2", type=_float, help="new model's accuracy")
    aunp.add_argument("--power", type=_float)
    for q in (apow, asize, amde, atab, aunp):
        q.add_argument("--alpha", type=_float, default=0.05)
    for q in (apow, asize, amde, aest, atab, aunp):
        q.add_argument("--json", action="store_true", help="print one JSON array of records, nothing else")

    bleu = sub.add_parser("bleu", help="BLEU/chrF: randomization-test power, swap-effect estimates, paired tests")
    bsub = bleu.add_subparsers(dest="action", required=True, parser_class=_Parser)
    bpow = bsub.add_parser("power", help="power, Type-S, Type-M over n x delta x p0 x b0")
    bpow.add_argument("--n", type=_number_list(int, "--n"), nargs="+", required=True, help="test-set sentences")
    bpow.add_argument("--delta", type=_number_list(_float, "--delta"), nargs="+", required=True,
                      help="expected difference B - A in BLEU points")
    bpow.add_argument("--sims", type=int, default=1000)
    bpow.add_argument("--permutations", type=int, default=10_000, help="randomization trials per simulated study")
    bpow.add_argument("--approx", nargs="?", const="saddlepoint", choices=APPROXIMATIONS,
                      help="approximate p-values instead of permutations (default approximation: saddlepoint)")
    bpow.add_argument("--jobs", type=int, help="worker processes (default: all cores)")
    bpow.add_argument("--checkpoint", metavar="FILE", help="JSONL of finished chunks; rerun to resume")
    bpow.add_argument("--out", metavar="FILE")
    bmde = bsub.add_parser("mde", help="smallest BLEU difference reaching the target power")
    bmde.add_argument("--n", type=int, required=True)
    bsize = bsub.add_parser("size", help="test-set size reaching the target power")
    bsize.add_argument("--delta", type=_float, required=True)
    for q in (bmde, bsize):
        q.add_argument("--p0", type=_float, required=True)
        q.add_argument("--b0", type=_float, required=True)
        q.add_argument("--target-power", type=_float, default=0.8)
        q.add_argument("--sims", type=int, default=2000)
        q.add_argument("--method", choices=BLEU_METHODS, default="saddlepoint")
        q.add_argument("--permutations", type=int, default=10_000)
        q.add_argument("--jobs", type=int)
    for q in (bpow,):
        q.add_argument("--p0", type=_number_list(_float, "--p0"), nargs="+", required=True,
                       help="share of sentences whose swap changes nothing")
        q.add_argument("--b0", type=_number_list(_float, "--b0"), nargs="+", required=True,
                       help="Laplace scale of the swap effects times n")
    best = bsub.add_parser("estimate", help="swap effects of two systems' outputs -> P0, b0 (with intervals)")
    best.add_argument("--ref", required=True, metavar="FILE", help="reference, one segment per line")
    best.add_argument("--sys-a", required=True, metavar="FILE")
    best.add_argument("--sys-b", required=True, metavar="FILE")
    best.add_argument("--nboot", type=int, default=1000)
    btest = bsub.add_parser("test", help="paired tests of systems against a baseline")
    btest.add_argument("--ref", required=True, metavar="FILE")
    btest.add_argument("--baseline", required=True, metavar="FILE")
    btest.add_argument("--systems", required=True, nargs="+", metavar="FILE")
    kind = btest.add_mutually_exclusive_group()
    kind.add_argument("--paired-ar", action="store_true", help="approximate randomization (default)")
    kind.add_argument("--paired-bs", action="store_true", help="paired bootstrap")
    btest.add_argument("--trials", type=int, help="AR trials (default 10,000) or bootstrap resamples (1,000)")
    btest.add_argument("--bs-rule", choices=BOOTSTRAP_RULES, default="sacrebleu")
    for q in (best, btest):
        q.add_argument("--metric", choices=CORPUS_METRICS, default="bleu")
    for q in (bpow, bmde, bsize, best, btest):
        q.add_argument("--seed", type=int, default=1)
        if q is not best and q is not btest:
            q.add_argument("--alpha", type=_float, default=0.05)
        q.add_argument("--json", action="store_true", help="print one JSON array of records, nothing else")

    fit = sub.add_parser("fit", help="fit pilot data (ratings or head-to-head judgments) and export parameters")
    fit.add_argument("data", metavar="RATINGS", help="tidy CSV or Parquet, one row per rating or judgment")
    for role in ("worker", "item", "system", "score"):
        fit.add_argument(f"--{role}", metavar="COL", help=f"{role} column (default: found by name)")
    fit.add_argument("--system-a", default="system_a", metavar="COL", help="binomial: first system's column")
    fit.add_argument("--system-b", default="system_b", metavar="COL", help="binomial: second system's column")
    fit.add_argument("--outcome", default="outcome", metavar="COL", help="binomial: a, b or tie (or the winner)")
    fit.add_argument("--baseline", metavar="SYSTEM", help="system the others are compared with (default: first)")
    fit.add_argument("--systems", nargs="+", metavar="SYSTEM", help="keep only these systems")
    fit.add_argument("--where", action="append", metavar="COL=VALUE", help="keep rows where COL equals VALUE")
    fit.add_argument("--family", choices=("gaussian", "binomial"), default="gaussian")
    fit.add_argument("--backend", choices=FIT_BACKENDS, default="lme4",
                     help="lme4 (R, Satterthwaite t; default), statsmodels (no R, same tests and Wald intervals, "
                          "Gaussian only), bambi (Bayesian, posterior intervals)")
    fit.add_argument("--scale", nargs=2, type=_float, metavar=("MIN", "MAX"), help="rating scale; rescale to [0, 1]")
    fit.add_argument("--duplicates", choices=("error", "average", "keep"), default="error")
    fit.add_argument("--ties", choices=("drop", "split"), default="drop")
    fit.add_argument("--correlated", action="store_true", help="correlated random intercepts and slopes")
    fit.add_argument("--simplify", action="store_true", help="drop zero variance components step by step")
    fit.add_argument("--intervals", choices=INTERVALS,
                     help="intervals for the SDs (default: wald for lme4 and statsmodels, posterior for bambi)")
    fit.add_argument("--nboot", type=int, default=500, help="bootstrap fits for --intervals boot")
    fit.add_argument("--draws", type=int, default=1000, help="bambi: draws per chain")
    fit.add_argument("--chains", type=int, default=2, help="bambi: chains")
    fit.add_argument("--seed", type=int, default=1)
    fit.add_argument("-o", "--out", metavar="FILE", help="parameter file to write (.json)")
    fit.add_argument("--json", action="store_true", help="print one JSON array of records, nothing else")
    return parser


def _add_h2h_mixed(p: argparse.ArgumentParser, many: bool) -> None:
    g = p.add_argument_group("repeated judgments (logistic GLMM, lme4)")
    g.add_argument("--params", metavar="FILE", help="head-to-head parameter file (`hepower fit --family binomial`)")
    g.add_argument("--comparison", metavar="SYSTEM", help="which comparison of a parameter file with several")
    g.add_argument("--sd-worker", type=_float, help="worker SD on the log-odds scale")
    g.add_argument("--sd-item", type=_float, help="item SD on the log-odds scale")
    if many:
        g.add_argument("--workers", type=_number_list(int, "--workers"), nargs="+")
        g.add_argument("--items", type=_number_list(int, "--items"), nargs="+")
        g.add_argument("--judgments-per-item", type=_number_list(int, "--judgments-per-item"), nargs="+",
                       help="workers judging each item (default: all)")
        g.add_argument("--effect", type=_number_list(_float, "--effect"), nargs="+",
                       help="P(B preferred) for a typical worker and item")
        g.add_argument("--log-odds", type=_number_list(_float, "--log-odds"), nargs="+", help="the effect as log-odds")
        g.add_argument("--checkpoint", metavar="FILE")
    else:
        g.add_argument("--workers", type=int)
        g.add_argument("--judgments-per-item", type=int)
        g.add_argument("--effect", type=_float, help="P(B preferred) for a typical worker and item")
        g.add_argument("--log-odds", type=_float)
    g.add_argument("--test", choices=("z", "lrt"), default="z")
    p.add_argument("--alpha", type=_float, default=0.05)
    p.add_argument("--sims", type=int, default=None, help="simulations (default 10000 independent, 300 GLMM)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--jobs", type=int, default=None)
    p.add_argument("--json", action="store_true", help="print one JSON array of records, nothing else")


def _h2h_params(args: argparse.Namespace) -> Any:
    from .params import H2HParams, load_h2h_params

    if args.params:
        if args.sd_worker is not None or args.sd_item is not None:
            raise InputError("give --params or --sd-worker/--sd-item, not both")
        return load_h2h_params(args.params, args.comparison)
    if args.sd_worker is None or args.sd_item is None:
        raise InputError("a GLMM design needs --params FILE or both --sd-worker and --sd-item")
    return H2HParams(args.sd_worker, args.sd_item, name="command-line")


def _is_mixed(args: argparse.Namespace) -> bool:
    return any(getattr(args, k, None) is not None for k in ("params", "sd_worker", "sd_item", "workers"))


def _emit(table: pd.DataFrame, args: argparse.Namespace, columns: Sequence[str], out: Any = None) -> None:
    if out or getattr(args, "out", None):
        write_table(table, out or check_output_path(args.out))
    if args.json:
        print(json.dumps(json_records(table)))
    else:
        _print_table(table, columns)


def _run_accuracy(args: argparse.Namespace) -> int:
    from .engine import results_table, run_cells
    from .scenarios import accuracy as a

    if args.action == "power":
        out = check_output_path(args.out) if args.out else None
        plot = check_output_path(args.plot, PLOT_FORMATS, "--plot") if args.plot else None
        if (args.table is None) == (args.delta is None or args.agreement is None) or (
                args.table is not None and (args.delta or args.agreement)):
            raise InputError("give --delta and --agreement, or --table (four probabilities)")
        pairs = ([a.from_table(*args.table)] if args.table else
                 [(d, g) for d in _flatten(args.delta) for g in _flatten(args.agreement)])
        cells = [a.McNemarScenario(n, d, g, args.method, args.alpha) for n in _flatten(args.n) for d, g in pairs]
        table = results_table(run_cells(cells, args.sims, seed=args.seed))
        if plot:
            from .plots import plot_accuracy_curves

            plot_accuracy_curves(table, plot, title=f"McNemar, {args.method} method, alpha {args.alpha:g}")
        _emit(table, args, ["n", "delta", "agreement", "method", "power", "ci_low", "ci_high", "type_s", "type_m"],
              out)
        return 0
    if args.action == "estimate":
        rec = a.estimate_accuracy(args.predictions, args.model_a, args.model_b, args.item_column,
                                  args.model_column, args.correct_column)
        table = pd.DataFrame([rec])
    elif args.action == "size":
        table = pd.DataFrame([a.mcnemar_sample_size(args.delta, args.agreement, args.target_power, args.method,
                                                    args.alpha)])
    elif args.action == "mde":
        table = pd.DataFrame([a.accuracy_mde(args.n, args.baseline, args.prior, args.target_power, args.method,
                                             args.alpha)])
    elif args.action == "unpaired":
        table = pd.DataFrame([a.solve_prop_test(args.n, args.p1, args.p2, args.power, args.alpha)])
    else:
        table = pd.DataFrame(a.mde_table(args.prior, list(dict.fromkeys(args.method)), args.target_power, args.alpha))
        if not args.json:
            _print_mde_table(table, args.prior)
            return 0
    _emit(table, args, list(table.columns))
    return 0


def _print_mde_table(table: pd.DataFrame, prior: str) -> None:
    """Table 9 layout: one row per task, MDEs in percentage points."""
    wide = table.pivot_table(index="task", columns="method", values="mde", sort=False, dropna=False)
    first = table.drop_duplicates("task").set_index("task")
    pct = lambda v: "n.a." if v is None or v != v else f"+{100 * v:.2f}"  # noqa: E731
    rows = []
    for task in first.index:
        r = first.loc[task]
        row = {"task": task, "n": int(r["n"]), "SOTA %": f"{100 * r['sota']:.3g}"}
        row.update({f"MDE {m}": pct(wide.loc[task, m]) for m in wide.columns})
        row["MDE unpaired"] = pct(r["mde_unpaired"])
        row["Lachenbruch mid (low, high)"] = (f"{pct(r['mde_lachenbruch'])} ({pct(r['mde_lachenbruch_low'])}, "
                                             f"{pct(r['mde_lachenbruch_high'])})")
        row["expected gain"] = f"{100 * r['expected_gain']:+.2f}"
        rows.append(row)
    print(f"Minimum detectable effects at 80% power, {prior} prior (percentage points):")
    print(pd.DataFrame(rows).to_string(index=False))
    print("n.a.: no gain reaches the target power under this prior (its agreement shrinks as the gain grows).")


def _system_name(path: str) -> str:
    """``system.HW-TSC.txt`` -> ``HW-TSC``."""
    return Path(path).name.removeprefix("system.").removesuffix(".txt")


def _run_bleu(args: argparse.Namespace) -> int:
    from .scenarios import bleu as b

    if args.action == "power":
        out = check_output_path(args.out) if args.out else None
        bar = _ProgressBar(enabled=True)
        try:
            table = b.bleu_power(_flatten(args.n), _flatten(args.delta), _flatten(args.p0), _flatten(args.b0),
                                 args.approx or "randomization", args.permutations, args.alpha, args.sims, args.seed,
                                 args.jobs, bar, args.checkpoint)
        finally:
            bar.close()
        _emit(table, args, ["n", "delta", "p0", "b0", "method", "power", "ci_low", "ci_high", "type_s", "type_m"],
              out)
        return 0
    if args.action in ("mde", "size"):
        common = dict(target_power=args.target_power, method=args.method, permutations=args.permutations,
                      alpha=args.alpha, n_sims=args.sims, seed=args.seed, jobs=args.jobs)
        rec = (b.bleu_mde(args.n, args.p0, args.b0, **common) if args.action == "mde"
               else b.bleu_sample_size(args.delta, args.p0, args.b0, **common))
        table = pd.DataFrame([rec])
        _emit(table, args, list(table.columns))
        return 0
    from .fitting.swap_effects import estimate_swap_parameters
    from .metrics import corpus_stats, read_lines
    from .significance.paired import paired_bootstrap, paired_randomization

    ref = read_lines(args.ref, "reference")

    def stats_of(path: str) -> Any:
        return corpus_stats(read_lines(path, "system output"), ref, args.metric)

    if args.action == "estimate":
        rec = {"system_a": _system_name(args.sys_a), "system_b": _system_name(args.sys_b),
               **estimate_swap_parameters(stats_of(args.sys_a), stats_of(args.sys_b), args.nboot, seed=args.seed)}
        table = pd.DataFrame([rec])
        _emit(table, args, list(table.columns))
        return 0
    base = stats_of(args.baseline)
    rows = []
    for path in args.systems:
        other = stats_of(path)
        if args.paired_bs:
            r = paired_bootstrap(base, other, args.trials or 1000, args.seed, args.bs_rule)
        else:
            r = paired_randomization(base, other, args.trials or 10_000, args.seed)
        rows.append({"system": _system_name(path), "baseline": _system_name(args.baseline), "metric": args.metric,
                     **r})
    table = pd.DataFrame(rows)
    _emit(table, args, ["system", "baseline", "metric", "score", "baseline_score", "delta", "p_value", "method"])
    return 0


def _run_h2h(args: argparse.Namespace) -> int:
    from .scenarios import headtohead as h

    if args.action == "mde":
        try:
            rec = h.h2h_mde(args.n, args.p_tie, args.target_power, args.ties, args.alpha)
        except NotAttainableError as exc:
            rec = {"n": args.n, "p_tie": args.p_tie, "ties": args.ties, "p_win": None, "mde": None,
                   "power_at_mde": None, "reason": f"{exc}: {exc.reason}"}
        _emit(pd.DataFrame([rec]), args, list(rec))
        return 0
    if getattr(args, "out", None):
        check_output_path(args.out)
    sims = args.sims
    if sims is not None and sims < 1:
        raise InputError(f"--sims must be a positive integer, got {sims}")
    if args.action == "size":
        if _is_mixed(args):
            if args.workers is None:
                raise InputError("give --workers for a GLMM design")
            params = _h2h_params(args)
            r = h.h2h_mixed_sample_size(params, h.effect_to_log_odds(args.effect, args.log_odds), args.workers,
                                        args.judgments_per_item, args.target_power, args.test, args.alpha,
                                        sims or 300, args.seed, args.jobs)
        else:
            if args.p_win is None:
                raise InputError("give --p-win (independent judgments) or --params/--workers (GLMM)")
            r = h.h2h_sample_size(args.p_win, args.p_tie, args.target_power, args.ties, args.alpha)
        if args.json:
            print(json.dumps(json_records(pd.DataFrame([r.record()]))))
        else:
            print(r)
        return 0
    bar = _ProgressBar(enabled=True)
    try:
        if _is_mixed(args):
            if not args.workers or not args.items:
                raise InputError("a GLMM design needs --workers and --items")
            if args.method not in (None, "lme4"):
                raise InputError("repeated judgments are simulated with --method lme4")
            params = _h2h_params(args)
            effects = _flatten(args.effect)
            odds = _flatten(args.log_odds)
            if (effects is None) == (odds is None):
                raise InputError("give the effect as --effect (a probability) or --log-odds, not both")
            log_odds = odds if odds is not None else [h.effect_to_log_odds(p, None) for p in effects]
            table = h.h2h_mixed_power(params, _flatten(args.workers), _flatten(args.items), log_odds,
                                      _flatten(args.judgments_per_item) or [None], args.test, args.alpha,
                                      sims or 300, args.seed, args.jobs, bar, args.checkpoint)
            columns = ["workers", "items", "judgments_per_item", "effect", "p_win", "power", "ci_low", "ci_high",
                       "type_s", "type_m", "n_failed", "n_singular", "n_warnings"]
        else:
            if not args.n or not args.p_win:
                raise InputError("give --n and --p-win (independent judgments) or --params/--workers (GLMM)")
            table = h.h2h_power(_flatten(args.n), _flatten(args.p_win), _flatten(args.p_tie), args.ties,
                                args.method or "exact", args.alpha, sims or 10_000, args.seed, args.jobs, bar)
            columns = ["n", "p_win", "p_tie", "ties", "method", "power", "ci_low", "ci_high", "type_s", "type_m"]
    finally:
        bar.close()
    _emit(table, args, columns)
    return 0


class _ProgressBar:
    """A tqdm bar on stderr that appears only when a run takes over a second."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.bar: Any = None

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=done, unit="sim", delay=1.0, file=sys.stderr, leave=False)
        else:
            self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _smallest_designs(table: pd.DataFrame, target: float) -> pd.DataFrame:
    """Per (workers, effect): the fewest items in the sweep whose power reaches the target."""
    rows = []
    for (w, e), g in table.groupby(["workers", "effect"], sort=True):
        ok = g[g.power >= target].sort_values("items")
        first = ok.iloc[0] if len(ok) else None
        rows.append({
            "workers": w,
            "effect": e,
            "items": int(first["items"]) if first is not None else None,
            "power": float(first["power"]) if first is not None else float(g.power.max()),
        })
    return pd.DataFrame(rows)


def _print_table(table: pd.DataFrame, columns: Sequence[str]) -> None:
    cols = [c for c in columns if c in table.columns and not table[c].isna().all()]
    print(table[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}"))


def _run_likert_power(args: argparse.Namespace) -> int:
    params = _params_from_args(args)
    out = check_output_path(args.out) if args.out else None
    plot = check_output_path(args.plot, PLOT_FORMATS, "--plot") if args.plot else None
    if not 0 < args.target_power < 1:
        raise InputError(f"--target-power must be in (0, 1), got {args.target_power}")
    bar = _ProgressBar(enabled=True)
    try:
        table = likert_power(
            params, _flatten(args.workers), _flatten(args.items), _flatten(args.effect),
            method=args.method, test=args.test, alpha=args.alpha, n_sims=args.sims,
            seed=args.seed, jobs=args.jobs, progress=bar, checkpoint=args.checkpoint,
        )
    finally:
        bar.close()
    if out:
        write_table(table, out)
    if plot:
        from .plots import plot_power_curves

        plot_power_curves(table, plot, target=args.target_power,
                          title=f"{params.name}: {args.method}, {args.test} test")
    if args.json:
        print(json.dumps(json_records(table)))
        return 0
    print(f"Power for {params.name} ({args.method}, {args.test} test, alpha {args.alpha:g}, "
          f"{args.sims} simulations per cell, seed {args.seed}):")
    _print_table(table, ["workers", "items", "effect", "power", "ci_low", "ci_high", "type_s", "type_m",
                         "df", "n_failed", "n_singular", "n_warnings"])
    print(f"\nSmallest designs in this sweep reaching {args.target_power:g} power:")
    for r in _smallest_designs(table, args.target_power).to_dict(orient="records"):
        found = r["items"] is not None and r["items"] == r["items"]
        what = f"{int(r['items'])} items (power {r['power']:.3f})" if found else f"none (best {r['power']:.3f})"
        print(f"  {r['workers']} workers, effect {r['effect']:g}: {what}")
    for path in (out, plot):
        if path:
            print(f"wrote {path}", file=sys.stderr)
    return 0


def _run_likert_size(args: argparse.Namespace) -> int:
    params = _params_from_args(args)
    result = likert_sample_size(
        params, args.effect, target_power=args.target_power, workers=args.workers, items=args.items,
        vary=args.vary, method=args.method, test=args.test, alpha=args.alpha, n_sims=args.sims,
        seed=args.seed, jobs=args.jobs,
    )
    if args.json:
        print(json.dumps(json_records(pd.DataFrame([result.record()]))))
    else:
        print(result)
    return 0


def _where(items: Sequence[str] | None) -> dict[str, str]:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise InputError(f"--where takes COL=VALUE, got {item!r}")
        col, value = item.split("=", 1)
        out[col] = value
    return out


def fit_records(result: Any) -> list[dict[str, Any]]:
    """Flat records of a fit: intervals as NAME_ci_low / NAME_ci_high, correlations as cor_GROUP."""
    flat = []
    for rec in result.records:
        r = {k: v for k, v in rec.items() if k not in ("intervals", "correlations")}
        for name, (lo, hi) in rec.get("intervals", {}).items():
            r[f"{name}_ci_low"], r[f"{name}_ci_high"] = lo, hi
        for group, cor in (rec.get("correlations") or {}).items():
            r[f"cor_{group}"] = cor
        flat.append(r)
    return flat


def _run_fit(args: argparse.Namespace) -> int:
    from .fitting.model import fit_pilot
    from .fitting.ratings import read_judgments, read_ratings
    from .io import write_text_atomic

    out = check_output_path(args.out, (".json",), "--out") if args.out else None
    if args.nboot < 1 or args.draws < 1 or args.chains < 1:
        raise InputError("--nboot, --draws and --chains must be positive")
    if args.family == "gaussian":
        if args.ties != "drop":
            raise InputError("--ties applies to --family binomial")
        data = read_ratings(args.data, args.worker, args.item, args.system, args.score, args.baseline, args.systems,
                            _where(args.where), tuple(args.scale) if args.scale else None, args.duplicates)
    else:
        if args.scale or args.score or args.system:
            raise InputError("--scale, --score and --system apply to ratings; judgments use --system-a/-b and --outcome")
        data = read_judgments(args.data, args.worker, args.item, args.system_a, args.system_b, args.outcome,
                              args.baseline, args.systems, _where(args.where), args.ties)
    result = fit_pilot(data, args.backend, args.correlated, args.simplify, args.intervals, args.nboot, args.seed,
                       args.draws, args.chains)
    if out:
        write_text_atomic(out, json.dumps(result.to_params_file(), indent=1) + "\n")
    if args.json:
        print(json.dumps(json_records(pd.DataFrame(fit_records(result)))))
    else:
        print(result.summary())
        if out and data.family == "gaussian":
            print(f"\nwrote {out}: plan with `hepower likert power --params {out}"
                  + (" --comparison SYSTEM" if len(result.records) > 1 else "") + " ...`")
        elif out:
            print(f"\nwrote {out} (head-to-head parameters: log-odds intercept, sd_worker, sd_item)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hepower`` console script."""
    try:
        args = build_parser().parse_args(argv)
        if (getattr(args, "sims", 1) or 1) < 1:
            raise InputError(f"--sims must be a positive integer, got {args.sims}")
        if args.command == "fit":
            return _run_fit(args)
        if args.command == "h2h":
            return _run_h2h(args)
        if args.command == "accuracy":
            return _run_accuracy(args)
        if args.command == "bleu":
            return _run_bleu(args)
        handler = {("likert", "power"): _run_likert_power, ("likert", "size"): _run_likert_size}
        return handler[(args.command, args.action)](args)
    except (InputError, BackendUnavailableError, HepowerError) as exc:
        print(f"hepower: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `hepower ... | head`: the reader left; not an error of ours
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("hepower: interrupted (finished chunks are kept with --checkpoint)", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the last line of defence
        print(f"hepower: internal error: {exc.__class__.__name__}: {exc} "
              "(please report it with the command you ran)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
