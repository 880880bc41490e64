"""Every ``hepower`` parser is generated from the one description of the commands (issue 25 item 4):
no command keeps a hand-written parser, and each parser has exactly the options its description lists."""
from __future__ import annotations

import argparse
import importlib

import pytest

from humaneval_power.cli import GROUPS, build_parser, main
from humaneval_power.interface.commands import COMMANDS


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command path, parser) of every command that runs (a parser without sub-commands)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from _leaves(sub, path + (name,))


def test_every_command_is_described_and_no_group_builds_its_own_parser() -> None:
    runnable = dict(_leaves(build_parser()))
    assert sorted(runnable) == sorted(COMMANDS)
    for group in GROUPS:
        assert not hasattr(importlib.import_module(f"humaneval_power.cli.{group}"), "add_parser"), group


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_a_parser_has_exactly_the_described_options(path: tuple[str, ...]) -> None:
    parser = dict(_leaves(build_parser([path[0]])))[path]
    described = {s for o in COMMANDS[path].all_options() for s in (*o.aliases, o.flag) if not o.positional}
    given = {s for a in parser._actions for s in a.option_strings} - {"-h", "--help"}
    assert given == described
    positional = [a.dest for a in parser._actions if not a.option_strings]
    assert positional == [o.dest_name for o in COMMANDS[path].all_options() if o.positional]


def test_fit_keeps_its_short_out_flag_and_json_only_output(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser(["fit"]).parse_args(["fit", "ratings.csv", "-o", "p.json"])
    assert args.out == "p.json" and args.out_formats == (".json",) and args.seed == 1  # fit_pilot's seed
    assert main(["fit", "ratings.csv", "-o", "p.csv"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ".json" in err[0]


def test_serve_and_store_show_parse_with_the_library_defaults() -> None:
    from humaneval_power.serve.commands import Limits

    args = build_parser(["serve"]).parse_args(["serve"])
    limits = Limits()
    assert (args.host, args.port) == ("127.0.0.1", 8000)
    assert (args.time_limit, args.max_sims, args.max_jobs) == (limits.time_limit, limits.max_sims, limits.max_jobs)
    args = build_parser(["store"]).parse_args(["store", "show", "s.db", "--json"])
    assert (args.command, args.action, args.file, args.json) == ("store", "show", "s.db", True)
