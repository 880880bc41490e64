"""Properties found missing by trying this session's features (review, session 31)."""
from __future__ import annotations

import pandas as pd
from hypothesis import given, settings
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
