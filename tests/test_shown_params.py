"""The command line the page shows for typed ``params`` is read by the CLI's parser as the same values
(each typed field written as its own option: one home for how an option becomes words)."""
from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from humaneval_power.interface.parsers import command_parser
from humaneval_power.interface.validation import command_of, command_words, validate

SD = st.floats(0, 3, allow_nan=False).map(lambda v: round(v, 3))


def _parsed(function: str, request: dict[str, Any]) -> dict[str, Any]:
    path = command_of()[function].path
    return vars(command_parser(path).parse_args(command_words(function, validate(function, request))[len(path):]))


def _one(parsed: Any) -> Any:
    """The one value of an option (a grid option parses to a list of lists)."""
    while isinstance(parsed, list):
        assert len(parsed) == 1
        parsed = parsed[0]
    return parsed


@settings(max_examples=40, deadline=None)
@given(st.fixed_dictionaries({}, optional={"sd_worker": SD, "sd_item": SD, "p_tie": st.floats(0, 0.5).map(
    lambda v: round(v, 3)), "ties": st.sampled_from(["split", "drop"])}))
def test_typed_head_to_head_params_read_back(params: dict[str, Any]) -> None:
    parsed = _parsed("h2h_mixed_power", {"params": params, "workers": [10], "items": [20], "log_odds": [0.3]})
    for key, value in params.items():
        assert _one(parsed[key]) == value


@settings(max_examples=40, deadline=None)
@given(st.fixed_dictionaries({}, optional=dict.fromkeys(("sd_worker", "sd_worker_system", "sd_item", "sd_item_system"), SD)),
       st.sampled_from([None, "card2020-high", "card2020-low"]))
def test_typed_likert_params_read_back(sds: dict[str, Any], preset: str | None) -> None:
    params = {**sds, **({"preset": preset} if preset else {})}
    parsed = _parsed("likert_power", {"params": params, "workers": [10], "items": [20], "effect": [0.3]})
    for key, value in params.items():
        assert _one(parsed[key]) == value
