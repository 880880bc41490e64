"""The planner's inputs as a user gives them -> the Python API's arguments, for every front end.

A user names the parameters by typed SDs, a preset or a parameter file; a design by options, a
design file or a pilot's ratings; a head-to-head study by independent judgments or a GLMM design.
The command line and the web API build the API's arguments with these functions alone, so both
refuse the same inputs with the same one-line messages (:class:`~humaneval_power.errors.InputError`;
they name the command line's options, which the web API documents as its fields).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import InputError
from .ordinal_process import ORDINAL_PRESETS
from .params import PRESETS, SD_NAMES, H2HParams, LikertParams, get_preset, load_params

#: the API's defaults of the design keywords a design file fills when the user left them at these
DESIGN_DEFAULTS: dict[str, Any] = {"systems": 2, "presentation": "within", "missing": 0.0, "items_per_hit": 1}
#: the values of a (size) option that count as "not given" besides None: its default, as one value or a list
GRID_SIZES = ("items", "workers", "ratings_per_item", "items_per_hit")


#: every ``--preset``: the Gaussian (Card et al.) and the ordinal ones
LIKERT_PRESETS = (*PRESETS, *ORDINAL_PRESETS)


def likert_params(preset: str | None = None, params: str | None = None, comparison: str | None = None,
                  intercept: float | None = None, *, family: str | None = None,
                  thresholds: Sequence[float] | None = None, link: str | None = None, **sds: float | None) -> Any:
    """The parameters named by a preset, a parameter file (``params``, a path) or typed SDs (typed SDs
    override a preset's or a file's), or the coding-invariant process when its SDs are typed. Only SDs
    whose ratings vary within ``validation.SCORE_SPREAD`` are taken (the refits' tolerances are absolute;
    the analytic tier fails below 1e-150, so one range serves every method). Ordinal ratings
    (``family="ordinal"``, implied by an ordinal preset or parameter file): an
    :class:`~humaneval_power.ordinal_process.OrdinalProcess` (:func:`ordinal_params`)."""
    from .validation import check_choice, check_spread

    if family is not None:
        check_choice("family", family, ("gaussian", "ordinal"))
    in_file = bool(params) and ordinal_file(params, comparison)  # type: ignore[arg-type]
    implied = in_file or preset in ORDINAL_PRESETS
    if family == "gaussian" and implied:
        raise InputError(f"--family gaussian with ordinal parameters ({'the file' if in_file else preset})")
    if family == "ordinal" or implied:
        if params and not in_file:
            raise InputError("--family ordinal needs an ordinal parameter file (hepower fit --family ordinal); "
                             "this one is Gaussian")
        if in_file:
            if thresholds is not None or link is not None:
                raise InputError("an ordinal parameter file gives the thresholds and link: drop --thresholds, --link")
            return _ordinal_params(params, preset, intercept, sds)  # type: ignore[arg-type]
        return ordinal_params(preset, thresholds, link, intercept, sds)
    if thresholds is not None or link is not None:
        raise InputError("--thresholds and --link go with --family ordinal")
    built = _named_params(preset, params, comparison, intercept, sds)
    check_spread("ratings under these SDs", math.hypot(*built.sds.values()), "the SDs and the effect")
    return built


def ordinal_file(params: str, comparison: str | None = None) -> bool:
    """Whether the parameter file ``params`` is an ordinal one (``hepower fit --family ordinal``)."""
    from .params import check_comparison, read_params_doc

    doc = read_params_doc(params, comparison)
    ordinal = isinstance(doc, dict) and doc.get("family") == "ordinal"
    if ordinal:
        check_comparison(params, comparison)  # one latent model: the comparison names the pair planned
    return ordinal


def _ordinal_params(params: str, preset: str | None, intercept: float | None, sds: Mapping[str, float | None]) -> Any:
    """The ordinal process of an ordinal parameter file (thresholds, link, latent SDs), typed SDs refused."""
    from .ordinal_process import OrdinalProcess
    from .params import load_ordinal_params

    if preset or intercept is not None or any(v is not None for v in sds.values()):
        raise InputError("an ordinal parameter file gives the thresholds and latent SDs: drop --preset, "
                         "--intercept and typed SDs")
    return OrdinalProcess.from_params(load_ordinal_params(params))


def ordinal_params(preset: str | None, thresholds: Sequence[float] | None, link: str | None,
                   intercept: float | None, sds: Mapping[str, float | None]) -> Any:
    """The ordinal process of an ordinal preset (:data:`~humaneval_power.ordinal_process.ORDINAL_PRESETS`) with
    any of its thresholds, link and latent SDs replaced by typed ones, or of typed thresholds and all four
    latent SDs (link default logit). Refuses a Gaussian preset, ``intercept`` and the Gaussian-only SDs."""
    from dataclasses import replace

    from .ordinal_process import ORDINAL_SDS, OrdinalProcess

    if preset is not None and preset not in ORDINAL_PRESETS:
        raise InputError(f"--preset {preset} is Gaussian; the ordinal presets: {', '.join(ORDINAL_PRESETS)}")
    if intercept is not None:
        raise InputError("ordinal ratings have no --intercept: the thresholds place them on the scale")
    other = sorted(k for k, v in sds.items() if v is not None and k not in ORDINAL_SDS)
    if other:
        raise InputError(f"ordinal ratings take the latent SDs {', '.join(ORDINAL_SDS)} (the latent residual is the "
                         f"link's); drop {', '.join(other)}")
    typed: dict[str, Any] = {k: float(v) for k, v in sds.items() if v is not None and k in ORDINAL_SDS}
    if thresholds is not None:
        typed["thresholds"] = tuple(float(t) for t in thresholds)
    if link is not None:
        if preset is not None and thresholds is None:
            raise InputError(f"the thresholds of {preset} are on its {ORDINAL_PRESETS[preset].link} scale: give "
                             "--thresholds with --link")
        typed["link"] = link
    if preset is not None:
        return replace(ORDINAL_PRESETS[preset], **typed) if typed else ORDINAL_PRESETS[preset]
    missing = [f"--{k.replace('_', '-')}" for k in ("thresholds", *ORDINAL_SDS) if k not in typed]
    if missing:
        raise InputError(f"ordinal ratings without a preset need {', '.join(missing)}")
    return OrdinalProcess(**typed, name="command-line (ordinal)")


def _named_params(preset: str | None, params: str | None, comparison: str | None, intercept: float | None,
                  sds: Mapping[str, float | None]) -> Any:
    from .processes import INVARIANT_SDS, InvariantProcess

    unknown = sorted(set(sds) - set(SD_NAMES) - set(INVARIANT_SDS))
    if unknown:
        raise InputError(f"unknown SD(s) {', '.join(unknown)}; known: {', '.join(dict.fromkeys(SD_NAMES + INVARIANT_SDS))}")
    typed: dict[str, Any] = {k: v for k, v in sds.items() if v is not None}
    invariant = {k: typed[k] for k in INVARIANT_SDS if k in typed and k not in SD_NAMES}
    if invariant:
        missing = [k for k in INVARIANT_SDS if k not in typed]
        if missing:
            raise InputError(f"the coding-invariant model needs all five SDs (missing {', '.join(missing)})")
        if preset or params or any(k in typed for k in SD_NAMES[:-1]):
            raise InputError("give the coding-invariant SDs or slope parameters (--preset/--params/slope SDs), not both")
        return InvariantProcess(**{k: typed[k] for k in INVARIANT_SDS}, intercept=0.5 if intercept is None else intercept,
                                name="command-line (invariant)")
    if preset and params:
        raise InputError("give --preset or --params, not both")
    overrides: dict[str, Any] = {k: typed[k] for k in SD_NAMES if k in typed}
    if intercept is not None:
        overrides["intercept"] = intercept
    if params:
        base = load_params(params, comparison)
    elif preset:
        base = get_preset(preset)
    elif all(k in overrides for k in SD_NAMES):
        return LikertParams(intercept=overrides.pop("intercept", 0.5), **overrides, name="command-line")
    elif overrides:
        missing = [k for k in SD_NAMES if k not in overrides]
        raise InputError(f"give all five SDs or a --preset/--params to start from (missing {', '.join(missing)})")
    else:
        base = get_preset("card2020-high")
    return base.with_sds(**overrides)


def likert_systems(params: str | None, comparison: str | None = None) -> int:
    """How many systems to plan for when the user does not say: a parameter file's (a shared-SD fit of
    several systems, or an ordinal fit), else 2."""
    from .params import params_systems

    if not params:
        return 2
    if not ordinal_file(params, comparison):
        load_params(params, comparison)  # the file's own refusals first
    return params_systems(params) or 2


def plan_subject(name: str, systems: int, params: str | None = None, comparison: str | None = None) -> str:
    """What a plan's headline names: the pair planned (``comparison`` vs the file's baseline), the file's
    comparisons when all are planned, or the comparisons whose shared parameters serve; and the
    number of systems in the study. ``name``: the parameters' own name, for a preset or typed SDs."""
    from .params import params_comparisons

    held = params_comparisons(params) if params else None
    if held is None:
        return f"{name} in a {systems}-system study"
    baseline, others = held
    if comparison is not None or len(others) == 1:
        return f"{comparison or others[0]} vs {baseline} in a {systems}-system study"
    if len(others) + 1 == systems:
        return f"{', '.join(others)} vs {baseline} in a {systems}-system study"
    return f"a {systems}-system study with the parameters shared by {', '.join(others)} vs {baseline}"


def merge_design_file(path: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The design keywords a design file sets: each of its fields the user left unset (None, or the API's
    default in :data:`DESIGN_DEFAULTS`, alone or as a one-value list); the workload too (as
    ``workload``, a tuple of weights)."""
    from .designs import read_design_file

    out: dict[str, Any] = {}
    for key, value in read_design_file(path).items():
        current = given.get(key)
        if key == "workload":
            out[key] = tuple(float(v) for v in value)
        elif current is None or (key in DESIGN_DEFAULTS and current in (DESIGN_DEFAULTS[key], [DESIGN_DEFAULTS[key]])):
            out[key] = value
    return out


def pilot_frame(path: str, where: Mapping[str, str] | None = None) -> Any:
    """A pilot's ratings (any table ``io.read_table`` reads), filtered by ``where`` (column -> value)."""
    from .io import apply_filters, read_table

    return apply_filters(read_table(path)[0], dict(where or {}))


def pilot_design(path: str, where: Mapping[str, str] | None = None, systems: Sequence[str] | None = None,
                 duplicates: str = "error", source: str | None = None) -> Any:
    """The layout a pilot or finished study used (its ratings' worker, item and system columns), to plan
    with (``designs.PilotDesign``, scaled to the planned items)."""
    from .designs import PilotDesign

    return PilotDesign.from_ratings(pilot_frame(path, where), systems=systems, source=source or path,
                                    duplicates=duplicates)


def worker_pool(design: Mapping[str, Any], workers: Any) -> Any:
    """The planned worker pool: ``workers``, or the pilot's with a workload drawn from it (which fixes it),
    or 0 with a pilot's own layout (its workers come with it); a list stays a list."""
    if design.get("design_from") is not None:
        return [0] if isinstance(workers, list) or workers is None else 0
    if "workload" not in design:
        return workers
    pool = len(design["workload"])
    if workers not in (None, [pool], pool):
        raise InputError(f"--workload-from fixes the pool at the pilot's {pool} workers; drop --workers")
    return [pool] if isinstance(workers, list) else pool


def crowd_design(systems: int, assignment: str | None, presentation: str, missing: float, model: str | None,
                 compare: str, adjust: str, means: Sequence[float] | None, costs: Any, pair: tuple[int, int] | None,
                 design_from: str | None = None, workload_from: str | None = None,
                 where: Mapping[str, str] | None = None, pilot_systems: Sequence[str] | None = None,
                 duplicates: str = "error", workload: Sequence[float] | None = None) -> dict[str, Any]:
    """The design and analysis keywords of the Likert functions (``crowd.cell_factory``'s): a crowd design,
    or a pilot's own layout (``design_from``: its ratings, scaled to the planned items), or skewed
    workloads drawn from a pilot's ratings per worker (``workload_from``; implies random assignment)."""
    kw: dict[str, Any] = {"systems": systems, "assignment": assignment, "presentation": presentation,
                          "missing": missing, "model": model, "compare": compare, "adjust": adjust, "means": means,
                          "costs": costs}
    if pair is not None:
        kw["pair"] = tuple(pair)
    if (where or pilot_systems) and not (design_from or workload_from):
        raise InputError("--where and --pilot-systems go with --design-from or --workload-from")
    if duplicates != "error" and not design_from:
        raise InputError("--duplicates goes with --design-from")
    if design_from:
        kw["design_from"] = pilot_design(design_from, where, pilot_systems, duplicates)
    if workload_from:
        counts = pilot_frame(workload_from, where)["worker"].value_counts()
        kw["workload"] = tuple(float(c) for c in counts)
        kw["assignment"] = "random"
    elif workload:
        kw["workload"] = tuple(workload)
    return kw


def h2h_mode(params: str | None = None, sd_worker: float | None = None, sd_item: float | None = None,
             workers: Any = None) -> str:
    """Which head-to-head planner a request is for: "glmm" (repeated judgments: a parameter file, the SDs or
    a worker pool) or "independent" (independent judgments)."""
    return "glmm" if any(v is not None for v in (params, sd_worker, sd_item, workers)) else "independent"


def h2h_params(params: str | None = None, comparison: str | None = None, force: bool = False,
               sd_worker: float | None = None, sd_item: float | None = None, p_tie: float | None = None,
               ties: str | None = None) -> H2HParams:
    """The GLMM parameters: a head-to-head parameter file (``force``: even a quasi-separated fit), or typed SDs
    with a tie rate and policy."""
    from .params import load_h2h_params

    if params:
        if sd_worker is not None or sd_item is not None:
            raise InputError("give --params or --sd-worker/--sd-item, not both")
        if p_tie is not None or ties is not None:
            raise InputError("the parameter file carries the pilot's tie rate and policy: drop --p-tie/--ties")
        return load_h2h_params(params, comparison, allow_separation=force)
    if sd_worker is None or sd_item is None:
        raise InputError("a GLMM design needs --params FILE or both --sd-worker and --sd-item")
    return H2HParams(sd_worker, sd_item, name="command-line", p_tie=p_tie or 0.0, ties=ties or "drop")


def parameter_draws(assurance: bool | None, prior: Sequence[str] | None = None, draws: int | None = None,
                    seed: int = 0, params: str | None = None, names: Sequence[str] = SD_NAMES,
                    comparison: str | None = None, aliases: Mapping[str, str] | None = None,
                    target_assurance: float | None = None) -> Any:
    """The parameter draws an assurance request asks for (``names`` from a parameter file's stored draws, or
    ``prior`` sampled ``draws`` times), or None without ``assurance`` (then a prior, a number of draws or a
    target assurance is refused: it would be ignored)."""
    from .assurance import DEFAULT_DRAWS, Prior, load_draws

    if not assurance:
        used = [o for o, v in (("--prior", prior), ("--draws", draws), ("--target-assurance", target_assurance))
                if v is not None]
        if used:
            raise InputError(f"{' and '.join(used)} go{'es' if len(used) == 1 else ''} with --assurance")
        return None
    if prior:
        return Prior(tuple(prior)).sample(draws or DEFAULT_DRAWS, seed)
    if not params:
        raise InputError("--assurance needs parameter draws: a --params file with draws (`hepower fit --draws N`) "
                         "or --prior NAME=DIST:ARGS")
    if ordinal_file(params, comparison):
        from .assurance import ordinal_draws
        from .params import load_ordinal_params

        return ordinal_draws(load_ordinal_params(params), str(params))
    return load_draws(params, names, comparison, aliases)
