"""A checkpoint file that cannot lie: JSON lines, a header naming the run, a checksum per record.

Line 1 is a header ``{"hepower_checkpoint": FORMAT, "run": RUN_ID, "about": {...}}``;
``RUN_ID`` is a hash of everything that determines the results (the caller
computes it). Every later line is one record ``{"data": {...}, "sum": CHECKSUM}``
whose checksum covers the run id and the record, so a record edited by hand,
copied from another run or cut short is recognised. Opening the file:

* a missing or empty file starts a new checkpoint (the folder must exist);
* a header for another run, a file that is not a checkpoint, or a complete
  record that fails its checksum raises :class:`InputError` before any work,
  unless ``restart`` is given, which starts the file over;
* a last line cut short by an interruption (no final newline) is removed.

The format knows nothing of power simulations: the engine stores one record
per finished chunk and checks their contents; a result store can reuse it.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterator

from .errors import InputError

FORMAT = 1
_RESUME_HINT = "rerun the same command to resume, or add --restart to start over (this discards it)"


def run_id(identity: Any) -> str:
    """A stable hash of a JSON-serialisable description of a run."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()


def _checksum(run: str, data: Any) -> str:
    return hashlib.sha256((run + json.dumps(data, sort_keys=True)).encode()).hexdigest()[:32]


class Checkpoint:
    """Validated records of one run, appended one line at a time (flushed and synced)."""

    def __init__(self, path: str | Path, run: str, about: dict[str, Any] | None = None, restart: bool = False) -> None:
        self.path = Path(path)
        self.run = run
        self.records: list[dict[str, Any]] = []
        if self.path.is_dir():
            raise InputError(f"checkpoint {self.path} is a folder; give a file name")
        if not self.path.parent.is_dir():
            raise InputError(f"checkpoint folder does not exist: {self.path.parent}")
        exists = self.path.exists() and self.path.stat().st_size > 0
        if exists and not restart:
            self._load()
        try:
            if not exists or restart:
                with self.path.open("w", encoding="utf-8") as fh:
                    header = {"hepower_checkpoint": FORMAT, "run": run, "about": about or {}}
                    fh.write(json.dumps(header, sort_keys=True, default=str) + "\n")
            self._fh = self.path.open("a", encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot write the checkpoint {self.path}: {exc.strerror or exc}") from None

    def _load(self) -> None:
        raw = self._read_bytes()
        complete, _, torn = raw.rpartition(b"\n")
        if not complete and torn:  # not even the header ends in a newline
            complete, torn = torn, b""
        lines = complete.split(b"\n") if complete else []
        try:
            text = [line.decode("utf-8") for line in lines]
            header = json.loads(text[0])
        except (UnicodeDecodeError, ValueError, IndexError):
            raise InputError(f"{self.path} is not a hepower checkpoint; give another --checkpoint file or "
                             "--restart to overwrite it") from None
        if not isinstance(header, dict) or header.get("hepower_checkpoint") != FORMAT:
            raise InputError(f"{self.path} is not a hepower checkpoint (format {FORMAT}); give another "
                             "--checkpoint file or --restart to overwrite it")
        if header.get("run") != self.run:
            raise InputError(f"checkpoint {self.path} belongs to a run with other arguments; rerun that command to "
                             "resume it, give another --checkpoint file, or --restart to start over (this discards it)")
        for number, line in enumerate(text[1:], start=2):
            rec = self._parse(line)
            if rec is None:
                raise InputError(f"checkpoint {self.path}, line {number}: the record is corrupt or was edited "
                                 "(checksum mismatch); --restart starts over (this discards the file)")
            self.records.append(rec)
        if torn:
            with self.path.open("r+b") as fh:  # drop the line an interruption cut short
                fh.truncate(len(complete) + 1)

    def _read_bytes(self) -> bytes:
        try:
            return self.path.read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read the checkpoint {self.path}: {exc.strerror or exc}") from None

    def _parse(self, line: str) -> dict[str, Any] | None:
        try:
            rec = json.loads(line)
            data, checksum = rec["data"], rec["sum"]
        except (ValueError, KeyError, TypeError):
            return None
        return data if isinstance(data, dict) and checksum == _checksum(self.run, data) else None

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.records)

    def add(self, data: dict[str, Any]) -> None:
        """Append one record; it is on disk when this returns."""
        self.records.append(data)
        self._fh.write(json.dumps({"data": data, "sum": _checksum(self.run, data)}, sort_keys=True) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        self._fh.close()

    def resume_hint(self) -> str:
        """What to tell a user whose run stopped."""
        return f"finished chunks are saved in {self.path}; {_RESUME_HINT}"
