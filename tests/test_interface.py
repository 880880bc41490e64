"""The one description of the public API (humaneval_power.interface): it names real parameters, and the
command line is generated from it."""
from __future__ import annotations

import inspect

import pytest

from humaneval_power.interface import (
    NAMES,
    SIGNATURE,
    api_defaults,
    choices_of,
    default_of,
    resolve,
)
from humaneval_power.interface.commands import COMMANDS


def test_every_name_resolves() -> None:
    for name in NAMES:
        assert resolve(name) is not None, name


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_api_options_name_parameters_of_their_function(path: tuple[str, ...]) -> None:
    """An option said to be an API keyword is one, of the command's function (or another mode's, or the
    source its default is read from); a SIGNATURE default exists there."""
    command = COMMANDS[path]
    for option in command.all_options():
        if not option.api or option.hidden:
            continue
        sources = command.functions() + ([option.source] if option.source else [])
        assert any(option.name in inspect.signature(resolve(f)).parameters for f in sources), (path, option.flag)
        if option.default is SIGNATURE:
            assert default_of(option, command) == api_defaults(option.source or command.function)[option.name]


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_choices_are_the_library_constants(path: tuple[str, ...]) -> None:
    """Choices named by a constant are that constant's members; a SIGNATURE default is one of them."""
    command = COMMANDS[path]
    for option in command.all_options():
        choices = choices_of(option)
        if choices is None:
            continue
        assert len(choices) == len(set(choices)) > 0
        default = None if option.hidden else default_of(option, command)
        values = default if isinstance(default, (list, tuple)) else [default]
        assert all(v is None or v in choices for v in values), (path, option.flag, default)


def test_parsers_are_generated_from_the_description() -> None:
    """Every described option is on its command's parser with the described default."""
    from humaneval_power.cli import build_parser

    parser = build_parser()
    for path, command in COMMANDS.items():
        args = parser.parse_args([*path, "--help"][:len(path)] + _required(command))
        for option in command.all_options():
            if option.hidden or option.required or option.positional or (option.action == "store_true" and option.default is None):
                continue
            default = default_of(option, command)
            value = getattr(args, option.dest_name)
            if option.grid and default is not None:
                default = [list(default) if isinstance(default, (list, tuple)) else [default]]
            elif isinstance(default, tuple):
                default = list(default)
            assert value == default, (path, option.flag, value, default)


def _required(command: object) -> list[str]:
    """Values for the required options of a command (so that it parses)."""
    out: list[str] = []
    for option in command.all_options():  # type: ignore[attr-defined]
        if option.positional:
            out.append("x.csv")
        elif option.required:
            count = option.nargs if isinstance(option.nargs, int) else 1
            out += [option.flag, *["x" if option.kind is None else "1"] * count]
    return out
