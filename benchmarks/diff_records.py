"""The largest numeric difference between two versions of behaviour records (tests/records/*.json), per record
and per field: python benchmarks/diff_records.py OLD_DIR NEW_DIR [names...] (default: every record in NEW_DIR)."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def walk(a: Any, b: Any, path: str, out: dict[str, float]) -> None:
    """Record into ``out`` the max |a - b| of each numeric leaf (by path, list indices dropped); other leaves
    that differ as ``inf``."""
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        for k in a:
            walk(a[k], b[k], f"{path}.{k}" if path else k, out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for x, y in zip(a, b):
            walk(x, y, path, out)
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        out[path] = max(out.get(path, 0.0), abs(float(a) - float(b)))
    elif a != b:
        out[path] = float("inf")


def main() -> None:
    old, new = Path(sys.argv[1]), Path(sys.argv[2])
    names = sys.argv[3:] or sorted(p.stem for p in new.glob("*.json"))
    for name in names:
        diff: dict[str, float] = {}
        walk(json.loads((old / f"{name}.json").read_text()), json.loads((new / f"{name}.json").read_text()), "", diff)
        changed = {k: v for k, v in diff.items() if v}
        print(json.dumps({"record": name, "max_difference": max(changed.values(), default=0.0), "fields": changed}))


if __name__ == "__main__":
    main()
