"""Assurance: power averaged over the uncertainty of the parameters.

A plan made at a pilot's point estimates is *conditional* on them; with three
workers those estimates are so uncertain that "80% power" may be far less in
truth. Given draws of the parameters — the bambi posterior or the parametric
bootstrap stored in a fitted parameter file (``hepower fit --draws N``), or a
prior (:class:`Prior`) — every design cell is evaluated once at the point
estimate and once per draw, through the same engine and tiers:

* ``conditional_power``: power at the point estimate (what a plain plan reports);
* ``assurance``: the mean over draws of the probability of success — a result
  significant in the direction of the planned effect (for a draw whose effect
  has that sign, its power; otherwise its wrong-sign rejection rate; half the
  rejection rate at a zero effect);
* ``p_power_reaches_target``: the share of draws whose power reaches the target;
* ``assurance_se``: SD of the per-draw success probabilities / sqrt(draws), the
  Monte-Carlo error of the assurance (draw sampling and simulated studies).

The draws are fixed once (seeded), so every design and every effect sees the
same draws and curves over the design stay smooth; draw d's studies use their
own random stream (the cell's stream key and d), independent of the other draws.
An assurance cell is an engine scenario whose ``exact()`` runs its inner cells,
so :func:`~humaneval_power.planning.power_grid` and
:func:`~humaneval_power.planning.solve` plan with it unchanged.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
from scipy import stats

from .engine import PowerResult, Scenario, StudyOutcomes, run_cells
from .errors import InputError
from .executors import Jobs
from .params import read_params_doc
from .progress import ProgressFn, as_progress
from .validation import check_target_power

#: parameter-file keys holding draws, and where they come from
DRAW_KEYS = {"posterior_draws": "bambi posterior", "bootstrap_draws": "parametric bootstrap"}
#: head-to-head files store draws under the fitted names; the planner's names
H2H_DRAW_NAMES = {"sd_worker": "worker|(Intercept)", "sd_item": "item|(Intercept)"}
#: the design fields a progress label names
SIZES = ("n", "workers", "items", "ratings_per_item", "judgments_per_item", "effect")
#: draws used when none is said (a file's draws are thinned to it, a prior sampled that many times)
DEFAULT_DRAWS = 200


@dataclass(frozen=True)
class ParamDraws:
    """Draws of some parameters: ``values[name]`` holds one value per draw (all of equal length)."""

    values: Mapping[str, tuple[float, ...]]
    source: str

    def __post_init__(self) -> None:
        lengths = {len(v) for v in self.values.values()}
        if not self.values or lengths == {0}:
            raise InputError(f"{self.source}: no parameter draws")
        if len(lengths) != 1:
            raise InputError(f"{self.source}: the parameters have different numbers of draws")
        for name, v in self.values.items():
            a = np.asarray(v, float)
            if not np.isfinite(a).all():
                raise InputError(f"{self.source}: draws of {name} are not all finite numbers")

    def __len__(self) -> int:
        return len(next(iter(self.values.values())))

    def rows(self) -> list[dict[str, float]]:
        """One dict of parameter values per draw."""
        names = list(self.values)
        return [dict(zip(names, map(float, vals))) for vals in zip(*(self.values[k] for k in names))]

    def thin(self, n: int | None, seed: int = 0) -> ParamDraws:
        """At most ``n`` draws, a seeded random subset in their original order (all when ``n`` is None)."""
        if n is None or n >= len(self):
            return self
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise InputError(f"the number of draws must be a positive integer, got {n!r}")
        keep = np.sort(np.random.default_rng(seed).choice(len(self), size=int(n), replace=False))
        return ParamDraws({k: tuple(float(v[i]) for i in keep) for k, v in self.values.items()},
                          f"{self.source}, {n} of {len(self)} draws")


def draws_from_doc(doc: Any, names: Sequence[str], source: str, aliases: Mapping[str, str] | None = None) -> ParamDraws:
    """The draws of ``names`` in a parameter-file document (InputError when it has none)."""
    aliases = aliases or {}
    found = [(key, what) for key, what in DRAW_KEYS.items() if isinstance(doc, dict) and doc.get(key)]
    if not found:
        raise InputError(f"{source} has no parameter draws, which --assurance needs: refit with `hepower fit "
                         "--draws N` (parametric bootstrap, or the bambi backend's posterior) or give --prior")
    key, what = found[0]
    stored = doc[key]
    if not isinstance(stored, dict):
        raise InputError(f"{source}: {key} must be an object of parameter -> list of draws")
    values = {}
    for name in names:
        raw = stored.get(aliases.get(name, name))
        if raw is None:
            continue
        if not isinstance(raw, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in raw):
            raise InputError(f"{source}: {key}.{aliases.get(name, name)} must be a list of numbers")
        values[name] = tuple(float(v) for v in raw)
    if not values:
        raise InputError(f"{source}: its {key} hold none of {', '.join(names)}")
    negative = [k for k, v in values.items() if k.startswith("sd_") and min(v) < 0]
    if negative:
        raise InputError(f"{source}: negative draws of {', '.join(negative)}")
    return ParamDraws(values, f"{what} ({source})")


def load_draws(path: str, names: Sequence[str], comparison: str | None = None,
               aliases: Mapping[str, str] | None = None) -> ParamDraws:
    """Draws of ``names`` stored in a parameter file (``comparison`` picks one from a set)."""
    return draws_from_doc(read_params_doc(path, comparison), names, str(path), aliases)


# ------------------------------------------------------------------------------------------ priors

#: name: (scipy constructor from the spec's numbers, number of numbers, what they mean)
DISTRIBUTIONS: dict[str, tuple[Callable[..., Any], int, str]] = {
    "beta": (lambda a, b: stats.beta(a, b), 2, "A,B (shapes)"),
    "uniform": (lambda lo, hi: stats.uniform(lo, hi - lo), 2, "LOW,HIGH"),
    "normal": (lambda m, s: stats.norm(m, s), 2, "MEAN,SD"),
    "halfnormal": (lambda s: stats.halfnorm(scale=s), 1, "SCALE"),
    "lognormal": (lambda median, s: stats.lognorm(s, scale=median), 2, "MEDIAN,SDLOG"),
    "gamma": (lambda shape, scale: stats.gamma(shape, scale=scale), 2, "SHAPE,SCALE"),
}
PRIOR_HELP = ("NAME=DIST:ARGS, e.g. p_win=beta:13,7 or sd_worker_slope=lognormal:0.2,0.5; DIST is "
              + ", ".join(f"{k}:{v[2]}" for k, v in DISTRIBUTIONS.items()))


@dataclass(frozen=True)
class Prior:
    """Independent priors of some parameters, from specs ``NAME=DIST:ARGS`` (see ``PRIOR_HELP``)."""

    specs: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.specs:
            raise InputError("the prior is empty: give NAME=DIST:ARGS")
        names = [self._parse(s)[0] for s in self.specs]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise InputError(f"the prior names {', '.join(twice)} more than once")

    @staticmethod
    def _parse(spec: str) -> tuple[str, Any]:
        m = re.fullmatch(r"\s*(\w+)\s*=\s*(\w+)\s*:\s*(.+)", str(spec))
        if not m:
            raise InputError(f"cannot read the prior {spec!r}: expected {PRIOR_HELP}")
        name, dist, args = m.groups()
        if dist not in DISTRIBUTIONS:
            raise InputError(f"unknown prior distribution {dist!r} in {spec!r}; choose one of {', '.join(DISTRIBUTIONS)}")
        make, count, what = DISTRIBUTIONS[dist]
        try:
            numbers = [float(x) for x in args.split(",")]
        except ValueError:
            numbers = []
        if len(numbers) != count or not all(math.isfinite(x) for x in numbers):
            raise InputError(f"the prior {spec!r} needs {count} number(s): {dist}:{what}")
        frozen = make(*numbers)
        lo, hi = frozen.support()
        if not (np.isfinite(frozen.mean()) and lo < hi and np.all(np.isfinite(frozen.std()))
                and frozen.std() > 0) or any(x <= 0 for x in numbers[1:] if dist != "uniform") or (
                dist in ("beta", "halfnormal") and numbers[0] <= 0):
            raise InputError(f"the prior {spec!r} is not a proper distribution (check its numbers)")
        return name, frozen

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._parse(s)[0] for s in self.specs)

    def mean(self, name: str) -> float:
        """The prior mean of one parameter."""
        return float(dict(self._parse(s) for s in self.specs)[name].mean())

    def sample(self, n: int = DEFAULT_DRAWS, seed: int = 0) -> ParamDraws:
        """``n`` independent draws (seeded; each parameter its own stream, so adding one keeps the others)."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise InputError(f"the number of draws must be a positive integer, got {n!r}")
        values = {}
        for spec in self.specs:
            name, dist = self._parse(spec)
            rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=tuple(name.encode())))
            values[name] = tuple(float(v) for v in dist.rvs(size=int(n), random_state=rng))
        return ParamDraws(values, "prior " + "; ".join(self.specs))


def ordinal_draws(params: Any, source: str) -> ParamDraws:
    """The joint draws of an ordinal parameter file (:class:`~humaneval_power.params.OrdinalParams` with
    ``posterior_draws``, ``hepower fit --family ordinal --backend bambi``): the four latent SDs and the
    thresholds as ``threshold_1`` .. ``threshold_{K-1}`` (InputError when it has none)."""
    if params.draws is None:
        raise InputError(f"{source} has no parameter draws, which --assurance needs: refit with `hepower fit "
                         "--family ordinal --backend bambi` (posterior draws) or give --prior (e.g. "
                         "sd_worker=lognormal:1.3,0.3 threshold_1=normal:-6,0.8)")
    d = params.draws
    values = {k: tuple(float(v) for v in d[k]) for k in params.sds if k in d}
    values.update({f"threshold_{k + 1}": tuple(float(th[k]) for th in d["thresholds"])
                   for k in range(len(params.thresholds))})
    return ParamDraws(values, f"{DRAW_KEYS['posterior_draws']} ({source})")


def apply_draws(point: Any, draws: ParamDraws, prefix: str = "sd_") -> list[Any]:
    """One copy of the dataclass ``point`` per draw with the drawn fields replaced (validated by it);
    only fields named ``prefix...`` may be drawn (the variance components), and of a point with
    ``thresholds`` (ordinal ratings) each threshold as ``threshold_1`` .. ``threshold_{K-1}``."""
    th = tuple(getattr(point, "thresholds", ()))
    names = [f"threshold_{k + 1}" for k in range(len(th))]
    known = sorted(f.name for f in fields(point) if f.name.startswith(prefix)) + names
    unknown = [k for k in draws.values if k not in known]
    if unknown:
        raise InputError(f"{draws.source}: {', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not a "
                         f"parameter that can be drawn for {getattr(point, 'name', type(point).__name__)} "
                         f"(those are {', '.join(known)})")
    out = []
    for i, row in enumerate(draws.rows()):
        drawn: dict[str, Any] = {k: v for k, v in row.items() if k not in names}
        if any(k in row for k in names):
            drawn["thresholds"] = tuple(row.get(k, t) for k, t in zip(names, th))
        try:
            out.append(replace(point, **drawn))
        except InputError as exc:
            raise InputError(f"{draws.source}, draw {i + 1}: {exc}") from None
    return out


# ------------------------------------------------------------------------------------------ engine cells

@dataclass(frozen=True)
class DrawCell:
    """A cell evaluated under one parameter draw: the inner cell with its own random stream."""

    inner: Scenario
    index: int

    @property
    def effect(self) -> float:
        return self.inner.effect

    @property
    def chunk_size(self) -> int:
        return self.inner.chunk_size

    def cell(self) -> dict[str, Any]:
        return self.inner.cell()

    def stream_key(self) -> str:
        return json.dumps([self.inner.stream_key(), "draw", self.index])

    def study_bytes(self) -> int:
        return getattr(self.inner, "study_bytes", lambda: 0)()

    def simulate(self, n: int, rng: np.random.Generator) -> StudyOutcomes:
        return self.inner.simulate(n, rng)

    def exact(self) -> PowerResult | None:
        return self.inner.exact()


def success_probability(result: PowerResult, planned_sign: float) -> float:
    """P(significant in the planned direction) of a cell whose true effect is ``result.cell['effect']``.

    Same sign: its power. Opposite sign: its wrong-sign rejection rate,
    power * type_s / (1 - type_s) (0 when nothing is significant; with a monotone likelihood
    ratio it never exceeds the power, so a power of 0 means 0). Zero effect: half the rejection rate.
    """
    effect = float(result.cell["effect"])
    if effect == 0:
        return result.power / 2
    if math.copysign(1, effect) == math.copysign(1, planned_sign):
        return result.power
    if result.power == 0 or not math.isfinite(result.type_s) or result.type_s >= 1:
        return 0.0
    return result.power * result.type_s / (1 - result.type_s)


def summarise(point: PowerResult, draws: Sequence[PowerResult], target_power: float, source: str) -> PowerResult:
    """The assurance of a cell from its power at the point estimate and under each draw."""
    sign = float(point.cell["effect"]) or 1.0
    s = np.array([success_probability(r, sign) for r in draws])
    d = len(s)
    a = float(s.mean())
    se = float(s.std(ddof=1) / math.sqrt(d)) if d > 1 else math.nan
    exact = point.n_sims == 0 and all(r.n_sims == 0 for r in draws)
    half = 0.0 if exact else 1.959963984540054 * (se if math.isfinite(se) else 0.0)
    q05, q50, q95 = (float(v) for v in np.quantile(s, [0.05, 0.5, 0.95]))
    extra = {**point.extra, "assurance": a, "assurance_se": se, "conditional_power": point.power,
             "p_power_reaches_target": float((s >= target_power).mean()), "target_power": target_power,
             "power_q05": q05, "power_q50": q50, "power_q95": q95, "draws": d, "draw_source": source}
    n_sims = 0 if exact else point.n_sims + sum(r.n_sims for r in draws)
    return PowerResult(cell=dict(point.cell), power=a, ci_low=max(0.0, a - half), ci_high=min(1.0, a + half),
                       power_excluding_failures=a, type_s=math.nan, type_m=math.nan, mean_estimate=math.nan,
                       n_sims=n_sims, n_failed=sum(r.n_failed for r in draws),
                       n_singular=sum(r.n_singular for r in draws), n_warnings=sum(r.n_warnings for r in draws),
                       df=point.df, extra=extra)


@dataclass(frozen=True)
class AssuranceCell:
    """A design cell under parameter uncertainty: the cell at the point estimate and one per draw.

    Its ``exact()`` runs them (``n_sims`` studies each where simulated) and returns the
    assurance as the result's ``power``, with an approximate 95% interval
    (assurance +- 1.96 SE) unless every inner cell is exact; the other figures are in its
    ``extra`` (see :func:`summarise`). Everything else (``effect``, ``cell()``, ``design``,
    ``closed_form``) is the point cell's. ``jobs`` runs the inner cells: give an open executor
    (the planning functions do, see :func:`~humaneval_power.executors.one_executor`); a number of
    processes would start a pool, and R in it, for every cell.
    """

    point: Scenario
    draws: tuple[Scenario, ...]
    n_sims: int
    seed: int
    target_power: float
    source: str = ""
    jobs: Jobs = None
    progress: ProgressFn | None = field(default=None, compare=False)

    def __getattr__(self, name: str) -> Any:  # effect, chunk_size, cell(), design, closed_form, ...
        if name.startswith("__") or name == "point":
            raise AttributeError(name)
        return getattr(self.point, name)

    def stream_key(self) -> str:
        return json.dumps(["assurance", self.point.stream_key(), len(self.draws)])

    def simulate(self, n: int, rng: np.random.Generator) -> StudyOutcomes:  # pragma: no cover - exact() answers
        raise NotImplementedError("an assurance cell is evaluated by exact()")

    def exact(self) -> PowerResult:
        report = as_progress(self.progress)
        what = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                         for k, v in self.point.cell().items() if k in SIZES)

        def inner(done: int, total: int, label: str = "") -> None:
            report(done, total, f"assurance over {len(self.draws)} draws ({what})")

        results = run_cells([self.point, *self.draws], self.n_sims, seed=self.seed, jobs=self.jobs, progress=inner)
        return summarise(results[0], results[1:], self.target_power, self.source)


def assured(make_for: Callable[[Any], Callable[..., Scenario]], point: Any, draws: Sequence[Any], n_sims: int,
            seed: int, target_power: float, source: str, jobs: Jobs = None,
            progress: ProgressFn | None = None) -> Callable[..., AssuranceCell]:
    """A cell factory for the planning core: ``make_for(params)`` is the plain factory of one
    parameter set; the result builds the assurance cell over ``point`` and ``draws``, whose draws run
    on ``jobs`` (an open executor shared by every cell, see :class:`AssuranceCell`)."""
    check_target_power(target_power)
    if not draws:
        raise InputError("assurance needs at least one parameter draw")
    point_make = make_for(point)
    draw_makes = [make_for(p) for p in draws]

    def make(*args: Any, **kwargs: Any) -> AssuranceCell:
        return AssuranceCell(point_make(*args, **kwargs),
                             tuple(DrawCell(m(*args, **kwargs), i) for i, m in enumerate(draw_makes)),
                             n_sims, seed, target_power, source, jobs, progress)

    return make


#: columns the CLIs print for an assurance table, after the design columns
COLUMNS = ["conditional_power", "assurance", "assurance_se", "p_power_reaches_target", "power_q05", "power_q50",
           "power_q95", "draws"]


def describe_solve(result: Any, value: str, spread: str, where: str) -> str:
    """The sentence of a solve over assurance (``SolveResult.__str__``), with the plain answer beside it."""
    ex = result.at.extra if result.at is not None else {}
    figures = (f"conditional power {ex['conditional_power']:.3f}, P(power >= {ex['target_power']:g}) "
               f"{ex['p_power_reaches_target']:.3f}; {ex['draws']} draws, {ex['draw_source']}") if ex else ""
    if result.attainable:
        how = (f"(power exact per draw; SE {ex['assurance_se']:.3f} from the draws)" if where == "exact"
               else f"{where} (SE {ex['assurance_se']:.3f})")
        text = (f"smallest {result.solve_for} with assurance >= {result.target_power:g}: {value}{spread}; assurance "
                f"there {ex['assurance']:.3f} {how}, {figures}")
    else:
        text = f"target assurance {result.target_power:g} is not attainable: {result.reason}"
        text += f" (at the best design tried: {figures})" if figures else ""
    if "conditional_value" in result.detail:
        plain = result.detail["conditional_value"]
        text += (f"\nat the point estimate (conditional power >= the target power): {result.solve_for} "
                 + (f"{plain:g}" if plain is not None else "not attainable"))
    return text
