"""``hepower store show FILE``: what a result store holds (see :mod:`humaneval_power.store`)."""
from __future__ import annotations

import argparse

from .common import print_json, print_table

COLUMNS = ["key", "scenario", "workers", "items", "ratings_per_item", "judgments_per_item", "n", "effect", "method",
           "test", "seed", "chunk_size", "chunks", "studies", "seconds"]


def run(args: argparse.Namespace) -> int:
    """Run ``hepower store show``."""
    import pandas as pd

    from ..store import CHECKSUM_NOTE, Store

    with Store(args.file, create=False) as store:
        table = pd.DataFrame(store.summary())
        about = store.about()
    if args.json:
        print_json(table)
    elif table.empty:
        print(f"{args.file}: a hepower {about.get('hepower')} store holding no cells")
    else:
        print(f"{args.file}: hepower {about.get('hepower')} store, {len(table)} cells, "
              f"{int(table.studies.sum()):,} studies")
        print_table(table, COLUMNS + [c for c in table.columns if c not in COLUMNS])
    if not args.json:
        print(f"note: {CHECKSUM_NOTE}")
    return 0
