"""Properties found missing by trying this session's features (review, session 31)."""
from __future__ import annotations

import contextlib
import io

import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from humaneval_power.completed_study import markdown_table


def _cells(line: str) -> list[str]:
    """A Markdown table row's cells as GitHub renders them: ``\\x`` is a literal x, an unescaped ``|`` a border."""
    cells, current, chars = [], "", iter(line.strip())
    for c in chars:
        if c == "\\":
            current += next(chars, "\\")
        elif c == "|":
            cells.append(current.strip())
            current = ""
        else:
            current += c
    return cells[1:]  # the text before the first border is empty


_text = st.text(st.sampled_from("ab1|\\ -"), max_size=6)


@settings(max_examples=60, deadline=None)
@given(st.lists(_text, min_size=1, max_size=3, unique=True), st.data())
def test_markdown_table_keeps_every_cell_whole(columns: list[str], data: st.DataObject) -> None:
    """Every row of the table has as many cells as there are columns, each reading back as its text, whatever
    the text (an ordinal report's thresholds are named ``1|2``; the pipe split the row before)."""
    rows = data.draw(st.lists(st.lists(_text, min_size=len(columns), max_size=len(columns)), max_size=3))
    lines = markdown_table(pd.DataFrame(rows, columns=columns)).splitlines()
    assert [c.strip() for c in columns] == _cells(lines[0])
    assert len(lines) == len(rows) + 2
    for row, line in zip(rows, lines[2:]):
        assert _cells(line) == [c.strip() for c in row]


_probability = st.floats(-0.5, 1.5).map(lambda x: round(x, 3))


@settings(max_examples=40, deadline=None)
@given(st.lists(_probability, min_size=4, max_size=4), st.sampled_from(["table_positive", "table_negative"]))
def test_f1_table_refused_alike_by_api_and_command(table: list[float], which: str) -> None:
    """A table that is not four probabilities summing to 1 is refused by the web API (its validated call, the
    worker's arguments) with the line ``hepower f1 power`` prints (the API showed a tuple, the CLI a list)."""
    from humaneval_power.cli import main
    from humaneval_power.errors import InputError
    from humaneval_power.interface.validation import validate
    from humaneval_power.scenarios.f1 import f1_power
    from humaneval_power.serve.worker import api_arguments

    assume(min(table) < 0 or abs(sum(table) - 1) > 1e-6)
    tables = {"table_positive": [0.1, 0.05, 0.15, 0.7], "table_negative": [0.9, 0.05, 0.03, 0.02], which: table}
    request = {"n": [20], "p_positive": [0.3], **tables, "n_sims": 20}
    with pytest.raises(InputError) as api:
        f1_power(**api_arguments("f1_power", validate("f1_power", request), "."))
    argv = ["f1", "power", "--n", "20", "--p-positive", "0.3", "--sims", "20", "--jobs", "1"]
    for name, values in tables.items():
        argv += ["--" + name.replace("_", "-"), *map(str, values)]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(argv) == 2
    assert err.getvalue().strip() == f"hepower: error: {api.value}"


def test_every_served_function_is_named_in_the_serve_docs() -> None:
    """docs/serve.md lists the functions the server offers (the f1 functions, served, were missing)."""
    from pathlib import Path

    from humaneval_power.serve.commands import NOT_SERVED, functions

    text = (Path(__file__).parents[1] / "docs" / "serve.md").read_text(encoding="utf-8")
    assert [f for f in sorted(functions()) if f"`{f}`" not in text] == []
    assert set(NOT_SERVED).isdisjoint(functions())
