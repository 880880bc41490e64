"""The result store: one SQLite file of finished chunks, shared by any number of sweeps.

Every chunk of simulated studies is saved under the key of its cell
(:func:`cell_key`: a hash of the scenario's class, parameters, design and
analysis, the seed, the chunk size, the engine's and the package's versions),
its chunk index and its number of studies. A sweep looks up the chunks of its
cells before it starts and runs only the missing ones, so

* a rerun skips finished cells and chunks, and an interrupted sweep resumes
  (each chunk is committed as it finishes; a SIGKILL loses at most the chunks
  running at that moment);
* several sweeps (other grids, other commands, sweeps running at the same time)
  share one store: cells they have in common are computed once; a sweep with
  more studies per cell reuses the chunks of one with fewer.

Why SQLite rather than a folder of Parquet files: each chunk is one small row
committed atomically (a torn write cannot happen), several processes may write
to it at once (write-ahead log, a lock held for milliseconds), it is one file
to copy, and it needs nothing beyond Python's standard library.

Opening a store checks it before any work, and changes nothing when it refuses
(:class:`InputError`): a file that is not a hepower store, a store of another
store format or written by another hepower version (its keys would never
match, its results are not comparable), a record whose checksum fails.
The checksum has no secret key: it catches accidents (a damaged or hand-edited
record), not an attacker, who can recompute it (:data:`CHECKSUM_NOTE`).
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .errors import InputError

FORMAT = 1
_SQLITE_MAGIC = b"SQLite format 3\x00"
#: the files SQLite keeps next to a database X (X-wal, X-shm, X-journal) and deletes when it closes X
SIDECARS = ("-wal", "-shm", "-journal")
#: how a real sidecar starts: a write-ahead log, a rollback journal (or its zeroed header, journal_mode=PERSIST)
_SIDECAR_MAGIC = {"-wal": (b"\x37\x7f\x06\x82", b"\x37\x7f\x06\x83"),
                  "-journal": (b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7", bytes(8))}
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cells (
    key TEXT PRIMARY KEY, scenario TEXT NOT NULL, cell TEXT NOT NULL, seed INTEGER NOT NULL,
    chunk_size INTEGER NOT NULL, added REAL NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (
    cell TEXT NOT NULL REFERENCES cells(key), chunk INTEGER NOT NULL, n INTEGER NOT NULL,
    counts TEXT NOT NULL, seconds REAL NOT NULL, sum TEXT NOT NULL, PRIMARY KEY (cell, chunk, n));
"""


def digest(identity: Any) -> str:
    """A stable hash of a JSON-serialisable description."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()


def _version() -> str:
    from . import __version__

    return __version__


def cell_key(scenario: Any, seed: int, chunk_size: int, engine_version: int) -> str:
    """What determines a cell's chunks: the scenario (class, random stream = parameters and
    design, cell record = design, effect and analysis), seed, chunk size and versions."""
    kind = f"{type(scenario).__module__}.{type(scenario).__qualname__}"
    return digest([kind, scenario.stream_key(), scenario.cell(), seed, chunk_size, engine_version, _version()])


#: what the records' checksums protect against, said by ``hepower store show``
CHECKSUM_NOTE = ("checksums catch damaged or hand-edited records, not deliberate forgery (they have no secret "
                 "key): reuse only stores you trust")


def _checksum(key: str, chunk: int, n: int, counts: str) -> str:
    return digest([key, chunk, n, counts])[:32]


def check_sidecar_name(path: str | Path, option: str = "--store") -> None:
    """Refuse a file name SQLite reserves for a database's sidecar (``X-wal``, ``X-shm``, ``X-journal``):
    a run on the store X would take the file for X's log and delete it."""
    name = str(path)
    for suffix in SIDECARS:
        if name.endswith(suffix):
            raise InputError(f"{option} {name} ends in {suffix!r}, SQLite's name for the {suffix[1:]} file of "
                             f"{name[:-len(suffix)]!r} (deleted when that store is opened); give another file name")


def _check_siblings(path: Path) -> None:
    """Refuse to open a store X next to an ``X-wal``/``X-shm``/``X-journal`` that is not X's own sidecar
    (e.g. another database): SQLite would read it as X's log and delete it."""
    for suffix in SIDECARS:
        sibling = Path(f"{path}{suffix}")
        if not sibling.is_file():
            continue
        try:
            with sibling.open("rb") as fh:
                head = fh.read(len(_SQLITE_MAGIC))
        except OSError as exc:
            raise InputError(f"cannot read {sibling}: {exc.strerror or exc}") from None
        magic = _SIDECAR_MAGIC.get(suffix)
        foreign = head.startswith(_SQLITE_MAGIC) or bool(head and magic and not head.startswith(magic))
        if foreign:
            raise InputError(f"{sibling} is not the {suffix[1:]} file of the store {path} (SQLite would delete it "
                             "on opening the store); rename one of them")


class Store:
    """A result store file (created when missing; its folder must exist). ``restart``: the runs
    given this store recompute their cells (their chunks are discarded when they start)."""

    def __init__(self, path: str | Path, restart: bool = False, create: bool = True) -> None:
        self.path = Path(path)
        self.restart = restart
        #: what to do about a refused file: a run may use another store; `store show` only reads one
        self._remedy = "give another --store FILE" if create else "give a file written by a run's --store FILE"
        if not create:  # read only: nothing is created, changed or deleted
            if not self.path.is_file():
                raise InputError(f"no result store at {self.path}")
            if self.path.stat().st_size == 0:
                raise InputError(f"{self.path} is an empty file, not a hepower result store")
        self._check()
        self._created = create and (not self.path.exists() or self.path.stat().st_size == 0)
        if not create:
            self.db = self._read_only()
            try:
                meta = self.about()
            except sqlite3.Error:  # an SQLite file without the store's tables
                meta = {}
            self._check_meta(meta)
            return
        try:
            self.db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")  # with WAL: a killed process loses nothing committed
            with self.db:  # one transaction: a sweep opening the store meanwhile sees all of it or none
                self.db.execute("BEGIN IMMEDIATE")
                for statement in _SCHEMA.split(";"):
                    self.db.execute(statement)
                self.db.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?), ('hepower', ?)",
                                (str(FORMAT), _version()))
        except sqlite3.Error as exc:
            raise InputError(f"cannot write the store {self.path}: {exc}") from None
        self._check_meta(self.about())

    def _check(self) -> None:
        """Refuse, before writing anything, a file that is not a store of this format and version, a
        sidecar name, or a foreign file where the store's sidecar goes."""
        check_sidecar_name(self.path)
        _check_siblings(self.path)
        if self.path.is_dir():
            raise InputError(f"store {self.path} is a folder; give a file name")
        if not self.path.parent.is_dir():
            raise InputError(f"store folder does not exist: {self.path.parent}")
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        try:
            with self.path.open("rb") as fh:
                magic = fh.read(len(_SQLITE_MAGIC))
        except OSError as exc:
            raise InputError(f"cannot read the store {self.path}: {exc.strerror or exc}") from None
        meta = None
        if magic == _SQLITE_MAGIC:
            try:
                # immutable: no lock, no -wal/-shm files made next to a file we refuse (the meta is
                # written once; one still in another writer's log is checked again once opened)
                with sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro&immutable=1", uri=True) as ro:
                    tables = ro.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]
                    meta = dict(ro.execute("SELECT name, value FROM meta").fetchall()) if tables else {}
                ro.close()
            except sqlite3.Error:
                meta = None
        if meta == {}:  # a new SQLite file, still empty: another sweep is creating this store
            return
        if meta is None or "format" not in meta:
            raise InputError(f"{self.path} is not a hepower result store (files of the former --checkpoint "
                             f"format are not read); {self._remedy}")
        self._check_meta(meta)

    def _read_only(self) -> sqlite3.Connection:
        """A connection that writes nothing: immutable (no lock, no -wal/-shm files made) unless another
        writer's log is there to be read."""
        log = Path(f"{self.path}-wal").exists()
        uri = f"{self.path.resolve().as_uri()}?mode=ro" + ("" if log else "&immutable=1")
        try:
            return sqlite3.connect(uri, uri=True, timeout=60)
        except sqlite3.Error as exc:
            raise InputError(f"cannot read the store {self.path}: {exc}") from None

    def _check_meta(self, meta: dict[str, str]) -> None:
        if "format" not in meta:
            problem = f"{self.path} is not a hepower result store"
        elif meta["format"] != str(FORMAT) or meta.get("hepower") != _version():
            problem = (f"store {self.path} was written by hepower {meta.get('hepower')} (store format "
                       f"{meta['format']}), this is hepower {_version()} (format {FORMAT}); its results are "
                       f"not reused: {self._remedy}")
        else:
            return
        if hasattr(self, "db"):
            self.db.close()
        raise InputError(problem)

    def add_cells(self, cells: Iterable[tuple[str, Any, dict[str, Any], int, int]]) -> None:
        """Describe cells (key, scenario, cell record, seed, chunk size) for ``hepower store show``."""
        rows = [(k, f"{type(s).__module__}.{type(s).__qualname__}", json.dumps(c, sort_keys=True, default=str),
                 seed, size, time.time()) for k, s, c, seed, size in cells]
        self._write("INSERT OR IGNORE INTO cells VALUES (?, ?, ?, ?, ?, ?)", rows)

    def chunks(self, key: str) -> list[tuple[int, int, dict[str, Any]]]:
        """(chunk, n, counts) of the finished chunks of a cell; a record failing its checksum is refused."""
        out = []
        for chunk, n, counts, checksum in self.db.execute(
                "SELECT chunk, n, counts, sum FROM chunks WHERE cell = ? ORDER BY chunk", (key,)):
            if checksum != _checksum(key, chunk, n, counts):
                raise InputError(f"store {self.path}: a record of chunk {chunk} is corrupt or was edited "
                                 "(checksum mismatch); --restart recomputes this run's cells")
            try:
                out.append((chunk, n, json.loads(counts)))
            except ValueError:
                raise InputError(f"store {self.path}: a record of chunk {chunk} is corrupt") from None
        return out

    def add(self, key: str, chunk: int, n: int, counts: dict[str, Any], seconds: float) -> None:
        """Save a finished chunk; it is committed when this returns (a chunk saved twice is kept once)."""
        text = json.dumps(counts, sort_keys=True)
        self._write("INSERT OR IGNORE INTO chunks VALUES (?, ?, ?, ?, ?, ?)",
                    [(key, chunk, n, text, seconds, _checksum(key, chunk, n, text))])

    def discard(self, keys: Iterable[str]) -> int:
        """Remove the chunks of these cells (``--restart``); returns how many were removed."""
        before = self.db.total_changes
        self._write("DELETE FROM chunks WHERE cell = ?", [(k,) for k in keys])
        return self.db.total_changes - before

    def _write(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        try:
            with self.db:
                self.db.execute("BEGIN IMMEDIATE")
                self.db.executemany(sql, rows)
        except sqlite3.Error as exc:
            raise InputError(f"cannot write the store {self.path}: {exc}") from None

    def summary(self) -> list[dict[str, Any]]:
        """One record per cell: its design, seed, chunk size, studies and chunks done, compute seconds."""
        rows = self.db.execute(
            "SELECT c.key, c.scenario, c.cell, c.seed, c.chunk_size, COUNT(k.chunk), COALESCE(SUM(k.n), 0), "
            "COALESCE(SUM(k.seconds), 0) FROM cells c LEFT JOIN chunks k ON k.cell = c.key "
            "GROUP BY c.key ORDER BY c.added, c.key").fetchall()
        return [{"key": key[:12], **json.loads(cell), "scenario": scenario.rsplit(".", 1)[-1], "seed": seed,
                 "chunk_size": size, "chunks": chunks, "studies": studies, "seconds": round(seconds, 3)}
                for key, scenario, cell, seed, size, chunks, studies, seconds in rows]

    def about(self) -> dict[str, str]:
        return dict(self.db.execute("SELECT name, value FROM meta").fetchall())

    def close(self) -> None:
        """Close the store; one this run created and saved nothing in is removed (a run refused
        after the store was opened leaves no file behind)."""
        empty = self._created and not self.db.execute("SELECT 1 FROM chunks LIMIT 1").fetchone()
        self.db.close()
        if empty:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    def resume_hint(self) -> str:
        """What to tell a user whose run stopped."""
        return (f"finished chunks are saved in {self.path}; rerun the same command to resume "
                "(--restart recomputes them)")

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
