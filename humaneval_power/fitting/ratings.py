"""Tidy pilot data, validated: Likert ratings and head-to-head judgments."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError
from ..io import apply_filters, read_table, resolve_column
from ..validation import TIE_POLICIES, check_choice, check_scores

DUPLICATE_POLICIES = ("error", "average", "keep")
RATING_FAMILIES = ("gaussian", "ordinal")  #: how :func:`read_ratings` reads scores: interval data or categories


@dataclass(frozen=True)
class PilotData:
    """Validated long data: columns worker, item, system (str) and score (float) or outcome.

    ``systems`` lists the systems with the baseline first.
    """

    frame: pd.DataFrame
    systems: tuple[str, ...]
    family: str
    source: str
    sha256: str | None
    notes: tuple[str, ...] = ()
    scale: tuple[float, float] | None = None  #: the original scale, if rescaled to [0, 1]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def baseline(self) -> str:
        return self.systems[0]

    def counts(self) -> dict[str, int]:
        """Numbers of ratings, workers, items and systems."""
        f = self.frame
        return {
            "n_ratings": len(f),
            "n_workers": int(f["worker"].nunique()),
            "n_items": int(f["item"].nunique()),
            "n_systems": len(self.systems),
        }


def _order_systems(present: Sequence[str], baseline: str | None, keep: Sequence[str] | None) -> tuple[str, ...]:
    systems = sorted(set(present))
    if baseline is not None and baseline not in systems:
        raise InputError(f"baseline {baseline!r} is not among the systems: {', '.join(systems)}")
    base = baseline if baseline is not None else (keep[0] if keep else systems[0])
    return (base,) + tuple(s for s in systems if s != base)


def _check_spread(frame: pd.DataFrame, what: str) -> None:
    for role in ("worker", "item"):
        if frame[role].nunique() < 2:
            raise InputError(f"only one {role} in the {what}: a crossed model needs at least two {role}s")


def duplicates_note(frame: pd.DataFrame, keys: Sequence[str], duplicates: str) -> str | None:
    """What the ``duplicates`` policy does with ratings sharing a (worker, item, system): None when
    there are none; an InputError under ``error``; else a note (``average``: the caller averages them,
    ``keep``: kept, the model then treats them as independent errors)."""
    check_choice("duplicates policy", duplicates, DUPLICATE_POLICIES)
    dup = frame.duplicated(list(keys), keep=False)
    if not dup.any():
        return None
    n_cells = int(frame[dup].groupby(list(keys)).ngroups)
    example = frame[dup].iloc[0]
    msg = (f"{int(dup.sum())} ratings share a (worker, item, system) with another rating ({n_cells} cells, "
           f"e.g. {'/'.join(str(example[k]) for k in keys)})")
    if duplicates == "error":
        raise InputError(msg + "; use --duplicates average or --duplicates keep")
    return msg + (" (averaged)" if duplicates == "average" else " (kept as repeated ratings)")


def read_ratings(
    source: str | Path | pd.DataFrame,
    worker: str | None = None,
    item: str | None = None,
    system: str | None = None,
    score: str | None = None,
    baseline: str | None = None,
    systems: Sequence[str] | None = None,
    where: dict[str, str] | None = None,
    scale: tuple[float, float] | None = None,
    duplicates: str = "error",
    family: str = "gaussian",
) -> PilotData:
    """Read and validate Likert ratings, one row per rating.

    ``scale=(MIN, MAX)`` declares the rating scale: scores outside it are an
    error and scores are rescaled to [0, 1] (as Card et al. did).
    ``duplicates``: several ratings of one (worker, item, system) are an
    ``error`` (default), are ``average``d, or ``keep``t as repeated measures.
    ``family="ordinal"`` reads the ratings as categories (:func:`_ordinal_levels`): the same checks
    without rescaling, then integer scores on ``scale = (lowest, highest)`` (default: the observed range).
    """
    check_choice("ratings family", family, RATING_FAMILIES)
    if family == "ordinal":
        if duplicates == "average":
            raise InputError("--duplicates average makes mean ratings, not categories: use error or keep with "
                             "--family ordinal")
        if scale is not None and not all(float(v).is_integer() for v in scale):
            raise InputError(f"an ordinal scale is two integer ratings LOWEST HIGHEST, got {scale[0]:g} {scale[1]:g}")
    check_choice("duplicates policy", duplicates, DUPLICATE_POLICIES)
    raw, name, digest = read_table(source)
    raw = apply_filters(raw, where)
    cols = {role: resolve_column(raw, role, given) for role, given in
            (("worker", worker), ("item", item), ("system", system), ("score", score))}
    frame = pd.DataFrame({role: raw[col] for role, col in cols.items()})
    for role in ("worker", "item", "system"):
        if frame[role].isna().any():
            raise InputError(f"{int(frame[role].isna().sum())} rows have no {role} (column {cols[role]!r})")
        frame[role] = frame[role].astype(str)
    values = pd.to_numeric(frame["score"], errors="coerce")
    bad = values.isna() & frame["score"].notna()
    if bad.any():
        first = frame["score"][bad].iloc[0]
        raise InputError(f"{int(bad.sum())} scores in column {cols['score']!r} are not numbers (e.g. {first!r})")
    if values.isna().any():
        raise InputError(f"{int(values.isna().sum())} scores in column {cols['score']!r} are missing")
    if not np.isfinite(values).all():
        raise InputError(f"scores in column {cols['score']!r} must be finite")
    frame["score"] = values.astype(float)
    if systems:
        unknown = sorted(set(systems) - set(frame["system"]))
        if unknown:
            raise InputError(f"system(s) not in the data: {', '.join(unknown)}")
        frame = frame[frame["system"].isin(systems)]
    order = _order_systems(frame["system"].unique(), baseline, systems)
    if len(order) < 2:
        raise InputError(f"only one system ({order[0]}) in the data: nothing to compare")
    _check_spread(frame, "ratings")
    notes: list[str] = []
    if family == "ordinal":
        levels = _ordinal_levels(frame["score"], cols["score"], scale)
    elif scale is not None:
        lo, hi = float(scale[0]), float(scale[1])
        if not lo < hi:
            raise InputError(f"--scale needs MIN < MAX, got {lo} {hi}")
        outside = (frame["score"] < lo) | (frame["score"] > hi)
        if outside.any():
            raise InputError(f"{int(outside.sum())} scores lie outside the declared scale [{lo:g}, {hi:g}] "
                             f"(e.g. {frame['score'][outside].iloc[0]:g})")
        frame["score"] = (frame["score"] - lo) / (hi - lo)
        notes.append(f"scores rescaled from [{lo:g}, {hi:g}] to [0, 1]")
    if family == "gaussian":  # ordinal categories: their own checks (_ordinal_levels), no spread or magnitude
        check_scores(frame["score"], cols["score"], frame["system"])
    elif frame.groupby("system")["score"].nunique().max() == 1:
        raise InputError(f"every system's ratings in column {cols['score']!r} are one category each: the systems "
                         "separate the categories perfectly and the cumulative-link model has no finite estimates")
    keys = ["worker", "item", "system"]
    note = duplicates_note(frame, keys, duplicates)
    if note:
        if duplicates == "average":
            frame = frame.groupby(keys, as_index=False, sort=False)["score"].mean()
        notes.append(note)
    frame = frame.reset_index(drop=True)
    if family == "ordinal":
        return PilotData(frame, order, family, name, digest, tuple(notes), scale=(float(levels[0]), float(levels[-1])),
                         extra={"levels": levels})
    return PilotData(frame, order, family, name, digest, tuple(notes),
                     scale=(float(scale[0]), float(scale[1])) if scale else None)


#: outcomes read as a tie (case-insensitive); ``tie_values`` adds more (e.g. "both", "neither")
TIE_WORDS = ("tie", "draw", "equal", "0")


def judged_systems(system_a: pd.Series, system_b: pd.Series, baseline: str | None,
                   systems: Sequence[str] | None) -> tuple[str, ...]:
    """The systems of head-to-head judgments in analysis order (the baseline first, the others sorted)."""
    present = sorted(set(system_a.astype(str)) | set(system_b.astype(str)))
    if systems:
        unknown = sorted(set(systems) - set(present))
        if unknown:
            raise InputError(f"system(s) not in the data: {', '.join(unknown)}")
    order = _order_systems(systems or present, baseline, systems)
    if len(order) < 2:
        raise InputError("only one system in the data: nothing to compare")
    return order


def read_judgments(
    source: str | Path | pd.DataFrame,
    worker: str | None = None,
    item: str | None = None,
    system_a: str = "system_a",
    system_b: str = "system_b",
    outcome: str = "outcome",
    baseline: str | None = None,
    systems: Sequence[str] | None = None,
    where: dict[str, str] | None = None,
    ties: str = "drop",
    tie_values: Sequence[str] = (),
) -> PilotData:
    """Read head-to-head judgments: one row per comparison of system_a with system_b.

    ``outcome`` holds ``a``, ``b`` or a tie (``tie``, ``draw``, ``equal``, ``0``, or any
    of ``tie_values``, e.g. ``("both", "neither")``), or the winning system's name.
    Each system is compared with the baseline on the rows that pit the two
    against each other; only those rows are validated and counted. One row per
    judgment: ``score`` is 1 when the non-baseline system won, 0 when it lost;
    ties are dropped, or ``split``: score 1/2, i.e. half a win and half a loss
    (the fits use the weighted likelihood ``score*eta - log(1 + exp(eta))``).
    """
    check_choice("ties policy", ties, TIE_POLICIES)
    if isinstance(tie_values, str):
        raise InputError(f"tie_values must be a list of answers, got the string {tie_values!r}")
    raw, name, digest = read_table(source)
    raw = apply_filters(raw, where)
    cols = {"worker": resolve_column(raw, "worker", worker), "item": resolve_column(raw, "item", item)}
    for role, col in (("system_a", system_a), ("system_b", system_b), ("outcome", outcome)):
        cols[role] = resolve_column(raw, role, col)
    f = pd.DataFrame({role: raw[col].astype(str) for role, col in cols.items()})
    order = judged_systems(f["system_a"], f["system_b"], baseline, systems)
    base = order[0]
    other = np.where(f["system_a"] == base, f["system_b"], np.where(f["system_b"] == base, f["system_a"], ""))
    f = f[np.isin(other, order[1:])].assign(system=other[np.isin(other, order[1:])])
    missing = [s for s in order[1:] if s not in set(f["system"])]
    if missing:
        raise InputError(f"no judgments pit the baseline {base!r} against {', '.join(missing)}")
    blank = raw.loc[f.index, [cols[r] for r in ("worker", "item", "outcome")]].isna().any(axis=1)
    if blank.any():
        raise InputError(f"{int(blank.sum())} of the {len(f)} judgments analysed have no worker, item or outcome")
    out = f["outcome"].str.strip()
    low = out.str.lower()
    winner = np.where(low == "a", f["system_a"], np.where(low == "b", f["system_b"], out))
    is_tie = low.isin(TIE_WORDS + tuple(str(v).strip().lower() for v in tie_values)).to_numpy()
    won = winner == f["system"].to_numpy()
    valid = is_tie | won | (winner == base)
    if not valid.all():
        bad = out[~valid]
        raise InputError(f"{int((~valid).sum())} of the {len(f)} judgments analysed have an outcome that is not a, b, "
                         f"a tie or one of the two systems (e.g. {bad.iloc[0]!r}; answers: "
                         f"{', '.join(map(repr, sorted(bad.unique())[:5]))}); declare tie answers with --tie-values")
    score = np.where(is_tie, 0.5, won.astype(float))
    frame = pd.DataFrame({"worker": f["worker"], "item": f["item"], "system": f["system"], "score": score})
    if ties == "drop":
        frame = frame[~is_tie]
        gone = [s for s in order[1:] if s not in set(frame["system"])]
        if gone:
            raise InputError(f"every judgment of {base!r} against {', '.join(gone)} is a tie: nothing left "
                             "once ties are dropped (use --ties split)")
    frame = frame.reset_index(drop=True)
    _check_spread(frame, "judgments")
    n_ties = int(is_tie.sum())
    notes = [f"{n_ties} of {len(f)} judgments are ties, "
             + ("dropped" if ties == "drop" else "each split into half a win and half a loss (weighted likelihood)")]
    p_tie = pd.Series(is_tie, index=f.index).groupby(f["system"]).mean()  # per comparison, before dropping
    return PilotData(frame, order, "binomial", name, digest, tuple(notes),
                     extra={"ties": ties, "p_tie": {str(k): float(v) for k, v in p_tie.items()}})


#: the most categories an ordinal scale may have (a threshold between each two; a 0-100 slider has 101)
MAX_CATEGORIES = 101


def _ordinal_levels(scores: pd.Series, column: str, scale: tuple[float, float] | None) -> tuple[int, ...]:
    """The categories of ordinal ratings: integer scores on ``scale = (lowest, highest)`` (default: the observed
    range), at most :data:`MAX_CATEGORIES` of them, at least three observed and none of the scale unused
    (:func:`~.clmm.ordinal_codes`); every refusal an ordinal one (InputError)."""
    from .clmm import ordinal_codes

    y = scores.to_numpy(float)
    rng = None if scale is None else (int(scale[0]), int(scale[1]))
    if rng is not None and not rng[0] < rng[1]:
        raise InputError(f"--scale needs LOWEST < HIGHEST, got {rng[0]} {rng[1]}")
    lo, hi = (float(y.min()), float(y.max())) if rng is None else rng
    if np.all(y == np.round(y)) and hi - lo + 1 > MAX_CATEGORIES:  # before ordinal_codes lists every category
        raise InputError(f"ordinal ratings in column {column!r} span {lo:g}..{hi:g}, {hi - lo + 1:g} categories: an "
                         f"ordinal model takes at most {MAX_CATEGORIES} (a threshold between each two); are these "
                         "ratings on a scale?")
    return ordinal_codes(y, rng)[1]
