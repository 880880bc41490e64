"""An API call given as JSON -> its validation, the equivalent ``hepower`` command line and Python snippet.

A call is the name of a public API function (``likert_power``, ``mcnemar_power``, ``agreement``, ...)
and its keyword arguments, by the API's names. Every function a described command calls is served
(:mod:`humaneval_power.interface.commands`; a command's modes too, e.g. the GLMM head-to-head
planner), except :data:`NOT_SERVED`. A request is checked by
:func:`humaneval_power.interface.validation.validate`, generated from the same description as the
command line's parser (a bad value gives the CLI's one-line message), and against the server's
:class:`Limits`; the worker (:mod:`.worker`) then calls the Python API directly, as
:func:`python_snippet` shows. The command line (:func:`shell_command`) is only shown, never parsed.
"""
from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..errors import InputError
from ..interface import address
from ..interface.validation import (
    PARAMS_FILE,
    command_of,
    command_words,
    describe,
    file_arguments,
    request_arguments,
    request_options,
    validate,
)

#: described functions the server does not run, and why
NOT_SERVED: dict[str, str] = {
    "Store": "store show reads a result store on the machine running hepower; a client has none on the server",
    "Limits": "serve is the server itself"}
#: the GLMM head-to-head planners: their ``params`` is a head-to-head parameter file or typed SDs
H2H_GLMM = ("h2h_mixed_power", "h2h_mixed_sample_size")
SIZE_KEYS = ("items", "workers", "n", "max_n", "ratings_per_item", "items_per_hit")
NOT_AXES = ("pair", "means", "scale", "levels", "tie_values", "methods")  #: list arguments that are not grid axes


@cache
def functions() -> dict[str, str]:
    """The served API functions -> their module under humaneval_power (for the Python snippet)."""
    return {name: address(name).split(":")[0].removeprefix("humaneval_power.") for name in command_of()
            if name not in NOT_SERVED}


#: functions whose command takes a file the server does not take (budget searches crowd designs: the command
#: refuses --design-from)
NO_UPLOAD = ("likert_budget",)


@cache
def uploads() -> dict[str, str]:
    """The served functions that take a file the client uploads (POST /api/upload/<function>) -> that argument
    (the first, for a function taking several: :func:`upload_arguments`)."""
    return {name: files[0] for name in functions() if (files := upload_arguments(name))}


def upload_arguments(name: str) -> tuple[str, ...]:
    """The arguments of the served function ``name`` that are files the client uploads."""
    return () if name in NO_UPLOAD else file_arguments(name)


def text_file(name: str, argument: str) -> bool:
    """Whether the uploaded ``argument`` of ``name`` is a text file kept under the client's file name (a system's
    output, named by it: ``bleu test``), not a table renamed after its argument (``ratings.csv``)."""
    return request_options(name)[argument].metavar == TEXT_METAVAR


def form(name: str) -> list[dict[str, Any]]:
    """The generic form of ``name`` (:func:`~humaneval_power.interface.validation.describe`); a file's ``accept``:
    a table's formats, or None for text files (any name)."""
    from ..io import TABLE_FORMATS

    return [{**a, "accept": None if text_file(name, a["name"]) else list(TABLE_FORMATS)} if a["type"] == "file" else a
            for a in describe(name)]


#: the metavar of a text file (one segment per line) a command reads
TEXT_METAVAR = "FILE"
#: characters an uploaded text file's name may hold (it is a file in the job's folder and a word of the command)
FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}")


def upload_name(name: str, argument: str, filename: str | None) -> str:
    """The name an uploaded file gets in the job's folder: a table its argument's name and its format's suffix
    (``ratings.csv``); a text file its own name without any folder (InputError when unsafe or not a table)."""
    from ..io import TABLE_FORMATS

    given = (filename or "").replace("\\", "/").rsplit("/", 1)[-1]
    if text_file(name, argument):
        if not FILE_NAME.fullmatch(given) or given == PARAMS_FILE:
            raise InputError(f"{argument}: the file name {given!r} is not taken: use letters, digits and . _ + - "
                             "(up to 100, not starting with . or -)")
        return given
    suffix = "." + given.rsplit(".", 1)[-1].lower() if "." in given else ""
    if suffix not in TABLE_FORMATS:
        what = str(request_options(name)[argument].metavar or "a table").lower()
        raise InputError(f"{filename or 'the file'}: upload {what} as {', '.join(TABLE_FORMATS)}")
    return argument + suffix


@dataclass(frozen=True)
class Limits:
    """What one request may ask of the server."""

    max_sims: int = 20_000  #: simulated studies per cell
    max_cells: int = 200  #: design cells of one grid (product of the list lengths)
    max_work: int = 2_000_000  #: simulated studies of one request (cells x sims)
    max_size: int = 20_000  #: items, workers, n, ...
    max_permutations: int = 10_000
    time_limit: float = 120.0  #: seconds of computation per request
    max_body: int = 1_000_000  #: bytes of a request body
    max_jobs: int = 2  #: computations running at once
    abandon_after: float = 30.0  #: seconds a job may go unpolled before it is cancelled (its client left)


def arguments(name: str) -> tuple[str, ...]:
    """The keyword arguments a request for ``name`` may give (the API's, less what the server sets)."""
    _served(name)
    return request_arguments(name)


def _served(name: str) -> None:
    if name not in functions():
        why = f" ({NOT_SERVED[name]})" if name in NOT_SERVED else ""
        raise InputError(f"unknown function {name!r}{why}; the API offers {', '.join(functions())}")


def check(name: str, kwargs: Any, limits: Limits | None = None) -> dict[str, Any]:
    """The validated, converted keyword arguments of the call ``name(**kwargs)`` (InputError with one line
    when bad, or larger than ``limits`` allow)."""
    _served(name)
    call = validate(name, kwargs)
    check_limits(kwargs, limits or Limits())
    return call


def command_line(name: str, kwargs: Mapping[str, Any]) -> list[str]:
    """The ``hepower`` arguments making the call (shown, never parsed)."""
    return command_words(name, kwargs)


def check_limits(kwargs: Mapping[str, Any], limits: Limits) -> None:
    """Refuse requests larger than the server takes (simulations, grid cells, design sizes)."""
    def values(key: str) -> list[Any]:
        v = kwargs.get(key)
        return [] if v is None else list(v) if isinstance(v, (list, tuple)) else [v]

    sims = values("n_sims")
    if sims and _big(sims[0], limits.max_sims):
        raise InputError(f"n_sims {_shown(sims[0])} exceeds this server's limit of {limits.max_sims:,} per cell; run "
                         "larger studies with the command line")
    perms = values("permutations")
    if perms and _big(perms[0], limits.max_permutations):
        raise InputError(f"permutations {_shown(perms[0])} exceeds this server's limit of {limits.max_permutations:,}")
    for key in SIZE_KEYS:
        for v in values(key):
            if _big(v, limits.max_size):
                raise InputError(f"{key} {_shown(v)} exceeds this server's limit of {limits.max_size:,}")
    cells = math.prod(len(v) for k, v in kwargs.items() if k not in NOT_AXES and isinstance(v, (list, tuple)) and v
                      and all(isinstance(x, (int, float)) for x in v))
    cells = 1 if cells == 0 else cells
    if cells > limits.max_cells:
        raise InputError(f"the grid has {cells:,} cells, more than this server's limit of {limits.max_cells:,}")
    if sims and isinstance(sims[0], int) and cells * sims[0] > limits.max_work:
        raise InputError(f"{cells:,} cells x {sims[0]:,} simulations exceed this server's limit of "
                         f"{limits.max_work:,} simulated studies per request")


def _big(value: Any, limit: int) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > limit


def _shown(value: float) -> str:
    """A number over a limit as given: an integer (1e12 too) as ``1,000,000,000,000``, else as Python shows it."""
    return f"{int(value):,}" if float(value).is_integer() else repr(value)


def shell_command(argv: list[str]) -> str:
    """The command line as one would type it."""
    return "hepower " + shlex.join(argv)


def python_snippet(name: str, kwargs: Mapping[str, Any]) -> str:
    """Python making the same call as :func:`command_line`'s command (and printing its result)."""
    module = functions()[name]
    imports = [f"from humaneval_power.{module} import {name}"]
    args = []
    for key, value in kwargs.items():
        if value is None:
            continue
        if key == "params":
            expr = _h2h_params_expr(value, imports) if name in H2H_GLMM else _params_expr(value, imports)
        elif key == "costs":
            imports.append("from humaneval_power.designs import Costs")
            expr = "Costs(" + ", ".join(f"{k}={v!r}" for k, v in value.items() if v is not None) + ")"
        elif key == "pair":
            expr = repr(tuple(value))
        else:
            expr = repr(list(value) if isinstance(value, tuple) else value)
        args.append(f"{key}={expr}")
    call = f"{name}({', '.join(args)})"
    if name == "likert_budget":
        body = f"designs, result = {call}\nprint(designs.to_string())\nprint(result)"
    elif name.endswith("_power"):
        body = f"table = {call}\nprint(table.to_string())"
    else:
        body = f"result = {call}\nprint(result)"
    return "\n".join(dict.fromkeys(imports)) + "\n\n" + body + "\n"


def _h2h_params_expr(params: Any, imports: list[str]) -> str:
    if "schema" in params:
        imports.append("from humaneval_power.params import load_h2h_params")
        return f"load_h2h_params({PARAMS_FILE!r})"
    imports.append("from humaneval_power.plan_inputs import h2h_params")
    return "h2h_params(" + ", ".join(f"{k}={v!r}" for k, v in params.items() if v is not None) + ")"


def _params_expr(params: Any, imports: list[str]) -> str:
    from ..interface.commands import INVARIANT_TYPED

    if isinstance(params, str):
        return repr(params)
    if "schema" in params:
        imports.append("from humaneval_power.params import load_params")
        return f"load_params({PARAMS_FILE!r})"
    sds = {k: v for k, v in params.items() if k != "preset" and v is not None}
    if any(k in INVARIANT_TYPED for k in sds):
        imports.append("from humaneval_power.processes import InvariantProcess")
        sds.setdefault("intercept", 0.5)
        return "InvariantProcess(" + ", ".join(f"{k}={v!r}" for k, v in sds.items()) + \
            ", name='command-line (invariant)')"
    if params.get("preset") is None and len(set(sds) - {"intercept"}) == 5:
        imports.append("from humaneval_power.params import LikertParams")
        sds.setdefault("intercept", 0.5)
        return "LikertParams(" + ", ".join(f"{k}={v!r}" for k, v in sds.items()) + ", name='command-line')"
    imports.append("from humaneval_power.params import get_preset")
    base = f"get_preset({params.get('preset') or 'card2020-high'!r})"
    return base + ".with_sds(" + ", ".join(f"{k}={v!r}" for k, v in sds.items()) + ")"
