"""What examples/ordinal_type1.py and examples/ordinal_agreement.py share: the benchmark processes and designs,
a rejection rate with its 95% Clopper-Pearson interval, and the resumable loop over chunks of studies that saves
the results after every chunk."""
from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from humaneval_power.designs import CrowdDesign
from humaneval_power.engine import clopper_pearson
from humaneval_power.ordinal_process import OrdinalProcess

_THRESHOLDS = (-2.0, -0.7, 0.5, 1.8)
PROCESSES = {  # "bench": benchmarks/bench_clmm.py; "hr": the low worker SD of the Howcroft & Rieser table (docs)
    "bench": OrdinalProcess(_THRESHOLDS, "logit", sd_worker=0.8, sd_worker_system=0.3, sd_item=1.0, sd_item_system=0.5),
    "hr": OrdinalProcess(_THRESHOLDS, "logit", sd_worker=0.5, sd_worker_system=0.3, sd_item=1.0, sd_item_system=0.5),
}
DESIGNS = {
    "crossed": CrowdDesign(items=40, workers=5, ratings_per_item=5, assignment="crossed"),
    "sparse": CrowdDesign(items=100, workers=15, ratings_per_item=3, assignment="balanced"),
    "between": CrowdDesign(items=60, workers=15, ratings_per_item=3, presentation="between"),
}


def rate(reject: np.ndarray) -> str:
    """The share of True in ``reject`` with its 95% Clopper-Pearson interval."""
    k, n = int(np.sum(reject)), np.size(reject)
    lo, hi = clopper_pearson(k, n)
    return f"{k / n:.3f} [{lo:.3f}, {hi:.3f}]"


def chunks(out: Path, fields: Sequence[str], total: int, chunk: int, label: str, start: int = 0,
           **meta: Any) -> Iterator[tuple[slice, dict[str, np.ndarray]]]:
    """The studies ``start..total`` in chunks: yields (columns, results) for the caller to fill, then saves the
    results (NaN where not yet done) with ``meta`` to ``out`` (npz) and reports progress. A partial ``out`` is
    resumed from its ``done``."""
    res = {k: np.full(total, np.nan) for k in fields}
    done = start
    if out.exists():
        old = np.load(out)
        done = int(old["done"])
        for k in fields:
            res[k][start:done] = old[k][start:done]
    while done < total:
        cols = slice(done, min(total, done + chunk))
        yield cols, res
        done = cols.stop
        np.savez(out, done=done, **meta, **res)
        print(f"{label}: {done}/{total}", file=sys.stderr, flush=True)
