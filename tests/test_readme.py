"""The README's tutorial is self-contained: every file a command reads was written by an earlier one, in out/."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

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
        for flag, value in zip(argv, argv[1:]):
            if flag in READS and value.endswith(".json") and value.upper() != value:
                assert value in written, f"`{' '.join(argv)}` reads {value}, which no earlier command writes"
            if flag in WRITES and not value.isupper():
                assert value.startswith("out/"), f"`{' '.join(argv)}` writes {value} outside out/"
                written.add(value)
    assert written, "the README's commands were not found"
