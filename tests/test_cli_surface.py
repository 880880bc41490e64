"""The command line's surface: help for every option, --version, lazy start-up, API parity of names."""
from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from humaneval_power.cli import GROUPS, build_parser, main


def _subparsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Every (command path, parser) below ``parser``."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _subparsers(sub, path + (name,))


def _commands():
    return [(p, sp) for p, sp in _subparsers(build_parser()) if p]


def test_every_option_of_every_subcommand_has_help() -> None:
    missing = []
    for path, parser in _commands():
        for action in parser._actions:
            if action.option_strings and action.help != argparse.SUPPRESS and not (action.help or "").strip():
                missing.append(f"hepower {' '.join(path)} {action.option_strings[0]}")
    assert not missing, f"options without help text: {missing}"


def test_help_shows_defaults_and_range_syntax() -> None:
    likert = dict(_commands())[("likert", "power")].format_help()
    assert "(default: 1000)" in likert and "START:STOP:STEP" in likert
    assert "0-1 for the presets" in likert  # the effect's scale is said


def test_one_name_per_concept() -> None:
    """--sims for Monte-Carlo repetitions, --method for the BLEU approximation, --n-boot for bootstraps."""
    for path, parser in _commands():
        opts = {o for a in parser._actions for o in a.option_strings if a.help != argparse.SUPPRESS}
        assert not opts & {"--nsims", "--n-sims", "--approx"}, path
        assert "--nboot" not in {o for a in parser._actions for o in a.option_strings[:1]}, path
    bleu_power = dict(_commands())[("bleu", "power")]
    assert any("--method" in a.option_strings for a in bleu_power._actions)


def test_version_and_no_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("hepower ")
    assert main([]) == 0
    out = capsys.readouterr().out
    assert all(group in out for group in GROUPS)


def test_group_without_command_prints_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["likert"])
    assert exc.value.code == 0
    assert "power" in capsys.readouterr().out


def test_help_does_not_import_the_numerical_stack() -> None:
    """`hepower --help` must not load scipy or pandas (start-up time; see benchmarks/bench_cli.py)."""
    code = ("import sys; from humaneval_power.cli import main\n"
            "try: main(['--help'])\nexcept SystemExit: pass\n"
            "print(sorted(m for m in ('scipy', 'pandas', 'statsmodels', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("argv", [["likert", "power", "--effect", "0.1", "--seed", "-1"],
                                  ["likert", "power", "--effect", "0.1", "--jobs", "0"],
                                  ["h2h", "size", "--p-win", "0.6", "--jobs", "-1"],
                                  ["bleu", "test", "--ref", "r", "--baseline", "a", "--systems", "b", "--trials", "0"],
                                  ["fit", "x.csv", "--n-boot", "0"]])
def test_counts_are_checked_when_parsed(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("hepower")


def test_scientific_notation_for_whole_numbers() -> None:
    from humaneval_power.cli.common import integer

    assert integer("1e3") == 1000 and integer("12") == 12
    with pytest.raises(ValueError):
        integer("1.5")
