"""Reading and writing files: atomic outputs (never half a file) and table formats."""
from __future__ import annotations

import glob
import json
import math
import os
import stat
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from .errors import InputError

TABLE_FORMATS = (".csv", ".json", ".parquet")
PLOT_FORMATS = (".png", ".pdf", ".svg")


TEMP_MARK = ".hepower-tmp-"


def _target(path: str | Path) -> Path:
    """Where a write to ``path`` lands: through symlinks, so a link keeps pointing at the written file."""
    return Path(os.path.realpath(path))


def _new_file_mode(path: Path) -> int:
    """An existing file keeps its mode; a new one gets 0666 minus the umask (0644 normally)."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def _temp_for(path: Path) -> Path:
    """A fresh temporary file next to ``path``, named so that a later run can recognise it."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}{TEMP_MARK}{os.getpid()}-", suffix=path.suffix or ".tmp",
                               dir=path.parent)
    os.close(fd)
    return Path(tmp)


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (this user's or another's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temps(path: Path) -> list[Path]:
    """Delete temporary files that an interrupted write of ``path`` left behind (their process is gone)."""
    removed = []
    for tmp in path.parent.glob(f".{glob.escape(path.name)}{TEMP_MARK}*"):
        pid = tmp.name[len(path.name) + 1 + len(TEMP_MARK):].split("-", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def write_outputs(writes: Sequence[tuple[str | Path, Callable[[Path], object]]]) -> None:
    """Write every output, or none: each ``write(tmp)`` fills a temporary file next to its
    target; only when all succeeded are they renamed over the targets (through symlinks,
    keeping an existing file's mode, else the umask's)."""
    staged: list[tuple[Path, Path]] = []
    try:
        for path, write in writes:
            target = _target(path)
            if not target.parent.is_dir():
                raise InputError(f"output folder does not exist: {Path(path).parent}")
            tmp = _temp_for(target)
            staged.append((tmp, target))
            write(tmp)
            os.chmod(tmp, _new_file_mode(target))
        for tmp, target in staged:
            os.replace(tmp, target)
    except BaseException:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """Write a text file atomically (through a temporary file in the same folder, then a rename)."""
    write_outputs([(Path(path), lambda tmp: tmp.write_text(text, encoding="utf-8"))])


def check_output_path(path: str | Path, formats: tuple[str, ...] = TABLE_FORMATS, option: str = "--out") -> Path:
    """Validate an output path before any work is done: its suffix, that it is not a folder, and
    that its folder exists and accepts a new file (tried for real: permissions, read-only
    file systems). Temporary files of earlier interrupted writes are removed."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{option} {p} is a folder; give a file name ending in {', '.join(formats)}")
    if p.suffix.lower() not in formats:
        raise InputError(f"{option} must end in {', '.join(formats)}, got {p.name!r}")
    target = _target(p)
    if not target.parent.is_dir():
        raise InputError(f"{option}: output folder does not exist: {target.parent}")
    try:
        _temp_for(target).unlink()
    except OSError as exc:
        raise InputError(f"{option}: cannot write to {target.parent}: {exc.strerror or exc}") from None
    remove_stale_temps(target)
    return p


def check_output_paths(*outputs: tuple[str | Path | None, tuple[str, ...], str]) -> list[Path | None]:
    """:func:`check_output_path` for several ``(path or None, formats, option)``; refuses two options naming one file."""
    checked = [check_output_path(p, fmts, opt) if p else None for p, fmts, opt in outputs]
    seen: dict[Path, str] = {}
    for p, (_, _, opt) in zip(checked, outputs):
        if p is not None:
            t = _target(p)
            if t in seen:
                raise InputError(f"{seen[t]} and {opt} name the same file {p}")
            seen[t] = opt
    return checked


def table_writer(table: pd.DataFrame, path: str | Path) -> Callable[[Path], object]:
    """A function writing ``table`` to a temporary file in the format of ``path``'s suffix."""
    suffix = Path(path).suffix.lower()
    if suffix == ".csv":
        return lambda tmp: table.to_csv(tmp, index=False)
    if suffix == ".json":
        return lambda tmp: tmp.write_text(json.dumps(json_records(table), indent=1) + "\n")
    if suffix == ".parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise InputError("writing .parquet needs pyarrow: pip install 'humaneval-power[parquet]'") from None
        return lambda tmp: table.to_parquet(tmp, index=False)
    raise InputError(f"--out must end in {', '.join(TABLE_FORMATS)}, got {Path(path).name!r}")


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


# ---------------------------------------------------------------- tidy inputs

#: Column names tried, in order, when the default name is absent.
COLUMN_ALIASES = {
    "worker": ("worker", "annotator", "rater", "judge", "worker_id", "annotator_id"),
    "item": ("item", "segment", "item_id", "doc", "document", "id"),
    "system": ("system", "model", "system_id"),
    "score": ("score", "rating", "value"),
}


def input_file(path: str | Path, what: str = "input") -> Path:
    """An existing file to read: a missing path and a folder are refused with what they are."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{what} {p} is a folder, not a file")
    if not p.is_file():
        raise InputError(f"{what} file not found: {p}")
    return p


def read_table(source: str | Path | pd.DataFrame) -> tuple[pd.DataFrame, str, str | None]:
    """A CSV or Parquet file (or a DataFrame): the frame, its name and its sha256."""
    import hashlib

    if isinstance(source, pd.DataFrame):
        return source.copy(), "<DataFrame>", None
    path = input_file(source)
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
