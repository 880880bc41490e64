"""``hepower``: the command line, a thin layer over the Python API.

One module per command group (``likert``, ``h2h``, ``accuracy``, ``f1``, ``bleu``,
``fit``, ``analyze``, ``agreement``, ``serve``, ``store``), each with ``run(args)``. Every parser is
generated from the description of the commands (:mod:`humaneval_power.interface.commands`). A group's
module (and the library behind it) is imported only when that group runs, so ``hepower --help`` starts at once.

Exit codes: 0 success, 2 bad input or usage (one line on stderr), 1 an
internal error, 130 interrupted. Tables go to stdout (``--json``: exactly one
JSON array); progress and warnings go to stderr; files are written atomically.
"""
from __future__ import annotations

import argparse
import importlib
import signal
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import HepowerError, Interrupted
from ..interface.parsers import Parser, add_group
from .common import OutputFiles, check_command_line, prepare_run

#: command group -> one-line help (the module ``humaneval_power.cli.<group>`` holds the rest)
GROUPS = {
    "likert": "Likert human evaluations (crossed worker x item linear mixed model)",
    "h2h": "head-to-head (pairwise preference) studies",
    "accuracy": "comparing classifiers on accuracy (McNemar; unpaired proportions)",
    "f1": "comparing classifiers on F1 (paired randomization test, Card et al. App. F)",
    "bleu": "BLEU/chrF: randomization-test power, swap-effect estimates, paired tests",
    "fit": "fit pilot data (ratings or head-to-head judgments) and export parameters",
    "analyze": "analyse a completed study: F test, marginal means, adjusted contrasts (mixed model)",
    "agreement": "rater agreement: Krippendorff's alpha, ICCs, ratings per item for a target reliability",
    "serve": "the interactive planner in the browser: a local web app and its JSON API",
    "store": "result stores of --store: list what a store holds",
}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("humaneval-power")
    except PackageNotFoundError:  # run from a source tree that is not installed
        from .. import __version__

        return __version__


def build_parser(groups: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``hepower`` parser; ``groups`` limits which command groups get their full options
    (the others are listed with their help only). Default: all of them."""
    parser = Parser(prog="hepower", description="Power analysis for NLP evaluations.",
                    epilog="Run `hepower GROUP --help` for a group's commands; docs/ has the details.")
    parser.add_argument("--version", action="version", version=f"hepower {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="GROUP", required=True, parser_class=Parser)
    for name, text in GROUPS.items():
        if groups is None or name in groups:
            add_group(sub, name, text)
        else:
            sub.add_parser(name, help=text)
    return parser


def _group_of(argv: Sequence[str]) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


def _run(args: argparse.Namespace) -> int:
    """Run the parsed command: generically when its description says which columns to print
    (:func:`~humaneval_power.cli.common.run_command`), else by its group's module."""
    from ..interface.commands import COMMANDS
    from .common import run_command

    path = (args.command,) if getattr(args, "action", None) is None else (args.command, args.action)
    command = COMMANDS.get(path)
    if command is not None and command.columns is not None:
        return run_command(command, args)
    return int(importlib.import_module(f"{__name__}.{args.command}").run(args))


_terminated: list[bool] = []


def _on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM ends the run like Ctrl-C (workers stopped, finished chunks kept, temp files
    removed), with exit code 143. It goes through the current Ctrl-C handler: while R computes
    in this process that handler only flags the interrupt for R (an exception raised here would
    be lost inside R's callback and the run would go on)."""
    _terminated.append(True)
    on_int = signal.getsignal(signal.SIGINT)
    if callable(on_int) and on_int is not signal.default_int_handler:
        on_int(signal.SIGINT, frame)
        return
    raise Interrupted()


def _one_line_warning(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
                      line: Any = None) -> None:
    print(f"hepower: warning: {str(message).splitlines()[0] if str(message) else category.__name__}",
          file=sys.stderr)


def main(argv: Sequence[str] | None = None, progress: Callable[[int, int, str], None] | None = None) -> int:
    """Entry point of the ``hepower`` console script; ``progress(done, total, label)`` receives the progress
    instead of the bar on stderr (``hepower serve``'s workers)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    previous = (signal.getsignal(signal.SIGTERM), warnings.showwarning)
    try:
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_sigterm)
        warnings.showwarning = _one_line_warning
        group = _group_of(argv)
        parser = build_parser([group] if group in GROUPS else [])
        if not argv:
            parser.print_help()
            return 0
        args = parser.parse_args(argv)
        if getattr(args, "action", "") is None:
            parser.parse_args([args.command, "--help"])
        check_command_line(args)
        args.progress = progress
        args.outputs = OutputFiles(args)
        opened = prepare_run(args)
        try:
            return _run(args)
        finally:
            for obj in reversed(opened):
                obj.close()
    except HepowerError as exc:
        print(f"hepower: error: {exc}", file=sys.stderr)
        return 2
    except MemoryError as exc:  # an allocation no machine could make: bad input, not a crash
        print(f"hepower: error: not enough memory ({str(exc) or 'MemoryError'}); ask for fewer simulations, "
              "resamples or a smaller design", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `hepower ... | head`: the reader left; not an error of ours
        sys.stderr.close()
        return 0
    except KeyboardInterrupt as exc:
        print(f"hepower: {'terminated' if _terminated else 'interrupted'}" + (f"; {exc}" if str(exc) else ""),
              file=sys.stderr)
        return 143 if _terminated else 130
    except Exception as exc:  # noqa: BLE001 - the last line of defence
        print(f"hepower: internal error: {exc.__class__.__name__}: {exc} "
              "(please report it with the command you ran)", file=sys.stderr)
        return 1
    finally:
        if signal.getsignal(signal.SIGTERM) is _on_sigterm:
            signal.signal(signal.SIGTERM, previous[0])
        warnings.showwarning = previous[1]
