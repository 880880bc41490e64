"""The command line's surface: help for every option, --version, lazy start-up, API parity of names."""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

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
    assert "0-1 for the presets" in " ".join(likert.split())  # the effect's scale is said
    assert "reproduces a whole run (default: 0)" in " ".join(likert.split())  # a zero default is shown too


def test_one_name_per_concept() -> None:
    """--sims for Monte-Carlo repetitions, --method for the BLEU approximation, --n-boot for bootstraps."""
    for path, parser in _commands():
        opts = {o for a in parser._actions for o in a.option_strings if a.help != argparse.SUPPRESS}
        assert not opts & {"--nsims", "--n-sims", "--approx", "--nboot"}, path  # former spellings are gone
    bleu_power = dict(_commands())[("bleu", "power")]
    assert any("--method" in a.option_strings for a in bleu_power._actions)


def _described() -> dict[tuple[str, ...], tuple[str, dict[str, str]]]:
    """Described command -> (its API function, {CLI dest: API parameter}), read from the description."""
    from humaneval_power.interface import address
    from humaneval_power.interface.commands import COMMANDS

    return {path: (address(c.function).removeprefix("humaneval_power."),
                   {o.dest_name: o.name for o in c.all_options() if o.param})
            for path, c in COMMANDS.items() if not c.modes}


#: command -> (API function, {CLI dest: API parameter}); the CLI's defaults must be the API's
API_OF = _described()
#: commands whose CLI default (None) stands for a per-mode API default, given here as mode -> function
MODES = {
    ("h2h", "power"): {"independent": "scenarios.headtohead:h2h_power", "glmm": "scenarios.headtohead:h2h_mixed_power"},
    ("h2h", "size"): {"independent": "scenarios.headtohead:h2h_sample_size",
                      "glmm": "scenarios.headtohead:h2h_mixed_sample_size"},
}


def _api_defaults(target: str) -> dict[str, object]:
    import importlib
    import inspect

    module, name = target.split(":")
    fn = getattr(importlib.import_module(f"humaneval_power.{module}"), name)
    params = inspect.signature(fn).parameters.values()
    return {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}


def _same(cli: object, api: object) -> bool:
    """Equal defaults; a grid option's default (a list of value lists) is compared flattened."""
    if isinstance(api, (tuple, list)):
        from humaneval_power.cli.common import flatten

        values = list(cli)  # type: ignore[call-overload]
        return (flatten(values) if values and isinstance(values[0], list) else values) == list(api)
    if isinstance(cli, list) and cli and isinstance(cli[0], list):  # a grid option; the API takes one value too
        from humaneval_power.cli.common import flatten

        return flatten(cli) == [api]
    return cli == api


@pytest.mark.parametrize("path", sorted(API_OF) + sorted(MODES))
def test_cli_defaults_are_the_api_defaults(path: tuple[str, ...]) -> None:
    """Every option the API also takes has the same default on both sides (the seed included)."""
    parser = dict(_commands())[path]
    if path in MODES:
        from humaneval_power.interface.commands import H2H_FUNCTIONS, h2h_sims

        for mode, target in MODES[path].items():
            if (path[-1], mode) in H2H_FUNCTIONS and "n_sims" in _api_defaults(target):
                assert h2h_sims(path[-1], mode) == _api_defaults(target)["n_sims"], (path, mode)
        targets = list(MODES[path].values())
        renames: dict[str, str] = {}
    else:
        target, renames = API_OF[path]
        targets = [target]
    checked = []
    for target in targets:
        api = _api_defaults(target)
        for action in parser._actions:
            name = renames.get(action.dest, action.dest)
            if (action.option_strings and name in api and action.default is not None and name != "jobs"
                    and action.help != argparse.SUPPRESS):
                assert _same(action.default, api[name]), (path, action.dest, action.default, target, api[name])
                checked.append(name)
    assert {"alpha", "seed", "max_sims"} & set(checked) or path in {("accuracy", "estimate"), ("store", "show")}, (
        path, checked)


_ROOT = Path(__file__).resolve().parents[1]
_DOCS = [_ROOT / "README.md", *sorted((_ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in _DOCS])
def test_docs_use_current_option_names(path: Path) -> None:
    """README and docs/ show each option by its one current name, never a hidden former spelling."""
    import re

    hidden = {o for _, p in _commands() for a in p._actions if a.help == argparse.SUPPRESS for o in a.option_strings}
    former = {o for _, p in _commands() for a in p._actions if "deprecated" in str(a.help) for o in a.option_strings}
    assert former == {"--checkpoint"}  # the one deprecated spelling, with its removal version in its help
    used = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", path.read_text()))
    assert not used & (hidden | former), used & (hidden | former)


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
    from humaneval_power.interface.values import integer

    assert integer("1e3") == 1000 and integer("12") == 12
    with pytest.raises(ValueError):
        integer("1.5")
