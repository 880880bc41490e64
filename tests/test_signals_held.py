"""A stop signal that arrives while the pool forks a worker is not lost: the local executor holds SIGINT and
SIGTERM around ``submit`` (which forks on demand), so the handler runs after the fork, in the executor's code,
not inside the fork's at-fork hooks (which ignore the exception: a CI run went on after its SIGTERM); the
workers start with the parent's own handlers."""
from __future__ import annotations

import os
import signal
import sys

import pytest

from humaneval_power.executors import LocalProcesses
from humaneval_power.executors.local import HELD_SIGNALS, _hold, _signals_held

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX signals, fork")


class Stop(Exception):
    pass


def _raise(signum: int, frame: object) -> None:
    raise Stop


def test_a_signal_during_the_held_section_is_handled_right_after_it() -> None:
    previous = signal.signal(signal.SIGTERM, _raise)
    reached = []
    try:
        with pytest.raises(Stop):
            with _signals_held():
                os.kill(os.getpid(), signal.SIGTERM)
                reached.append("inside")  # not interrupted here: the signal is held
            reached.append("after")  # handled as the section ends, before this line
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert reached == ["inside"]
    assert all(signal.getsignal(s) is not _hold for s in HELD_SIGNALS)


def _holding(_: int) -> bool:
    return signal.getsignal(signal.SIGTERM) is _hold


def test_workers_forked_while_held_keep_the_parents_handlers() -> None:
    seen: list[bool] = []
    with LocalProcesses(2) as pool:
        pool.map(_holding, range(6), lambda task, holding: seen.append(holding))
    assert seen == [False] * 6
