"""Who rates what: crowd designs for Likert evaluations, and what they cost.

A design lays out one study's ratings as three index arrays of equal length
(:class:`Layout`: worker, item, system). :class:`CrowdDesign` covers the
designs real crowd studies use (Card et al. App. H.3):

* ``systems`` S, ``items`` I, a pool of ``workers`` W, ``ratings_per_item`` k
  distinct workers per rated unit (k = W with ``crossed``: every worker rates
  every item);
* ``presentation``: ``within`` — the unit is an item: each of its k workers
  rates every system's output of it; ``between`` — the unit is an (item,
  system) output, each with its own k workers;
* ``assignment``: ``crossed`` (k = W), ``balanced`` (cyclic: unit u gets workers
  u*k, ..., u*k + k - 1 mod W, workloads as even as possible) or ``random``
  (k of W drawn anew per unit in every simulated study, optionally with
  skewed ``workload`` weights, e.g. taken from a pilot);
* ``items_per_hit`` h: a HIT is h consecutive units done by the same k workers;
* ``missing``: each rating is lost independently with this probability.

:class:`PilotDesign` is the layout a pilot or finished study actually used,
scaled to a new number of items. Both share one interface: ``draw(rng, n)``
gives the layouts of n studies; ``fixed`` says whether they are all the same.
"""
from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from .errors import InputError
from .validation import check_choice, check_count, check_number

ASSIGNMENTS = ("crossed", "balanced", "random")
PRESENTATIONS = ("within", "between")


@dataclass(frozen=True)
class Layout:
    """The ratings of one study (or of n studies: ``worker`` may be (n, N) when it varies by study)."""

    worker: np.ndarray
    item: np.ndarray
    system: np.ndarray
    n_workers: int
    n_items: int
    n_systems: int

    @property
    def size(self) -> int:
        return int(self.item.shape[-1])


class Design(Protocol):
    """What every design offers the planner."""

    @property
    def systems(self) -> int:
        """The number of systems compared."""

    @property
    def fixed(self) -> bool:
        """Whether every simulated study has the same layout."""

    def draw(self, rng: np.random.Generator, n: int) -> list[Layout] | Layout:
        """The layouts of ``n`` studies: one shared Layout when ``fixed``, else a Layout whose worker
        array is (n, N) (same shapes), or a list of n Layouts (shapes differ: missing ratings)."""

    def record(self) -> dict[str, Any]:
        """Design fields for result records."""

    def key(self) -> list[Any]:
        """What identifies the design's random stream."""

    def counts(self) -> dict[str, float]:
        """Expected ratings, HITs (assignments) and workers used, for the cost model."""


@dataclass(frozen=True)
class CrowdDesign:
    """I items, S systems, a pool of W workers, k distinct workers per unit (see the module docs).

    >>> d = CrowdDesign(items=4, workers=3, ratings_per_item=2, systems=2)
    >>> lay = d.draw(np.random.default_rng(0), 1)
    >>> lay.worker.tolist(), lay.item.tolist()
    ([0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2, 0, 0, 1, 1], [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3])
    """

    items: int
    workers: int
    ratings_per_item: int | None = None
    systems: int = 2
    assignment: str = "balanced"
    presentation: str = "within"
    items_per_hit: int = 1
    missing: float = 0.0
    workload: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        check_count("systems", self.systems, 2)
        check_count("items", self.items, 2)
        check_count("workers", self.workers, 1)
        check_choice("assignment", self.assignment, ASSIGNMENTS)
        check_choice("presentation", self.presentation, PRESENTATIONS)
        k = self.k
        check_count("ratings per item", k, 1)
        if k > self.workers:
            raise InputError(f"ratings per item ({k}) exceed the pool of workers ({self.workers})")
        if self.assignment == "crossed" and k != self.workers:
            raise InputError(f"a crossed design has every worker rate every item: ratings per item must equal "
                             f"the workers ({self.workers}), got {k}")
        check_count("items per HIT", self.items_per_hit, 1)
        if self.items_per_hit > self.units:
            raise InputError(f"items per HIT ({self.items_per_hit}) exceed the {self.units} "
                             f"{'outputs' if self.presentation == 'between' else 'items'} of the design")
        if not 0 <= check_number("missing rate", self.missing) < 1:
            raise InputError(f"the missing-rating rate must be in [0, 1), got {self.missing}")
        if self.workload is not None:
            w = np.asarray(self.workload, float)
            if self.assignment != "random":
                raise InputError("skewed workloads need --assignment random (workers drawn with these weights)")
            if w.shape != (self.workers,) or not np.all(np.isfinite(w)) or np.any(w < 0) or (w > 0).sum() < k:
                raise InputError(f"the workload needs {self.workers} non-negative weights, at least {k} positive")
        kept, needed = self.counts()["ratings"], self.systems + 5  # fixed effects + variance components
        if self.missing > 0 and kept < needed:
            raise InputError(f"with {self.missing:g} of the ratings missing, about {kept:.3g} are left: fewer than "
                             f"the {needed} parameters of the model, which cannot be fitted; lower --missing")

    @property
    def k(self) -> int:
        """Distinct workers per unit."""
        return self.workers if self.ratings_per_item is None else self.ratings_per_item

    @property
    def units(self) -> int:
        """Units that get their own k workers: items (within) or outputs (between)."""
        return self.items * (self.systems if self.presentation == "between" else 1)

    @property
    def hits(self) -> int:
        return -(-self.units // self.items_per_hit)

    @property
    def fixed(self) -> bool:
        return self.assignment != "random" and self.missing == 0

    def _unit_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per rating slot (unit-major, then its k workers, then systems within an item): the slot's
        HIT, worker position 0..k-1, item and system."""
        s, k = self.systems, self.k
        if self.presentation == "within":
            unit = np.repeat(np.arange(self.items), k * s)
            pos = np.tile(np.repeat(np.arange(k), s), self.items)
            item = unit
            system = np.tile(np.arange(s), self.items * k)
        else:
            unit = np.repeat(np.arange(self.units), k)  # unit = item * S + system
            pos = np.tile(np.arange(k), self.units)
            item, system = unit // s, unit % s
        return unit // self.items_per_hit, pos, item, system

    def draw(self, rng: np.random.Generator, n: int) -> Layout | list[Layout]:
        hit, pos, item, system = self._unit_rows()
        k, w = self.k, self.workers
        if self.assignment != "random":
            if self.presentation == "between" and self.assignment == "balanced":
                worker = balanced_workers(self.items, w, k, self.systems, self.items_per_hit)[hit, pos]
            else:  # within (or crossed): cyclic, unit u gets workers u*k, ..., u*k + k - 1 mod W
                worker = (hit * k + pos) % w
        else:
            probs = None if self.workload is None else np.asarray(self.workload, float) / sum(self.workload)
            if probs is None:  # k distinct of W per HIT: the first k of a random permutation
                keys = rng.random((n, self.hits, w))
                chosen = np.argsort(keys, axis=2)[:, :, :k]
            else:  # weighted sampling without replacement (Efraimidis-Spirakis keys)
                with np.errstate(divide="ignore"):
                    keys = np.log(rng.random((n, self.hits, w))) / probs
                chosen = np.argsort(-keys, axis=2)[:, :, :k]
            worker = chosen[:, hit, pos]
        lay = Layout(worker, item, system, w, self.items, self.systems)
        if self.missing == 0:
            return lay
        keep = rng.random((n, item.size)) >= self.missing
        workers = np.broadcast_to(worker, (n, item.size))
        return [Layout(workers[j, keep[j]], item[keep[j]], system[keep[j]], w, self.items, self.systems)
                for j in range(n)]

    def record(self) -> dict[str, Any]:
        rec = {"items": self.items, "workers": self.workers, "ratings_per_item": self.k, "systems": self.systems,
               "assignment": self.assignment, "presentation": self.presentation}
        if self.items_per_hit != 1:
            rec["items_per_hit"] = self.items_per_hit
        if self.missing:
            rec["missing"] = self.missing
        if self.workload is not None:
            rec["workload"] = "skewed"
        return rec

    def key(self) -> list[Any]:
        return ["crowd", self.items, self.workers, self.k, self.systems, self.assignment, self.presentation,
                self.items_per_hit, self.missing, list(self.workload) if self.workload is not None else None]

    def counts(self) -> dict[str, float]:
        per_unit = self.k * (self.systems if self.presentation == "within" else 1)
        return {"ratings": self.units * per_unit * (1 - self.missing), "assignments": self.hits * self.k,
                "workers_used": float(min(self.workers, self.hits * self.k))}


@functools.lru_cache(maxsize=32)
def balanced_workers(items: int, workers: int, k: int, systems: int, items_per_hit: int = 1) -> np.ndarray:
    """The k workers of every HIT (hits x k) of a balanced between-output design; outputs (item i,
    system s) are units i*S + s, h consecutive units a HIT.

    One output per HIT (h = 1), by construction: the S*I*k rating slots, labelled with systems in
    turn (slot t rates system t mod S), are cut into W consecutive blocks of floor or ceil(S*I*k/W)
    slots, one per worker, so every worker rates every system floor or ceil(load/S) times
    (Latin-square style); system s's slots are dealt to its I outputs column-wise (output j gets slots
    j, j + I, ..., j + (k-1)*I), which gives each output k distinct workers, with its items shifted by
    s*I/S so that a worker's outputs of different systems are of different items where the numbers allow.
    HITs of h > 1 outputs, greedily HIT by HIT: fewest HITs so far (workloads differ by at most one
    HIT), then fewest outputs of this HIT's systems so far, then not having just rated an item of this
    HIT, then cyclic order. (The former cyclic rule, HIT j to workers j*k, ..., j*k + k - 1 mod W, gave
    every worker a single system whenever W is a multiple of S*k.)

    >>> balanced_workers(4, 4, 1, 2)[:, 0].reshape(4, 2).tolist()  # [item][system]; each worker rates A and B
    [[0, 2], [1, 3], [2, 0], [3, 1]]
    """
    if items_per_hit == 1:
        total = systems * items * k
        base, extra = divmod(total, workers)
        owner = np.repeat(np.arange(workers), base + (np.arange(workers) < extra))  # slot -> worker, in blocks
        out = np.empty((items * systems, k), np.int64)
        for s in range(systems):
            dealt = owner[s::systems].reshape(k, items).T  # row j: slots j, j + I, ...
            out[((np.arange(items) + s * (items // systems)) % items) * systems + s] = dealt
        out.setflags(write=False)
        return out
    units = items * systems
    hits = -(-units // items_per_hit)
    load = np.zeros(workers, np.int64)
    per_system = np.zeros((workers, systems), np.int64)
    last_item = np.full(workers, -1)
    out = np.empty((hits, k), np.int64)
    scale = units * k + 1  # above any count of outputs: keeps the keys lexicographic
    position = np.arange(workers)
    for j in range(hits):
        unit = np.arange(j * items_per_hit, min((j + 1) * items_per_hit, units))
        item, system = unit // systems, unit % systems
        repeat = np.isin(last_item, item)
        seen = per_system[:, system].sum(axis=1)
        key = ((load * scale + seen) * 2 + repeat) * workers + (position - j * k) % workers
        chosen = np.argsort(key, kind="stable")[:k]
        out[j] = chosen
        load[chosen] += 1
        np.add.at(per_system, (np.repeat(chosen, system.size), np.tile(system, k)), 1)
        last_item[chosen] = item[-1]
    out.setflags(write=False)
    return out


@dataclass(frozen=True)
class PilotDesign:
    """The layout of a pilot (worker, item, system per rating) scaled to ``items`` items: new item j
    copies the raters and systems of pilot item j mod I_pilot (the pilot's workers keep their
    relative workloads; workload per worker grows with items / I_pilot)."""

    worker: tuple[int, ...]
    item: tuple[int, ...]
    system: tuple[int, ...]
    items: int
    source: str = "pilot"

    def __post_init__(self) -> None:
        check_count("items", self.items, 2)
        if not len(self.worker) == len(self.item) == len(self.system) or not self.worker:
            raise InputError("a pilot design needs worker, item and system for every rating")
        if len(set(self.system)) < 2:
            raise InputError(f"{self.source}: the pilot rates fewer than two systems")

    @classmethod
    def from_ratings(cls, frame: Any, items: int | None = None, worker: str = "worker", item: str = "item",
                     system: str = "system", systems: Sequence[str] | None = None,
                     source: str = "pilot", duplicates: str = "error") -> PilotDesign:
        """From a ratings table (one row per rating); ``systems`` picks and orders the systems (the
        first is system A, the baseline); the item count defaults to the pilot's. Several ratings of
        one (worker, item, system) follow ``duplicates`` as in ``fit``/``analyze``: an ``error``
        (default), ``average``d (one rating per cell: the layout the averaged data has) or ``keep``t
        (every rating planned as an independent one)."""
        import pandas as pd

        from .fitting.ratings import duplicates_note

        missing = [c for c in (worker, item, system) if c not in frame.columns]
        if missing:
            raise InputError(f"{source}: missing column(s) {', '.join(missing)}")
        df = frame[[worker, item, system]].dropna()
        have = sorted(df[system].astype(str).unique())
        names = [str(n) for n in systems] if systems else have
        if systems is not None:
            if len(set(names)) < 2 or len(set(names)) < len(names):
                raise InputError(f"{source}: give two or more distinct systems, got {' '.join(names)}")
            unknown = [n for n in names if n not in have]
            if unknown:
                raise InputError(f"{source}: no system {', '.join(unknown)}; have {', '.join(have)}")
        df = df[df[system].astype(str).isin(names)]
        if df.empty:
            raise InputError(f"{source}: no ratings of the systems {', '.join(names)}")
        try:
            if duplicates_note(df, [worker, item, system], duplicates) and duplicates == "average":
                df = df.drop_duplicates([worker, item, system])
        except InputError as exc:
            raise InputError(f"{source}: {exc}") from None
        per_worker = df.groupby(worker)[system].nunique()
        if per_worker.max() < 2 and df.groupby(item)[system].nunique().max() < 2:
            raise InputError(f"{source}: no worker or item is rated under two systems: the design does not "
                             "connect the systems")
        w = pd.factorize(df[worker])[0]
        i = pd.factorize(df[item])[0]
        s = pd.Categorical(df[system].astype(str), categories=names).codes
        return cls(tuple(w.tolist()), tuple(i.tolist()), tuple(int(v) for v in s), items or int(i.max()) + 1, source)

    @property
    def systems(self) -> int:
        return max(self.system) + 1

    @property
    def fixed(self) -> bool:
        return True

    def draw(self, rng: np.random.Generator, n: int) -> Layout:
        w, i, s = (np.asarray(v) for v in (self.worker, self.item, self.system))
        pilot_items = int(i.max()) + 1
        reps = -(-self.items // pilot_items)
        new = (np.arange(reps)[:, None] * pilot_items + i[None, :]).ravel()
        keep = new < self.items
        return Layout(np.tile(w, reps)[keep], new[keep], np.tile(s, reps)[keep], int(w.max()) + 1, self.items,
                      self.systems)

    def record(self) -> dict[str, Any]:
        """``ratings_per_item``: distinct workers per (item, system) output, on average (the layout's
        k); ``ratings_per_output`` too when repeated ratings were kept."""
        lay = self.draw(np.random.default_rng(0), 1)
        outputs = self.items * self.systems
        cells = len(set(zip(lay.worker.tolist(), lay.item.tolist(), lay.system.tolist())))
        rec = {"items": self.items, "workers": lay.n_workers, "ratings_per_item": round(cells / outputs, 3),
               "systems": self.systems, "assignment": "pilot", "presentation": "pilot", "source": self.source}
        if cells < lay.size:
            rec["ratings_per_output"] = round(lay.size / outputs, 3)
        return rec

    def key(self) -> list[Any]:
        import hashlib

        digest = hashlib.sha256(np.asarray([self.worker, self.item, self.system]).tobytes()).hexdigest()[:16]
        return ["pilot", digest, self.items]

    def counts(self) -> dict[str, float]:
        lay = self.draw(np.random.default_rng(0), 1)
        units = len(set(zip(lay.item.tolist(), lay.worker.tolist())))
        return {"ratings": float(lay.size), "assignments": float(units), "workers_used": float(lay.n_workers)}


#: the budget search's default space: items on a log grid, pools of workers, ratings per item (k)
BUDGET_ITEMS = (50, 100, 200, 400, 800, 1600, 3200)
BUDGET_WORKERS = (3, 10, 30, 100)
BUDGET_RATINGS_PER_ITEM = (1, 2, 3, 4, 5)

DESIGN_FIELDS = ("items", "workers", "ratings_per_item", "systems", "assignment", "presentation", "items_per_hit",
                 "missing", "workload")


def read_design_file(path: str | Path) -> dict[str, Any]:
    """A design file: one JSON object with any of DESIGN_FIELDS (the keywords of :class:`CrowdDesign`),
    e.g. ``{"items": 300, "workers": 15, "ratings_per_item": 3, "presentation": "between"}``."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"design file not found: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read design file {p}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{p}: not a JSON design ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict):
        raise InputError(f"{p}: a design file holds one JSON object")
    unknown = sorted(set(doc) - set(DESIGN_FIELDS))
    if unknown:
        raise InputError(f"{p}: unknown design field(s) {', '.join(unknown)}; known: {', '.join(DESIGN_FIELDS)}")
    for key in ("items", "workers", "ratings_per_item", "systems", "items_per_hit"):
        if key in doc and (key != "ratings_per_item" or doc[key] is not None):  # checked even when an option wins
            check_count(f"{p}: {key}", doc[key])
    return doc


@dataclass(frozen=True)
class Costs:
    """What a study costs: ``per_rating`` and ``per_hit`` (each HIT assignment, i.e. a HIT done by one
    worker) plus the platform's ``fee`` on both (a fraction), and ``per_worker`` (recruitment,
    qualification) for every worker used.

    >>> Costs(per_rating=0.1, fee=0.2).of(CrowdDesign(items=100, workers=10, ratings_per_item=3))
    72.0
    """

    per_rating: float = 0.0
    per_hit: float = 0.0
    fee: float = 0.0
    per_worker: float = 0.0

    def __post_init__(self) -> None:
        for name in ("per_rating", "per_hit", "fee", "per_worker"):
            if check_number(name.replace("_", " "), getattr(self, name)) < 0:
                raise InputError(f"costs must be >= 0: {name.replace('_', ' ')} is {getattr(self, name)}")
        if self.fee > 1:
            raise InputError(f"the platform fee is a fraction of the pay (0.2 for 20%), at most 1; got {self.fee:g}")

    @property
    def any(self) -> bool:
        return any((self.per_rating, self.per_hit, self.per_worker))

    def of(self, design: Design) -> float:
        c = design.counts()
        paid = (self.per_rating * c["ratings"] + self.per_hit * c["assignments"]) * (1 + self.fee)
        return round(paid + self.per_worker * c["workers_used"], 10)


def check_budget(budget: float | None, costs: Costs) -> float:
    """A budget (inf when None) that can pay for at least one HIT."""
    if budget is None:
        return math.inf
    b = check_number("budget", budget)
    one_hit = (costs.per_rating + costs.per_hit) * (1 + costs.fee) + costs.per_worker
    if b <= 0 or b < one_hit:
        raise InputError(f"a budget of {b:g} does not pay for one rating in one HIT ({one_hit:g})")
    return b
