"""The Likert parameter file (versioned JSON) and the presets from Card et al. (2020).

Convention: the system contrast is coded x = -1/2 (A), +1/2 (B), so the fixed
slope *is* the difference in mean rating (B - A) and slope SDs are SDs of that
difference across workers / items. Card et al. coded x = +-1: their slope and
slope SDs are half of ours; :func:`from_plus_minus_one` converts explicitly.
"""
from __future__ import annotations

import itertools
import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from .errors import InputError
from .validation import check_magnitude

SCHEMA = "humaneval-power/likert-params"
SCHEMA_VERSION = 1
SD_NAMES = (
    "sd_worker_intercept",
    "sd_worker_slope",
    "sd_item_intercept",
    "sd_item_slope",
    "sd_residual",
)


@dataclass(frozen=True)
class LikertParams:
    """Parameters of the crossed worker/item LMM (mean-difference coding).

    >>> p = LikertParams(0.5, 0.01, 0.22, 0.04, 0.28, 0.26)
    >>> p.sd_worker_slope
    0.22
    """

    intercept: float
    sd_worker_intercept: float
    sd_worker_slope: float
    sd_item_intercept: float
    sd_item_slope: float
    sd_residual: float
    scale: tuple[float, float] | None = (0.0, 1.0)
    effect: float | None = None  #: an effect estimated from data, if any (not used to plan)
    name: str = "custom"
    provenance: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key in ("intercept",) + SD_NAMES:
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InputError(f"{key} must be a number, got {value!r}")
            check_magnitude(key, value)
        for key in SD_NAMES:
            if getattr(self, key) < 0:
                raise InputError(f"{key} must be >= 0, got {getattr(self, key)!r}")
        if self.sd_residual <= 0:
            raise InputError("sd_residual must be > 0")
        if self.scale is not None:
            lo, hi = self.scale
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise InputError(f"scale must be two finite numbers MIN < MAX, got {self.scale!r}")

    @property
    def sds(self) -> dict[str, float]:
        """The five SDs keyed by their parameter names."""
        return {k: float(getattr(self, k)) for k in SD_NAMES}

    def with_sds(self, **sds: float) -> LikertParams:
        """A copy with some SDs replaced (validated)."""
        unknown = set(sds) - set(SD_NAMES) - {"intercept"}
        if unknown:
            raise InputError(f"unknown parameter(s): {', '.join(sorted(unknown))}")
        changes: dict[str, Any] = {**sds, "name": self.name + "+overrides" if sds else self.name}
        return replace(self, **changes)

    def invariant_components(self) -> dict[str, float]:
        """The coding-invariant model's SDs for this pair: group and group x system, for workers and items.

        The reverse of ``sd_slope^2 = 2 tau^2``, ``sd_intercept^2 = sigma^2 + tau^2 / 2``; it exists
        only when ``sd_intercept^2 >= sd_slope^2 / 4`` (InputError otherwise).
        """
        out = {}
        for g in ("worker", "item"):
            icpt, slope = getattr(self, f"sd_{g}_intercept"), getattr(self, f"sd_{g}_slope")
            if icpt**2 < slope**2 / 4:
                raise InputError(f"{self.name}: no coding-invariant equivalent: sd_{g}_intercept {icpt:g} is below "
                                 f"half sd_{g}_slope ({slope / 2:g}), which the invariant model cannot produce")
            out[f"sd_{g}"] = math.sqrt(icpt**2 - slope**2 / 4)
            out[f"sd_{g}_system"] = slope / math.sqrt(2)
        return out

    def to_json(self) -> dict[str, Any]:
        """The parameter-file document."""
        d = asdict(self)
        return {
            "schema": SCHEMA,
            "version": SCHEMA_VERSION,
            "family": "gaussian",
            "effect_coding": "mean-difference (x = -0.5 for system A, +0.5 for system B)",
            "name": d["name"],
            "intercept": d["intercept"],
            **{k: d[k] for k in SD_NAMES},
            "correlations": None,
            "scale": list(self.scale) if self.scale else None,
            "effect": d["effect"],
            "provenance": d["provenance"],
        }

    @classmethod
    def from_json(cls, doc: Any, source: str = "parameter file") -> LikertParams:
        """Validate a parameter-file document (see :meth:`to_json`)."""
        if not isinstance(doc, dict):
            raise InputError(f"{source}: expected a JSON object")
        if doc.get("schema") != SCHEMA:
            raise InputError(f"{source}: not a Likert parameter file (schema {doc.get('schema')!r})")
        if doc.get("version") != SCHEMA_VERSION:
            raise InputError(f"{source}: unsupported version {doc.get('version')!r}")
        if doc.get("family", "gaussian") != "gaussian":
            raise InputError(f"{source}: family {doc.get('family')!r} is not a Likert (gaussian) model")
        if doc.get("correlations") and any(v for v in doc["correlations"].values()):
            raise InputError(f"{source}: the planner does not simulate correlated random effects yet; "
                             "refit without --correlated")
        missing = [k for k in ("intercept",) + SD_NAMES if k not in doc]
        if missing:
            raise InputError(f"{source}: missing {', '.join(missing)}")
        scale = doc.get("scale")
        if scale is not None and (not isinstance(scale, list) or len(scale) != 2):
            raise InputError(f"{source}: scale must be [MIN, MAX] or null")
        try:
            return cls(
                intercept=doc["intercept"],
                **{k: doc[k] for k in SD_NAMES},
                scale=tuple(scale) if scale is not None else None,
                effect=doc.get("effect"),
                name=str(doc.get("name", "custom")),
                provenance=dict(doc.get("provenance") or {}),
            )
        except InputError as exc:
            raise InputError(f"{source}: {exc}") from None


def from_plus_minus_one(
    name: str,
    intercept: float,
    sd_worker_intercept: float,
    sd_worker_slope: float,
    sd_item_intercept: float,
    sd_item_slope: float,
    sd_residual: float,
    source: str,
) -> LikertParams:
    """Convert SDs reported under +-1 coding: slope SDs double, intercept SDs stay."""
    return LikertParams(
        intercept=intercept,
        sd_worker_intercept=sd_worker_intercept,
        sd_worker_slope=2 * sd_worker_slope,
        sd_item_intercept=sd_item_intercept,
        sd_item_slope=2 * sd_item_slope,
        sd_residual=sd_residual,
        scale=(0.0, 1.0),
        name=name,
        provenance={
            "source": source,
            "original_coding": "+-1 (x = -1 for A, +1 for B)",
            "conversion": "slope SDs x2 to the mean-difference coding; effect = 2 x their 'diff'",
            "original_sds": {
                "sd_worker_intercept": sd_worker_intercept,
                "sd_worker_slope": sd_worker_slope,
                "sd_item_intercept": sd_item_intercept,
                "sd_item_slope": sd_item_slope,
                "sd_residual": sd_residual,
            },
        },
    )


_TABLE16 = "Card et al. (2020), Table 16; beta0 = 0.5 as in their simulations"
PRESETS: dict[str, LikertParams] = {
    "card2020-high": from_plus_minus_one("card2020-high", 0.5, 0.01, 0.11, 0.04, 0.14, 0.26, _TABLE16),
    "card2020-low": from_plus_minus_one("card2020-low", 0.5, 0.01, 0.04, 0.01, 0.13, 0.16, _TABLE16),
}


def get_preset(name: str) -> LikertParams:
    """A built-in preset by name."""
    try:
        return PRESETS[name]
    except KeyError:
        raise InputError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}") from None


def as_params(params: LikertParams | str) -> LikertParams:
    """Parameters given as an object or a preset name (the API's boundary check)."""
    if isinstance(params, str):
        return get_preset(params)
    if not isinstance(params, LikertParams):
        raise InputError(f"params must be LikertParams or a preset name, got {type(params).__name__}")
    return params


SET_SCHEMA = "humaneval-power/params-set"


def read_params_doc(path: str | Path, comparison: str | None = None) -> dict[str, Any]:
    """The JSON document of a parameter file; from a set (several comparisons), the one named."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"parameter file not found: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read parameter file {p}: {exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{p}: malformed JSON ({exc.msg} at line {exc.lineno})") from None
    if isinstance(doc, dict) and doc.get("schema") == SET_SCHEMA:
        choices = doc.get("comparisons") or {}
        shared = _shared_model(choices)
        if shared is not None and comparison in (None, *choices):  # a named comparison keeps its pilot effect
            return shared if comparison is None else {**shared, "effect": choices[comparison].get("effect")}
        if comparison is None:
            raise InputError(f"{p} holds several comparisons against {doc.get('baseline')!r}: "
                             f"choose one with --comparison ({', '.join(choices)})")
        if comparison not in choices:
            raise InputError(f"{p}: no comparison {comparison!r}; have {', '.join(choices)}")
        chosen: dict[str, Any] = choices[comparison]
        return chosen
    if comparison is not None and isinstance(doc, dict) and (doc.get("provenance") or {}).get("system") not in (None, comparison):
        raise InputError(f"{p} holds only the comparison {doc['provenance']['system']!r}")
    whole: dict[str, Any] = doc
    return whole


def _shared_model(choices: Any) -> dict[str, Any] | None:
    """The one model of a set whose gaussian comparisons differ only in their means (the coding-invariant
    fit of several systems: every pair has the same SDs), or None: every comparison, or none, then
    plans with the same parameters and random stream, the intercept being the baseline's mean."""
    docs = list(choices.values()) if isinstance(choices, dict) else []
    means = ("name", "intercept", "effect", "provenance")
    if not docs or not all(isinstance(d, dict) and d.get("family", "gaussian") == "gaussian" for d in docs):
        return None
    if any({k: v for k, v in d.items() if k not in means} != {k: v for k, v in docs[0].items() if k not in means}
           for d in docs[1:]):
        return None
    first = docs[0]
    try:
        baseline = float(first["intercept"]) - float(first.get("effect") or 0.0) / 2
    except (KeyError, TypeError, ValueError):
        return None
    return {**first, "intercept": baseline, "effect": None,
            "name": f"{', '.join(choices)} vs the baseline ({len(docs) + 1} systems, shared SDs)"}


def beyond_scale_note(scale: tuple[float, float] | None, effect: float | None) -> str | None:
    """The note for an effect larger than the whole rating scale (no two systems can differ that much), or None."""
    if scale is None or effect is None or not abs(effect) > scale[1] - scale[0]:
        return None
    return (f"this effect is larger than the whole rating scale [{scale[0]:g}, {scale[1]:g}]: no two systems "
            "can differ that much, so the design cannot detect any possible difference")


def params_systems(path: str | Path) -> int | None:
    """How many systems a parameter file's model describes: a set whose comparisons share one model (the
    coding-invariant fit of several systems) has its comparisons plus the baseline, an ordinal fit its
    systems; None otherwise (each comparison is a two-system model)."""
    doc = json.loads(Path(path).read_text(encoding="utf-8"))  # read_params_doc has checked it
    if isinstance(doc, dict) and doc.get("family") == "ordinal":
        return len(doc.get("systems") or ()) if len(doc.get("systems") or ()) >= 2 else None
    choices = doc.get("comparisons") if isinstance(doc, dict) and doc.get("schema") == SET_SCHEMA else None
    return len(choices) + 1 if choices and _shared_model(choices) is not None else None


def params_comparisons(path: str | Path) -> tuple[str, tuple[str, ...]] | None:
    """A parameter file's baseline and the systems it compares with it (a set's comparisons, an ordinal
    fit's systems after the first, a single comparison's system), or None when the file does not say."""
    doc = json.loads(Path(path).read_text(encoding="utf-8"))  # read_params_doc has checked it
    if not isinstance(doc, dict):
        return None
    if doc.get("family") == "ordinal":
        systems = tuple(map(str, doc.get("systems") or ()))
        return (systems[0], systems[1:]) if len(systems) >= 2 else None
    if doc.get("schema") == SET_SCHEMA:
        return str(doc.get("baseline")), tuple(map(str, doc.get("comparisons") or {}))
    prov = doc.get("provenance") or {}
    return (str(prov["baseline"]), (str(prov["system"]),)) if prov.get("baseline") and prov.get("system") else None


def check_comparison(path: str | Path, comparison: str | None) -> None:
    """Refuse a ``comparison`` an ordinal parameter file does not hold (a set's are checked by
    :func:`read_params_doc`)."""
    held = params_comparisons(path)
    if comparison is not None and held is not None and comparison not in held[1]:
        raise InputError(f"{path}: no comparison {comparison!r}; have {', '.join(held[1])}")
    if comparison is not None and held is None:
        raise InputError(f"{path} names no systems: drop --comparison")


def load_params(path: str | Path, comparison: str | None = None) -> LikertParams:
    """Read and validate a Likert parameter file (``comparison`` picks one from a set)."""
    doc = read_params_doc(path, comparison)
    if isinstance(doc, dict) and doc.get("family") == "binomial":
        raise InputError(f"{path} holds head-to-head (binomial) parameters; the Likert planner needs a gaussian fit")
    return LikertParams.from_json(doc, source=str(path))


def strict_json(doc: Any) -> Any:
    """``doc`` with every non-finite float (NaN, inf) as None: strict JSON readers (R's jsonlite) reject NaN."""
    if isinstance(doc, float):
        return doc if math.isfinite(doc) else None
    if isinstance(doc, dict):
        return {k: strict_json(v) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [strict_json(v) for v in doc]
    return doc


def params_json(doc: Any) -> str:
    """A parameter-file document as strict JSON text (missing numbers are null)."""
    return json.dumps(strict_json(doc), indent=1, allow_nan=False) + "\n"


def save_params(params: LikertParams, path: str | Path) -> None:
    """Write a parameter file atomically."""
    from .io import write_text_atomic

    write_text_atomic(Path(path), params_json(params.to_json()))


H2H_SCHEMA = "humaneval-power/h2h-params"


@dataclass(frozen=True)
class H2HParams:
    """Head-to-head GLMM parameters: worker and item SDs on the log-odds scale.

    ``intercept`` is a fitted log-odds that B beats A (kept for reference; plans
    choose their own effect). ``p_tie``: the pilot's share of ties, ``ties``: how the fit treated
    them (``drop`` or ``split``); the GLMM planner simulates ties at that rate and analyses them so.
    """

    sd_worker: float
    sd_item: float
    intercept: float | None = None
    name: str = "custom"
    provenance: dict[str, Any] = field(default_factory=dict)
    separation: str | None = None  #: why the fit looked quasi-separated (then the SDs are not usable), or None
    p_tie: float = 0.0
    ties: str = "drop"

    def __post_init__(self) -> None:
        for key in ("sd_worker", "sd_item"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise InputError(f"{key} must be a finite number >= 0, got {value!r}")
            check_magnitude(key, value)
        if isinstance(self.p_tie, bool) or not isinstance(self.p_tie, (int, float)) or not 0 <= self.p_tie < 1:
            raise InputError(f"p_tie must be a probability in [0, 1), got {self.p_tie!r}")
        if self.ties not in ("drop", "split"):
            raise InputError(f"ties must be drop or split, got {self.ties!r}")

    @classmethod
    def from_json(cls, doc: Any, source: str = "parameter file", allow_separation: bool = False) -> H2HParams:
        """Validate a parameter document; one marked ``"separation": true`` (a quasi-separated
        fit, see ``hepower fit``) is refused unless ``allow_separation``."""
        if not isinstance(doc, dict) or doc.get("schema") != H2H_SCHEMA:
            family = doc.get("family") if isinstance(doc, dict) else None
            raise InputError(f"{source}: not a head-to-head parameter file (family {family!r}); "
                             "fit one with `hepower fit --family binomial`")
        separation = None
        if doc.get("separation"):
            separation = str(doc.get("separation_reason") or "quasi-separated")
            if not allow_separation:
                raise InputError(f"{source}: the fit behind these parameters is {separation}; plan with "
                                 "parameters from another pilot or your own SDs, or force it (--force, "
                                 "allow_separation=True)")
        if doc.get("version", SCHEMA_VERSION) != SCHEMA_VERSION:
            raise InputError(f"{source}: unsupported version {doc.get('version')!r}")
        try:
            return cls(sd_worker=doc["sd_worker"], sd_item=doc["sd_item"], intercept=doc.get("intercept"),
                       name=str(doc.get("name", "custom")), provenance=dict(doc.get("provenance") or {}),
                       separation=separation, p_tie=doc.get("p_tie", 0.0), ties=doc.get("ties", "drop"))
        except KeyError as exc:
            raise InputError(f"{source}: missing {exc.args[0]}") from None
        except InputError as exc:
            raise InputError(f"{source}: {exc}") from None


def load_h2h_params(path: str | Path, comparison: str | None = None, allow_separation: bool = False) -> H2HParams:
    """Read a head-to-head parameter file (``comparison`` picks one from a set); a file marked as
    quasi-separated is refused unless ``allow_separation``."""
    return H2HParams.from_json(read_params_doc(path, comparison), source=str(path), allow_separation=allow_separation)


ORDINAL_SCHEMA = "humaneval-power/ordinal-params"
#: the latent random-effect SDs of an ordinal parameter file (the coding-invariant model; the names of
#: :class:`~humaneval_power.ordinal_process.OrdinalProcess`)
ORDINAL_SD_NAMES = ("sd_worker", "sd_worker_system", "sd_item", "sd_item_system")


@dataclass(frozen=True)
class OrdinalParams:
    """A cumulative-link mixed model on the latent scale: P(Y <= k) = F(theta_k - eta).

    ``scale``: the category labels (consecutive integers, lowest first); ``thresholds``: the
    K - 1 strictly increasing thresholds; ``sds``: the four latent SDs (:data:`ORDINAL_SD_NAMES`);
    ``effects``: each system's latent shift from ``systems[0]`` (the baseline), as fitted (kept for
    reference; plans choose their own effect).
    """

    thresholds: tuple[float, ...]
    sds: dict[str, float]
    link: str = "logit"
    scale: tuple[int, ...] = (1, 2, 3, 4, 5)
    systems: tuple[str, ...] = ()
    effects: dict[str, float] = field(default_factory=dict)
    name: str = "custom"
    provenance: dict[str, Any] = field(default_factory=dict)
    #: posterior draws (``fit --family ordinal --backend bambi``) for planning with assurance: ``thresholds``
    #: (a list of K - 1 increasing values per draw), each of :data:`ORDINAL_SD_NAMES`, ``effects`` (system -> list)
    draws: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        from .fitting.clmm import check_link

        check_link(self.link)
        labels = list(self.scale)
        if (len(labels) < 3 or any(isinstance(v, bool) or not isinstance(v, int) for v in labels)
                or labels != list(range(labels[0], labels[0] + len(labels)))):
            raise InputError(f"scale must list at least three consecutive integer categories, got {labels!r}")
        th = list(self.thresholds)
        for k, v in enumerate(th):
            check_magnitude(f"threshold {k + 1}", v)
        if len(th) != len(labels) - 1:
            raise InputError(f"{len(labels)} categories need {len(labels) - 1} thresholds, got {len(th)}")
        for k in range(len(th) - 1):
            if not th[k] < th[k + 1]:
                raise InputError(f"thresholds must increase: {labels[k]}|{labels[k + 1]} = {th[k]:g} is not below "
                                 f"{labels[k + 1]}|{labels[k + 2]} = {th[k + 1]:g}")
        unknown = sorted(set(self.sds) - set(ORDINAL_SD_NAMES))
        missing = [k for k in ORDINAL_SD_NAMES if k not in self.sds]
        if unknown or missing:
            raise InputError(f"sds must give {', '.join(ORDINAL_SD_NAMES)}"
                             + (f"; unknown: {', '.join(unknown)}" if unknown else f"; missing: {', '.join(missing)}"))
        for sd_name in ORDINAL_SD_NAMES:
            if check_magnitude(sd_name, self.sds[sd_name]) < 0:
                raise InputError(f"{sd_name} must be >= 0, got {self.sds[sd_name]!r}")
        for system, value in self.effects.items():
            check_magnitude(f"effect of {system}", value)
        if self.draws is not None:
            self._check_draws(self.draws)

    def _check_draws(self, draws: Any) -> None:
        """Posterior draws of the same shape and rules as the estimates (InputError otherwise)."""
        if not isinstance(draws, dict) or not isinstance(draws.get("thresholds"), list):
            raise InputError("posterior_draws must be an object with a list of thresholds per draw")
        n = len(draws["thresholds"])
        series = {k: draws.get(k) for k in ORDINAL_SD_NAMES}
        series.update({f"effect of {s}": v for s, v in (draws.get("effects") or {}).items()})
        for key, values in series.items():
            if not isinstance(values, list) or len(values) != n:
                raise InputError(f"posterior_draws: {key} must list {n} draws")
            for v in values:
                if check_magnitude(key, v) < 0 and key in ORDINAL_SD_NAMES:
                    raise InputError(f"posterior_draws: {key} must be >= 0, got {v!r}")
        for d, th in enumerate(draws["thresholds"]):
            if (not isinstance(th, list) or len(th) != len(self.thresholds)
                    or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in th)
                    or not all(a < b for a, b in itertools.pairwise(th))):
                raise InputError(f"posterior_draws: draw {d + 1} of the thresholds is not {len(self.thresholds)} "
                                 "increasing numbers")

    def to_json(self) -> dict[str, Any]:
        """The parameter-file document."""
        return {
            "schema": ORDINAL_SCHEMA,
            "version": SCHEMA_VERSION,
            "family": "ordinal",
            "name": self.name,
            "link": self.link,
            "scale": list(self.scale),
            "thresholds": [float(v) for v in self.thresholds],
            "sds": {k: float(self.sds[k]) for k in ORDINAL_SD_NAMES},
            "systems": list(self.systems),
            "effects": {k: float(v) for k, v in self.effects.items()},
            "effect_coding": "treatment: each system's latent shift from the first (the baseline); positive = higher "
                             "ratings",
            "provenance": self.provenance,
            **({"posterior_draws": self.draws} if self.draws is not None else {}),
        }

    @classmethod
    def from_json(cls, doc: Any, source: str = "parameter file") -> OrdinalParams:
        """Validate an ordinal parameter-file document (see :meth:`to_json`); typed or edited values are
        held to the same checks as fitted ones (e.g. increasing thresholds)."""
        if not isinstance(doc, dict) or doc.get("schema") != ORDINAL_SCHEMA:
            family = doc.get("family") if isinstance(doc, dict) else None
            raise InputError(f"{source}: not an ordinal parameter file (family {family!r}); "
                             "fit one with `hepower fit --family ordinal`")
        if doc.get("version") != SCHEMA_VERSION:
            raise InputError(f"{source}: unsupported version {doc.get('version')!r}")
        missing = [k for k in ("link", "scale", "thresholds", "sds") if k not in doc]
        if missing:
            raise InputError(f"{source}: missing {', '.join(missing)}")
        try:
            for key, kind in (("scale", list), ("thresholds", list), ("sds", dict), ("effects", dict), ("systems", list)):
                if key in doc and not isinstance(doc[key], kind):
                    raise InputError(f"{key} must be a JSON {'array' if kind is list else 'object'}")
            for k, v in list(doc.get("sds", {}).items()) + [(f"threshold {n + 1}", v) for n, v in enumerate(doc["thresholds"])]:
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise InputError(f"{k} must be a number, got {v!r}")
            return cls(thresholds=tuple(doc["thresholds"]), sds=dict(doc["sds"]), link=str(doc["link"]),
                       scale=tuple(doc["scale"]), systems=tuple(map(str, doc.get("systems") or ())),
                       effects=dict(doc.get("effects") or {}), name=str(doc.get("name", "custom")),
                       provenance=dict(doc.get("provenance") or {}), draws=doc.get("posterior_draws"))
        except InputError as exc:
            raise InputError(f"{source}: {exc}") from None


def load_ordinal_params(path: str | Path) -> OrdinalParams:
    """Read and validate an ordinal parameter file (``hepower fit --family ordinal -o FILE``)."""
    return OrdinalParams.from_json(read_params_doc(path), source=str(path))
