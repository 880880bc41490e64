"""Defects a review found: each test fails before its fix (likert budget without costs, clmm's non-integer
message, unbounded f1 work, grid-option and f1 mde wording)."""

from __future__ import annotations

import argparse
import io
import re
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from humaneval_power.cli import main
from humaneval_power.designs import Costs
from humaneval_power.errors import InputError
from humaneval_power.fitting.clmm import ordinal_codes
from humaneval_power.interface.values import number_list
from humaneval_power.scenarios.f1 import MAX_N, f1_mde, f1_power, f1_size
from humaneval_power.scenarios.likert import likert_budget

NO_COSTS = "give the costs to minimise"


def _cli(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with redirect_stdout(io.StringIO()), redirect_stderr(err):
        code = main(argv)
    return code, err.getvalue().strip()


@pytest.mark.parametrize("costs", [None, Costs(), Costs(fee=0.2)])
def test_a_budget_search_without_costs_is_refused_by_the_library(costs: Costs | None) -> None:
    with pytest.raises(InputError, match=NO_COSTS):
        likert_budget("card2020-high", 0.3, budget=100, costs=costs)


def test_the_api_refuses_a_budget_without_costs_with_the_cli_line() -> None:
    pytest.importorskip("fastapi", reason="hepower serve needs the serve extra (FastAPI)")
    from fastapi.testclient import TestClient

    from humaneval_power.serve.app import create_app
    from humaneval_power.serve.commands import Limits, command_line

    kwargs = {"params": "card2020-high", "effect": 0.3, "budget": 100}
    with TestClient(create_app(Limits(max_jobs=1))) as client:
        r = client.post("/api/likert_budget", json=kwargs)
    assert r.status_code == 422 and NO_COSTS in r.json()["detail"], r.text
    code, err = _cli(command_line("likert_budget", kwargs))
    assert code == 2 and err == f"hepower: error: {r.json()['detail']}"


@settings(max_examples=40, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True).filter(lambda v: not float(v).is_integer()),
       st.integers(0, 5))
def test_a_non_integer_rating_is_named_in_its_plain_repr(bad: float, where: int) -> None:
    ratings = [1.0, 2.0, 3.0, 4.0, 5.0]
    ratings.insert(where, bad)
    with pytest.raises(InputError) as e:
        ordinal_codes(np.array(ratings))
    assert f"(e.g. {bad!r})" in str(e.value) and "np." not in str(e.value)


F1_TABLES = {"p_positive": 0.3, "table_positive": (0.1, 0.05, 0.15, 0.7), "table_negative": (0.9, 0.05, 0.03, 0.02)}


@settings(max_examples=25, deadline=None)
@given(st.integers(MAX_N + 1, 10**18), st.sampled_from(["power", "size", "mde"]))
def test_f1_refuses_a_test_set_beyond_its_bound_before_any_work(n: int, which: str) -> None:
    with pytest.raises(InputError, match=f"{n:,} is more items than f1 plans for") as e:
        if which == "power":
            f1_power([100, n], **F1_TABLES, n_sims=10**9)
        elif which == "size":
            f1_size(**F1_TABLES, max_n=n, n_sims=10**9)
        else:
            f1_mde(n, **F1_TABLES, n_sims=10**9)
    assert "\n" not in str(e.value)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["n", "max_n", "items", "n_sims", "permutations"]),
       st.one_of(st.integers(10**5, 10**15), st.integers(10**5, 10**15).map(float)))
def test_server_limits_name_an_integer_as_an_integer(key: str, value: float) -> None:
    from humaneval_power.serve.commands import Limits, check_limits

    with pytest.raises(InputError, match=f"^{key} {int(value):,} exceeds this server's limit"):
        check_limits({key: [value] if key in ("n", "items") else value}, Limits())


def _bounded_grid_options() -> list[tuple[str, Any]]:
    """Every grid option whose values have a lower bound (an ``at_least`` integer)."""
    from humaneval_power.interface.commands import COMMANDS

    found = {(o.flag, o.kind) for c in COMMANDS.values() for o in c.all_options()
             if o.grid and getattr(o.kind, "__name__", "").startswith("integer >= ")}
    assert found
    return sorted(found, key=lambda fk: fk[0])


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(_bounded_grid_options()), st.integers(-10**6, 10**6), st.booleans())
def test_a_grid_value_below_its_bound_says_the_bound(option: tuple[str, Any], value: int, as_range: bool) -> None:
    flag, kind = option
    minimum = int(kind.__name__.removeprefix("integer >= "))
    text = f"{value}:{max(value, minimum) + 4}:2" if as_range else str(value)
    parse = number_list(kind, flag)
    if value >= minimum:
        assert parse(text)[0] == value
        return
    with pytest.raises(argparse.ArgumentTypeError) as e:
        parse(text)
    assert str(e.value) == f"must be an integer >= {minimum}, got '{value}'"


def test_an_unreachable_f1_mde_says_no_difference_reaches_the_target() -> None:
    r = f1_mde(10, **F1_TABLES, n_sims=20, permutations=100)
    assert r.value is None
    said = r"^no F1 difference up to the largest the tables' agreement allows \(0\.\d+\) reaches power 0\.8 with n = 10 "
    assert re.match(said, r.reason) and " at 1." not in r.reason, r.reason
