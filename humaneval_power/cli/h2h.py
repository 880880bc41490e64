"""``hepower h2h``: head-to-head (pairwise preference) studies, independent or repeated judgments."""
from __future__ import annotations

import argparse
from typing import Any

from ..errors import InputError
from ..interface.commands import h2h_sims
from ..plan_inputs import h2h_mode, h2h_params
from .assurance_options import assurance_kwargs, draws_from_args
from .common import ProgressBar, emit, emit_solve, flatten


def _h2h_params(args: argparse.Namespace) -> Any:
    p_tie = args.p_tie
    if not args.params and args.sd_worker is not None and args.sd_item is not None:
        values = flatten(p_tie) if isinstance(p_tie, list) else [p_tie]
        if len(values) > 1:
            raise InputError("a GLMM design takes one --p-tie")
        p_tie = values[0]
    return h2h_params(args.params, args.comparison, args.force, args.sd_worker, args.sd_item, p_tie, args.ties)


def _is_mixed(args: argparse.Namespace) -> bool:
    return h2h_mode(args.params, args.sd_worker, args.sd_item, args.workers) == "glmm"


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
            with ProgressBar.of(args) as bar:
                r = h.h2h_mixed_sample_size(_h2h_params(args), h.effect_to_log_odds(args.effect, args.log_odds),
                                            args.workers, args.judgments_per_item, args.target_power, args.test,
                                            args.alpha, args.sims or h2h_sims("size", "glmm"), args.seed, args.jobs,
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
    with ProgressBar.of(args) as bar:
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
                                      args.sims or h2h_sims("power", "glmm"), args.seed, args.jobs, bar,
                                      store=args.store, target_power=args.target_power,
                                      method=args.method or "fast", **assurance_kwargs(args, draws))
            columns = ["workers", "items", "judgments_per_item", "effect", "p_win", "power", "ci_low", "ci_high",
                       "type_s", "type_m", "n_failed", "n_singular", "n_warnings"]
        else:
            if not args.n or not args.p_win:
                raise InputError("give --n and --p-win (independent judgments) or --params/--workers (GLMM)")
            table = h.h2h_power(flatten(args.n), flatten(args.p_win), flatten(args.p_tie) or [0.0], args.ties or "drop",
                                args.method or "exact", args.alpha,
                                args.sims or h2h_sims("power", "independent"), args.seed, args.jobs, bar,
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
