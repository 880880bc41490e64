"""The argparse parsers generated from the description of the public commands (:mod:`humaneval_power.interface`).

:class:`Parser` is argparse with one-line errors (:class:`~humaneval_power.errors.InputError`, exit 2) and
defaults shown in the help; :func:`command_parser` is the parser of one described command, which the
command line nests under ``hepower GROUP`` (the web API validates a request from the same description:
:mod:`.validation`).
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from ..errors import InputError
from . import Command, Group, Option, choices_of, default_of, help_of
from .values import number_list


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2) and defaults shown in every option's help."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise InputError(f"{self.prog}: {message}")


class HelpFormatter(argparse.HelpFormatter):
    """Appends ``(default: ...)`` to an option's help unless it states its default or has none."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (action.option_strings and "default" not in text and action.nargs != 0
                and not any(default is v for v in (None, False, argparse.SUPPRESS))):  # 0 is a default to show
            if isinstance(default, list):
                default = " ".join(str(v) for g in default for v in (g if isinstance(g, list) else [g]))
            text += f" (default: {str(default).replace('%', '%%')})"
        return text


def add_group(sub: Any, name: str, text: str) -> None:
    """A command group whose commands are all described in :mod:`humaneval_power.interface.commands`."""
    from ..interface.commands import COMMANDS

    if (name,) in COMMANDS:  # a group that is one command (``analyze``)
        command = COMMANDS[name,]
        add_options(sub.add_parser(name, help=text, description=command.description or text), command)
        return
    group = sub.add_parser(name, help=text, description=text)
    commands = group.add_subparsers(dest="action", metavar="COMMAND", parser_class=type(group))
    for path, command in COMMANDS.items():
        if path[:-1] == (name,):
            add_command(commands, command)


def add_command(sub: Any, command: Command) -> argparse.ArgumentParser:
    """The argparse parser of a described command (its options generated from the description)."""
    parser: argparse.ArgumentParser = sub.add_parser(command.path[-1], help=command.help, description=command.description)
    add_options(parser, command)
    return parser


def add_options(target: Any, command: Command, items: Sequence[Option | Group] | None = None) -> None:
    """Add the described options (default: all of ``command``'s, and its settings) to a parser or argument group."""
    if items is None:
        target.set_defaults(**command.settings, progress_unit=command.progress)
    for item in command.options if items is None else items:
        if isinstance(item, Group):
            group = target.add_mutually_exclusive_group() if item.exclusive else target.add_argument_group(item.title)
            add_options(group, command, item.options)
        else:
            target.add_argument(*item.aliases, item.flag, **argparse_keywords(item, command))


def argparse_keywords(option: Option, command: Command) -> dict[str, Any]:
    """``add_argument``'s keywords for ``option``: a grid option takes several values or ranges
    (its default a list of lists), a hidden one (a former spelling) sets nothing unless given."""
    kw: dict[str, Any] = {"help": argparse.SUPPRESS if option.hidden else help_of(option)}
    if option.action is not None:
        kw["action"] = option.action
    if option.action == "store_true" and option.default is not None:  # a switch whose default is the API's
        return {**kw, "default": default_of(option, command)}
    if option.action != "store_true":
        default = argparse.SUPPRESS if option.hidden else default_of(option, command)
        if option.grid and default is not None:
            default = [list(default) if isinstance(default, (list, tuple)) else [default]]
        elif isinstance(default, tuple) and option.nargs is not None:
            default = list(default)
        if default is not None:
            kw["default"] = default
        if option.kind is not None:
            kw["type"] = number_list(option.kind, option.flag) if option.grid else option.kind
        kw["nargs"] = "+" if option.grid else option.nargs
    for key in ("metavar", "const"):
        if getattr(option, key) is not None:
            kw[key] = getattr(option, key)
    if option.dest is not None and not option.positional:
        kw["dest"] = option.dest
    if option.required:
        kw["required"] = True
    choices = choices_of(option)
    if choices is not None:
        kw["choices"] = choices
    return {k: v for k, v in kw.items() if v is not None}


def command_parser(path: Sequence[str]) -> Parser:
    """A stand-alone parser of the described command ``hepower *path`` (its errors name that command)."""
    from .commands import COMMANDS

    command = COMMANDS[tuple(path)]
    parser = Parser(prog="hepower " + " ".join(path), description=command.description or command.help)
    add_options(parser, command)
    return parser
