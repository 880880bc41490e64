"""The web API's validation (``interface.validation``), generated from the command descriptions, against the
command line's parser generated from the same descriptions: for random JSON requests it accepts exactly what
the parser accepts for the equivalent command line, with the same one-line message when both refuse."""
from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from humaneval_power.errors import InputError
from humaneval_power.interface import Option, choices_of
from humaneval_power.interface.parsers import command_parser as parser_of
from humaneval_power.interface.validation import (
    command_of,
    command_words,
    convert,
    request_arguments,
    request_options,
    validate,
)
from humaneval_power.serve.commands import functions

#: numbers as a command line can take them as separate words: argparse reads a negative number written with
#: an exponent ('-1e-05') as an option, so they stay within 4 decimals and 1e6 (and NaN/inf as scalars)
NUMBERS = st.one_of(st.integers(-3, 60), st.floats(-1e6, 1e6).map(lambda x: round(x, 4)),
                    st.sampled_from([0.5, 1.0, 1e3, 2.5e4]))
SCALAR_NUMBERS = st.one_of(NUMBERS, st.sampled_from([float("nan"), float("inf"), float("-inf")]))
TEXT = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=8)


def _values(option: Option, several: bool) -> st.SearchStrategy[Any]:
    """A well-typed JSON value of one option (the JSON type the option takes; any value of it)."""
    choices = choices_of(option)
    if option.action == "store_true":
        return st.booleans()
    if option.kind is not None:
        scalar = NUMBERS if several else SCALAR_NUMBERS
    else:
        text = TEXT.filter(lambda t: not t.startswith("-")) if several else TEXT
        scalar = st.one_of(st.sampled_from(list(choices)), text) if choices else text
    return st.lists(scalar, max_size=4) if several else scalar


@st.composite
def requests(draw: Any, function: str) -> dict[str, Any]:
    """A request of ``function``: a random subset of its options with well-typed values (files by name)."""
    out: dict[str, Any] = {}
    for name, option in request_options(function).items():
        if option.positional:
            out[name] = "ratings.csv"  # the server names an uploaded file
        elif draw(st.booleans()):
            several = option.grid or option.nargs is not None or option.action == "append"
            if option.action == "append":  # where: an object
                out[name] = draw(st.dictionaries(st.sampled_from(["dimension", "x"]), TEXT, max_size=2))
            else:
                out[name] = draw(_values(option, several))
    if "pair" in request_arguments(function) and draw(st.booleans()):
        out["pair"] = draw(st.lists(st.integers(-2, 5), min_size=2, max_size=2))
    return out


def _cli(function: str, request: dict[str, Any]) -> str | None:
    """The command line's parser on the equivalent command: None when it accepts, else its message."""
    words = command_words(function, request)
    path = command_of()[function].path
    try:
        command_parser(path).parse_args(words[len(path):])
    except InputError as exc:
        return str(exc)
    return None


SERVED = sorted(functions())
command_parser = cache(parser_of)


@pytest.mark.parametrize("function", SERVED)
def test_validation_accepts_what_the_command_line_accepts(function: str) -> None:
    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(requests(function))
    def check(request: dict[str, Any]) -> None:
        expected = _cli(function, request)
        try:
            validate(function, request)
        except InputError as exc:
            assert expected is not None, f"refused what the command line takes: {exc}"
            assert "\n" not in str(exc)
            overfull = any(isinstance(o.nargs, int) and len(request.get(n) or ()) > o.nargs
                           for n, o in request_options(function).items())
            if not overfull:  # too many values of a fixed count: argparse reads the extra words as positionals
                assert str(exc) == expected
        else:
            assert expected is None, f"accepted what the command line refuses: {expected}"

    check()


#: JSON that has no command-line equivalent: a word for a number, a list for one value, a number for a string
ILL_TYPED = st.one_of(st.booleans(), TEXT, st.lists(NUMBERS, min_size=2, max_size=3),
                      st.dictionaries(TEXT, NUMBERS, min_size=1, max_size=2), NUMBERS)


@pytest.mark.parametrize("function", ["likert_power", "h2h_mixed_power", "agreement", "mde_table"])
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_a_value_of_the_wrong_json_type_is_refused_naming_the_field(function: str, data: Any) -> None:
    name, option = data.draw(st.sampled_from(sorted(request_options(function).items())))
    value = data.draw(ILL_TYPED)
    several = option.grid or option.nargs is not None
    well_typed = (isinstance(value, bool) if option.action == "store_true" else
                  (isinstance(value, (int, float)) and not isinstance(value, bool)) if option.kind is not None and
                  not several else isinstance(value, str) if option.kind is None and not several else True)
    if well_typed or several or option.positional or option.action == "append":
        return  # covered by the equivalence above
    with pytest.raises(InputError) as caught:
        validate(function, {name: value})
    assert name in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("request_, expected", [
    ({"sims": 10}, "has no argument 'sims'"),
    ({"workers": ["ten"], "effect": [0.2]}, "workers takes numbers, got 'ten'"),
    ({"effect": [0.2], "costs": {"per_rating": "x"}}, "costs.per_rating takes numbers"),
    ({"effect": [0.2], "costs": {"tip": 1}}, "costs: unknown field(s) tip"),
    ({"effect": [0.2], "params": {"sd_residual": "big"}}, "params.sd_residual takes numbers"),
    ({"effect": [0.2], "params": {"preset": "nope"}}, "argument --preset: invalid choice: 'nope'"),
    ({"effect": [0.2], "pair": [0, "b"]}, "pair takes two system indices from 0"),
    ({"effect": [0.2], "pair": [0, 0, 1]}, "argument --pair: expected 2 arguments"),
    ({"effect": [0.2], "where": ["dimension=x"]}, "where takes an object"),
    ({"effect": [0.2], "assurance": 1}, "assurance takes true or false"),
])
def test_structured_and_json_only_mistakes_name_the_field(request_: dict[str, Any], expected: str) -> None:
    with pytest.raises(InputError, match=None) as caught:
        validate("likert_power", request_)
    assert expected in str(caught.value), caught.value


def test_converted_values_are_the_command_lines() -> None:
    """Ranges and the pair as the command line reads them (the pair counted from 0, as the API does)."""
    call = validate("likert_power", {"effect": [0.1, 0.2], "workers": [3.0], "pair": [0, 2], "systems": 3,
                                     "where": {"dimension": 1}, "costs": {"per_rating": 1}})
    assert call == {"effect": [0.1, 0.2], "workers": [3], "pair": (0, 2), "systems": 3,
                    "where": {"dimension": "1"}, "costs": {"per_rating": 1.0}}
    args = command_parser(("likert", "power")).parse_args(
        command_words("likert_power", {"effect": [0.1, 0.2], "workers": [3.0], "pair": [0, 2]})[2:])
    assert args.workers == [[3]] and args.pair == [1, 3]


@pytest.mark.parametrize("function", SERVED)
def test_the_generated_form_is_the_request_arguments(function: str) -> None:
    """GET /api's form of a function (the page's generic form): its arguments, the files to upload, the required
    ones, and choices the validation takes."""
    from humaneval_power.interface.validation import describe, file_arguments

    form = describe(function)
    assert [a["name"] for a in form] == list(request_arguments(function))
    assert [a["name"] for a in form if a["type"] == "file"] == list(file_arguments(function))
    options = request_options(function)
    for a in form:
        assert a["type"] in ("file", "switch", "integer", "number", "text", "params", "costs", "pair", "where")
        if a["name"] in options and a["type"] != "where":
            assert a["required"] == (options[a["name"]].required or a["type"] == "file") and a["help"]
        for choice in a.get("choices") or []:  # each choice shown is taken (as the string the page sends)
            convert(command_of()[function], options[a["name"]], [choice] if a["several"] else choice)
