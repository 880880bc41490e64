"""The README's tutorial is self-contained: every file a command reads was written by an earlier one, in out/."""
from __future__ import annotations

import itertools
import re
import shlex
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
READS = ("--params",)
WRITES = ("-o", "--out", "--plot")


def _commands() -> list[list[str]]:
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S)
    text = "\n".join(blocks).replace("\\\n", " ")
    lines = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    inline = re.findall(r"`(hepower [^`]+)`", README.read_text())
    return [shlex.split(line) for line in lines + inline if line.startswith("hepower")]


def test_tutorial_files_are_written_before_they_are_read_and_go_to_out() -> None:
    written: set[str] = set()
    for argv in _commands():
        for flag, value in itertools.pairwise(argv):
            if flag in READS and value.endswith(".json") and value.upper() != value:
                assert value in written, f"`{' '.join(argv)}` reads {value}, which no earlier command writes"
            if flag in WRITES and not value.isupper():
                assert value.startswith("out/"), f"`{' '.join(argv)}` writes {value} outside out/"
                written.add(value)
    assert written, "the README's commands were not found"


def test_python_and_cli_examples_give_the_same_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    """Step 4's Python prints what step 2's `likert size` command prints (and the README shows): same defaults."""
    from humaneval_power.cli import main

    text = README.read_text()
    python = re.search(r"```python\n(.*?)```", text, flags=re.S).group(1)
    command = next(c for c in _commands() if c[1:3] == ["likert", "size"] and "card2020-low" in c)
    shown = re.search(r"# (smallest items: .*)", text).group(1)
    exec(compile(python, "README.md", "exec"), {})
    from_python = capsys.readouterr().out.strip().splitlines()[-1]
    assert main(command[1:]) == 0
    from_cli = capsys.readouterr().out.strip()
    assert from_python == from_cli == shown
