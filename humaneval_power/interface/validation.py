"""Validation of a call given as JSON (an API function's keyword arguments) by the description of its command.

The web API checks a request here, directly, with the converters, choices, ``nargs`` and required
options of :mod:`.commands` — the ones the command line's parser is generated from — and refuses it
with the one line ``hepower`` prints for the equivalent command (``hepower likert power: argument
--workers: ...``), or, for what only JSON can get wrong (a word for a number, an unknown field), a line
naming the field. No command line is built or parsed.

A value's JSON type follows its option: a switch takes true/false; a typed option numbers (each read as
the command line reads the number's text); an untyped one strings; a grid option or one taking several
values a list (a single value counts as a list of one). Four arguments are structured:

* ``params``: a preset name, a parameter-file document (an object with its ``"schema"``), or typed SDs
  ``{"sd_worker_intercept": ..., "intercept": ..., "preset": ...}`` (the command line's ``--preset``,
  ``--intercept`` and SD options; ordinal ratings: ``"family": "ordinal"``, ``"thresholds": [...]``,
  ``"link"`` and the latent SDs); for the GLMM head-to-head planner a head-to-head file or
  ``{"sd_worker", "sd_item", "p_tie", "ties"}``;
* ``costs``: the fields of :class:`humaneval_power.designs.Costs` (the cost options);
* ``pair``: two system indices from 0, as in the API (``--pair`` counts from 1);
* ``where``: an object ``{column: value}`` (``--where COL=VALUE`` repeated).
"""
from __future__ import annotations

import argparse
import inspect
from collections.abc import Mapping
from functools import cache
from typing import Any

from ..errors import InputError
from . import Command, Option, choices_of, resolve
from .values import number_list

SERVER_OWNED = ("jobs", "progress", "store")  #: set by the server, never by a request
STRUCTURED = ("params", "costs", "pair", "where")  #: arguments given as JSON objects (see the module's text)
FILE_METAVARS = ("RATINGS", "PREDICTIONS", "FILE")  #: a file a client uploads (never a path on the server)
H2H_FIELDS = ("sd_worker", "sd_item", "p_tie", "ties")  #: the typed fields of a GLMM design's ``params``
ORDINAL_TYPED = ("family", "thresholds", "link")  #: the typed fields of ordinal ratings' ``params``
COST_SOURCE = "Costs"  #: the options that are fields of ``costs``


@cache
def command_of() -> dict[str, Command]:
    """API function -> the command calling it (its function or a mode), from the description."""
    from .commands import COMMANDS

    return {f: c for c in COMMANDS.values() for f in (c.function, *c.modes) if f is not None}


def _signature(function: str) -> list[str]:
    params = inspect.signature(resolve(function)).parameters.values()
    return [p.name for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD]


@cache
def request_options(function: str) -> dict[str, Option]:
    """The options a request for ``function`` may give, by API name: the command's API options that the
    function (or its ``**design`` function, or the pilot layout's ``crowd_design``) takes, less the server's."""
    command = command_of()[function]
    taken = set(_signature(function))
    if command.design is not None:
        taken |= set(_signature(command.design)) | set(_signature("crowd_design"))
    out: dict[str, Option] = {}
    for option in command.all_options():
        if (option.api and not option.hidden and option.name in taken and option.name not in SERVER_OWNED
                and option.source != COST_SOURCE and option.name not in out):
            out[option.name] = option
    return out


@cache
def request_arguments(function: str) -> tuple[str, ...]:
    """The keyword arguments a request for ``function`` may give, in the function's order."""
    command = command_of()[function]
    options = request_options(function)
    structured = {"params": "params" in _signature(function),
                  "costs": any(o.source == COST_SOURCE for o in command.all_options()) and command.design is not None}
    names = [n for n in _signature(function) if n in options or structured.get(n)]
    names += [n for n in options if n not in names] + [n for n, ok in structured.items() if ok and n not in names]
    return tuple(names)


def file_arguments(function: str) -> tuple[str, ...]:
    """The arguments of ``function`` that are files the client uploads (a positional input or a pilot)."""
    return tuple(n for n, o in request_options(function).items() if o.positional or o.metavar in FILE_METAVARS)


def prog(command: Command) -> str:
    """The command as ``hepower`` names it in its messages."""
    return "hepower " + " ".join(command.path)


def _fail(command: Command, option: Option, message: str) -> InputError:
    """argparse's message for an option's bad value."""
    name = (option.metavar if isinstance(option.metavar, str) else option.dest_name) if option.positional \
        else option.flag
    return InputError(f"{prog(command)}: argument {name}: {message}")


def word(value: Any) -> str:
    """A JSON scalar as the command line's word for it."""
    return repr(value) if isinstance(value, float) else str(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def convert(command: Command, option: Option, value: Any, key: str | None = None) -> Any:
    """One option's JSON value, converted and checked as the command line converts and checks its words."""
    key = key or option.name
    if option.action == "store_true":
        if not isinstance(value, bool):
            raise InputError(f"{key} takes true or false, got {value!r}")
        return value
    several = option.grid or option.nargs is not None or option.action == "append"
    values = list(value) if several and isinstance(value, (list, tuple)) else [value]
    if not several and isinstance(value, (list, tuple, Mapping)):
        raise InputError(f"{key} takes one value, got {value!r}")
    for v in values:
        if option.kind is not None and not _is_number(v):
            raise InputError(f"{key} takes numbers, got {v!r}")
        if option.kind is None and not isinstance(v, str):
            raise InputError(f"{key} takes {'strings' if several else 'a string'}, got {v!r}")
        if several and isinstance(v, str) and v.startswith("-"):
            raise InputError(f"{key}: a value may not start with '-', got {v!r}")
    count = option.nargs if isinstance(option.nargs, int) else None
    if several and (not values or (count is not None and len(values) != count)):  # argparse counts, then converts
        expected = "at least one argument" if count is None else f"{count} argument{'s' * (count != 1)}"
        raise _fail(command, option, f"expected {expected}")
    converted: list[Any] = []
    for v in values:
        converted += _value(command, option, word(v))
    if count is not None:  # a fixed number of values (--pair, --scale): a tuple, as the API takes them
        return tuple(converted)
    return converted if several else converted[0]


def _value(command: Command, option: Option, text: str) -> list[Any]:
    """argparse's ``_get_values`` of one word: the type (the grid's ranges), then the choices."""
    kind = number_list(option.kind, option.flag) if option.grid and option.kind is not None else option.kind
    try:
        value: Any = text if kind is None else kind(text)
    except argparse.ArgumentTypeError as exc:
        raise _fail(command, option, str(exc)) from None
    except (TypeError, ValueError):
        name = getattr(kind, "__name__", repr(kind))
        raise _fail(command, option, f"invalid {name} value: {text!r}") from None
    values: list[Any] = value if option.grid and option.kind is not None else [value]
    choices = choices_of(option)
    for v in values:
        if choices is not None and v not in choices:
            raise _fail(command, option, f"invalid choice: {v!r} (choose from {', '.join(map(repr, choices))})")
    return values


def validate(function: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of a request for ``function``, converted (a grid's values read as the command
    line reads them); :class:`InputError` with one line when a value is bad, unknown or missing. ``None``
    means "not given"."""
    if function not in command_of():
        raise InputError(f"unknown function {function!r}; the API offers {', '.join(command_of())}")
    if not isinstance(kwargs, Mapping):
        raise InputError(f"{function} takes a JSON object of keyword arguments")
    command = command_of()[function]
    known = request_arguments(function)
    unknown = [k for k in kwargs if k not in known]
    if unknown:
        raise InputError(f"{function} has no argument {unknown[0]!r}; it takes {', '.join(known)}")
    options = request_options(function)
    out: dict[str, Any] = {}
    for key, value in kwargs.items():
        if value is None:
            continue
        if key == "params":
            out[key] = _h2h_params(command, value) if command.path[0] == "h2h" else _likert_params(command, value)
        elif key == "costs":
            out[key] = _costs(command, value)
        elif key == "pair":
            out[key] = _pair(command, options[key], value)
        elif key == "where":
            out[key] = _where(value)
        else:
            out[key] = convert(command, options[key], value)
    missing = [o for n, o in options.items() if o.required and out.get(n) is None]
    if missing:
        names = [(o.metavar or o.dest_name) if o.positional else o.flag for o in missing]
        raise InputError(f"{prog(command)}: the following arguments are required: {', '.join(map(str, names))}")
    return out


def _by_flag(command: Command, flag: str) -> Option:
    return next(o for o in command.all_options() if o.flag == flag)


def _likert_params(command: Command, params: Any) -> Any:
    """A preset name, a parameter-file document (checked when loaded), or typed parameters (each as its option:
    SDs, and for ordinal ratings ``family``, ``thresholds`` and ``link``)."""
    from ..params import SD_NAMES
    from .commands import INVARIANT_TYPED

    preset = _by_flag(command, "--preset")
    if isinstance(params, str):
        return convert(command, preset, params, "params")
    if not isinstance(params, Mapping):
        raise InputError(f"params must be a preset name, a parameter file (JSON object) or SDs, got {params!r}")
    if "schema" in params:
        return dict(params)
    typed = ("preset", "intercept") + SD_NAMES + INVARIANT_TYPED + ORDINAL_TYPED
    unknown = sorted(set(params) - set(typed))
    if unknown:
        raise InputError(f"params: unknown field(s) {', '.join(unknown)}; give a parameter file (with its "
                         f"\"schema\") or any of {', '.join(typed)}")
    return {k: convert(command, _by_flag(command, "--" + k.replace("_", "-")), v, f"params.{k}")
            for k, v in params.items() if v is not None}


def _h2h_params(command: Command, params: Any) -> Any:
    """A head-to-head parameter-file document, or the GLMM's typed SDs, tie probability and tie policy."""
    if not isinstance(params, Mapping):
        raise InputError(f"params must be a head-to-head parameter file (JSON object) or {', '.join(H2H_FIELDS)}, "
                         f"got {params!r}")
    if "schema" in params:
        return dict(params)
    unknown = sorted(set(params) - set(H2H_FIELDS))
    if unknown:
        raise InputError(f"params: unknown field(s) {', '.join(unknown)}; give a parameter file (with its "
                         f"\"schema\") or any of {', '.join(H2H_FIELDS)}")
    out = {}
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, (list, tuple, Mapping)):
            raise InputError(f"params.{key} takes one value, got {value!r}")
        option = _by_flag(command, "--" + key.replace("_", "-"))
        converted = convert(command, option, value, f"params.{key}")
        out[key] = converted[0] if option.grid else converted
    return out


def _costs(command: Command, costs: Any) -> dict[str, Any]:
    """The fields of ``designs.Costs``, each checked as its cost option."""
    fields = {o.name: o for o in command.all_options() if o.source == COST_SOURCE}
    if not isinstance(costs, Mapping):
        raise InputError(f"costs takes an object with any of {', '.join(fields)}, got {costs!r}")
    unknown = sorted(set(costs) - set(fields))
    if unknown:
        raise InputError(f"costs: unknown field(s) {', '.join(unknown)}; known: {', '.join(fields)}")
    return {k: convert(command, fields[k], v, f"costs.{k}") for k, v in costs.items() if v is not None}


def _pair(command: Command, option: Option, pair: Any) -> tuple[int, int]:
    """Two system indices from 0 (``--pair`` counts from 1)."""
    if not isinstance(pair, (list, tuple)) or not all(_is_number(v) for v in pair):
        raise InputError(f"pair takes two system indices from 0, got {pair!r}")
    a, b = convert(command, option, [v + 1 for v in pair])
    return a - 1, b - 1


def _where(where: Any) -> dict[str, str]:
    """``{column: value}``; values compared as text, as ``--where COL=VALUE`` gives them."""
    if not isinstance(where, Mapping) or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool)
                                                 for v in where.values()):
        raise InputError(f"where takes an object of column: value, got {where!r}")
    return {str(k): word(v) for k, v in where.items()}


def command_words(function: str, kwargs: Mapping[str, Any]) -> list[str]:
    """The ``hepower`` command line making the call ``function(**kwargs)`` (for showing it; ``kwargs`` as the
    client gave them, validated by :func:`validate`)."""
    command = command_of()[function]
    options = request_options(function)
    words = list(command.path)
    for key, value in kwargs.items():
        if value is None:
            continue
        if key == "params":
            words += _params_words(command, value)
        elif key == "costs":
            flags = {o.name: o.flag for o in command.all_options() if o.source == COST_SOURCE}
            words += [f"{flags[k]}={word(v)}" for k, v in value.items() if v is not None]
        elif key == "pair":
            words += ["--pair", *(str(v + 1) for v in value)]
        elif key == "where":
            words += [w for k, v in value.items() for w in ("--where", f"{k}={word(v)}")]
        else:
            words += _option_words(options[key], value)
    return words


def _option_words(option: Option, value: Any) -> list[str]:
    if option.positional:
        return [word(value)]
    if option.action == "store_true":
        return [option.flag] if value else []
    if option.grid or option.nargs is not None:
        return [option.flag, *map(word, value if isinstance(value, (list, tuple)) else [value])]
    return [f"{option.flag}={word(value)}"]


PARAMS_FILE = "params.json"  #: the name an uploaded parameter file has in the command shown


def _params_words(command: Command, params: Any) -> list[str]:
    """The options giving ``params`` (validated): the preset's name, the parameter file, or each typed field as
    its option (a Likert preset first: the other fields override its values)."""
    if isinstance(params, str):
        return _option_words(_by_flag(command, "--preset"), params)
    if "schema" in params:
        return ["--params", PARAMS_FILE]
    keys = sorted(params, key=lambda k: k != "preset")
    return [w for k in keys if params[k] is not None
            for w in _option_words(_by_flag(command, "--" + k.replace("_", "-")), params[k])]


def describe(function: str) -> list[dict[str, Any]]:
    """The arguments of a request for ``function`` as a form shows them (the web page's generic form): name,
    the command line's flag, help, ``type`` (file, switch, number, integer, text, params, costs, pair, where),
    whether it takes several values, its choices and whether it is required."""
    from . import default_of, help_of

    command = command_of()[function]
    options = request_options(function)
    files = file_arguments(function)
    out = []
    for name in request_arguments(function):
        option = options.get(name)
        if option is None or name in STRUCTURED:  # a structured argument
            out.append({"name": name, "type": name, "help": "see docs/serve.md", "required": False})
            continue
        kind = option.kind
        integer = kind is not None and getattr(kind, "__name__", "").startswith("integer")
        choices = choices_of(option)
        default = default_of(option, command) if option.action != "store_true" else None
        out.append({
            "name": name, "flag": option.flag, "help": help_of(option), "required": option.required or name in files,
            "type": ("file" if name in files else "switch" if option.action == "store_true" else "integer"
                     if integer else "number" if kind is not None else "text"),
            "several": option.grid or option.nargs is not None,
            "choices": None if choices is None else [str(c) for c in choices],
            "default": None if default is None else word(default) if not isinstance(default, (list, tuple))
            else " ".join(map(word, default))})
    return out
