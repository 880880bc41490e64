"""Reading and writing files: atomic outputs (never half a file) and table formats."""
from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from .errors import InputError

TABLE_FORMATS = (".csv", ".json", ".parquet")
PLOT_FORMATS = (".png", ".pdf", ".svg")


def _atomic(path: Path, write: Callable[[Path], None]) -> None:
    """Write through a temporary file in the same folder, then rename."""
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(f"output folder does not exist: {folder}")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix or ".tmp", dir=folder)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """Write a text file atomically."""
    _atomic(Path(path), lambda tmp: tmp.write_text(text, encoding="utf-8"))


def check_output_path(path: str | Path, formats: tuple[str, ...] = TABLE_FORMATS, option: str = "--out") -> Path:
    """Validate an output path (suffix, existing folder) before any work is done."""
    p = Path(path)
    if p.suffix.lower() not in formats:
        raise InputError(f"{option} must end in {', '.join(formats)}, got {p.name!r}")
    if not (p.parent if str(p.parent) else Path(".")).is_dir():
        raise InputError(f"output folder does not exist: {p.parent}")
    return p


def json_records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """Records with NaN turned into null and numpy scalars into Python ones."""
    out = []
    for rec in table.to_dict(orient="records"):
        clean = {}
        for k, v in rec.items():
            if hasattr(v, "item"):
                v = v.item()
            if isinstance(v, float) and not math.isfinite(v):
                v = None
            clean[k] = v
        out.append(clean)
    return out


def write_table(table: pd.DataFrame, path: str | Path) -> None:
    """Write a table as CSV, JSON (array of records) or Parquet, atomically."""
    p = check_output_path(path)
    suffix = p.suffix.lower()
    if suffix == ".csv":
        _atomic(p, lambda tmp: table.to_csv(tmp, index=False))
    elif suffix == ".json":
        _atomic(p, lambda tmp: tmp.write_text(json.dumps(json_records(table), indent=1) + "\n"))
    else:
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise InputError("writing .parquet needs pyarrow: pip install 'humaneval-power[parquet]'") from None
        _atomic(p, lambda tmp: table.to_parquet(tmp, index=False))


# ---------------------------------------------------------------- tidy inputs

#: Column names tried, in order, when the default name is absent.
COLUMN_ALIASES = {
    "worker": ("worker", "annotator", "rater", "judge", "worker_id", "annotator_id"),
    "item": ("item", "segment", "item_id", "doc", "document", "id"),
    "system": ("system", "model", "system_id"),
    "score": ("score", "rating", "value"),
}


def read_table(source: str | Path | pd.DataFrame) -> tuple[pd.DataFrame, str, str | None]:
    """A CSV or Parquet file (or a DataFrame): the frame, its name and its sha256."""
    import hashlib

    if isinstance(source, pd.DataFrame):
        return source.copy(), "<DataFrame>", None
    path = Path(source)
    if not path.is_file():
        raise InputError(f"input file not found: {path}")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            frame = pd.read_parquet(path)
        else:
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    except (ValueError, OSError, UnicodeDecodeError, ImportError) as exc:
        raise InputError(f"cannot read {path}: {exc.__class__.__name__}: {str(exc).splitlines()[0]}") from None
    if frame.empty:
        raise InputError(f"{path} has no rows")
    return frame, str(path), digest


def resolve_column(frame: pd.DataFrame, role: str, given: str | None) -> str:
    """The column playing ``role``: the given name, else the first alias present."""
    if given is not None:
        if given not in frame.columns:
            raise InputError(f"column {given!r} (--{role}) not found; columns are: {', '.join(map(str, frame.columns))}")
        return given
    for name in COLUMN_ALIASES.get(role, (role,)):
        if name in frame.columns:
            return name
    raise InputError(
        f"no {role} column (looked for {', '.join(COLUMN_ALIASES.get(role, (role,)))}); name it with --{role} COL; "
        f"columns are: {', '.join(map(str, frame.columns))}"
    )


def apply_filters(frame: pd.DataFrame, where: dict[str, str] | None) -> pd.DataFrame:
    """Keep rows where each column equals the given value (``--where COL=VALUE``)."""
    for col, value in (where or {}).items():
        if col not in frame.columns:
            raise InputError(f"--where column {col!r} not found; columns are: {', '.join(map(str, frame.columns))}")
        kept = frame[frame[col].astype(str) == str(value)]
        if kept.empty:
            values = sorted(frame[col].astype(str).unique())[:10]
            raise InputError(f"--where {col}={value} keeps no rows; values of {col} include: {', '.join(values)}")
        frame = kept
    return frame
