"""``hepower agreement``: rater agreement of a ratings file (Krippendorff's alpha, ICCs, ratings needed)."""
from __future__ import annotations

import argparse
import json
import sys

from .common import where_filters


def run(args: argparse.Namespace) -> int:
    """Run ``hepower agreement``: the records to --out, then the summary (or JSON) to stdout."""
    import pandas as pd

    from ..completed_study import agreement
    from ..io import json_records, table_writer

    result = agreement(args.data, args.worker, args.item, args.system, args.score, args.by,
                       where_filters(args.where), args.metric, args.levels, args.boot, args.level, args.seed,
                       args.target)
    records = pd.DataFrame(result.records())
    if args.outputs.paths.get("out") is not None:
        args.outputs.write(out=table_writer(records, args.outputs.paths["out"]))
    print(json.dumps(json_records(records)) if args.json else result, file=sys.stdout)
    return 0
