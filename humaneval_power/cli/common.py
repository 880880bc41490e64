"""Shared plumbing of the command modules: argument types, help defaults, output."""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast, overload

from ..errors import InputError


@overload
def flatten(groups: None) -> None: ...
@overload
def flatten(groups: Sequence[Sequence[Any]]) -> list[Any]: ...
def flatten(groups: Sequence[Sequence[Any]] | None) -> list[Any] | None:
    """The values of an option given as several lists (``nargs='+'`` of ranges)."""
    return None if groups is None else [v for g in groups for v in g]


def emit(table: Any, args: argparse.Namespace, columns: Sequence[str], **more: Callable[[Path], object]) -> None:
    """Write ``table`` to --out and the other outputs (``more``: option dest -> writer, e.g.
    ``plot=...``) all together, then print it (a readable table, or JSON with --json)."""
    from ..io import json_records, table_writer

    outputs: OutputFiles = args.outputs
    if (out := outputs.paths.get("out")) is not None:
        more = {"out": table_writer(table, out), **more}
    outputs.write(**more)
    if args.json:
        print(json.dumps(json_records(table)))
    else:
        print_table(table, columns)


def emit_solve(result: Any, args: argparse.Namespace) -> None:
    """Print a :class:`~humaneval_power.planning.SolveResult` (or ``SolveResults``, one per alternative): its
    sentence, or its JSON record(s) with --json; also written to --out when given."""
    import pandas as pd

    from ..planning import solve_records

    table = pd.DataFrame(solve_records(result))
    outputs: OutputFiles | None = getattr(args, "outputs", None)
    if outputs is not None and (out := outputs.paths.get("out")) is not None:
        from ..io import table_writer

        outputs.write(out=table_writer(table, out))
    if args.json:
        print_json(table)
    else:
        print(result)


class OutputFiles:
    """The output files a command line names (``--out``, ``--plot``): checked before any work
    is done, written all together or not at all."""

    def __init__(self, args: argparse.Namespace) -> None:
        from ..io import PLOT_FORMATS, TABLE_FORMATS, check_output_paths

        specs = {"out": (getattr(args, "out_formats", TABLE_FORMATS), "--out"), "plot": (PLOT_FORMATS, "--plot")}
        names = [d for d in specs if getattr(args, d, None)]
        checked = check_output_paths(*((getattr(args, d), *specs[d]) for d in names))
        self.paths = cast(dict[str, Path], dict(zip(names, checked)))  # every name given: none is None

    def write(self, **writers: Callable[[Path], object]) -> None:
        """Write each named output (dest -> function filling a temporary file); say so on stderr."""
        from ..io import write_outputs

        todo = [(self.paths[d], w) for d, w in writers.items() if d in self.paths and w is not None]
        write_outputs(todo)
        for path, _ in todo:
            print(f"wrote {path}", file=sys.stderr)


#: option dests naming files a command writes; every other option with a file metavar names a file it reads
OUTPUT_DESTS = ("out", "plot", "report", "latex")
FILE_METAVARS = ("FILE", "RATINGS", "PREDICTIONS")


def _options_of(args: argparse.Namespace) -> list[tuple[str, str, Any]]:
    """(name, dest, metavar) of every option of the command ``args`` was parsed for, once per dest, from its
    description (a deprecated spelling shares its dest with the option it names: the first spelling stands
    for both)."""
    from ..interface.commands import COMMANDS

    command = COMMANDS[tuple(v for v in (args.command, getattr(args, "action", None)) if v)]
    first = {o.dest_name: o for o in reversed([o for o in command.all_options() if not o.hidden])}
    return [(str(o.metavar) if o.positional else o.flag, o.dest_name, o.metavar)
            for o in command.all_options() if first.get(o.dest_name) is o]


def file_options(args: argparse.Namespace) -> tuple[list[tuple[str, str]], ...]:
    """``(inputs, outputs)``: (option, path) of every file the command line names, read or written
    (``--store`` is read, so it counts as an input); an option given several files is listed once per file."""
    inputs: list[tuple[str, str]] = []
    outputs: list[tuple[str, str]] = []
    for name, dest, metavar in _options_of(args):
        value = getattr(args, dest, None)
        if metavar not in FILE_METAVARS or value is None or not isinstance(value, (str, list)):
            continue
        for path in value if isinstance(value, list) else [value]:
            (outputs if dest in OUTPUT_DESTS else inputs).append((name, path))
    return inputs, outputs


def _same_file(a: str, b: str) -> bool:
    """Whether two paths name one file: the same resolved path (symlinks followed, even when the
    file does not exist yet) or, for existing files, the same inode (hard links)."""
    import os

    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_file_options(args: argparse.Namespace) -> None:
    """Refuse, before any work, a command line whose output file is one of its own input files (or
    its result store), and an input that is a folder or an empty file name."""
    import os

    from ..store import check_sidecar_name

    inputs, outputs = file_options(args)
    for option, path in inputs + outputs:
        if not path.strip():
            raise InputError(f"{option} needs a file name, got {path!r}")
    for option, path in inputs:
        if os.path.isdir(path):
            raise InputError(f"{option} {path} is a folder, not a file")
    for option, path in outputs + [(o, p) for o, p in inputs if o == "--store"]:
        check_sidecar_name(path, option)
    for out_option, out in outputs:
        for in_option, path in inputs:
            if _same_file(out, path):
                raise InputError(f"{out_option} {out} is the file {in_option} reads; refusing to write over an "
                                 "input: give another output file")


def check_options(args: argparse.Namespace) -> None:
    """Refuse option combinations with no meaning, whichever command has them: a target power at or
    below the significance level (a test at level alpha has power alpha with no effect at all, so
    every effect, or none, reaches it) and --type-m without the --plot it adds a panel to."""
    from ..validation import check_target_power

    target, alpha = getattr(args, "target_power", None), getattr(args, "alpha", None)
    if target is not None and alpha is not None:
        check_target_power(target, alpha)
    if getattr(args, "type_m", False) and not getattr(args, "plot", None):
        raise InputError("--type-m adds a panel to the --plot figure; give --plot FILE (the table always has type_m)")


def check_command_line(args: argparse.Namespace) -> None:
    """Every check of a parsed command line that needs no computation: files, then options."""
    check_file_options(args)
    check_options(args)


def prepare_run(args: argparse.Namespace) -> list[Any]:
    """Open the result store (--store, --restart) and start the executor (--scheduler, --jobs)
    before any work, so that a bad store or an unreachable scheduler stops the run at once;
    returns what to close at the end."""
    opened: list[Any] = []
    if getattr(args, "restart", False) and not getattr(args, "store", None):
        raise InputError("--restart applies to a --store FILE")
    if getattr(args, "store", None):
        from ..store import Store

        args.store = Store(args.store, restart=args.restart)
        opened.append(args.store)
    if getattr(args, "scheduler", None) is not None:
        from ..executors import from_options

        try:
            args.jobs = from_options(args.scheduler, args.jobs)
        except BaseException:
            for obj in opened:
                obj.close()
            raise
        opened.append(args.jobs)
    return opened


def api_keywords(command: Any, args: argparse.Namespace, function: Callable[..., Any]) -> dict[str, Any]:
    """The keywords of ``function`` from a parsed command line: every API option of the described ``command``
    the function takes (a grid option's ranges flattened), and ``jobs`` / ``store`` as :func:`prepare_run` left
    them."""
    import inspect

    taken = inspect.signature(function).parameters
    out: dict[str, Any] = {}
    for option in command.all_options():
        if option.api and option.name in taken and option.name not in out and hasattr(args, option.dest_name):
            value = getattr(args, option.dest_name)
            out[option.name] = flatten(value) if option.grid else value
    return out


def run_command(command: Any, args: argparse.Namespace) -> int:
    """Run a described command generically (its ``columns`` set): call its function with the command line's
    keywords (and the progress bar when it takes ``progress``), then print the returned table's ``columns``
    (all when empty) with :func:`emit`, or a solve result with :func:`emit_solve`."""
    import inspect

    import pandas as pd

    from ..interface import resolve

    function = resolve(command.function)
    kw = api_keywords(command, args, function)
    with ProgressBar.of(args) as bar:
        result = function(**kw, **({"progress": bar} if "progress" in inspect.signature(function).parameters else {}))
    if isinstance(result, pd.DataFrame):
        emit(result, args, command.columns or list(result.columns))
    else:
        emit_solve(result, args)
    return 0


def print_json(table: Any) -> None:
    """One JSON array of records on stdout."""
    from ..io import json_records

    print(json.dumps(json_records(table)))


def print_table(table: Any, columns: Sequence[str]) -> None:
    """The named columns that have values, numbers to 4 significant digits."""
    cols = [c for c in columns if c in table.columns and not table[c].isna().all()]
    print(table[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}"))


BAR_DELAY = 1.0  #: seconds before a progress bar appears (short runs stay quiet)
LOG_SECONDS = 10.0  #: seconds between progress lines when stderr is not a terminal (no bar: one line each)
NOTE_DELAY: float | None = 1.0  #: seconds after which a long step says on stderr what it does (None: never)


class StageNotes:
    """Notes on stderr for steps without a progress bar of their own (R's start-up, a fit, a search):
    each message replaces the previous one and is printed once it has been current for NOTE_DELAY
    seconds, so a quick step (or a quick failure) prints nothing; messages starting with "warning"
    are printed at once."""

    def __init__(self, prefix: str = "hepower") -> None:
        self.prefix = prefix
        self.timer: threading.Timer | None = None

    def __call__(self, message: str) -> None:
        self.close()
        if message.startswith("warning") or NOTE_DELAY == 0:
            self._print(message)
        elif NOTE_DELAY is not None:
            self.timer = threading.Timer(NOTE_DELAY, self._print, (message,))
            self.timer.daemon = True
            self.timer.start()

    def _print(self, message: str) -> None:
        print(f"{self.prefix}: {message}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()

    def __enter__(self) -> StageNotes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def stage_note(message: str) -> Iterator[None]:
    """One :class:`StageNotes` message for the duration of a step."""
    with StageNotes() as notes:
        notes(message)
        yield


def search_note(what: str, target: float, step: str = "") -> str:
    """The stage note of a size or MDE search; ``step``: what one step of the search costs."""
    return f"searching the smallest {what} reaching power {target:g}" + (f"; each step {step}" if step else "") + " ..."


def simulated(sims: int, method: str, simulating: bool = True) -> str:
    """A search step's cost: ``sims`` simulated studies by ``method`` (or nothing when exact)."""
    return f"simulates {sims:,} studies ({method})" if simulating else ""


#: a bar's unit (tqdm's, singular) for what a command's progress counts (``Command.progress``)
BAR_UNITS = {"studies": "sim", "designs": "design", "trials": "trial"}


class ProgressBar:
    """A labelled tqdm bar on stderr (``progress(done, total, label)``) that appears only when a
    run takes over a second; the label says what is being worked on (e.g. which cell).

    A background tick redraws it every ``tick`` seconds, so it appears (and its clock runs) even
    while the first chunk of a long run is still being computed.
    """

    def __init__(self, enabled: bool = True, unit: str = "sim", tick: float = 0.5,
                 sink: Callable[[int, int, str], None] | None = None) -> None:
        self.enabled = enabled
        self.sink = sink  #: where progress goes instead of a bar, ``sink(done, total, label)`` (a web worker's)
        self.unit = unit
        self.bar: Any = None
        self._born = self._logged = 0.0
        self._last: tuple[int, int | None, str] | None = None  # the latest update, in a log (not a terminal)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self.tick = tick

    @classmethod
    def of(cls, args: argparse.Namespace) -> ProgressBar:
        """The bar of a parsed command: its sink, and the unit its description's ``progress`` names."""
        unit = getattr(args, "progress_unit", "studies")
        return cls(sink=args.progress, unit=BAR_UNITS.get(unit, unit))

    def __call__(self, done: int, total: int, label: str = "") -> None:
        if not self.enabled:
            return
        if self.sink is not None:
            self.sink(done, total, label)
            return
        known = total or None  # 0: a search whose number of steps is not known in advance
        if not sys.stderr.isatty():  # a log file: tqdm's carriage returns would make one endless line
            self._last = (done, known, label)
            self._line(done, known, label)
            self._start_ticker()
            return
        if self.bar is None or self.bar.total != known:
            from tqdm import tqdm

            self.close()
            self.bar = tqdm(total=known, initial=done, unit=self.unit, unit_scale=True, delay=BAR_DELAY, file=sys.stderr,
                            leave=False, dynamic_ncols=True)
            self._born = time.monotonic()
        else:
            self.bar.update(done - self.bar.n)
        if label:
            self.bar.set_description_str(label, refresh=False)
        self._start_ticker()

    def _start_ticker(self) -> None:
        if self._ticker is None:
            self._ticker = threading.Thread(target=self._redraw, daemon=True, name="hepower-progress")
            self._ticker.start()

    def _line(self, done: int, total: int | None, label: str) -> None:
        """One plain line once the run is ``BAR_DELAY`` old, then at most every ``LOG_SECONDS`` (and at the end)."""
        with self._lock:
            now = time.monotonic()
            if not self._born:
                self._born = now
            if now - self._born < BAR_DELAY or (self._logged and now - self._logged < LOG_SECONDS and done != total):
                return
            self._logged = now
            print(f"hepower: {label + ': ' if label else ''}{done:,}{f'/{total:,}' if total else ''} {self.unit}s "
                  f"({now - self._born:.0f} s)", file=sys.stderr, flush=True)

    def summary(self, run: Any) -> None:
        """Where the time of a finished sweep went (a :class:`~humaneval_power.engine.RunSummary`), on
        stderr when the sweep was long enough to show a bar."""
        if self.enabled and run.seconds >= BAR_DELAY:
            self.close()
            print(f"hepower: {run}", file=sys.stderr, flush=True)

    def _redraw(self) -> None:
        """Redraw the bar once it is over a second old (tqdm's own ``delay`` only acts on updates); in a log,
        write the due line even while the first chunk of a long run is still being computed."""
        while not self._stop.wait(self.tick):
            if self._last is not None:
                self._line(*self._last)
                continue
            bar = self.bar
            if bar is not None and not bar.disable and time.monotonic() - self._born >= bar.delay:
                bar.refresh()
                bar.last_print_t = bar._time()  # drawn: close() must clear it (tqdm counts only its own draws)

    def close(self) -> None:
        self._last = None  # a log's ticker writes no line after this
        if self.bar is not None:
            self.bar.close()

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        self.close()


def where_filters(items: Sequence[str] | None) -> dict[str, str]:
    """``--where COL=VALUE`` options as a dict."""
    out = {}
    for item in items or []:
        if "=" not in item:
            raise InputError(f"--where takes COL=VALUE, got {item!r}")
        col, value = item.split("=", 1)
        out[col] = value
    return out
