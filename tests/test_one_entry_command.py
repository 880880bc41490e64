"""A command of an existing group is one entry of the description (issue #25: "a CLI command 1 file").

A toy command is added to ``interface.commands.COMMANDS`` only (its function lives in this test module, named by
``module``): the parser, its help, the generic runner (``cli.common.run_command``) and the web API's validation
all follow, and the command line gives the API's numbers.
"""
from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from humaneval_power.cli import main
from humaneval_power.interface import SIGNATURE, Command, Option, address, resolve
from humaneval_power.interface.commands import COMMANDS, JSON, OUT
from humaneval_power.interface.validation import command_of, validate
from humaneval_power.interface.values import finite_float, positive

PATH = ("accuracy", "toy")


def toy_power(n: list[int], effect: float = 0.5, seed: int = 0, progress=None) -> pd.DataFrame:
    """Power of a one-sample z test of ``effect`` SDs with n observations (and a seeded noise column)."""
    from scipy import stats

    n_arr = np.asarray(n, float)
    power = stats.norm.sf(stats.norm.isf(0.025) - effect * np.sqrt(n_arr))
    if progress is not None:
        progress(1, 1)
    return pd.DataFrame({"n": n_arr.astype(int), "power": power,
                         "noise": np.random.default_rng(seed).normal(size=len(n_arr))})


TOY = Command(PATH, "toy_power", "power of a toy z test",
              (Option("--n", "observations", positive, grid=True, required=True),
               Option("--effect", "effect in SDs", finite_float, SIGNATURE),
               Option("--seed", "seed", int, SIGNATURE), JSON, OUT),
              module=__name__, columns=("n", "power"))


@contextlib.contextmanager
def registered() -> Iterator[Command]:
    """The toy command in the description (the description's caches cleared on entry and exit)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(COMMANDS, PATH, TOY)
        command_of.cache_clear()
        try:
            yield TOY
        finally:
            command_of.cache_clear()
    command_of.cache_clear()


@pytest.fixture
def toy() -> Iterator[Command]:
    with registered() as command:
        yield command


def test_help_lists_the_options_with_the_signature_defaults(toy: Command, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["accuracy", "toy", "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert "--effect EFFECT  effect in SDs (default: 0.5)" in text
    assert "--n N [N ...]" in text and "--json" in text and "--out FILE" in text


@settings(max_examples=20, deadline=None)
@given(n=st.lists(st.integers(1, 500), min_size=1, max_size=4), effect=st.floats(0, 2), seed=st.integers(0, 99))
def test_cli_json_equals_the_api_and_the_web_validation(n: list[int], effect: float, seed: int) -> None:
    """Property: for any arguments the generic runner prints the API's table; the web API accepts the same
    arguments by the same description."""
    with registered():
        assert address("toy_power") == f"{__name__}:toy_power"
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["accuracy", "toy", "--n", *map(str, n), "--effect", repr(effect), "--seed", str(seed),
                         "--json"])
        assert code == 0
        records = json.loads(out.getvalue())
        expected = resolve("toy_power")(n, effect, seed)
        assert [r["n"] for r in records] == n
        np.testing.assert_allclose([r["power"] for r in records], expected.power, rtol=1e-12)
        np.testing.assert_allclose([r["noise"] for r in records], expected.noise, rtol=1e-12)
        kw = validate("toy_power", {"n": n, "effect": effect, "seed": seed})
        np.testing.assert_allclose(resolve("toy_power")(**kw).power, expected.power, rtol=1e-12)


def test_bad_input_is_one_line_and_exit_2(toy: Command, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["accuracy", "toy", "--n", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["hepower: error: hepower accuracy toy: argument --n: must be an integer >= 1, got '0'"]


def test_the_readable_table_shows_the_entry_columns(toy: Command, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["accuracy", "toy", "--n", "10", "40"]) == 0
    text = capsys.readouterr().out
    assert "power" in text and "noise" not in text


def test_every_generic_command_resolves_and_has_no_group_handler() -> None:
    """Every command run generically names a function that resolves; f1 size and mde are such commands."""
    generic = [c for c in COMMANDS.values() if c.columns is not None]
    assert {c.path for c in generic} >= {("f1", "size"), ("f1", "mde")}
    for command in generic:
        assert callable(resolve(command.function)), command.path


@pytest.mark.parametrize("action", ["size", "mde"])
def test_f1_size_and_mde_run_generically_with_the_apis_numbers(action: str, tmp_path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """``f1 size`` / ``f1 mde`` (entries only): the CLI's JSON record and --out equal the API's solve record."""
    from humaneval_power.io import json_records
    from humaneval_power.scenarios.f1 import f1_mde, f1_size

    pos, neg = (0.1, 0.05, 0.15, 0.7), (0.9, 0.05, 0.03, 0.02)
    common = {"permutations": 200, "n_sims": 60, "seed": 3, "jobs": 1}
    words = ["--p-positive", "0.3", "--table-positive", *map(str, pos), "--table-negative", *map(str, neg),
             "--permutations", "200", "--sims", "60", "--seed", "3", "--jobs", "1", "--json"]
    out = tmp_path / "solve.json"
    if action == "size":
        api = f1_size(0.3, pos, neg, max_n=5000, **common)
        words += ["--max-n", "5000"]
    else:
        api = f1_mde(150, 0.3, pos, neg, **common)
        words += ["--n", "150"]
    assert main(["f1", action, *words, "--out", str(out)]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert cli == json.loads(json.dumps(json_records(pd.DataFrame([api.record()]))))
    assert json.loads(out.read_text()) == cli
