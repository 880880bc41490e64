"""What a command's progress counts is said once, in its description (``Command.progress``), and both front ends
label progress by it: the command line's bar and the web's job (no front end names a command to choose a unit)."""
from __future__ import annotations

import argparse
import inspect
from pathlib import Path

import pytest

from humaneval_power.cli.common import BAR_UNITS, ProgressBar
from humaneval_power.interface import resolve
from humaneval_power.interface.parsers import command_parser
from humaneval_power.interface.validation import command_of

COMMANDS = sorted(command_of())
STATIC = Path(__file__).parents[1] / "humaneval_power" / "serve" / "static"


@pytest.mark.parametrize("name", COMMANDS)
def test_the_described_unit_matches_the_progress_the_function_takes(name: str) -> None:
    """Property over every command: a unit the bar knows, or ``stages`` exactly for the functions whose
    progress is a note per stage (``progress(message)``)."""
    command = command_of()[name]
    param = inspect.signature(resolve(name)).parameters.get("progress")
    assert command.progress in (*BAR_UNITS, "stages")
    if param is not None:
        assert (command.progress == "stages") == ("[[str], None]" in str(param.annotation)), name


@pytest.mark.parametrize("name", COMMANDS)
def test_the_command_line_bar_shows_the_described_unit(name: str) -> None:
    command = command_of()[name]
    if command.progress == "stages":
        return
    unit = command_parser(command.path).get_default("progress_unit")
    assert unit == command.progress
    args = argparse.Namespace(progress=None, progress_unit=unit)
    assert ProgressBar.of(args).unit == BAR_UNITS[command.progress]


def test_the_web_job_carries_the_unit_and_the_page_shows_it() -> None:
    from humaneval_power.serve.commands import functions
    from humaneval_power.serve.jobs import Job

    for name in functions():  # the served ones
        assert Job(name, {}, []).view()["unit"] == command_of()[name].progress
    page = (STATIC / "app.js").read_text()
    assert "job.unit" in page and 'job.function === "likert_budget" ? "designs"' not in page
