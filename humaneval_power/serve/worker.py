"""The web app's worker: a request's call of the Python API, made directly (no command line).

Imported once by the fork server, so that every worker starts with the numerical stack and the
planners loaded (a fast computation then answers in milliseconds).
"""
from __future__ import annotations

import importlib
import inspect
import os
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import HepowerError, InputError
from ..interface import resolve
from ..interface.validation import command_of
from .commands import H2H_GLMM, PARAMS_FILE

REPORT_FILE = "report.html"  #: the format of the analysis report the page shows

PRELOADED = ("numpy", "pandas", "scipy.stats", "humaneval_power.io", "humaneval_power.engine",
             "humaneval_power.planning", "humaneval_power.fitting.batched", "humaneval_power.scenarios.likert",
             "humaneval_power.scenarios.headtohead", "humaneval_power.scenarios.accuracy",
             "humaneval_power.scenarios.bleu", "humaneval_power.plan_inputs")

for _name in PRELOADED:
    importlib.import_module(_name)
importlib.import_module("humaneval_power.fitting.blas").blas_controller()  # BLAS found once, not per request


def api_arguments(name: str, arguments: Mapping[str, Any], folder: str) -> dict[str, Any]:
    """The keyword arguments of the API function ``name`` for a request's ``arguments`` (validated and
    converted by :func:`humaneval_power.interface.validation.validate`; an uploaded file is named relative to
    ``folder``, the worker's working directory);
    parameters, costs and the design built as the command line builds them (:mod:`humaneval_power.plan_inputs`);
    an uploaded parameter file is ``folder``'s :data:`PARAMS_FILE`."""
    from ..plan_inputs import h2h_params, likert_params, likert_systems

    kw = {k: v for k, v in arguments.items() if v is not None}
    params = kw.pop("params", None)
    path = os.path.join(folder, PARAMS_FILE) if isinstance(params, Mapping) and "schema" in params else None
    _assurance(name, kw, path)
    if name in H2H_GLMM:
        kw["params"] = h2h_params(path) if path else h2h_params(**params)
    if not name.startswith("likert_"):
        return kw
    if path is not None:
        kw["params"] = likert_params(params=path)
    elif isinstance(params, Mapping):  # typed: SDs, and for ordinal ratings family, thresholds and link
        typed = dict(params)
        kw["params"] = likert_params(typed.pop("preset", None), None, None, typed.pop("intercept", None), **typed)
    else:
        kw["params"] = likert_params(preset=params)
    if "costs" in kw:
        from ..designs import Costs

        kw["costs"] = Costs(**kw["costs"])
    kw.setdefault("systems", likert_systems(path))
    return _with_design(name, kw)


def _with_design(name: str, kw: dict[str, Any]) -> dict[str, Any]:
    """The design keywords built as the command line builds them (``plan_inputs.crowd_design``; an uploaded
    pilot's layout, its items unless given, its workers with it)."""
    from ..interface import api_defaults
    from ..plan_inputs import crowd_design, worker_pool

    factory = api_defaults("cell_factory")
    keys = ("systems", "assignment", "presentation", "missing", "model", "compare", "adjust", "means", "costs", "pair")
    given = {k: kw.pop(k, factory.get(k)) for k in keys}
    pilot = kw.pop("design_from", None)
    design = crowd_design(**given, design_from=pilot, where=kw.pop("where", None),  # the worker runs in ``folder``
                          pilot_systems=kw.pop("pilot_systems", None), duplicates=kw.pop("duplicates", "error"))
    if pilot is not None:
        items = design["design_from"].items
        if name != "likert_sample_size":  # a size search varies the items unless told otherwise
            kw.setdefault("items", [items] if name == "likert_power" else items)
        kw["workers"] = worker_pool(design, kw.get("workers"))
    return {**kw, **design}


def _assurance(name: str, kw: dict[str, Any], path: str | None) -> None:
    """``assurance: true``: the draws stored in the uploaded parameter file, as ``--assurance`` takes them."""
    from ..assurance import DEFAULT_DRAWS, H2H_DRAW_NAMES
    from ..params import SD_NAMES
    from ..plan_inputs import parameter_draws

    if "assurance" not in kw and "draws" not in kw and "target_assurance" not in kw:
        return
    names, aliases = (SD_NAMES, None) if name.startswith("likert_") else (tuple(H2H_DRAW_NAMES), H2H_DRAW_NAMES)
    draws = parameter_draws(kw.pop("assurance", None), None, kw.get("draws"), kw.get("seed", 0), path, names,
                            None, aliases, kw.get("target_assurance"))
    kw.update(assurance=draws, draws=kw.get("draws") or DEFAULT_DRAWS)


def call(name: str, arguments: Mapping[str, Any], folder: str,
         progress: Callable[[int, int, str], None]) -> dict[str, Any]:
    """Run the request: ``{"records": [...]}``, the records ``hepower ... --json`` prints (a budget search
    adds ``"designs"``, the evaluated designs; a fit ``"params_file"``, the text of the parameter file), and
    ``"warnings"`` (one line each)."""
    from ..io import json_records

    function = resolve(name)
    kw = api_arguments(name, arguments, folder)
    accepted = inspect.signature(function).parameters
    if command_of()[name].progress == "stages" and "progress" in accepted:  # a note per stage: progress(message)
        kw["progress"] = lambda message: progress(0, 0, str(message))
    elif "progress" in accepted:
        kw["progress"] = progress
    if "jobs" in accepted:
        kw["jobs"] = 1  # one core per computation; results do not depend on it
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = function(**kw)
        except TypeError as exc:  # a required argument left out
            if "required" not in str(exc) and "missing" not in str(exc):
                raise
            raise InputError(f"{name}: {exc}".replace(f"{name}() ", "")) from None
    out: dict[str, Any] = {"warnings": [str(w.message).splitlines()[0] for w in caught if str(w.message)]}
    if name == "analyze":
        from ..completed_study.report import report_text

        out["report"] = report_text(result, REPORT_FILE)
    if hasattr(result, "params_json"):  # a fitted pilot: the parameter file ``hepower fit -o`` writes
        out["params_file"] = result.params_json()
    if name == "likert_budget":
        designs, result = result
        out["designs"] = json_records(designs)
    return {**out, **outcome(result)}


def outcome(result: Any) -> dict[str, Any]:
    """An API function's result as the web API returns it: ``records``, the records ``hepower ... --json``
    prints, and for a completed study's analysis or an agreement its ``summary`` (the text the command prints)."""
    import pandas as pd

    from ..io import json_records

    if hasattr(result, "records"):
        return {"records": json_records(pd.DataFrame(result.records())), "summary": str(result)}
    if isinstance(result, pd.DataFrame):
        table = result
    else:  # a search's answer (its record), one record, or a list of them (a table)
        table = pd.DataFrame([result.record()] if hasattr(result, "record") else
                             result if isinstance(result, list) else [result])
    return {"records": json_records(table)}


def work(name: str, arguments: Mapping[str, Any], send: Any, folder: str) -> None:
    """Worker process: make the call in ``folder``; send its progress, then ("done", outcome) or
    ("failed", HTTP status, one-line message)."""
    import time

    os.setpgid(0, 0)  # a process group of its own: cancelling kills its pool too
    os.chdir(folder)
    last = [0.0]

    def progress(done: int, total: int, label: str = "") -> None:
        now = time.monotonic()
        if now - last[0] > 0.1 or done >= total > 0:
            last[0] = now
            send.send(("progress", int(done), int(total), str(label)))

    try:
        send.send(("done", call(name, arguments, folder, progress)))
    except HepowerError as exc:
        send.send(("failed", 422, _one_line(exc)))
    except MemoryError as exc:
        send.send(("failed", 422, (f"not enough memory ({str(exc) or 'MemoryError'}); ask for fewer simulations, "
                                   "resamples or a smaller design")))
    except Exception as exc:  # noqa: BLE001 - reported to the client, never a traceback
        send.send(("failed", 500, f"internal error: {exc.__class__.__name__}: {_one_line(exc)}"))
    send.close()


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else exc.__class__.__name__
