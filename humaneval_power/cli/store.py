"""``hepower store show FILE``: what a result store holds (see :mod:`humaneval_power.store`)."""
from __future__ import annotations

import argparse
from typing import Any

from ..interface.parsers import Parser
from .common import add_json_option, print_json, print_table

COLUMNS = ["key", "scenario", "workers", "items", "ratings_per_item", "judgments_per_item", "n", "effect", "method",
           "test", "seed", "chunk_size", "chunks", "studies", "seconds"]


def add_parser(sub: Any, name: str, text: str) -> None:
    """The ``store`` commands."""
    p = sub.add_parser(name, help=text, description=text)
    cmds = p.add_subparsers(dest="action", metavar="COMMAND", parser_class=Parser)
    show = cmds.add_parser("show", help="list the cells a store holds, with their studies done",
                           description="One row per cell: its design, seed, chunk size, chunks and studies done "
                                       "and the seconds they took.")
    show.add_argument("file", metavar="FILE", help="a result store written with --store")
    add_json_option(show)


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
