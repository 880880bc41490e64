"""Corpus metrics from per-item sufficient statistics (sacrebleu's), scored vectorised.

sacrebleu extracts, for every sentence, the counts its corpus score is a
function of (BLEU: hypothesis and reference length, matched and total n-grams
for n = 1..4; chrF: hypothesis, reference and matched character n-grams per
order). A corpus score is that function of the summed counts, so swapping,
resampling or permuting sentences only needs sums of rows: never re-score text.
``score`` below evaluates sacrebleu's formulas on many summed rows at once
(BLEU: exponential smoothing, as sacrebleu's default; chrF: beta 2, char order
6, word order 0); tests check them against sacrebleu to 1e-9.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, cast

import numpy as np

from .errors import InputError
from .validation import check_choice

METRICS = ("bleu", "chrf")


@dataclass(frozen=True)
class ItemStats:
    """Per-item sufficient statistics (n x k) and the vectorised corpus score of their sums."""

    metric: str
    stats: np.ndarray
    score_sums: Callable[[np.ndarray], np.ndarray]
    references: int = 1  #: reference streams the statistics were computed against

    @property
    def n(self) -> int:
        return int(self.stats.shape[0])

    def corpus_score(self) -> float:
        return float(self.score_sums(self.stats.sum(axis=0)))


def check_paired(a: ItemStats, b: ItemStats) -> None:
    """Two different systems' statistics on the same segments, for the same metric and references."""
    if a.metric != b.metric:
        raise InputError(f"both systems need the same metric ({a.metric} vs {b.metric})")
    if a.references != b.references:
        raise InputError(f"both systems need the same references ({a.references} vs {b.references} reference files)")
    if a.n != b.n:
        raise InputError(f"the two systems have {a.n} and {b.n} segments: outputs must align line by line")
    if np.array_equal(a.stats, b.stats):
        raise InputError("the two systems have the same statistics on every segment (the same output twice?): "
                         "nothing to compare")


def bleu_from_sums(sums: np.ndarray, max_order: int = 4) -> np.ndarray:
    """sacrebleu corpus BLEU (exp smoothing) from summed statistics [..., 2 + 2 * max_order]."""
    s = np.asarray(sums, dtype=float)
    sys_len, ref_len = s[..., 0], s[..., 1]
    correct, total = s[..., 2:2 + max_order], s[..., 2 + max_order:2 + 2 * max_order]
    with np.errstate(divide="ignore", invalid="ignore"):
        bp = np.where(sys_len < ref_len, np.where(sys_len > 0, np.exp(1 - ref_len / np.maximum(sys_len, 1e-300)), 0.0),
                      1.0)
        zero = correct == 0
        # exp smoothing: the k-th order without matches gets 100 / (2^k total)
        halvings = np.cumsum(zero, axis=-1)
        prec = np.where(zero, 100.0 / (2.0 ** halvings * np.maximum(total, 1e-300)), 100.0 * correct / total)
        logs = np.where(prec > 0, np.log(np.maximum(prec, 1e-300)), -9999999999.0)
        # sacrebleu stops at the first order without any n-grams (its precisions stay 0)
        empty = np.cumsum(total == 0, axis=-1) > 0
        logs = np.where(empty, -9999999999.0, logs)
        score = bp * np.exp(logs.sum(axis=-1) / max_order)
    return np.where(correct.sum(axis=-1) == 0, 0.0, score)


def chrf_from_sums(sums: np.ndarray, beta: float = 2.0, eps: float = 1e-16) -> np.ndarray:
    """sacrebleu corpus chrF (effective-order averaging) from summed [hyp, ref, match] x orders."""
    s = np.asarray(sums, dtype=float)
    hyp, ref, match = s[..., 0::3], s[..., 1::3], s[..., 2::3]
    with np.errstate(divide="ignore", invalid="ignore"):
        prec = np.where(hyp > 0, match / np.where(hyp > 0, hyp, 1), eps)
        rec = np.where(ref > 0, match / np.where(ref > 0, ref, 1), eps)
        used = (hyp > 0) & (ref > 0)
        k = used.sum(axis=-1)
        avg_p = np.where(k > 0, (prec * used).sum(axis=-1) / np.maximum(k, 1), 0.0)
        avg_r = np.where(k > 0, (rec * used).sum(axis=-1) / np.maximum(k, 1), 0.0)
        f = beta**2
        denom = f * avg_p + avg_r
        return np.where(avg_p + avg_r > 0, 100 * (1 + f) * avg_p * avg_r / np.where(denom > 0, denom, 1), 0.0)


def mean_from_sums(sums: np.ndarray) -> np.ndarray:
    """Mean of a per-item metric from summed [value, 1]."""
    s = np.asarray(sums, dtype=float)
    return s[..., 0] / s[..., 1]


def read_lines(path: str | Path, what: str) -> list[str]:
    """One segment per line (UTF-8, a leading byte-order mark dropped); clear errors for missing,
    unreadable or empty files."""
    from .io import input_file

    p = input_file(path, what)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{what} file {p} is not UTF-8 text") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise InputError(f"{what} file {p} is empty")
    if not any(line.strip() for line in lines):
        raise InputError(f"{what} file {p} has only blank lines")
    return lines


def corpus_stats(hypotheses: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]],
                 metric: str = "bleu") -> ItemStats:
    """sacrebleu's per-sentence statistics of ``hypotheses`` against one or several references.

    ``references``: one reference per segment (a sequence of strings), or several
    reference streams (a sequence of such sequences, each aligned with the
    hypotheses). With several, the statistics are sacrebleu's multi-reference
    ones: BLEU clips each n-gram count by its largest count in any reference and
    takes the reference length closest to the hypothesis; chrF keeps, per
    segment, the reference with the best sentence chrF.
    """
    check_choice("metric", metric, METRICS)
    malformed = InputError("references must be one line per segment, or a list of such reference streams")
    if isinstance(references, str) or not len(references):
        raise malformed
    if isinstance(references[0], str):
        streams = [list(cast(Sequence[str], references))]
    elif any(isinstance(r, str) for r in references):  # a stream given as one string, not a list of lines
        raise malformed
    else:
        streams = [list(r) for r in references]
    for k, stream in enumerate(streams, 1):
        if not all(isinstance(line, str) for line in stream):
            raise malformed
        if len(hypotheses) != len(stream):
            which = f"reference {k}" if len(streams) > 1 else "references"
            raise InputError(f"{len(hypotheses)} hypotheses but {len(stream)} lines in {which}: "
                             "files must align line by line")
    if not len(hypotheses):
        raise InputError("no segments")
    scorer = _reference_scorer(metric, tuple(map(tuple, streams)))
    stats = np.asarray(scorer._extract_corpus_statistics(list(hypotheses), None), dtype=float)
    return ItemStats(metric, stats, bleu_from_sums if metric == "bleu" else chrf_from_sums, len(streams))


@lru_cache(maxsize=2)
def _reference_scorer(metric: str, streams: tuple[tuple[str, ...], ...]) -> Any:
    """sacrebleu's scorer with these references' n-grams extracted (its ``references=`` cache, read-only when
    scoring): half of a corpus scoring, done once for the systems scored against the same references (``bleu
    test``'s baseline and systems, ``bleu estimate``'s two). The same statistics as passing the references.
    The last two (metric, references) are kept (chrF's n-grams: ~50 MB per 1,000 segments); a long-lived process
    may free them with ``_reference_scorer.cache_clear()``."""
    import sacrebleu

    refs = [list(s) for s in streams]
    return sacrebleu.BLEU(references=refs) if metric == "bleu" else sacrebleu.CHRF(references=refs)


def per_item_stats(values: Sequence[float], metric: str = "mean") -> ItemStats:
    """Any per-item metric (accuracy, sentence scores): its corpus score is the mean."""
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or not len(v) or not np.isfinite(v).all():
        raise InputError("per-item values must be a non-empty list of finite numbers")
    return ItemStats(metric, np.column_stack([v, np.ones_like(v)]), mean_from_sums)


__all__ = [
    "METRICS",
    "ItemStats",
    "bleu_from_sums",
    "check_paired",
    "chrf_from_sums",
    "corpus_stats",
    "mean_from_sums",
    "per_item_stats",
    "read_lines",
]
