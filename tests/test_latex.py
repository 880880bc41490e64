"""LaTeX booktabs tables (issue 28): structure, stated precision, escaping, refusals; compiles when pdflatex is
installed."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from humaneval_power.errors import InputError
from humaneval_power.latex import booktabs_table, escape, format_number

TABLE = pd.DataFrame({"system": ["A_1", "B & C"], "mean": [4.3214, -0.0004], "p": [0.01234, np.nan],
                      "n": [300, 299], "letters": ["a", "ab"]})


def test_a_table_has_booktabs_rules_stated_precision_and_escaped_text() -> None:
    tex = booktabs_table(TABLE, {"mean": 2, "p": 3}, header={"mean": r"$\bar y$"})
    assert tex.splitlines() == [
        r"\begin{tabular}{lrrrl}", r"\toprule",
        r"system & $\bar y$ & p & n & letters \\", r"\midrule",
        r"A\_1 & 4.32 & 0.012 & 300 & a \\",
        r"B \& C & 0.00 & -- & 299 & ab \\",
        r"\bottomrule", r"\end{tabular}"]


def test_negative_numbers_use_a_math_minus() -> None:
    assert format_number(-1.5, 0) == "$-$2"
    assert format_number(-3.14159, 2) == "$-$3.14"
    assert format_number(-0.0001, 2) == "0.00"
    assert format_number(float("inf"), 2) == r"$\infty$"
    assert format_number(pd.NA, 2) == format_number(None, 2) == format_number(np.nan, 2) == "--"


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=20))
def test_escaped_text_has_no_active_special_character(text: str) -> None:
    """After escaping, every special character is preceded by a backslash or is part of a command we wrote."""
    out = escape(text)
    stripped = out.replace(r"\textbackslash{}", "").replace(r"\textasciitilde{}", "").replace(
        r"\textasciicircum{}", "")
    for ch in "&%$#_{}":
        assert stripped.count(ch) == stripped.count("\\" + ch)
    assert "~" not in stripped and "^" not in stripped and "\\" not in stripped.replace("\\&", "").replace(
        "\\%", "").replace("\\$", "").replace("\\#", "").replace("\\_", "").replace("\\{", "").replace("\\}", "")


@pytest.mark.parametrize("kwargs, message", [
    ({"precision": {"mean": 2}}, "state the precision of numeric column 'p'"),
    ({"precision": {"mean": 2, "p": 3, "sd": 1}}, "no column 'sd'"),
    ({"precision": {"mean": -1, "p": 3}}, "whole number of decimals"),
    ({"precision": {"mean": 2, "p": 3}, "align": ["l"]}, "one of l, c, r per column"),
])
def test_bad_table_requests_are_one_line(kwargs, message: str) -> None:
    with pytest.raises(InputError, match=message) as info:
        booktabs_table(TABLE, **kwargs)
    assert "\n" not in str(info.value)


def test_the_table_compiles(tmp_path) -> None:
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex is not installed (Debian: texlive-latex-base, texlive-latex-recommended)")
    body = booktabs_table(TABLE, {"mean": 2, "p": 3})
    (tmp_path / "t.tex").write_text("\\documentclass{article}\\usepackage{booktabs}\\begin{document}\n" + body
                                    + "\\end{document}\n")
    proc = subprocess.run(["pdflatex", "-halt-on-error", "-interaction=nonstopmode", "t.tex"], cwd=tmp_path, check=False,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout[-2000:]
