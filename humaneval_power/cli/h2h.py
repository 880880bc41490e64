"""``hepower h2h``: head-to-head (pairwise preference) studies, independent or repeated judgments."""
from __future__ import annotations

import argparse
from typing import Any

from ..errors import InputError
from ..validation import TIE_POLICIES
from .assurance_options import add_assurance_options, assurance_kwargs, draws_from_args
from .common import (RANGE_HELP, ProgressBar, add_alpha, add_checkpoint, add_out, add_plot_options, add_run_options,
                     add_target_power, emit, emit_solve, finite_float, flatten, number_list, positive)

#: default --sims, the API's n_sims: (command, independent judgments or GLMM) -> simulated studies per cell
SIMS = {("power", "independent"): 10_000, ("power", "glmm"): 500, ("size", "glmm"): 300}


P_WIN_HELP = ("independent judgments: probability that a judgment prefers B, counting ties in the denominator: "
              "p_win + p_tie + p_lose = 1 (the effect is p_win - p_lose); unlike a GLMM design's --effect and p_win "
              "column, which are conditional on a decisive judgment")
P_TIE_HELP = "probability of a tie (a GLMM design with --params: the parameter file's, from the pilot)"
TIES_HELP = ("ties: drop them, or split each as half a win for each side (a GLMM design with --params: as the "
             "pilot was fitted)")


def add_parser(sub: Any, name: str, text: str) -> None:
    """The ``h2h`` group and its commands."""
    h2h = sub.add_parser(name, help=text, description=text)
    hsub = h2h.add_subparsers(dest="action", metavar="COMMAND", parser_class=type(h2h))

    hpow = hsub.add_parser("power", help="power of independent judgments (--n) or of a GLMM design (--params)",
                           description=f"Power, Type-S and Type-M. Grid options take {RANGE_HELP}.")
    hpow.add_argument("--n", type=number_list(positive, "--n"), nargs="+", help="independent judgments (a count)")
    hpow.add_argument("--p-win", type=number_list(finite_float, "--p-win"), nargs="+", help=P_WIN_HELP)
    hpow.add_argument("--p-tie", type=number_list(finite_float, "--p-tie"), nargs="+", help=P_TIE_HELP)
    hpow.add_argument("--ties", choices=TIE_POLICIES, help=TIES_HELP)
    hpow.add_argument("--method", choices=("exact", "simulate", "fast", "lme4"), default=None,
                      help="exact or simulate (independent judgments; default exact); fast (GLMM, the default there: "
                           "glmer's Laplace fit without R) or lme4 (glmer refits in R)")
    _add_mixed(hpow, many=True, sims=f"default {SIMS['power', 'independent']} independent (--method simulate), "
                                             f"{SIMS['power', 'glmm']} GLMM")
    add_out(hpow)
    add_plot_options(hpow, "power curves (against n, or against items for a GLMM design; a line per effect)")
    add_target_power(hpow, " (with --assurance: the share of draws whose power reaches it)")
    add_assurance_options(hpow, solve=False)

    hsize = hsub.add_parser("size", help="smallest n (independent) or number of items (GLMM) for a target power")
    hsize.add_argument("--p-win", type=finite_float, help=P_WIN_HELP)
    hsize.add_argument("--p-tie", type=finite_float, help=P_TIE_HELP)
    hsize.add_argument("--ties", choices=TIE_POLICIES, help=TIES_HELP)
    add_target_power(hsize)
    _add_mixed(hsize, many=False, sims=f"GLMM; default {SIMS['size', 'glmm']}")
    hsize.add_argument("--method", choices=("fast", "lme4"), default="fast",
                       help="GLMM refits: fast (glmer's Laplace fit without R, the default) or lme4 (glmer in R)")
    add_assurance_options(hsize, solve=True)

    hmde = hsub.add_parser("mde", help="smallest p_win detectable with n independent judgments")
    hmde.add_argument("--n", type=positive, required=True, help="independent judgments (a count)")
    hmde.add_argument("--p-tie", type=finite_float, default=0.0, help="probability of a tie")
    hmde.add_argument("--ties", choices=TIE_POLICIES, default="drop", help=TIES_HELP)
    add_target_power(hmde)
    add_alpha(hmde)
    add_run_options(hmde, sims=None, jobs=False)


def _add_mixed(p: argparse.ArgumentParser, many: bool, sims: str) -> None:
    g = p.add_argument_group("repeated judgments (logistic GLMM)")
    g.add_argument("--params", metavar="FILE", help="head-to-head parameter file (`hepower fit --family binomial`)")
    g.add_argument("--comparison", metavar="SYSTEM", help="which comparison of a parameter file with several")
    g.add_argument("--force", action="store_true",
                   help="plan with a parameter file whose fit was quasi-separated (refused by default)")
    g.add_argument("--sd-worker", type=finite_float, help="SD of the workers' preference, on the log-odds scale")
    g.add_argument("--sd-item", type=finite_float, help="SD of the items' preference, on the log-odds scale")
    kind: Any = number_list(positive, "--workers") if many else positive
    nargs = "+" if many else None
    g.add_argument("--workers", type=kind, nargs=nargs, help="workers in the pool")
    if many:
        g.add_argument("--items", type=number_list(positive, "--items"), nargs="+", help="items judged")
    g.add_argument("--judgments-per-item", type=number_list(positive, "--judgments-per-item") if many else positive,
                   nargs=nargs, help="workers judging each item (default: all)")
    g.add_argument("--effect", type=number_list(finite_float, "--effect") if many else finite_float, nargs=nargs,
                   help="P(B preferred) in a decisive (non-tied) judgment for a typical worker and item (a "
                        "probability, the table's p_win column; shown as log-odds); not the unconditional "
                        "--p-win of independent judgments")
    g.add_argument("--log-odds", type=number_list(finite_float, "--log-odds") if many else finite_float,
                   nargs=nargs, help="the effect as log-odds instead of --effect")
    if many:
        add_checkpoint(g)
    g.add_argument("--test", choices=("z", "lrt", "t"), default="z",
                   help="Wald z test, likelihood-ratio test, or z against t with Satterthwaite df at most "
                        "workers - 1 (holds alpha where z is liberal: few, varying workers; --method fast)")
    add_alpha(p)
    p.add_argument("--sims", type=positive, default=None, metavar="N",
                   help=f"simulated studies per cell ({sims})")
    add_run_options(p, sims=None)


def _h2h_params(args: argparse.Namespace) -> Any:
    from ..params import H2HParams, load_h2h_params

    if args.params:
        if args.sd_worker is not None or args.sd_item is not None:
            raise InputError("give --params or --sd-worker/--sd-item, not both")
        if args.p_tie is not None or args.ties is not None:
            raise InputError("the parameter file carries the pilot's tie rate and policy: drop --p-tie/--ties")
        return load_h2h_params(args.params, args.comparison, allow_separation=args.force)
    if args.sd_worker is None or args.sd_item is None:
        raise InputError("a GLMM design needs --params FILE or both --sd-worker and --sd-item")
    p_tie = flatten(args.p_tie) if isinstance(args.p_tie, list) else [args.p_tie]
    if len(p_tie) > 1:
        raise InputError("a GLMM design takes one --p-tie")
    return H2HParams(args.sd_worker, args.sd_item, name="command-line", p_tie=p_tie[0] or 0.0,
                     ties=args.ties or "drop")


def _is_mixed(args: argparse.Namespace) -> bool:
    return any(getattr(args, k, None) is not None for k in ("params", "sd_worker", "sd_item", "workers"))


def _draws(args: argparse.Namespace) -> Any:
    """Parameter draws for --assurance: sd_worker / sd_item of a GLMM (file or prior), p_win / p_tie of
    independent judgments (prior); --p-win defaults to the prior mean."""
    from ..assurance import H2H_DRAW_NAMES

    draws = draws_from_args(args, tuple(H2H_DRAW_NAMES), H2H_DRAW_NAMES)
    if draws is not None and not _is_mixed(args) and args.p_win is None and "p_win" in draws.values:
        from ..assurance import Prior

        mean = Prior(tuple(args.prior)).mean("p_win")
        args.p_win = [[mean]] if args.action == "power" else mean
    return draws


def run(args: argparse.Namespace) -> int:
    """Run ``h2h power``, ``h2h size`` or ``h2h mde``."""

    from ..scenarios import headtohead as h

    if args.action != "mde":
        draws = _draws(args)
    if args.action == "mde":
        emit_solve(h.h2h_mde(args.n, args.p_tie, args.target_power, args.ties, args.alpha), args)
        return 0
    if args.action == "size":
        if _is_mixed(args):
            if args.workers is None:
                raise InputError("give --workers for a GLMM design")
            with ProgressBar() as bar:
                r = h.h2h_mixed_sample_size(_h2h_params(args), h.effect_to_log_odds(args.effect, args.log_odds),
                                            args.workers, args.judgments_per_item, args.target_power, args.test,
                                            args.alpha, args.sims or SIMS["size", "glmm"], args.seed, args.jobs,
                                            progress=bar, method=args.method,
                                            **assurance_kwargs(args, draws, solve=True))
        else:
            if args.p_win is None:
                raise InputError("give --p-win (independent judgments) or --params/--workers (GLMM)")
            more = assurance_kwargs(args, draws, solve=True)
            r = h.h2h_sample_size(args.p_win, args.p_tie or 0.0, args.target_power, args.ties or "drop", args.alpha,
                                  **more,
                                  **({"seed": args.seed} if more else {}))
        emit_solve(r, args)
        return 0
    with ProgressBar() as bar:
        if _is_mixed(args):
            if not args.workers or not args.items:
                raise InputError("a GLMM design needs --workers and --items")
            if args.method not in (None, "fast", "lme4"):
                raise InputError("repeated judgments are refitted with --method fast or lme4")
            effects, odds = flatten(args.effect), flatten(args.log_odds)
            if effects is None and odds is None:
                raise InputError("give the effect as --effect (a probability) or --log-odds")
            if effects is not None and odds is not None:
                raise InputError("give the effect as --effect (a probability) or --log-odds, not both")
            log_odds = odds if odds is not None else [h.effect_to_log_odds(p, None) for p in effects]
            params = _h2h_params(args)
            table = h.h2h_mixed_power(params, flatten(args.workers), flatten(args.items), log_odds,
                                      flatten(args.judgments_per_item) or [None], args.test, args.alpha,
                                      args.sims or SIMS["power", "glmm"], args.seed, args.jobs, bar,
                                      store=args.store, target_power=args.target_power,
                                      method=args.method or "fast", **assurance_kwargs(args, draws))
            columns = ["workers", "items", "judgments_per_item", "effect", "p_win", "power", "ci_low", "ci_high",
                       "type_s", "type_m", "n_failed", "n_singular", "n_warnings"]
        else:
            if not args.n or not args.p_win:
                raise InputError("give --n and --p-win (independent judgments) or --params/--workers (GLMM)")
            table = h.h2h_power(flatten(args.n), flatten(args.p_win), flatten(args.p_tie) or [0.0], args.ties or "drop",
                                args.method or "exact", args.alpha,
                                args.sims or SIMS["power", "independent"], args.seed, args.jobs, bar,
                                target_power=args.target_power, **assurance_kwargs(args, draws))
            columns = ["n", "p_win", "p_tie", "ties", "method", "power", "ci_low", "ci_high", "type_s", "type_m"]
    if draws is not None:
        from ..assurance import COLUMNS

        columns = [c for c in columns if c not in ("power", "ci_low", "ci_high", "type_s", "type_m", "n_failed",
                                                   "n_singular", "n_warnings")] + COLUMNS
    if _is_mixed(args) and not args.json:
        print(h.mixed_effect_note(params))

    def plot(tmp: Any) -> None:
        from ..plots import plot_h2h_power

        kind = (f"GLMM ({args.method or 'fast'}), {args.test} test" if _is_mixed(args)
                else f"independent judgments, {args.method or 'exact'} sign test")
        plot_h2h_power(table, type_m=args.type_m, title=f"{kind}, alpha {args.alpha:g}").savefig(tmp, dpi=args.dpi)

    emit(table, args, columns, plot=plot)
    return 0
