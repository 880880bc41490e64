"""`p_win` is defined where it is printed: unconditional (independent judgments), decisive (GLMM planner),
plogis(log-odds) = decisive probability or expected score by tie policy (analysis). Review of issue 23."""
from __future__ import annotations

from humaneval_power.cli import build_parser
from humaneval_power.completed_study.judgments import p_win_text


def _help(*argv: str) -> str:
    parser = build_parser()
    for name in argv:
        parser = next(a for a in parser._actions if hasattr(a, "choices") and isinstance(a.choices, dict)).choices[name]
    return " ".join(parser.format_help().split())


def test_each_p_win_says_which_probability_it_is() -> None:
    assert "decisive" in p_win_text("drop") and "expected score" in p_win_text("split")
    assert "not a win probability" in p_win_text("split")
    for action in ("power", "size"):
        text = _help("h2h", action)
        assert "p_win + p_tie + p_lose = 1" in text and "conditional on a decisive judgment" in text
    assert "the table's p_win column" in _help("h2h", "power")
