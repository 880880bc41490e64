"""Typed ordinal parameters (family, thresholds, link, latent SDs) through the web's JSON API: accepted by the
validation, planned by the worker exactly as the API plans them, shown as the command line that gives the same
numbers, and refused in one line when wrong."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from humaneval_power.errors import InputError
from humaneval_power.interface.validation import command_words, validate
from humaneval_power.io import json_records
from humaneval_power.plan_inputs import likert_params
from humaneval_power.scenarios.likert import likert_power

from .ordinal_shared import share_analysis_fits
from .serve_helpers import run_shown

TYPED = {"family": "ordinal", "thresholds": [-2.0, -0.7, 0.5, 1.8], "link": "probit", "sd_worker": 0.6,
         "sd_worker_system": 0.2, "sd_item": 0.8, "sd_item_system": 0.3}
RUN = {"workers": [6], "items": [12], "effect": [0.6], "n_sims": 20, "seed": 3, "model": "ordinal"}


def test_typed_ordinal_parameters_plan_as_the_api_and_the_command_shown(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The web request, the API and the command shown give one record. The ordinal fits of a study (deterministic)
    are made once per process and answered again (``tests/ordinal_shared.py``): a front end that simulated other
    studies or asked for another analysis would make other calls, fitted afresh."""
    from humaneval_power.analyses import OrdinalCLMM
    from humaneval_power.serve.worker import call

    share_analysis_fits(monkeypatch, OrdinalCLMM)

    request = validate("likert_power", {"params": TYPED, **RUN})
    out = call("likert_power", request, str(tmp_path), lambda d, t, label="": None)
    typed = {k: v for k, v in TYPED.items() if k not in ("family", "thresholds", "link")}
    api = likert_power(likert_params(family="ordinal", thresholds=TYPED["thresholds"], link="probit", **typed),
                       jobs=1, **RUN)
    assert out["records"] == json_records(api)
    shown = shlex.join(["hepower", *command_words("likert_power", {"params": TYPED, **RUN})])
    assert "--thresholds -2.0 -0.7 0.5 1.8" in shown and "--family=ordinal" in shown
    code, stdout, _ = run_shown(shown, tmp_path, "--json", "--jobs", "1")
    assert code == 0 and json.loads(stdout)[0]["power"] == out["records"][0]["power"]


@pytest.mark.parametrize(("change", "message"), [
    ({"thresholds": [0.5, -0.7, 1.8]}, "increas"),
    ({"link": "cauchit"}, "link"),
    ({"family": "poisson"}, "family"),
    ({"thresholds": [0.0, "a"]}, "thresholds"),
])
def test_bad_typed_ordinal_parameters_are_one_line(change: dict, message: str, tmp_path: Path) -> None:
    from humaneval_power.serve.worker import call

    with pytest.raises(InputError, match=message) as err:
        request = validate("likert_power", {"params": {**TYPED, **change}, **RUN})
        call("likert_power", request, str(tmp_path), lambda d, t, label="": None)
    assert "\n" not in str(err.value)
    assert shlex.split(str(err.value))  # a plain sentence
