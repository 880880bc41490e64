"""An API call given as JSON -> the equivalent ``hepower`` command line and Python snippet.

A call is the name of a public API function (``likert_power``, ``mcnemar_power``, ...) and
its keyword arguments, by the API's names. :func:`to_argv` writes the ``hepower`` command
that makes the same call and validates it with the parser generated from the command's
description (:mod:`humaneval_power.interface`): a bad value gives the CLI's one-line message.
The worker (:mod:`.worker`) then calls the Python API directly, as :func:`python_snippet`
shows. Three arguments are structured:

* ``params``: a preset name, a parameter-file document (as written by ``hepower fit``), or
  typed SDs ``{"sd_worker_intercept": ..., ..., "intercept": 0.5}`` (optionally with
  ``"preset"`` as the base the SDs override, or the five coding-invariant SDs);
* ``costs``: the fields of :class:`humaneval_power.designs.Costs`;
* ``pair``: two system indices from 0, as in the API.
"""
from __future__ import annotations

import argparse
import inspect
import math
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..errors import InputError
from ..interface import NAMES, Command, Option, resolve

#: the commands the page runs: API function -> the command running it (described in interface.commands)
COMMAND_OF: dict[str, tuple[str, ...]] = {
    "likert_power": ("likert", "power"), "likert_sample_size": ("likert", "size"), "likert_mde": ("likert", "mde"),
    "likert_budget": ("likert", "budget"), "h2h_power": ("h2h", "power"), "h2h_sample_size": ("h2h", "size"),
    "h2h_mde": ("h2h", "mde"), "mcnemar_power": ("accuracy", "power"), "mcnemar_sample_size": ("accuracy", "size"),
    "accuracy_mde": ("accuracy", "mde"), "bleu_power": ("bleu", "power"), "bleu_sample_size": ("bleu", "size"),
    "bleu_mde": ("bleu", "mde"), "h2h_mixed_power": ("h2h", "power"), "h2h_mixed_sample_size": ("h2h", "size"),
    "analyze": ("analyze",),
}
#: functions whose first argument is a file the client uploads (POST /api/upload/<function>): -> that argument
UPLOADS = {"analyze": "ratings", "likert_power": "design_from", "likert_sample_size": "design_from",
           "likert_mde": "design_from"}
#: the keywords of a pilot's layout (``plan_inputs.crowd_design``'s) the Likert planners take with an uploaded pilot
PILOT_LAYOUT = ("design_from", "where", "pilot_systems", "duplicates")
#: the GLMM head-to-head planners: their ``params`` is a head-to-head parameter file or typed SDs
H2H_GLMM = ("h2h_mixed_power", "h2h_mixed_sample_size")
H2H_FIELDS = ("sd_worker", "sd_item", "p_tie", "ties")  #: the typed fields of a GLMM design's ``params``
#: API function -> (its module under humaneval_power, the command running it)
FUNCTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    name: (NAMES[name].split(":")[0].removeprefix("humaneval_power."), path) for name, path in COMMAND_OF.items()}
#: the crowd-design keywords the Likert functions take through ``**design`` (those of ``crowd.cell_factory``
#: that the page can type; ``workload`` and ``design_from`` come from files)
CROWD_DESIGN = ("systems", "assignment", "presentation", "missing", "model", "compare", "adjust", "pair", "means",
                "costs")
SERVER_OWNED = ("jobs", "progress", "store")  #: set by the server, not by a request
OPTION = {"n_sims": "--sims"}  #: API keyword -> CLI option where the names differ beyond _ -> -
COST_OPTIONS = {"per_rating": "--cost-per-rating", "per_hit": "--cost-per-hit", "fee": "--platform-fee",
                "per_worker": "--cost-per-worker"}
PARAMS_FILE = "params.json"  #: the name an uploaded parameter file has in the command shown
SIZE_KEYS = ("items", "workers", "n", "ratings_per_item", "items_per_hit")
NOT_AXES = ("pair", "means")  #: list arguments that are not grid axes


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


def _fn(name: str) -> Any:
    if name not in FUNCTIONS:
        raise InputError(f"unknown function {name!r}; the API offers {', '.join(FUNCTIONS)}")
    return resolve(name)


@cache
def arguments(name: str) -> tuple[str, ...]:
    """The keyword arguments a request for ``name`` may give (the API's, less what the server sets)."""
    sig = inspect.signature(_fn(name)).parameters.values()
    names = [p.name for p in sig if p.kind is not inspect.Parameter.VAR_KEYWORD and p.name not in SERVER_OWNED]
    if name.startswith("likert_"):
        names += [k for k in CROWD_DESIGN + (PILOT_LAYOUT if name in UPLOADS else ()) if k not in names]
    return tuple(names)


def described(name: str) -> Command:
    """The description of the command running ``name``."""
    from ..interface.commands import COMMANDS

    return COMMANDS[FUNCTIONS[name][1]]


@cache
def command_parser(name: str) -> argparse.ArgumentParser:
    """The parser of the command running ``name``, generated from its description."""
    from ..interface.parsers import command_parser as parser_of

    return parser_of(FUNCTIONS[name][1])


def _option(name: str, key: str) -> Option:
    for option in described(name).all_options():
        if option.api and option.name == key and not option.hidden:
            return option
    raise InputError(f"{name}: the command line has no option for {key!r}")


def _number(key: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{key} takes numbers, got {value!r}")
    return repr(value) if isinstance(value, float) else str(value)


def _scalar(key: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    return _number(key, value)


def _h2h_params_argv(params: Any) -> list[str]:
    if not isinstance(params, Mapping):
        raise InputError(f"params must be a head-to-head parameter file (JSON object) or {', '.join(H2H_FIELDS)}, "
                         f"got {params!r}")
    if "schema" in params:
        return ["--params", PARAMS_FILE]
    unknown = sorted(set(params) - set(H2H_FIELDS))
    if unknown:
        raise InputError(f"params: unknown field(s) {', '.join(unknown)}; give a parameter file (with its "
                         f"\"schema\") or any of {', '.join(H2H_FIELDS)}")
    return [f"--{k.replace('_', '-')}={_scalar(k, params[k])}" for k in H2H_FIELDS if params.get(k) is not None]


def _params_argv(params: Any) -> list[str]:
    from ..interface.commands import INVARIANT_TYPED
    from ..params import SD_NAMES

    if isinstance(params, str):
        return [f"--preset={params}"]
    if not isinstance(params, Mapping):
        raise InputError(f"params must be a preset name, a parameter file (JSON object) or SDs, got {params!r}")
    if "schema" in params:
        return ["--params", PARAMS_FILE]
    typed = ("preset", "intercept") + SD_NAMES + INVARIANT_TYPED
    unknown = sorted(set(params) - set(typed))
    if unknown:
        raise InputError(f"params: unknown field(s) {', '.join(unknown)}; give a parameter file (with its "
                         f"\"schema\") or any of {', '.join(typed)}")
    argv = [f"--preset={params['preset']}"] if params.get("preset") is not None else []
    for key in typed[1:]:
        if params.get(key) is not None:
            argv.append(f"--{key.replace('_', '-')}={_number(key, params[key])}")
    return argv


def _costs_argv(costs: Any) -> list[str]:
    if not isinstance(costs, Mapping):
        raise InputError(f"costs takes an object with any of {', '.join(COST_OPTIONS)}, got {costs!r}")
    unknown = sorted(set(costs) - set(COST_OPTIONS))
    if unknown:
        raise InputError(f"costs: unknown field(s) {', '.join(unknown)}; known: {', '.join(COST_OPTIONS)}")
    return [f"{COST_OPTIONS[k]}={_number('costs.' + k, v)}" for k, v in costs.items() if v is not None]


def _pair_argv(pair: Any) -> list[str]:
    if (not isinstance(pair, (list, tuple)) or len(pair) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in pair)):
        raise InputError(f"pair takes two system indices from 0, got {pair!r}")
    return ["--pair", str(pair[0] + 1), str(pair[1] + 1)]  # the CLI numbers systems from 1


def to_argv(name: str, kwargs: Mapping[str, Any], limits: Limits | None = None) -> list[str]:
    """The ``hepower`` arguments making the call ``name(**kwargs)``, checked against ``limits`` and
    parsed by the CLI's parser (InputError with its one-line message when bad)."""
    if not isinstance(kwargs, Mapping):
        raise InputError(f"{name} takes a JSON object of keyword arguments")
    known = arguments(name)
    unknown = [k for k in kwargs if k not in known]
    if unknown:
        raise InputError(f"{name} has no argument {unknown[0]!r}; it takes {', '.join(known)}")
    check_limits(kwargs, limits or Limits())
    argv = list(FUNCTIONS[name][1])
    for key, value in kwargs.items():
        if value is None:
            continue
        if key == "params":
            argv += _h2h_params_argv(value) if name in H2H_GLMM else _params_argv(value)
        elif key == "costs":
            argv += _costs_argv(value)
        elif key == "pair":
            argv += _pair_argv(value)
        elif key == "where":
            argv += _where_argv(value)
        else:
            option = _option(name, key)
            word = _number if option.kind is not None else _scalar
            if option.positional:
                argv.append(_scalar(key, value))
            elif option.grid or option.nargs is not None:
                values = value if isinstance(value, (list, tuple)) else [value]
                if not values:
                    raise InputError(f"{key} takes at least one value")
                if any(isinstance(v, str) and v.startswith("-") for v in values):
                    raise InputError(f"{key}: a value may not start with '-', got {values!r}")
                argv += [option.flag, *(word(key, v) for v in values)]
            elif isinstance(value, (list, tuple)):
                raise InputError(f"{key} takes one value, got {value!r}")
            elif option.action == "store_true":
                if value is not True and value is not False:
                    raise InputError(f"{key} takes true or false, got {value!r}")
                argv += [option.flag] if value else []
            else:
                argv.append(f"{option.flag}={_scalar(key, value)}")
    command_parser(name).parse_args(argv[len(FUNCTIONS[name][1]):])  # the description's validation (InputError)
    return argv


def _where_argv(where: Any) -> list[str]:
    if not isinstance(where, Mapping) or not all(isinstance(v, (str, int, float)) for v in where.values()):
        raise InputError(f"where takes an object of column: value, got {where!r}")
    return [a for k, v in where.items() for a in ("--where", f"{k}={v}")]


def check_limits(kwargs: Mapping[str, Any], limits: Limits) -> None:
    """Refuse requests larger than the server takes (simulations, grid cells, design sizes)."""
    def values(key: str) -> list[Any]:
        v = kwargs.get(key)
        return [] if v is None else list(v) if isinstance(v, (list, tuple)) else [v]

    sims = values("n_sims")
    if sims and _big(sims[0], limits.max_sims):
        raise InputError(f"n_sims {sims[0]} exceeds this server's limit of {limits.max_sims:,} per cell; run "
                         "larger studies with the command line")
    perms = values("permutations")
    if perms and _big(perms[0], limits.max_permutations):
        raise InputError(f"permutations {perms[0]} exceeds this server's limit of {limits.max_permutations:,}")
    for key in SIZE_KEYS:
        for v in values(key):
            if _big(v, limits.max_size):
                raise InputError(f"{key} {v} exceeds this server's limit of {limits.max_size:,}")
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


def shell_command(argv: list[str]) -> str:
    """The command line as one would type it."""
    return "hepower " + shlex.join(argv)


def python_snippet(name: str, kwargs: Mapping[str, Any]) -> str:
    """Python making the same call as :func:`to_argv`'s command (and printing its result)."""
    module = FUNCTIONS[name][0]
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
