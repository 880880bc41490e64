"""Reliability (issue 18): Ctrl-C, workers that die with their parent, bounded runs, outputs
checked first and written all-or-nothing, result stores that cannot lie."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from humaneval_power import io
from humaneval_power.engine import StudyOutcomes, run_cells
from humaneval_power.errors import InputError
from humaneval_power.executors.local import remove_stale_run_dirs
from humaneval_power.scenarios.bleu import BleuScenario
from humaneval_power.store import Store, _checksum

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class _Coin:
    """A cheap scenario: significant with probability p."""

    p: float
    effect: float = 1.0
    chunk_size: int = 100

    def cell(self) -> dict[str, Any]:
        return {"p": self.p, "effect": self.effect}

    def stream_key(self) -> str:
        return f"coin-{self.p}"

    def simulate(self, n: int, rng: np.random.Generator) -> StudyOutcomes:
        sig = rng.random(n) < self.p
        return StudyOutcomes(np.ones(n), sig, np.zeros(n, bool), np.zeros(n, bool))

    def exact(self) -> None:
        return None


# ------------------------------------------------------------------ outputs (item 4)

def _write_table(table: pd.DataFrame, path: Path) -> None:
    """A table written as the commands write their --out."""
    io.write_outputs([(path, io.table_writer(table, path))])


def test_new_files_follow_the_umask_and_existing_files_keep_their_mode(tmp_path: Path) -> None:
    table = pd.DataFrame({"a": [1, 2]})
    old = os.umask(0o022)
    try:
        _write_table(table, tmp_path / "new.csv")
        assert stat.S_IMODE((tmp_path / "new.csv").stat().st_mode) == 0o644
        os.umask(0o002)
        _write_table(table, tmp_path / "group.csv")
        assert stat.S_IMODE((tmp_path / "group.csv").stat().st_mode) == 0o664
    finally:
        os.umask(old)
    (tmp_path / "new.csv").chmod(0o640)
    _write_table(table, tmp_path / "new.csv")
    assert stat.S_IMODE((tmp_path / "new.csv").stat().st_mode) == 0o640


def test_writes_go_through_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "t.csv"
    target.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    _write_table(pd.DataFrame({"a": [1]}), link)
    assert link.is_symlink() and target.read_text() == "a\n1\n"


def test_outputs_are_all_written_or_none(tmp_path: Path) -> None:
    first, second = tmp_path / "a.csv", tmp_path / "b.png"
    first.write_text("before\n")

    def broken(tmp: Path) -> None:
        tmp.write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        io.write_outputs([(first, lambda tmp: tmp.write_text("after\n")), (second, broken)])
    assert first.read_text() == "before\n" and not second.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv"], "temporary files left behind"


def test_output_paths_are_checked_for_real(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="folder"):
        io.check_output_path(tmp_path)  # a directory (its name has no table suffix either)
    (tmp_path / "dir.csv").mkdir()
    with pytest.raises(InputError, match="is a folder"):
        io.check_output_path(tmp_path / "dir.csv")
    with pytest.raises(InputError, match="does not exist"):
        io.check_output_path(tmp_path / "missing" / "t.csv")
    with pytest.raises(InputError, match="cannot write"):
        io.check_output_path("/proc/hepower-test.csv")  # refused even to root
    with pytest.raises(InputError, match="same file"):
        io.check_output_paths((tmp_path / "t.csv", io.TABLE_FORMATS, "--out"),
                              (tmp_path / "t.csv", io.TABLE_FORMATS, "--other"))


def test_temporary_files_of_killed_writes_are_removed_by_the_next_run(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    stale = tmp_path / f".t.csv{io.TEMP_MARK}{pid}-abc.csv"
    stale.write_text("half a table")
    mine = tmp_path / f".t.csv{io.TEMP_MARK}{os.getpid()}-abc.csv"  # a live writer's: kept
    mine.write_text("being written")
    io.check_output_path(tmp_path / "t.csv")
    assert not stale.exists() and mine.exists()


# ------------------------------------------------------------------ result stores (item 5; issue 15)

def _run(ck: Path, n_sims: int = 1000, seed: int = 1, **kw: Any) -> float:
    return run_cells([_Coin(0.3), _Coin(0.6)], n_sims, seed=seed, jobs=1, store=ck, **kw)[0].power


def _rows(ck: Path, sql: str = "SELECT cell, chunk, n, counts, sum FROM chunks ORDER BY rowid") -> list[Any]:
    with sqlite3.connect(ck) as db:
        rows = db.execute(sql).fetchall()
    db.close()
    return rows


def test_a_store_keeps_a_checksum_per_chunk_and_a_rerun_computes_nothing(tmp_path: Path) -> None:
    ck = tmp_path / "s.db"
    power = _run(ck)
    rows = _rows(ck)
    assert len(rows) == 20 and all(r[4] == _checksum(*r[:4]) for r in rows)
    seen: list[int] = []
    assert _run(ck, progress=lambda d, t, label="": seen.append(d)) == power
    assert seen == [2000], "resumed entirely from the store"


def _edit(ck: Path, sql: str, *args: Any) -> None:
    with sqlite3.connect(ck) as db:
        db.execute(sql, args)
    db.close()


def test_edited_records_are_refused(tmp_path: Path) -> None:
    ck = tmp_path / "s.db"
    _run(ck)
    cell, chunk, _, counts, _ = _rows(ck)[3]
    edited = json.loads(counts)
    edited["n_correct_sign"] = 100  # power 1.0 for this chunk
    _edit(ck, "UPDATE chunks SET counts = ? WHERE cell = ? AND chunk = ?", json.dumps(edited, sort_keys=True),
          cell, chunk)
    with pytest.raises(InputError, match=r"chunk 3.*checksum"):
        _run(ck)


def test_forged_records_with_valid_checksums_are_still_checked(tmp_path: Path) -> None:
    ck = tmp_path / "s.db"
    _run(ck)
    cell, chunk, n, counts, _ = _rows(ck)[0]
    forged = json.dumps({**json.loads(counts), "n_significant": n + 7}, sort_keys=True)
    _edit(ck, "UPDATE chunks SET counts = ?, sum = ? WHERE cell = ? AND chunk = ?", forged,
          _checksum(cell, chunk, n, forged), cell, chunk)
    with pytest.raises(InputError, match="inconsistent"):
        _run(ck)


def test_runs_of_other_arguments_share_a_store_and_restart_recomputes_only_its_own(tmp_path: Path) -> None:
    ck = tmp_path / "s.db"
    _run(ck, seed=1)
    first = _rows(ck)
    assert _run(ck, seed=2) == run_cells([_Coin(0.3)], 1000, seed=2, jobs=1)[0].power
    assert _run(ck, n_sims=999) == run_cells([_Coin(0.3)], 999, seed=1, jobs=1)[0].power  # 9 chunks reused, 1 new
    assert _rows(ck)[:20] == first and len(_rows(ck)) == 20 + 20 + 2
    seen: list[int] = []
    assert _run(ck, seed=2, restart=True, progress=lambda d, t, label="": seen.append(d)) == _run(ck, seed=2)
    assert seen[0] == 0 and _rows(ck)[:20] == first


@pytest.mark.parametrize("content", [os.urandom(300), b"some notes\nnot json\n",
                                     b'{"hepower_checkpoint": 1, "run": "abc", "about": {}}\n'])
def test_foreign_files_are_refused_before_any_work(tmp_path: Path, content: bytes) -> None:
    ck = tmp_path / "s.db"
    ck.write_bytes(content)
    with pytest.raises(InputError, match="not a hepower result store"):
        _run(ck, progress=_no_progress)
    assert ck.read_bytes() == content and sorted(tmp_path.iterdir()) == [ck]


def _no_progress(done: int, total: int, label: str = "") -> None:
    assert done == 0, "work started before the store was validated"


def test_store_path_errors_come_before_the_first_chunk(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a folder"):
        _run(tmp_path, progress=_no_progress)
    with pytest.raises(InputError, match="does not exist"):
        _run(tmp_path / "missing" / "s.db", progress=_no_progress)


# ------------------------------------------------------------------ unbounded work (item 3)

class _Stop(Exception):
    pass


def test_huge_runs_start_at_once_with_bounded_memory() -> None:
    calls: list[tuple[int, int, str]] = []

    def progress(done: int, total: int, label: str = "") -> None:
        calls.append((done, total, label))
        if done > 0:
            raise _Stop

    tracemalloc.start()
    start = time.monotonic()
    with pytest.raises(_Stop):
        run_cells([_Coin(0.3), _Coin(0.5)], 10**12, seed=1, jobs=1, progress=progress)
    elapsed = time.monotonic() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert elapsed < 2
    assert peak < 20 * 2**20, f"{peak / 2**20:.1f} MiB for two chunks"
    assert calls[-1][1] == 2 * 10**12 and "cell 1/2" in calls[-1][2] and "p=0.3" in calls[-1][2]


def test_a_study_that_cannot_fit_in_memory_is_refused() -> None:
    with pytest.raises(InputError, match="GiB of memory"):
        run_cells([BleuScenario(10**10, 1.0, 0.13, 25.8)], 10)


def test_progress_accepts_old_two_argument_callbacks() -> None:
    seen: list[tuple[int, int]] = []
    run_cells([_Coin(0.3)], 300, jobs=1, progress=lambda d, t, label="": seen.append((d, t)))
    assert seen == [(0, 300), (100, 300), (200, 300), (300, 300)]


# ------------------------------------------------------------------ Ctrl-C and orphans (items 1, 2)

_SLOW = ["likert", "power", "--method", "statsmodels", "--workers", "3", "--items", "20", "--effect", "0.2",
         "--sims", "5000", "--seed", "3"]


def _start(argv: list[str], **kw: Any) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "humaneval_power.cli", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True, **kw)


def _wait_for(cond: Any, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _lines(path: Path) -> int:
    """Chunks saved in a store (0 before it exists)."""
    try:
        return len(_rows(path, "SELECT chunk FROM chunks")) if path.exists() else 0
    except sqlite3.OperationalError:  # being created
        return 0


def _interrupt_and_check(proc: subprocess.Popen[str], ck: Path, sig: int = signal.SIGINT, delay: float = 0,
                         after: int = 2) -> None:
    """Signal the run ``delay`` seconds after its ``after``-th finished chunk (inside the next)."""
    _wait_for(lambda: _lines(ck) >= after or proc.poll() is not None, 120, f"{after} finished chunks")
    time.sleep(delay)
    assert proc.poll() is None, proc.communicate()
    kept = _lines(ck)
    start = time.monotonic()
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=5)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert time.monotonic() - start < 5
    assert proc.returncode == (130 if sig == signal.SIGINT else 143), err
    assert ("interrupted" if sig == signal.SIGINT else "terminated") in err, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert _lines(ck) >= kept, "finished chunks were lost"
    with Store(ck) as store:  # every record intact
        assert store.db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert all(store.chunks(key) for key in {r[0] for r in _rows(ck)})


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
def test_ctrl_c_stops_a_parallel_run_at_once_and_keeps_finished_chunks(tmp_path: Path) -> None:
    ck = tmp_path / "s.db"
    proc = _start(_SLOW + ["--jobs", "2", "--store", str(ck)])
    _wait_for(lambda: len(_children(proc.pid)) >= 2 or proc.poll() is not None, 30, "the workers")
    workers = _children(proc.pid)
    _interrupt_and_check(proc, ck)
    _wait_for(lambda: not any(_alive(w) for w in workers), 5, "the workers to end")


@pytest.mark.r
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_and_sigterm_stop_lme4_in_the_main_process(tmp_path: Path, lme4_backend: Any, sig: int) -> None:
    """SIGTERM too: raised from its handler while R runs, the exception was lost in R's callback. The signal
    comes 0.3 s into the second chunk, while R refits (a chunk of 10 refits of this design: ~0.9 CPU s, nearly
    all in R; the first chunk finished and stored is the one that must be kept)."""
    ck = tmp_path / "s.db"
    proc = _start(["likert", "power", "--method", "lme4", "--jobs", "1", "--workers", "3", "--items", "10",
                   "--effect", "0.2", "--sims", "5000", "--store", str(ck)])
    _interrupt_and_check(proc, ck, sig, delay=0.3, after=1)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_workers_die_with_their_parent(tmp_path: Path, sig: int) -> None:
    proc = _start(_SLOW + ["--jobs", "2"])
    try:
        _wait_for(lambda: len(_children(proc.pid)) >= 2 or proc.poll() is not None, 30, "the workers")
        workers = _children(proc.pid)
        assert len(workers) >= 2
        proc.send_signal(sig)
        proc.communicate(timeout=10)
        _wait_for(lambda: not any(_alive(w) for w in workers), 5, "orphaned workers to end")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()


def test_worker_temp_folders_of_killed_runs_are_removed(tmp_path: Path) -> None:
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)
    stale = tmp_path / f"hepower-run-{dead}-x"
    (stale / "RtmpAbc").mkdir(parents=True)
    live = tmp_path / f"hepower-run-{os.getpid()}-y"
    live.mkdir()
    assert remove_stale_run_dirs(str(tmp_path)) == [stale]
    assert not stale.exists() and live.exists()


def test_accuracy_simulation_shows_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    from humaneval_power.cli import common, main

    seen: list[tuple[int, int]] = []
    monkeypatch.setattr(common.ProgressBar, "__call__", lambda self, done, total, label="": seen.append((done, total)))
    assert main(["accuracy", "power", "--n", "100", "--delta", "0.02", "--agreement", "0.9", "--method", "simulate",
                 "--sims", "200000", "--json"]) == 0
    assert seen[-1] == (200_000, 200_000) and len(seen) == 3


# ------------------------------------------------------------------ issue 24, item 8

@pytest.mark.slow  # a Python importing distributed: 3-10 s
def test_a_malformed_scheduler_address_is_one_line_at_once() -> None:
    """``tcp://:::`` failed inside ``distributed.Client()``: the half-built client's ``__del__`` then waited
    20 s and printed a traceback after the error line (at exit: hence a process of its own)."""
    pytest.importorskip("distributed")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "humaneval_power.cli", *_SLOW[:-4], "--sims", "10",
                           "--scheduler", "tcp://:::"], capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert time.monotonic() - started < 19  # no 20 s wait for the half-built client
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("hepower: error: not a Dask scheduler address: 'tcp://:::'")
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.mark.parametrize("address", ["tcp://host-without-port", "tcp://h:port", "nosuch://h:1", "tcp://[::1"])
def test_malformed_scheduler_addresses_are_refused_before_connecting(address: str) -> None:
    pytest.importorskip("distributed")
    from humaneval_power.executors import from_options

    with pytest.raises(InputError, match=r"^not a Dask scheduler address: .*give tcp://HOST:PORT"):
        from_options(address, None)


# ------------------------------------------------------------------ issue 24, item 9: resume is the uninterrupted run

def interrupted_and_resumed(argv: list[str], store: Path, sig: int, chunks: int, prefix: list[str] | None = None) -> str:
    """The ``--json`` output of ``hepower argv`` signalled after its second stored chunk and rerun with its
    store (both real processes). ``prefix``: a command to run the processes under (e.g. ``setarch -R``).
    ``chunks``: how many the run has."""
    command = _command(argv, prefix or [])
    env = _env()
    proc = subprocess.Popen(command + ["--store", str(store)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)
    try:
        _wait_for(lambda: _lines(store) >= 2 or proc.poll() is not None, 300, "two finished chunks")
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == (130 if sig == signal.SIGINT else -signal.SIGKILL), err
    assert 2 <= _lines(store) < chunks
    resumed = _run_json(command + ["--store", str(store)])
    assert _lines(store) == chunks
    return resumed


def _command(argv: list[str], prefix: list[str]) -> list[str]:
    return prefix + [sys.executable, "-m", "humaneval_power.cli", *argv, "--json"]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _run_json(command: list[str]) -> str:
    proc = subprocess.run(command, capture_output=True, check=False, text=True, timeout=600, env=_env())
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def fresh_run(argv: list[str], prefix: list[str]) -> str:
    """The ``--json`` output of ``hepower argv`` run uninterrupted (no store) under ``prefix``."""
    return _run_json(_command(argv, prefix))


def in_process_json(argv: list[str]) -> str:
    """The ``--json`` output of ``hepower argv`` run uninterrupted (no store) in this process: the bytes a process
    prints, without a process's start-up (~1.2 CPU s of imports). Not for the lme4 tiers when bytes are compared:
    their results follow the address-space layout (test_reliability_r.R_TOLERANCE)."""
    import io as stdio
    from contextlib import redirect_stdout

    from humaneval_power.cli import main

    out = stdio.StringIO()
    with redirect_stdout(out):
        assert main([*argv, "--json"]) == 0
    return out.getvalue()


def run_once(argv: list[str], prefix: list[str], reference: dict[tuple[str, ...], str]) -> str:
    """:func:`fresh_run`, cached in ``reference`` by command line."""
    key = tuple(_command(argv, prefix))
    if key not in reference:
        reference[key] = fresh_run(argv, prefix)
    return reference[key]


_FAST = {"fast": ["likert", "power", "--method", "fast", "--workers", "5", "--items", "40", "--ratings-per-item", "3",
                  "--effect", "0.2", "--sims", "2000"],  # 10 chunks
         "randomization": ["bleu", "power", "--n", "300", "--delta", "0.5", "--p0", "0.13", "--b0", "25.8",
                           "--permutations", "500", "--sims", "10000"]}  # 10 chunks: after the second, the run
# must still be going when the signal comes (with 4 it could finish first on a loaded machine)
_FAST_RUNS: dict[str, str] = {}  #: uninterrupted runs' output by tier


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
# one xdist group per tier: both signals compare with one uninterrupted run (_FAST_RUNS is per process)
@pytest.mark.parametrize("tier", [pytest.param(t, marks=pytest.mark.xdist_group(f"resume_{t}"))
                                  for t in ("fast", "randomization")])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["sigint", "sigkill"])
def test_a_resumed_run_is_the_uninterrupted_run_byte_for_byte(tmp_path: Path, tier: str, sig: int) -> None:
    """The fast tier and the exact (randomization) test: interrupted after two chunks, resumed, the same bytes as
    the uninterrupted run (numpy only: computed in this process, once per tier)."""
    argv = _FAST[tier] + ["--seed", "7", "--jobs", "1"]
    resumed = interrupted_and_resumed(argv, tmp_path / "s.db", sig, chunks=10)
    if tier not in _FAST_RUNS:
        _FAST_RUNS[tier] = in_process_json(argv)
    assert resumed == _FAST_RUNS[tier]


def test_a_service_that_is_no_dask_scheduler_is_refused_within_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another service on the port (here one that accepts and never answers, as a web server waiting for its
    request): ``Client()`` waited about 90 s, failed half-built, and its ``__del__`` hung 20 s more."""
    pytest.importorskip("distributed")
    import socket

    from humaneval_power import executors

    monkeypatch.setattr(executors.dask_cluster, "CONNECT_TIMEOUT", 1)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        address = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(InputError, match=f"^cannot reach the Dask scheduler at {address} "):
            executors.from_options(address, None)
        assert time.monotonic() - started < 5
