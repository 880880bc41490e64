"""A pilot's file -> its family's reader and fit -> the parameter file (``hepower fit``'s whole computation).

:func:`fit_pilot_file` reads ratings (``gaussian``, ``ordinal``) or head-to-head judgments (``binomial``)
with :mod:`.ratings`, fits them with the family's backend (:func:`.model.fit_pilot` or
:func:`.ordinal_fit.fit_ordinal`; backends in :mod:`.registry`) and returns a :class:`PilotFit`: the
versioned parameter document ``hepower fit -o`` writes (:meth:`PilotFit.params_json`), the records of
``--json`` and the summary it prints. The command line and the web app only call it.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from . import registry

if TYPE_CHECKING:
    import pandas as pd

    from .ordinal_fit import OrdinalFitResult
    from .types import FitResult

__all__ = ["PilotFit", "SeparationWarning", "fit_pilot_file"]


class SeparationWarning(UserWarning):
    """A quasi-separated head-to-head comparison: its parameter file is marked (the planner refuses it unless
    forced)."""


@dataclass(frozen=True)
class PilotFit:
    """A fitted pilot: the family's fit result and what ``hepower fit`` shows and writes of it."""

    fit: FitResult | OrdinalFitResult

    @property
    def family(self) -> str:
        return self.fit.data.family

    def to_params_file(self) -> dict[str, Any]:
        """The parameter-file document (one comparison, a set of them, or the ordinal file)."""
        return self.fit.to_params_file()

    def params_json(self) -> str:
        """The parameter file's text, as ``hepower fit -o FILE`` writes it."""
        from ..params import params_json

        return params_json(self.to_params_file())

    def records(self) -> list[dict[str, Any]]:
        """One flat record per comparison (``hepower fit --json``)."""
        from .ordinal_fit import OrdinalFitResult

        return self.fit.records() if isinstance(self.fit, OrdinalFitResult) else self.fit.flat_records()

    def summary(self) -> str:
        """The readable summary ``hepower fit`` prints."""
        return self.fit.summary()

    def __str__(self) -> str:
        return self.summary()


def _stage(counts: dict[str, int], family: str, backend: str, intervals: str | None, n_boot: int,
           draws: int | None, chains: int) -> str:
    """What the fit is about to do (R's start-up alone takes seconds)."""
    what = {"lme4": "lme4 (starting R first)", "bambi": f"bambi ({chains} chains x {draws or 1000} draws)"}
    boot = f", then {n_boot} bootstrap refits" if intervals == "boot" else ""
    return (f"fitting {counts['n_ratings']:,} {'ratings' if family == 'gaussian' else 'judgments'} of "
            f"{counts['n_systems']} systems with {what.get(backend, backend)}{boot} ...")


def fit_pilot_file(
    source: str | Path | pd.DataFrame,
    family: str = "gaussian",
    worker: str | None = None,
    item: str | None = None,
    system: str | None = None,
    score: str | None = None,
    system_a: str = "system_a",
    system_b: str = "system_b",
    outcome: str = "outcome",
    baseline: str | None = None,
    systems: Sequence[str] | None = None,
    where: dict[str, str] | None = None,
    scale: tuple[float, float] | None = None,
    duplicates: str = "error",
    ties: str = "drop",
    tie_values: Sequence[str] = (),
    backend: str | None = None,
    link: str | None = None,
    correlated: bool = False,
    simplify: bool = False,
    intervals: str | None = None,
    n_boot: int = 500,
    draws: int | None = None,
    chains: int = 2,
    seed: int = 1,
    progress: Callable[[str], None] | None = None,
) -> PilotFit:
    """Read a pilot (CSV, Parquet or a DataFrame) and fit its family's mixed model: ``gaussian`` ratings
    (:func:`.model.fit_pilot`), ``binomial`` head-to-head judgments (columns ``system_a``, ``system_b``,
    ``outcome``; ``ties``, ``tie_values``) or ``ordinal`` ratings (:func:`.ordinal_fit.fit_ordinal`, ``link``).

    The reading keywords are :func:`.ratings.read_ratings`' and :func:`.ratings.read_judgments`'; ``backend``
    defaults to the family's (:func:`.registry.default_backend`); the others are the fitters'. Options of
    another family are refused (:class:`InputError`). ``progress`` receives a line of text per stage. A
    quasi-separated comparison is announced with a :class:`SeparationWarning`.
    """
    from .ratings import RATING_FAMILIES, read_judgments, read_ratings

    backend = backend or registry.default_backend(family)
    if family == "ordinal":
        given = [o for o, v in (("--correlated", correlated), ("--simplify", simplify)) if v]
        if given:
            raise InputError(f"{given[0]} does not apply to --family ordinal")
    elif link:
        raise InputError("--link applies to --family ordinal")
    if family in RATING_FAMILIES:
        judgment_only = [flag for flag, given in (  # the judgment columns default to their own names
            ("--system-a", system_a != "system_a"), ("--system-b", system_b != "system_b"),
            ("--outcome", outcome != "outcome"), ("--ties", ties != "drop"), ("--tie-values", bool(tie_values))) if given]
        if judgment_only:
            raise InputError(f"{', '.join(judgment_only)}: only for --family binomial (head-to-head judgments)")
        data = read_ratings(source, worker, item, system, score, baseline, systems, where, scale, duplicates, family)
    else:
        if scale or score or system:
            raise InputError("--scale, --score and --system apply to ratings; judgments use --system-a/-b and --outcome")
        data = read_judgments(source, worker, item, system_a, system_b, outcome, baseline, systems, where, ties,
                              tie_values)
    if family == "ordinal":
        from .ordinal_fit import fit_ordinal

        return PilotFit(fit_ordinal(data, backend, link or "logit", intervals=intervals, progress=progress,
                                    draws=draws, chains=chains, seed=seed))
    from .model import fit_pilot

    if progress is not None:
        progress(_stage(data.counts(), family, backend, intervals, n_boot, draws, chains))
    result = fit_pilot(data, backend, correlated, simplify, intervals, n_boot, seed, draws, chains, progress=progress)
    for rec in result.records:
        if rec.get("separation"):
            warnings.warn(SeparationWarning(
                f"{rec['system']} vs {rec['baseline']}: {rec['separation_reason']}; the parameter file is marked "
                "and `hepower h2h` refuses it unless --force"), stacklevel=2)
    return PilotFit(result)
