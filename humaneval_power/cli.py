"""``hepower``: the command line, a thin layer over the Python API.

Exit codes: 0 success, 2 bad input or usage (one line on stderr), 1 an
internal error. Tables go to stdout (``--json``: exactly one JSON array);
progress and warnings go to stderr; files are written atomically.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from .errors import BackendUnavailableError, HepowerError, InputError
from .io import PLOT_FORMATS, check_output_path, json_records, write_table
from .params import PRESETS, SD_NAMES, LikertParams, get_preset, load_params
from .scenarios.likert import METHODS, likert_power, likert_sample_size
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
    g.add_argument("--intercept", type=_float, help="beta0, the mean rating")
    for name in SD_NAMES:
        g.add_argument("--" + name.replace("_", "-"), dest=name, type=_float, metavar="SD",
                       help="slope SDs in the mean-difference convention" if "slope" in name else None)


def _params_from_args(args: argparse.Namespace) -> LikertParams:
    if args.preset and args.params:
        raise InputError("give --preset or --params, not both")
    overrides = {k: getattr(args, k) for k in SD_NAMES + ("intercept",) if getattr(args, k) is not None}
    if args.params:
        base = load_params(args.params)
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
    return parser


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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hepower`` console script."""
    try:
        args = build_parser().parse_args(argv)
        if getattr(args, "sims", 1) is not None and args.sims < 1:
            raise InputError(f"--sims must be a positive integer, got {args.sims}")
        handler = {("likert", "power"): _run_likert_power, ("likert", "size"): _run_likert_size}
        return handler[(args.command, args.action)](args)
    except (InputError, BackendUnavailableError, HepowerError) as exc:
        print(f"hepower: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hepower: interrupted (finished chunks are kept with --checkpoint)", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the last line of defence
        print(f"hepower: internal error: {exc.__class__.__name__}: {exc} "
              "(please report it with the command you ran)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
